"""An SQS batch, one effect per event: the team's handler is ``once_per_event(effect)``.

Per record (the protocol's calls are in :mod:`.dedup`):

==========================================  ===============================================
what happens                                outcome for the record
==========================================  ===============================================
not a notification                          failed: the queue's redrive moves it to its DLQ
claim: DynamoDB did not answer              failed: SQS redelivers it
claim: ``done`` (a duplicate)               acknowledged, the effect is not run
claim: another copy holds a live claim      failed: redelivered after the visibility timeout
claim won, the effect raised                released, failed: the next copy acts at once
claim won, done mark + effect's writes      acknowledged
claim won, claim lost meanwhile             acknowledged: the copy that holds it acts
claim won, mark refused or unanswered       released, failed: redelivered
process killed anywhere                     the batch returns; the lease runs out first
==========================================  ===============================================

Records are handled one after the other, so two copies of one event in a batch are a claim and a
duplicate. The function returns partial batch responses (``ReportBatchItemFailures``). From a FIFO
queue, once a record of a message group fails, the group's later records in the batch are reported
failed without being handled, so the group is redelivered in its order (Lambda's rule for FIFO
partial batch responses).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from .dedup import Busy, Claim, Deduplicator, Done
from .errors import ClaimLost, DedupUnavailable, NotANotification, SubscriberError
from .notification import OrderNotification, parse

logger = logging.getLogger(__name__)

#: The team's effect: acts on the notification under ``claim`` and returns its own DynamoDB writes
#: (TransactWriteItems entries, at most 99), committed with the done mark; ``None`` or ``[]`` for none.
Effect = Callable[[OrderNotification, Claim], Sequence[Mapping[str, Any]] | None]


class OncePerEvent:
    """A Lambda handler for an SQS event source: calls ``effect`` once per ``event_id``."""

    def __init__(self, effect: Effect, *, dedup: Deduplicator | None = None) -> None:
        self._effect = effect
        self._dedup = dedup

    @property
    def dedup(self) -> Deduplicator:
        """The deduplicator: the one given, or one from the environment, made once per container."""
        if self._dedup is None:
            self._dedup = Deduplicator.from_environment()
        return self._dedup

    def __call__(self, event: Mapping[str, Any], context: Any = None) -> dict[str, list[dict[str, str]]]:
        """The Lambda entry point: a partial batch response naming the records SQS must redeliver."""
        failures = self.handle(event.get("Records") or [])
        return {"batchItemFailures": [{"itemIdentifier": message_id} for message_id in failures]}

    def handle(self, records: Sequence[Mapping[str, Any]]) -> list[str]:
        """The message ids of the records to redeliver, in order."""
        failed: list[str] = []
        stopped_groups: set[str] = set()  # FIFO message groups with a failed record in this batch
        for record in records:
            group = (record.get("attributes") or {}).get("MessageGroupId")
            if group in stopped_groups or not self.handle_one(record):
                failed.append(str(record["messageId"]))
                if group is not None:
                    stopped_groups.add(group)
        return failed

    def handle_one(self, record: Mapping[str, Any]) -> bool:
        """True when the record can be acknowledged."""
        try:
            notification = parse(record)
        except NotANotification as exc:
            logger.error("record %s left to the dead-letter queue: %s", record.get("messageId"), exc)
            return False
        try:
            outcome = self.dedup.claim(notification.event_id)
        except DedupUnavailable as exc:
            logger.warning("record %s redelivered: %s", record.get("messageId"), exc)
            return False
        if isinstance(outcome, Done):
            return True
        if isinstance(outcome, Busy):
            return False
        return self._act(notification, outcome)

    def _act(self, notification: OrderNotification, claim: Claim) -> bool:
        try:
            writes = self._effect(notification, claim) or ()
            self.dedup.complete(claim, writes)
        except ClaimLost:
            logger.warning("event %s: lease ran out, another copy acts", notification.event_id)
            return True
        except Exception as exc:  # the team's effect may raise anything; the protocol's own are SubscriberErrors
            level = logging.WARNING if isinstance(exc, SubscriberError) else logging.ERROR
            logger.log(level, "event %s failed, claim released: %r", notification.event_id, exc)
            self._release(claim)
            return False
        return True

    def _release(self, claim: Claim) -> None:
        try:
            self.dedup.release(claim)
        except DedupUnavailable as exc:  # the lease runs out on its own
            logger.warning("event %s: release failed: %s", claim.event_id, exc)


def once_per_event(effect: Effect) -> OncePerEvent:
    """Decorate the team's effect into its Lambda handler::

    @once_per_event
    def handler(notification: OrderNotification, claim: Claim) -> list[dict[str, Any]]:
        return [{"Update": {...}}]  # committed with the done mark, exactly once
    """
    return OncePerEvent(effect)
