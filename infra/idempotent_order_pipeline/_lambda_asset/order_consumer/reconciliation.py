"""The reconciliation flow: notify every record left ``pending`` for longer than a threshold.

A record stays ``pending`` when its order was written but SNS never accepted the notification and
no copy of the message is left to redeliver it (the DLQ was dropped, or it expired there). The
index lists every record (pending or sent) by creation time until TTL deletes it; each shard is
read once, behind a stored checkpoint. One run::

    GetItem the checkpoints, consistent                          -> per shard: where its reading starts
    every shard of the index, oldest first (one page each, then round-robin in chunks):
        Query pending-by-age (checkpoint <= created_at <= now - threshold - margin)
                                                                 -> entries (keys only, may lag)
        BatchGetItem processed_events, consistent                -> still pending? order_id, payload_sha256
        BatchGetItem order_records, consistent (pending only)    -> the row exists and is this event's?
        Notifier.publish_batch (the consumer's own notifier)     -> same event_id, same content, FIFO ids
        OrderStore.mark_sent_batch (the consumer's condition)    -> sent, ttl set
    PutItem the checkpoints, over the revision read              -> per shard: its oldest entry still
                                                                    pending, else the upper bound read
    stop starting work when less than ``min_remaining_ms`` of the invocation is left
    stop waiting for the calls ``return_margin_ms`` before the deadline: the report, then the metrics

Guarantees, and why:

* **At least once, never a write of an order row.** A notification is rebuilt from the order row
  (:func:`order_consumer.contract.notification.build_notification`, as the consumer builds it) after
  checking that the row exists and was written by this event with this fingerprint; a record failing
  that check is logged as an anomaly and left alone.
* **Nothing is passed that is pending.** A shard's checkpoint moves only to the oldest entry the
  run left pending (a failed publish or mark, an anomaly, an unread record, an entry not reached),
  or, when it left none, to the upper bound it read to; an entry is passed only once this run read
  its record ``sent`` (or gone: TTL deletes only sent records) or marked it ``sent`` itself, and a
  status never goes back to ``pending``. Every entry below the upper bound is in the index when the
  run reads it: a record's ``created_at`` is taken before its transaction, which commits within the
  consumer's timeout (at most ``reconcile_after``, by the construct's rules), and the upper bound is
  ``INDEX_PROPAGATION_MARGIN_SECONDS`` earlier still, for the index's own lag. An entry whose
  ``created_at`` would be older when it is written (a record adopted from an earlier version) is
  given the time of its adoption. A failed or abandoned run writes no checkpoint: the next one
  reads the same entries again.
* **Resumes by itself.** A crash anywhere leaves records pending (published or not) and the
  checkpoints where they were; the next run publishes them again; subscribers deduplicate on
  ``event_id``.
* **Safe to run twice at once.** Two runs may publish the same record (at least once); the sent
  mark's condition (only a ``pending`` record moves to ``sent``) makes the marks idempotent. The
  checkpoints are written over the revision a run read: the run that writes second writes nothing,
  and each run's checkpoints are safe on their own (above).
* **Never races a normal redelivery by design.** The construct validates the threshold against the
  queue's visibility timeout x ``max_receive_count``; racing anyway only costs a duplicate.
* **Ends before its deadline, with its metrics.** The work runs on its own thread; the run's report
  is made when the work ends or ``return_margin_ms`` before the deadline, whatever a call does (one
  that never answers or trickles runs on, its result discarded: what it was doing stays pending and
  counts in the age). The oldest age is known once every shard's first page was read; a shard never
  read makes it unknown (``shards_unread``), and the handler then withholds the age metric, whose
  alarm treats missing data as breaching.
* **Once per run per record.** Each index entry is handled by one chunk of one run; an entry the
  run could not finish is left for the next run, never retried within the run.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from decimal import Decimal
from typing import Any

from .contract.errors import OrderPipelineError, TransientError
from .contract.notification import Notification, NotificationFormat, build_notification
from .contract.pending_index import INDEX_PROPAGATION_MARGIN_SECONDS, every_shard
from .notifier import Notifier
from .observability import logger
from .pending_records import Checkpoints, IndexEntry, OrderRow, PendingIndex, PendingRecord
from .store import OrderStore

#: Default records handled together (one BatchGetItem per table, up to 3 PublishBatch calls, one
#: BatchExecuteStatement of their marks).
DEFAULT_CHUNK_SIZE = 25
#: Default index entries per Query page.
DEFAULT_PAGE_SIZE = 100
#: Default time left below which the run starts no more work (a chunk's calls fit in it).
DEFAULT_MIN_REMAINING_MS = 15_000
#: Default time left when the run stops waiting for its calls and returns its report (for the metrics).
DEFAULT_RETURN_MARGIN_MS = 2_000

#: The longest the run waits for its work between two looks at the time left.
WAIT_SLICE_S = 0.1

RemainingTime = Callable[[], int]
#: Why a run's report was made while a call was still in flight.
ABANDONED = "the run's deadline came with a call in flight; what it was doing is left pending for the next run"


@dataclass
class RunReport:
    """What one run did, for the metrics, the log line and the handler's answer."""

    #: Index entries older than the threshold that the run looked at.
    found: int = 0
    #: Published and now marked sent by this run.
    reconciled: int = 0
    #: Found in the index but no longer pending on the consistent read (a delivery marked it).
    already_sent: int = 0
    #: Shards whose checkpoint this run moved forward (0 when another run wrote first, or it failed).
    checkpoints_advanced: int = 0
    #: Not notified this run: SNS refused it, a call failed, or the run ran out of time first.
    left_pending: int = 0
    #: Pending records whose order row is missing or another event's (never notified, logged).
    anomalies: int = 0
    #: Records found sent without a ``ttl`` (marked by 0.1.0 after a rollback), given one.
    expired: int = 0
    #: Age of the oldest record older than the threshold still pending when the run ended (0: none).
    #: A lower bound when ``shards_unread`` is not 0: the unread shards may hold older records.
    oldest_pending_age_seconds: int = 0
    #: Shards of the index whose first page the run never read (a query failed or did not answer).
    shards_unread: int = 0
    #: False when the run stopped for its deadline or a failed call before it had seen every shard to the end.
    complete: bool = True
    #: True when an unforeseen error (a bug) ended the run; the handler fails the invocation after its metrics.
    failed: bool = False
    errors: list[str] = field(default_factory=list)

    @property
    def oldest_pending_age_known(self) -> bool:
        """Whether ``oldest_pending_age_seconds`` is the age of the oldest pending record (every shard read)."""
        return self.shards_unread == 0

    def add(self, part: RunReport) -> None:
        """Count what one chunk did into the run's report."""
        self.found += part.found
        self.reconciled += part.reconciled
        self.already_sent += part.already_sent
        self.anomalies += part.anomalies
        self.expired += part.expired
        self.errors.extend(part.errors)

    def as_dict(self) -> dict[str, object]:
        return {
            "found": self.found,
            "reconciled": self.reconciled,
            "already_sent": self.already_sent,
            "checkpoints_advanced": self.checkpoints_advanced,
            "left_pending": self.left_pending,
            "anomalies": self.anomalies,
            "expired": self.expired,
            "oldest_pending_age_seconds": self.oldest_pending_age_seconds,
            "shards_unread": self.shards_unread,
            "complete": self.complete,
            "failed": self.failed,
            "errors": self.errors[:20],
        }


