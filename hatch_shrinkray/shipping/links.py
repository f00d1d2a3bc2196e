"""A configured model reached through a symbolic link that leaves the project.

Its bytes then come from a file the project does not hold (another checkout, a shared drive, a
path another build machine lacks), and a build ships whatever that file holds today, so the build
says where it read it. Reading it is the user's choice (a link to a large model kept outside the
repository is common); saying so is ours.
"""

from __future__ import annotations

import os
from pathlib import Path


def outside(root: Path, relpath: str) -> Path | None:
    """The file ``relpath`` leads to when a link on the way leaves ``root``; None when it stays inside."""
    real = Path(os.path.realpath(root / relpath))
    return None if real.is_relative_to(os.path.realpath(root)) else real
