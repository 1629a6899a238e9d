"""Which invocations crash, and where: the seeded crash plan of ``make demo``'s chaos run."""

from __future__ import annotations

import random
import threading
from collections.abc import Mapping, Sequence
from typing import Any

from idempotent_order_pipeline.sandbox.lambda_runtime import CrashOrder

#: The AWS calls of a batch of up to 10 new orders: TransactWriteItems, PublishBatch, BatchExecuteStatement.
CALLS_OF_A_BATCH_OF_NEW_ORDERS = 3


class RandomCrashes:
    """A seeded plan the poller asks before each invocation.

    The first ``guaranteed`` invocations crash for sure (at their first AWS call: a batch makes at
    least one, however few calls the consumer batches its records into), so that every run injects
    crashes; after that, each
    invocation crashes with probability ``rate`` at a random one of its first
    :data:`CALLS_OF_A_BATCH_OF_NEW_ORDERS` calls, before the call is sent or after its answer
    arrived. A batch of up to 10 new orders makes that many calls (one transaction, one publish,
    one batch of marks), so ``rate`` is the share of such invocations that crash; a batch of
    redeliveries makes one call (its cancelled transaction), so it crashes at a third of ``rate``.
    A batch holding a message on its last delivery (receive count at
    ``max_receive_count``) never crashes: the queue's redrive would then park a good message in the
    DLQ, which is correct behaviour but makes the run's figures depend on luck.
    """

    def __init__(self, rate: float, seed: int, *, max_receive_count: int | None, guaranteed: int = 2) -> None:
        self._rate = rate
        self._rng = random.Random(seed)  # noqa: S311 - chaos, not cryptography
        self._lock = threading.Lock()
        self._max_receive_count = max_receive_count
        self._guaranteed = guaranteed

    def __call__(self, records: Sequence[Mapping[str, Any]]) -> CrashOrder | None:
        if self._max_receive_count is not None and any(
            int(record["attributes"].get("ApproximateReceiveCount", 1)) >= self._max_receive_count for record in records
        ):
            return None
        with self._lock:
            if self._guaranteed > 0:
                self._guaranteed -= 1
                return CrashOrder(at_call=1, after=self._rng.random() < 0.5)
            if self._rng.random() >= self._rate:
                return None
            at_call = self._rng.randint(1, CALLS_OF_A_BATCH_OF_NEW_ORDERS)
            return CrashOrder(at_call=at_call, after=self._rng.random() < 0.5)
