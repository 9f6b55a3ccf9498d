"""``python -m streamjoin``."""

from __future__ import annotations

import sys

from streamjoin.cli import main

sys.exit(main())
