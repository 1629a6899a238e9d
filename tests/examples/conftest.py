"""Where the subscriber examples live (their Lambda code is loaded only in subprocesses, as Lambda loads it)."""

from __future__ import annotations

from pathlib import Path

SUBSCRIBER_EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "subscriber"
