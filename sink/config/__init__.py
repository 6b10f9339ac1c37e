"""Connector configuration: config files, typed settings, error settings."""

from __future__ import annotations
