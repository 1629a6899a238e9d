"""The subscriber example's Lambda code is its own asset root: put it on the path like Lambda does."""

from __future__ import annotations

import sys
from pathlib import Path

SUBSCRIBER_EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "subscriber"
sys.path.insert(0, str(SUBSCRIBER_EXAMPLE / "subscriber_lambda"))
