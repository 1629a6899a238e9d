"""A byte budget: how much message body the batch's threads may parse and write at once.

Parsing a body and serializing its order row costs up to about 100 times the body's size in
memory (a 256 KiB body of empty maps: some 27 MB), for as long as the record's transaction is
in flight. Ten threads doing that at once, over a batch of up to 6 MB that Lambda can deliver,
would add some 600 MB. Records hold the budget by their body's size (at most all of it, so any
body gets through alone) from parsing to the end of their transaction, so the extra peak stays
about ``capacity`` x 100 whatever the batch; small bodies share it and never wait in practice.
"""

from __future__ import annotations

import threading
import time

#: Default budget: two bodies of 256 KiB at once (about 60 MB of peak), or hundreds of small ones.
DEFAULT_CAPACITY_BYTES = 512 * 1024


class ByteBudget:
    """A counting semaphore over bytes. Thread-safe."""

    def __init__(self, capacity: int = DEFAULT_CAPACITY_BYTES) -> None:
        self._capacity = capacity
        self._used = 0
        self._changed = threading.Condition()

    def share(self, size: int) -> int:
        """What a body of ``size`` bytes holds: its size, at most the whole budget."""
        return max(0, min(size, self._capacity))

    def acquire(self, share: int, until: float | None) -> bool:
        """Hold ``share`` bytes (from :meth:`share`), waiting until the monotonic instant ``until`` at most."""
        with self._changed:
            while self._used + share > self._capacity:
                timeout = None if until is None else until - time.monotonic()
                if timeout is not None and timeout <= 0:
                    return False
                self._changed.wait(timeout)
            self._used += share
            return True

    def release(self, share: int) -> None:
        with self._changed:
            self._used -= share
            self._changed.notify_all()
