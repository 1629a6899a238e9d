"""How deep this interpreter's json reads: 3.11 stops near 1,000 levels, 3.14 measures the C stack."""

from __future__ import annotations

import json


def parses_here(text: str) -> bool:
    """Whether this interpreter's json.loads reads ``text`` (the depth it reaches depends on the version)."""
    try:
        json.loads(text)
    except (ValueError, RecursionError):
        return False
    return True
