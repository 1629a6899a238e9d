"""Where the stand-in's own files are: the directory holding the library, and a source checkout's root."""

from __future__ import annotations

import os
from pathlib import Path

#: The directory holding ``idempotent_order_pipeline``: ``infra/`` in a source checkout, site-packages installed.
LIBRARY_ROOT = Path(__file__).resolve().parents[2]
#: The repository root of a source checkout (``infra/``'s parent): its ``node_modules`` and ``.sandbox``.
REPO_ROOT = LIBRARY_ROOT.parent


def python_path() -> str:
    """``PYTHONPATH`` for the stand-in's own child processes: the library first (a checkout; harmless installed)."""
    existing = os.environ.get("PYTHONPATH")
    return str(LIBRARY_ROOT) if not existing else os.pathsep.join([str(LIBRARY_ROOT), existing])
