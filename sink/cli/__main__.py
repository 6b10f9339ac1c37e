"""``python -m sink.cli``: the same as the ``kcql-sink`` console script."""

from __future__ import annotations

import sys

from sink.cli.dispatch import main

sys.exit(main())