@dataclass
class _Shard:
    """One shard's progress in a run: entries read but not handled yet, and where its next page starts."""

    name: str
    #: Where this run reads from (the stored checkpoint): every entry created before it is handled.
    start: Decimal = Decimal(0)
    buffer: list[IndexEntry] = field(default_factory=list)
    #: Creation times of the entries this run read and left pending (failed, refused, anomalies).
    left: list[int] = field(default_factory=list)
    next_key: Mapping[str, Any] | None = None
    #: The sort key of ``next_key``: every entry after it was created at or after this time.
    next_created_at: int | None = None
    queried: bool = False
    failed: bool = False

    @property
    def exhausted(self) -> bool:
        return self.failed or (self.queried and not self.buffer and self.next_key is None)


class _Progress:
    """One run's state, shared by the thread doing the work and the thread that reports it.

    The worker changes it only under ``lock`` and only until ``closed``; once the report is made the
    run is closed, and whatever its calls still return is discarded (left pending, found next run).
    """

    def __init__(self, shards: list[_Shard]) -> None:
        self.lock = threading.Lock()
        self.closed = False
        self.shards = shards
        self.report = RunReport()
        #: The checkpoints the run read (None: not read, and no shard is read either).
        self.checkpoints: Checkpoints | None = None
        #: Creation times of the chunk whose calls are in flight.
        self.in_flight: list[int] = []
        self.crash: BaseException | None = None


