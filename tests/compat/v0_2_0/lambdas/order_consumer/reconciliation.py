"""The reconciliation flow: notify every record left ``pending`` for longer than a threshold.

A record stays ``pending`` when its order was written but SNS never accepted the notification and
no copy of the message is left to redeliver it (the DLQ was dropped, or it expired there). One run::

    every shard of the index, oldest first (one page each, then round-robin in chunks):
        Query pending-by-age (created_at < now - threshold)      -> candidates (keys only, may lag)
        BatchGetItem processed_events, consistent                -> still pending? order_id, payload_sha256
        BatchGetItem order_records, consistent                   -> the row exists and is this event's?
        Notifier.publish_batch (the consumer's own notifier)     -> same event_id, same content, FIFO ids
        OrderStore.mark_sent_batch (the consumer's condition)    -> sent, ttl set, out of the index
    stop starting work when less than ``min_remaining_ms`` of the invocation is left

Guarantees, and why:

* **At least once, never a write of an order row.** A notification is rebuilt from the record
  (``order_id``, ``payload_sha256``) after checking that the order row exists and was written by this
  event with this fingerprint; a record failing that check is logged as an anomaly and left alone.
* **Resumes by itself.** Nothing is remembered between runs: what is still pending is still in the
  index, so the next run finds it. A crash anywhere leaves records pending (published or not) and
  the next run publishes them again; subscribers deduplicate on ``event_id``.
* **Safe to run twice at once.** Two runs may publish the same record (at least once); the sent
  mark's condition (only a ``pending`` record moves to ``sent``) makes the marks idempotent.
* **Never races a normal redelivery by design.** The construct validates the threshold against the
  queue's visibility timeout x ``max_receive_count``; racing anyway only costs a duplicate.
* **Once per run per record.** Each index entry is handled by one chunk of one run; an entry the
  run could not finish is left for the next run, never retried within the run.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from order_consumer.notifier import Notification, Notifier
from order_consumer.observability import logger
from order_consumer.pending_index import every_shard
from order_consumer.pending_records import IndexEntry, OrderRow, PendingIndex, PendingRecord
from order_consumer.store import OrderStore
from order_events.errors import OrderPipelineError, TransientError

#: Default records handled together (one BatchGetItem per table, up to 3 PublishBatch calls, one mark).
DEFAULT_CHUNK_SIZE = 25
#: Default index entries per Query page.
DEFAULT_PAGE_SIZE = 100
#: Default time left below which the run starts no more work (a chunk's calls fit in it).
DEFAULT_MIN_REMAINING_MS = 15_000

RemainingTime = Callable[[], int]


@dataclass
class RunReport:
    """What one run did, for the metrics, the log line and the handler's answer."""

    #: Index entries older than the threshold that the run looked at.
    found: int = 0
    #: Published and now marked sent by this run.
    reconciled: int = 0
    #: Found in the index but no longer pending on the consistent read (a delivery marked it).
    already_sent: int = 0
    #: Not notified this run: SNS refused it, a call failed, or the run ran out of time first.
    left_pending: int = 0
    #: Pending records whose order row is missing or another event's (never notified, logged).
    anomalies: int = 0
    #: Age of the oldest record older than the threshold still pending when the run ended (0: none).
    oldest_pending_age_seconds: int = 0
    #: False when the run stopped for its deadline or a failed call before it had seen every shard to the end.
    complete: bool = True
    errors: list[str] = field(default_factory=list)

    def as_dict(self) -> dict[str, object]:
        return {
            "found": self.found,
            "reconciled": self.reconciled,
            "already_sent": self.already_sent,
            "left_pending": self.left_pending,
            "anomalies": self.anomalies,
            "oldest_pending_age_seconds": self.oldest_pending_age_seconds,
            "complete": self.complete,
            "errors": self.errors[:20],
        }


@dataclass
class _Shard:
    """One shard's progress in a run: entries read but not handled yet, and where its next page starts."""

    name: str
    buffer: list[IndexEntry] = field(default_factory=list)
    next_key: Mapping[str, Any] | None = None
    #: The sort key of ``next_key``: every entry after it was created at or after this time.
    next_created_at: int | None = None
    queried: bool = False
    failed: bool = False

    @property
    def exhausted(self) -> bool:
        return self.failed or (self.queried and not self.buffer and self.next_key is None)


