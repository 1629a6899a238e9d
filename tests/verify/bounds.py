"""The published bounds: which scenarios ``make verify`` explores, with how many crashes and faults.

docs/reliability.md quotes these figures; each scenario is in :mod:`tests.verify.scenarios`.
"""

from __future__ import annotations

from tests.verify.scheduler import Bounds

ONE_CRASH = Bounds(crashes=1, faults=0)
ONE_FAULT = Bounds(crashes=0, faults=1)

RUNS: list[tuple[str, Bounds]] = [
    *(
        (name, ONE_CRASH)
        for name in (
            "standard/same-content",
            "standard/conflicting-content",
            "fifo/same-content",
            "fifo/conflicting-content",
            # one message delivered twice at once; both messages lost unless acknowledged
            "standard/one-message-twice",
            "standard/last-receive",
            # a redrive racing them (tests/verify/redrive.py): the conflict's loser parked and moved
            # back; messages on their last receive dead-lettered by SQS and moved back
            "standard/conflict-redriven",
            "fifo/conflict-redriven",
            "standard/last-receive-redriven",
            "fifo/last-receive-redriven",
        )
    ),
    ("standard/same-content", ONE_FAULT),
    ("fifo/group-of-two", ONE_FAULT),
]

#: What the explorer does not reach at these bounds, printed by ``make verify``.
STRETCH = "two crashes per schedule: not explored (replay from scratch with sleep sets and state caching)"
