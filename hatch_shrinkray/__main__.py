"""``python -m hatch_shrinkray``."""

from __future__ import annotations

import sys

from hatch_shrinkray.console import main

sys.exit(main())