class Reconciler:
    """Finds records pending for longer than ``reconcile_after_seconds`` and notifies them. Thread-safe per run."""

    def __init__(
        self,
        *,
        index: PendingIndex,
        notifier: Notifier,
        store: OrderStore,
        reconcile_after_seconds: float,
        clock: Callable[[], float] = time.time,
        chunk_size: int = DEFAULT_CHUNK_SIZE,
        page_size: int = DEFAULT_PAGE_SIZE,
        min_remaining_ms: int = DEFAULT_MIN_REMAINING_MS,
    ) -> None:
        self._index = index
        self._notifier = notifier
        self._store = store
        self._after = reconcile_after_seconds
        self._clock = clock
        self._chunk_size = chunk_size
        self._page_size = page_size
        self._min_remaining_ms = min_remaining_ms

    def run(self, remaining_ms: RemainingTime | None = None) -> RunReport:
        """One pass over the index; never raises for a domain error, only for a crash (BaseException)."""
        report = RunReport()
        started = self._clock()
        cutoff = started - self._after
        # Rotate the first shard with the clock, so that a shard whose records keep failing cannot
        # take every run's time from the others.
        shards = [_Shard(name) for name in every_shard()]
        rotation = int(started // 60) % len(shards)
        shards = shards[rotation:] + shards[:rotation]
        # Left pending by this run (failed or not reached): their creation times make the age metric.
        left_created: list[int] = []

        def out_of_time() -> bool:
            return remaining_ms is not None and remaining_ms() < self._min_remaining_ms

        # First one page of every shard, so the oldest record of each is known even if time runs out.
        for shard in shards:
            if out_of_time():
                break
            self._fetch(shard, cutoff, report)
        while not all(shard.exhausted for shard in shards) and not out_of_time():
            for shard in shards:
                if shard.exhausted or out_of_time():
                    continue
                if not shard.buffer:
                    self._fetch(shard, cutoff, report)
                    continue
                chunk, shard.buffer = shard.buffer[: self._chunk_size], shard.buffer[self._chunk_size :]
                report.found += len(chunk)
                left_created.extend(self._reconcile(chunk, report, out_of_time))
        oldest_candidates: list[int] = list(left_created)
        for shard in shards:
            if not shard.exhausted:
                report.complete = False
            left_created.extend(entry.created_at for entry in shard.buffer)
            oldest_candidates.extend(entry.created_at for entry in shard.buffer)
            if shard.next_key is not None and shard.next_created_at is not None:
                oldest_candidates.append(shard.next_created_at)  # the unread rest is at least this old
        report.left_pending = len(left_created)
        if oldest_candidates:
            report.oldest_pending_age_seconds = max(0, int(self._clock() - min(oldest_candidates)))
        logger.info("reconciliation run", extra=report.as_dict())
        return report

    def _fetch(self, shard: _Shard, cutoff: float, report: RunReport) -> None:
        """The shard's next page into its buffer; a failed query ends the shard for this run."""
        if shard.queried and shard.next_key is None:
            return
        try:
            page = self._index.page(shard.name, created_before=cutoff, start_key=shard.next_key, limit=self._page_size)
        except TransientError as exc:
            shard.failed = True
            report.complete = False
            report.errors.append(f"shard {shard.name}: {exc}")
            logger.warning("pending-index query failed", extra={"shard": shard.name, "error": str(exc)[:500]})
            return
        shard.queried = True
        shard.buffer.extend(page.entries)
        shard.next_key = page.next_key
        shard.next_created_at = page.entries[-1].created_at if page.entries else None

    def _reconcile(self, chunk: Sequence[IndexEntry], report: RunReport, out_of_time: Callable[[], bool]) -> list[int]:
        """Confirm, publish and mark one chunk; return the creation times of what it left pending."""
        created = {entry.event_id: entry.created_at for entry in chunk}
        try:
            records, unread = self._index.read_pending([entry.event_id for entry in chunk])
            rows, rows_unread = self._index.read_order_rows([record.order_id for record in records])
        except TransientError as exc:
            report.errors.append(str(exc))
            logger.warning("pending records not read", extra={"error": str(exc)[:500]})
            return list(created.values())
        report.already_sent += len(created) - len(records) - len(unread)
        left = [created[event_id] for event_id in unread]
        notifications: list[Notification] = []
        for record in records:
            if record.order_id in rows_unread:
                left.append(record.created_at)
            elif self._row_matches(record, rows):
                notifications.append(
                    Notification(
                        event_id=record.event_id, order_id=record.order_id, payload_sha256=record.payload_sha256
                    )
                )
            else:
                report.anomalies += 1
                left.append(record.created_at)
        if not notifications:
            return left
        if out_of_time():
            return left + [created[n.event_id] for n in notifications]
        published = []
        for result in self._notifier.publish_batch(notifications):
            if result.ok:
                published.append(result.notification)
            else:
                left.append(created[result.notification.event_id])
                report.errors.append(f"{result.notification.event_id}: {result.error}")
        if not published:
            return left
        # Marked even when time is short: these were published, and a mark is one short call.
        try:
            marks = self._store.mark_sent_batch(published)
        except OrderPipelineError as exc:  # transient, or DynamoDB refusing the marks: they stay pending
            report.errors.append(str(exc))
            logger.warning("published records not marked sent", extra={"error": str(exc)[:500]})
            return left + [created[n.event_id] for n in published]
        for notification, marked in zip(published, marks, strict=True):
            if marked:
                report.reconciled += 1
            else:
                left.append(created[notification.event_id])
        return left

    @staticmethod
    def _row_matches(record: PendingRecord, rows: Mapping[str, OrderRow]) -> bool:
        row = rows.get(record.order_id)
        if row is None:
            logger.error(
                "ANOMALY: a pending record without its order row; not notified",
                extra={"event_id": record.event_id, "order_id": record.order_id},
            )
            return False
        if (row.event_id, row.payload_sha256) != (record.event_id, record.payload_sha256):
            logger.error(
                "ANOMALY: the order row belongs to another event or content; not notified",
                extra={"event_id": record.event_id, "order_id": record.order_id},
            )
            return False
        return True
