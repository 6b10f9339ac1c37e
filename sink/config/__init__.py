"""Connector configuration: config files, typed settings, error settings, and the one validation.

:mod:`sink.config.validate` checks a whole config for every entry point (CLI and REST);
:mod:`sink.config.secrets` decides which values are never shown.
"""

from __future__ import annotations
