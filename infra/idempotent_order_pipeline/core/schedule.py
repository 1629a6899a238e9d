"""EventBridge ``rate(...)`` expressions, as the constructs write them and the stand-in and the bench read them.

Standard library only: the stand-in reads a deployed rule's schedule without the CDK.
"""

from __future__ import annotations

import re

#: ``rate(N unit)``: a whole number and minute(s), hour(s) or day(s) (EventBridge's rate expressions).
RATE = re.compile(r"^rate\((\d+)\s+(minute|minutes|hour|hours|day|days)\)$")
_UNIT_SECONDS = {"minute": 60, "hour": 3600, "day": 86400}


def rate_seconds(expression: str) -> int | None:
    """Seconds between runs of ``rate(5 minutes)``; None for anything else (a ``cron(...)``, say)."""
    match = RATE.match(expression.strip())
    if match is None:
        return None
    return int(match[1]) * _UNIT_SECONDS[match[2].rstrip("s")]