class Reconciler:
    """Finds records pending for longer than ``reconcile_after_seconds`` and notifies them. Thread-safe per run."""

    def __init__(
        self,
        *,
        index: PendingIndex,
        notifier: Notifier,
        store: OrderStore,
        reconcile_after_seconds: float,
        notification_format: NotificationFormat = NotificationFormat(),  # noqa: B008 - frozen, shared
        clock: Callable[[], float] = time.time,
        chunk_size: int = DEFAULT_CHUNK_SIZE,
        page_size: int = DEFAULT_PAGE_SIZE,
        min_remaining_ms: int = DEFAULT_MIN_REMAINING_MS,
        return_margin_ms: int = DEFAULT_RETURN_MARGIN_MS,
        index_margin_seconds: float | None = None,
    ) -> None:
        self._index = index
        self._notifier = notifier
        self._store = store
        self._after = reconcile_after_seconds
        self._format = notification_format
        self._clock = clock
        self._chunk_size = chunk_size
        self._page_size = page_size
        self._min_remaining_ms = min_remaining_ms
        self._return_margin_ms = return_margin_ms
        #: None: the contract's INDEX_PROPAGATION_MARGIN_SECONDS (as this module has it at construction).
        self._index_margin = INDEX_PROPAGATION_MARGIN_SECONDS if index_margin_seconds is None else index_margin_seconds

    def run(self, remaining_ms: RemainingTime | None = None) -> RunReport:
        """One pass over the index; never raises for a domain error, only for a crash (BaseException).

        With ``remaining_ms`` the work runs on its own thread and the report is made when the work
        ends or ``return_margin_ms`` before the deadline, whichever comes first: a call that never
        answers, or trickles, cannot hold the run past its deadline (the call runs on, its result
        discarded). An unforeseen error is reported (``failed``), not raised.
        """
        started = self._clock()
        # Rotate the first shard with the clock, so that a shard whose records keep failing cannot
        # take every run's time from the others.
        shards = [_Shard(name) for name in every_shard()]
        rotation = int(started // 60) % len(shards)
        progress = _Progress(shards[rotation:] + shards[:rotation])
        # The upper bound of this run's reads (see the module docstring): three decimals, so that it is
        # the same number in the query and in the checkpoint.
        upper = Decimal(f"{started - self._after - self._index_margin:.3f}")
        if remaining_ms is None:
            self._work(progress, upper, lambda: False)
        else:
            worker = threading.Thread(
                target=self._work,
                args=(progress, upper, lambda: remaining_ms() < self._min_remaining_ms),
                name="reconciler-run",
                daemon=True,  # a call in flight at the deadline must not keep the process
            )
            worker.start()
            # Waits in short slices, each bounded by the time left, so the wait follows the
            # invocation's own clock (whatever ``remaining_ms`` measures).
            while worker.is_alive() and (left_ms := remaining_ms() - self._return_margin_ms) > 0:
                worker.join(timeout=min(left_ms / 1000, WAIT_SLICE_S))
            if worker.is_alive():
                logger.warning(ABANDONED)
                with progress.lock:
                    progress.report.errors.append(ABANDONED)
        report = self._close(progress)
        if progress.crash is not None:
            raise progress.crash
        logger.info("reconciliation run", extra=report.as_dict())
        return report

    def _work(self, progress: _Progress, upper: Decimal, out_of_time: Callable[[], bool]) -> None:
        """The run's work: the checkpoints, first one page of every shard, then chunks round-robin,
        until done or out of time; then the checkpoints written (unless the run was closed)."""
        try:
            if out_of_time() or not self._read_checkpoints(progress):
                return
            self._scan(progress, upper, out_of_time)
            self._advance(progress, upper)
        except Exception as exc:  # a bug or an unforeseen SDK error: reported, and the invocation fails
            logger.exception("reconciliation run failed")
            with progress.lock:
                if not progress.closed:
                    progress.report.failed = True
                    progress.report.errors.append(f"{type(exc).__name__}: {exc}")
        except BaseException as crash:  # the process is going down: the caller re-raises it
            with progress.lock:
                progress.crash = crash
            raise

    def _read_checkpoints(self, progress: _Progress) -> bool:
        """The stored checkpoints into every shard's start; False (no shard read) when the read failed."""
        try:
            checkpoints = self._index.checkpoints()
        except TransientError as exc:
            logger.warning("reconciler checkpoints not read", extra={"error": str(exc)[:500]})
            with progress.lock:
                if not progress.closed:
                    progress.report.complete = False
                    progress.report.errors.append(str(exc))
            return False
        with progress.lock:
            progress.checkpoints = checkpoints
            for shard in progress.shards:
                shard.start = checkpoints.start(shard.name)
        return True

    def _scan(self, progress: _Progress, upper: Decimal, out_of_time: Callable[[], bool]) -> None:
        # First one page of every shard, so the oldest record of each is known even if time runs out.
        for shard in progress.shards:
            if out_of_time() or progress.closed:
                return
            self._fetch(progress, shard, upper)
        while not progress.closed and not out_of_time():
            with progress.lock:
                open_shards = [shard for shard in progress.shards if not shard.exhausted]
            if not open_shards:
                return
            for shard in open_shards:
                if out_of_time() or progress.closed:
                    return
                if not shard.buffer:
                    self._fetch(progress, shard, upper)
                    continue
                with progress.lock:
                    if progress.closed:
                        return
                    chunk, shard.buffer = shard.buffer[: self._chunk_size], shard.buffer[self._chunk_size :]
                    progress.in_flight = [entry.created_at for entry in chunk]
                part = RunReport(found=len(chunk))
                left = self._reconcile(chunk, part, out_of_time)
                with progress.lock:
                    if progress.closed:
                        return
                    progress.report.add(part)
                    shard.left.extend(left)
                    progress.in_flight = []

    def _advance(self, progress: _Progress, upper: Decimal) -> None:
        """Write each read shard's new checkpoint: its oldest entry not handled, else ``upper``."""
        with progress.lock:
            if progress.closed or progress.checkpoints is None or progress.in_flight:
                return
            read = progress.checkpoints
            starts = {}
            for shard in progress.shards:
                if shard.failed or not shard.queried:
                    continue  # not read to the end: the shard starts where it did next time
                not_handled = [*shard.left, *(entry.created_at for entry in shard.buffer)]
                if shard.next_key is not None and shard.next_created_at is not None:
                    not_handled.append(shard.next_created_at)  # the unread pages start at this or later
                start = Decimal(min(not_handled)) if not_handled else upper
                if start > read.start(shard.name):
                    starts[shard.name] = start
        if not starts:
            return
        try:
            written = self._index.advance(read, starts)
        except TransientError as exc:  # the next run reads the same entries again
            logger.warning("reconciler checkpoints not written", extra={"error": str(exc)[:500]})
            with progress.lock:
                if not progress.closed:
                    progress.report.errors.append(str(exc))
            return
        if not written:
            logger.info("another reconciler run wrote the checkpoints first; theirs stand")
        with progress.lock:
            if not progress.closed and written:
                progress.report.checkpoints_advanced = len(starts)

    def _close(self, progress: _Progress) -> RunReport:
        """Close the run (the worker's later results are discarded) and make its report."""
        with progress.lock:
            progress.closed = True
            report = progress.report
            left_created = [created for shard in progress.shards for created in shard.left] + progress.in_flight
            oldest_candidates: list[int] = list(left_created)
            if progress.in_flight:
                report.complete = False
            for shard in progress.shards:
                if not shard.exhausted:
                    report.complete = False
                if not shard.queried:
                    report.shards_unread += 1
                left_created.extend(entry.created_at for entry in shard.buffer)
                oldest_candidates.extend(entry.created_at for entry in shard.buffer)
                if shard.next_key is not None and shard.next_created_at is not None:
                    oldest_candidates.append(shard.next_created_at)  # the unread rest is at least this old
            report.left_pending = len(left_created)
            if oldest_candidates:
                report.oldest_pending_age_seconds = max(0, int(self._clock() - min(oldest_candidates)))
            report.errors = list(report.errors)
            return report

    def _fetch(self, progress: _Progress, shard: _Shard, upper: Decimal) -> None:
        """The shard's next page into its buffer; a failed query ends the shard for this run."""
        if shard.queried and shard.next_key is None:
            return
        if shard.start > upper:  # its checkpoint is past this run's bound (a clock behind): nothing to read
            with progress.lock:
                shard.queried = True
            return
        try:
            page = self._index.page(
                shard.name, created_from=shard.start, created_to=upper, start_key=shard.next_key, limit=self._page_size
            )
        except TransientError as exc:
            logger.warning("pending-index query failed", extra={"shard": shard.name, "error": str(exc)[:500]})
            with progress.lock:
                if not progress.closed:
                    shard.failed = True
                    progress.report.complete = False
                    progress.report.errors.append(f"shard {shard.name}: {exc}")
            return
        with progress.lock:
            if progress.closed:
                return
            shard.queried = True
            shard.buffer.extend(page.entries)
            shard.next_key = page.next_key
            shard.next_created_at = page.entries[-1].created_at if page.entries else None

    def _reconcile(self, chunk: Sequence[IndexEntry], report: RunReport, out_of_time: Callable[[], bool]) -> list[int]:
        """Confirm, publish and mark one chunk; return the creation times of what it left pending."""
        created = {entry.event_id: entry.created_at for entry in chunk}
        try:
            records, stale, unread = self._index.read_listed([entry.event_id for entry in chunk])
            rows, rows_unread = self._index.read_order_rows([record.order_id for record in records])
        except TransientError as exc:
            report.errors.append(str(exc))
            logger.warning("pending records not read", extra={"error": str(exc)[:500]})
            return list(created.values())
        report.already_sent += len(created) - len(records) - len(unread)
        for event_id in stale:  # sent without a ttl (marked by 0.1.0 after a rollback)
            try:
                report.expired += self._store.expire_sent(event_id)
            except OrderPipelineError as exc:  # the next run finds it again
                report.errors.append(str(exc))
        left = [created[event_id] for event_id in unread]
        notifications: list[Notification] = []
        for record in records:
            if record.order_id in rows_unread:
                left.append(record.created_at)
            elif self._row_matches(record, rows):
                # From the stored row, as the consumer builds it: the first notification again.
                notifications.append(build_notification(rows[record.order_id].item, self._format))
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
        for mark in marks:
            if mark.error is None:
                report.reconciled += 1
            else:
                left.append(created[mark.notification.event_id])
                report.errors.append(f"{mark.notification.event_id}: {mark.error}")
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
