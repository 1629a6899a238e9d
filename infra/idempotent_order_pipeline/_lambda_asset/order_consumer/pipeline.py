"""The per-record flow and the batch orchestration.

Per record (an SQS record of the Lambda event)::

    parse -> order_schema (if any) -> TransactWriteItems(pending record + order row)
        new event                      -> notify -> mark sent           -> recorded
        record sent, same payload      -> nothing                       -> duplicate
        record pending, same payload   -> notify -> mark sent           -> republished
        order row only, same payload   -> nothing                       -> duplicate
          ... its own record pending   -> notify it -> mark it sent     -> republished (an older key)
        other payload under either key -> park in DLQ (IDEMPOTENCY_CONFLICT)
    invalid message                    -> park in DLQ (INVALID_MESSAGE, ITEM_TOO_LARGE, ...)
    order breaks the order_schema      -> park in DLQ (SCHEMA_VIOLATION)
    transient failure                  -> report in batchItemFailures; SQS redelivers

Per batch, in waves of at most ``max_workers`` x :data:`MAX_RECORDS_PER_TRANSACTION` records (250 by
default: a batch of 10 is one wave; a FIFO batch is always one), each wave in stages, one after the
other. Each stage is a function that takes records and returns what happened to each of them; its
calls run on the worker threads:

1. :meth:`OrderPipeline._write`: the transactions, one per lane of up to
   :data:`MAX_RECORDS_PER_TRANSACTION` records (one ``TransactWriteItems`` for a batch of 10), each
   record's outcome depending on its own cancellation reasons; records cancelled only by the others'
   are asked again without them. Records of a FIFO queue are one lane, in record order, and after a
   failure the rest of that group is never written;
2. :meth:`OrderPipeline._publish_and_park`: one SNS ``PublishBatch`` per 10 records to notify (on a
   FIFO topic a message group stays in one call, in record order) and, at the same time, the
   records that can never succeed to the DLQ (``SendMessageBatch`` when there are several);
3. :meth:`OrderPipeline._mark`: the ``sent`` marks of the records whose entries SNS accepted, one
   conditional PartiQL ``UPDATE`` each, up to 25 in one ``BatchExecuteStatement`` (one call for a
   batch of 10);
4. :meth:`OrderPipeline._results` with :func:`_outcome`, the one place that decides each record's
   outcome from what the stages returned: a record is acknowledged only once its order is durable
   and notified and marked, or once it is parked in the DLQ. A refused entry leaves its record pending and
   reported. A record that follows a failed one in its FIFO group is never acknowledged.

Why nothing is lost: the transaction is the one call every recorded order is sure to have made (a
crash may hit every later receive until the message reaches the DLQ, and the DLQ may be dropped), so
it writes the record into the pending index too, where the reconciler finds it; SNS accepting the
entry is the only thing that lets a record be marked, and each mark is conditional on its own record
(pending, with the notified content), so marks need no transaction between them. The argument, case
by case: ``docs/reliability.md``.

The waves keep what a batch writes within what it can notify and mark before its deadline: a batch of
10,000 whose first seconds wrote thousands of records would have no time left to notify any.

The invocation ends before its deadline: no record starts with less than ``min_remaining_ms`` of
invocation time left; the transactions are waited for until ``notify_reserve_ms`` is left and the
notifications, parking and marks until ``return_margin_ms`` is left. Whatever is unfinished then is
reported as a failure (O(1) work per record) while its thread runs on; a late result is never read,
and a queued call that had not started is never made.
"""

from __future__ import annotations

import enum
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterable, Mapping, Sequence
from concurrent.futures import FIRST_EXCEPTION, Future, ThreadPoolExecutor, wait
from dataclasses import dataclass, replace
from typing import Any, TypeVar

from .budget import DEFAULT_CAPACITY_BYTES, ByteBudget
from .contract.batching import MAX_BATCH_ENTRIES
from .contract.errors import IdempotencyConflictError, PermanentError, SchemaViolationError, TransientError
from .contract.keys import DEFAULT_IDENTITY_FIELDS
from .contract.message import OrderMessage, parse_order_message
from .contract.metric_names import (
    CONFLICTS,
    DUPLICATES_SKIPPED,
    INVALID_MESSAGES,
    NOTIFICATIONS_PUBLISHED,
    NOTIFICATIONS_REPUBLISHED,
    ORDERS_RECORDED,
    OUTCOME_METRICS,
    SCHEMA_VIOLATIONS,
    TRANSIENT_FAILURES,
)
from .contract.names import STATUS_SENT
from .contract.notification import Notification, NotificationFormat, build_notification, with_event_id
from .contract.order_schema import OrderSchema
from .dead_letter import DeadLetterQueue, ParkRequest
from .notifier import Notifier
from .observability import logger
from .store import (
    CANCELLED_BY_OTHERS,
    EVENT_RECORD_BYTES,
    MAX_BATCH_STATEMENTS,
    MAX_RECORDS_PER_TRANSACTION,
    MAX_TRANSACTION_BYTES,
    ExistingEvent,
    ExistingOrder,
    OrderStore,
)

#: Default worker threads: one per record of a default batch (10).
DEFAULT_MAX_WORKERS = 10
#: Default time a record needs to start: below this much invocation time left, it is left to SQS.
DEFAULT_MIN_REMAINING_MS = 3000
#: Default time left when the batch stops waiting for its transactions (the rest is for notifying).
DEFAULT_NOTIFY_RESERVE_MS = 1500
#: Default time left when the batch stops waiting for anything and returns.
DEFAULT_RETURN_MARGIN_MS = 500

SqsRecord = Mapping[str, Any]
RemainingTime = Callable[[], int]
_Value = TypeVar("_Value")

NOT_STARTED = "not started: too little invocation time left"
NOT_FINISHED = "not finished before the invocation's deadline; SQS redelivers it"
GROUP_FAILED = "an earlier message of its FIFO group failed; not acknowledged"


class Outcome(enum.StrEnum):
    """What happened to one record."""

    RECORDED = "recorded"
    DUPLICATE = "duplicate"
    REPUBLISHED = "republished"
    CONFLICT = "conflict"
    INVALID = "invalid"
    SCHEMA_VIOLATION = "schema_violation"
    RETRY = "retry"


@dataclass(frozen=True)
class RecordResult:
    """The outcome of one record, for the batch response, the log line and the metrics."""

    message_id: str
    outcome: Outcome
    event_id: str | None = None
    order_id: str | None = None
    order_written: bool = False
    published: bool = False
    error: str | None = None

    @property
    def failed(self) -> bool:
        """Whether the record goes into ``batchItemFailures``."""
        return self.outcome is Outcome.RETRY


def outcome_counts(results: Iterable[RecordResult], *, schema: bool = False) -> dict[str, int]:
    """Counts per outcome metric (every metric present, zeros included); ``SchemaViolations`` with ``schema``."""
    counts = dict.fromkeys((*OUTCOME_METRICS, SCHEMA_VIOLATIONS) if schema else OUTCOME_METRICS, 0)
    for result in results:
        counts[ORDERS_RECORDED] += result.order_written
        if result.published:
            key = NOTIFICATIONS_REPUBLISHED if result.outcome is Outcome.REPUBLISHED else NOTIFICATIONS_PUBLISHED
            counts[key] += 1
        counts[DUPLICATES_SKIPPED] += result.outcome is Outcome.DUPLICATE
        counts[CONFLICTS] += result.outcome is Outcome.CONFLICT
        counts[INVALID_MESSAGES] += result.outcome is Outcome.INVALID
        if result.outcome is Outcome.SCHEMA_VIOLATION:
            counts[SCHEMA_VIOLATIONS] = counts.get(SCHEMA_VIOLATIONS, 0) + 1
        counts[TRANSIENT_FAILURES] += result.outcome is Outcome.RETRY
    return counts


def _receive_count(record: SqsRecord) -> int:
    try:
        return int(record.get("attributes", {}).get("ApproximateReceiveCount", 0))
    except (TypeError, ValueError):
        return 0


def _message_group(record: SqsRecord) -> str | None:
    group = record.get("attributes", {}).get("MessageGroupId")
    return str(group) if group is not None else None


@dataclass(frozen=True)
class Deadlines:
    """Monotonic instants of one batch (None: no bound, when the caller gave no remaining time)."""

    start_until: float | None
    transactions_until: float | None
    return_at: float | None

    @classmethod
    def of(
        cls, remaining_ms: RemainingTime | None, *, min_remaining_ms: int, notify_reserve_ms: int, return_margin_ms: int
    ) -> Deadlines:
        if remaining_ms is None:
            return cls(None, None, None)
        now, left = time.monotonic(), remaining_ms()
        return cls(
            start_until=now + (left - min_remaining_ms) / 1000,
            transactions_until=now + (left - notify_reserve_ms) / 1000,
            return_at=now + (left - return_margin_ms) / 1000,
        )

    @staticmethod
    def passed(instant: float | None) -> bool:
        return instant is not None and time.monotonic() >= instant


class Next(enum.Enum):
    """What a record needs after its transaction."""

    NOTIFY = "notify"  # its order is recorded and pending: publish, then mark sent
    SKIP = "skip"  # already notified, or only its order row is left, with this content
    PARK = "park"  # it can never succeed: park it in the DLQ
    RETRY = "retry"  # a transient failure: SQS redelivers it


@dataclass(frozen=True)
class Written:
    """What the first stage found for one record."""

    next: Next
    message: OrderMessage | None = None
    #: What to publish (``Next.NOTIFY``), built from the order row before the message drops it.
    notification: Notification | None = None
    order_written: bool = False
    republish: bool = False
    error: str | None = None
    park: PermanentError | None = None


@dataclass(frozen=True)
class _Parsed:
    """A record parsed and checked, waiting for its transaction; it holds ``share`` of the byte budget."""

    index: int
    message: OrderMessage
    share: int


def _fits(chunk: Sequence[_Parsed], message: OrderMessage) -> bool:
    """Whether ``message`` can join the chunk's transaction: room left, and no item named twice."""
    if len(chunk) >= MAX_RECORDS_PER_TRANSACTION:
        return False
    size = sum(p.message.item_bytes for p in chunk) + EVENT_RECORD_BYTES * len(chunk)
    if chunk and size + message.item_bytes + EVENT_RECORD_BYTES > MAX_TRANSACTION_BYTES:
        return False
    return all(p.message.event_id != message.event_id and p.message.order_id != message.order_id for p in chunk)


def _stop_groups_at_first_failure(batch: _Batch, written: dict[int, Written]) -> None:
    """FIFO: each record after its group's first failed one is a failure too (whatever it found),
    so that nothing of a group is notified, parked or acknowledged past a record SQS must redeliver."""
    failed: set[str | None] = set()
    for index in sorted(written):
        group = batch.group(index)
        if group in failed:
            written[index] = Written(Next.RETRY, written[index].message, error=GROUP_FAILED)
        elif written[index].next is Next.RETRY:
            failed.add(group)


class _Batch:
    """One batch in flight: its records, its deadlines, and which records started."""

    def __init__(self, records: Sequence[SqsRecord], deadlines: Deadlines) -> None:
        self.records = records
        self.deadlines = deadlines
        self.fifo = str(records[0].get("eventSourceARN", "")).endswith(".fifo")
        self.lock = threading.Lock()
        self.started: set[int] = set()
        self.stopped = False  # a crash, or the batch returned: start nothing more

    def start(self, index: int) -> bool:
        """Whether record ``index`` may start now (then it counts as started)."""
        with self.lock:
            if self.stopped or Deadlines.passed(self.deadlines.start_until):
                return False
            self.started.add(index)
            return True

    def group(self, index: int) -> str | None:
        """Record ``index``'s FIFO message group (None on a standard queue)."""
        return _message_group(self.records[index]) if self.fifo else None

    def may_start(self) -> bool:
        """Whether a record may still start (the batch has not stopped, its last start has not passed)."""
        with self.lock:
            return not self.stopped and not Deadlines.passed(self.deadlines.start_until)

    def waves(self, workers: int) -> list[list[int]]:
        """The record indexes in waves, each written, notified and marked before the next starts.

        A wave is what the worker threads write at once: ``workers`` transactions of
        :data:`MAX_RECORDS_PER_TRANSACTION` records. So the records a batch writes are never more than
        it can notify and mark before its deadline (a batch of 10,000 would otherwise write thousands in
        its first seconds, then run out of time to notify them). A FIFO batch is one wave: its groups'
        order is kept within one wave (a FIFO event source delivers at most 10 records).
        """
        indexes = list(range(len(self.records)))
        size = len(indexes) if self.fifo else max(1, workers) * MAX_RECORDS_PER_TRANSACTION
        return [indexes[n : n + size] for n in range(0, len(indexes), size)]

    def lanes(self, wave: Sequence[int]) -> list[list[int]]:
        """A wave's record indexes written one transaction after the other, each lane on its own thread.

        On a FIFO queue one lane, in record order, so that each message group's records are written in
        order (a FIFO event source delivers at most 10 records: one transaction); else consecutive
        slices of :data:`MAX_RECORDS_PER_TRANSACTION` records, written at the same time.
        """
        indexes = list(wave)
        if self.fifo:
            return [indexes]
        size = MAX_RECORDS_PER_TRANSACTION
        return [indexes[n : n + size] for n in range(0, len(indexes), size)]


class OrderPipeline:
    """Processes SQS records of order messages. Build once per container; thread-safe."""

    def __init__(
        self,
        *,
        store: OrderStore,
        notifier: Notifier,
        dead_letters: DeadLetterQueue,
        identity_fields: Sequence[str] = DEFAULT_IDENTITY_FIELDS,
        notification_format: NotificationFormat = NotificationFormat(),  # noqa: B008 - frozen, shared
        order_schema: OrderSchema | None = None,
        max_workers: int = DEFAULT_MAX_WORKERS,
        min_remaining_ms: int = DEFAULT_MIN_REMAINING_MS,
        notify_reserve_ms: int = DEFAULT_NOTIFY_RESERVE_MS,
        return_margin_ms: int = DEFAULT_RETURN_MARGIN_MS,
        parse_budget_bytes: int = DEFAULT_CAPACITY_BYTES,
    ) -> None:
        self._store = store
        self._budget = ByteBudget(parse_budget_bytes)
        self._notifier = notifier
        self._dead_letters = dead_letters
        self._identity_fields = tuple(identity_fields)
        self._notification_format = notification_format
        self._order_schema = order_schema
        self._max_workers = max_workers
        self._min_remaining_ms = min_remaining_ms
        self._notify_reserve_ms = notify_reserve_ms
        self._return_margin_ms = return_margin_ms
        self._executor_lock = threading.Lock()
        self._executor = ThreadPoolExecutor(max_workers=max_workers, thread_name_prefix="order")
        self._lingering: list[Future[Any]] = []

    @property
    def validates_schema(self) -> bool:
        """Whether records are checked against an ``order_schema`` (the handler then emits ``SchemaViolations``)."""
        return self._order_schema is not None

    def close(self) -> None:
        """Stop the worker threads (a container never needs this; tests that build many pipelines do)."""
        self._executor.shutdown(wait=False, cancel_futures=True)

    def _pool(self) -> ThreadPoolExecutor:
        """The worker pool; a fresh one if the last batch left work running (a hung call holds a thread)."""
        with self._executor_lock:
            self._lingering = [future for future in self._lingering if not future.done()]
            if self._lingering:
                self._executor.shutdown(wait=False, cancel_futures=True)
                self._executor = ThreadPoolExecutor(max_workers=self._max_workers, thread_name_prefix="order")
                self._lingering = []
            return self._executor

    # --- a batch ----------------------------------------------------------------------------------

    def process_batch(
        self, records: Sequence[SqsRecord], remaining_ms: RemainingTime | None = None
    ) -> list[RecordResult]:
        """Process every record and return their results in record order.

        Returns before the invocation's deadline (see the module docstring). A crash
        (BaseException) in any record stops the batch and is re-raised.
        """
        if not records:
            return []
        deadlines = Deadlines.of(
            remaining_ms,
            min_remaining_ms=self._min_remaining_ms,
            notify_reserve_ms=self._notify_reserve_ms,
            return_margin_ms=self._return_margin_ms,
        )
        batch = _Batch(records, deadlines)
        pool = self._pool()
        written: dict[int, Written] = {}
        published: dict[int, str | None] = {}
        parked: dict[int, str | None] = {}
        marked: dict[int, str | None] = {}
        try:
            for wave in batch.waves(self._max_workers):
                if wave[0] > 0 and not batch.may_start():
                    break  # the rest is not started: too little time left
                wave_written = self._write(pool, batch, wave)
                to_notify = {
                    i: w.notification for i, w in wave_written.items() if w.next is Next.NOTIFY and w.notification
                }
                to_park = {i: w.park for i, w in wave_written.items() if w.next is Next.PARK and w.park}
                wave_published, wave_parked = self._publish_and_park(pool, batch, to_notify, to_park)
                accepted = {i: to_notify[i] for i, error in wave_published.items() if error is None}
                marked.update(self._mark(pool, batch, accepted))
                written.update(wave_written)
                published.update(wave_published)
                parked.update(wave_parked)
        finally:
            with batch.lock:
                batch.stopped = True
        return self._results(batch, written, published, parked, marked)

    def _gather(self, batch: _Batch, jobs: list[Future[dict[int, _Value]]], until: float | None) -> dict[int, _Value]:
        """The merged results of the jobs done by ``until``.

        A job not started by then is cancelled (its calls are never made); a job still running is
        left to finish on its own and its result is never read (the next batch gets a fresh pool).
        A crash (a BaseException that is not an Exception) in any job stops the batch: the other
        jobs start no new record, the running ones get until ``until`` to finish, and the crash is
        re-raised.
        """
        pending: set[Future[dict[int, _Value]]] = set(jobs)
        crash: BaseException | None = None
        while pending and crash is None and not Deadlines.passed(until):
            timeout = None if until is None else max(0.0, until - time.monotonic())
            done, pending = wait(pending, timeout=timeout, return_when=FIRST_EXCEPTION)
            crash = next((e for e in map(_job_error, done) if e is not None and not isinstance(e, Exception)), None)
        for job in pending:
            job.cancel()
        if crash is not None:
            with batch.lock:
                batch.stopped = True
            running = [job for job in pending if not job.cancelled()]
            _, pending = wait(running, timeout=None if until is None else max(0.0, until - time.monotonic()))
        still_running = [job for job in pending if not job.done()]
        if still_running:
            with self._executor_lock:
                self._lingering.extend(still_running)
        if crash is not None:
            raise crash
        results: dict[int, _Value] = {}
        for job in jobs:
            if job.done() and not job.cancelled():
                error = job.exception()
                if error is None:
                    results.update(job.result())
                else:  # a bug in the orchestration itself: the job's records stay unacknowledged
                    logger.error("unexpected error in a batch job", exc_info=error)
        return results

    # --- stage 1: parse and transaction ------------------------------------------------------------

    def _write(self, pool: ThreadPoolExecutor, batch: _Batch, wave: Sequence[int]) -> dict[int, Written]:
        """The transactions of every record of the wave that starts in time: what each found."""
        jobs = [pool.submit(self._write_lane, batch, lane) for lane in batch.lanes(wave)]
        return self._gather(batch, jobs, batch.deadlines.transactions_until)

    def _write_lane(self, batch: _Batch, indexes: Sequence[int]) -> dict[int, Written]:
        """Parse the lane's records in order and write them, up to :data:`MAX_RECORDS_PER_TRANSACTION`
        per transaction; on a FIFO queue a message group stops at its first failure."""
        written: dict[int, Written] = {}
        chunk: list[_Parsed] = []
        failed_groups: dict[str | None, int] = {}  # FIFO: each group's first failed record

        def flush() -> None:
            try:
                written.update(self._transact(batch, chunk, failed_groups))
            finally:
                for parsed in chunk:
                    self._budget.release(parsed.share)
                chunk.clear()

        try:
            for index in indexes:
                group = batch.group(index)
                if group in failed_groups:
                    continue  # the rest of a FIFO group is not started
                if not batch.start(index):
                    break
                record = batch.records[index]
                body = str(record.get("body", ""))
                share = self._budget.share(len(body))
                # Within the byte budget from parsing to the end of the transaction (order_consumer.budget).
                # A lane holding shares never waits for more (two lanes could wait for each other): it
                # writes what it holds first.
                if chunk and not self._budget.acquire(share, time.monotonic()):
                    flush()
                if not chunk and not self._budget.acquire(share, batch.deadlines.start_until):
                    written[index] = Written(
                        Next.RETRY,
                        error="TransientError: not started: the batch's parsing budget was held until its last start",
                    )
                    if batch.fifo:
                        failed_groups.setdefault(group, index)
                    continue
                try:
                    parsed = self._parse_one(index, record, share)
                except BaseException:
                    self._budget.release(share)
                    raise
                if isinstance(parsed, Written):
                    self._budget.release(share)
                    written[index] = parsed
                    if batch.fifo and parsed.next is Next.RETRY:
                        failed_groups.setdefault(group, index)
                    continue
                if not _fits(chunk, parsed.message):
                    flush()
                chunk.append(parsed)
            if chunk:
                flush()
        finally:
            for parsed in chunk:  # a crash mid-lane: give the budget back
                self._budget.release(parsed.share)
        if batch.fifo:
            _stop_groups_at_first_failure(batch, written)
        return written

    def _parse_one(self, index: int, record: SqsRecord, share: int) -> _Parsed | Written:
        """Parse and check one record: what to write, or its outcome when it can never be written."""
        message: OrderMessage | None = None
        try:
            body = str(record.get("body", ""))
            message = parse_order_message(body, record.get("messageAttributes") or {}, self._identity_fields)
            if self._order_schema is not None:
                self._order_schema.check(body)
        except PermanentError as exc:
            message = message.without_item() if message else None  # parked from the record, not the row
            return Written(Next.PARK, message, error=f"{exc.error_code}: {exc}", park=exc)
        except Exception as exc:  # a bug: never acknowledge the record
            logger.exception("unexpected error", extra={"message_id": str(record["messageId"])})
            return Written(
                Next.RETRY, message.without_item() if message else None, error=f"{type(exc).__name__}: {exc}"
            )
        return _Parsed(index, message, share)

    def _transact(
        self, batch: _Batch, chunk: Sequence[_Parsed], failed_groups: dict[str | None, int]
    ) -> dict[int, Written]:
        """Write the chunk's records in one transaction; ask again for those cancelled only by the others.

        Each round decides at least one record (a cancelled transaction names one record's failure at
        least), so a chunk of n records takes at most n calls, one when nothing collides.
        """
        written: dict[int, Written] = {}
        remaining = list(chunk)
        while remaining:
            if len(remaining) < len(chunk) and Deadlines.passed(batch.deadlines.start_until):
                # too late to ask again: these records were not written
                for parsed in remaining:
                    written[parsed.index] = Written(Next.RETRY, parsed.message.without_item(), error=NOT_FINISHED)
                break
            answers: Sequence[object]  # each record's RecordAnswer, or the call's error
            try:
                answers = self._store.record_batch([p.message for p in remaining])
            except PermanentError as exc:
                if len(remaining) > 1:
                    # Refused as a whole (DynamoDB does not say for which record): each on its own.
                    for parsed in remaining:
                        written.update(self._transact(batch, [parsed], failed_groups))
                    break
                answers = [exc]
            except TransientError as exc:
                answers = [exc] * len(remaining)
            except Exception as exc:  # a bug or an unforeseen SDK error: each record logs it, unacknowledged
                answers = [exc] * len(remaining)
            again: list[_Parsed] = []
            for parsed, answer in zip(remaining, answers, strict=True):
                group = batch.group(parsed.index)
                if parsed.index > failed_groups.get(group, len(batch.records)):
                    # after its FIFO group's failed record: never written (asked again only before it)
                    written[parsed.index] = Written(Next.RETRY, parsed.message.without_item(), error=GROUP_FAILED)
                elif answer is CANCELLED_BY_OTHERS:
                    again.append(parsed)
                else:
                    message_id = str(batch.records[parsed.index]["messageId"])
                    written[parsed.index] = self._after_transaction(message_id, parsed.message, answer)
                    if batch.fifo and written[parsed.index].next is Next.RETRY:
                        failed_groups.setdefault(group, parsed.index)
            remaining = again
        return written

    def _after_transaction(self, message_id: str, message: OrderMessage, answer: object) -> Written:
        """What one record needs after its transaction, from the store's answer for it."""
        try:
            if isinstance(answer, Exception):
                raise answer
            row, message = message.order_item, message.without_item()
            if answer is None:
                notification = build_notification(row, self._notification_format)
                return Written(Next.NOTIFY, message, notification, order_written=True)
            assert isinstance(answer, ExistingEvent | ExistingOrder), answer
            collision = answer
            if collision.payload_sha256 != message.payload_sha256:
                if isinstance(collision, ExistingEvent):
                    raise IdempotencyConflictError(
                        f"event_id {message.event_id!r:.80} is already recorded with another payload"
                    )
                raise IdempotencyConflictError(
                    f"order_id {message.order_id!r:.80} is already recorded with another payload "
                    f"(by event_id {collision.event_id!r:.80})"
                )
            if isinstance(collision, ExistingEvent) and collision.status != STATUS_SENT:
                # A previous delivery wrote the order but did not get to mark it sent: publish again
                # (the stored row has this content: the same payload_sha256).
                notification = build_notification(row, self._notification_format)
                return Written(Next.NOTIFY, message, notification, republish=True)
            if (
                isinstance(collision, ExistingOrder)
                and collision.event_id != message.event_id
                and self._store.adopt_pending(collision.event_id, message.payload_sha256)
            ):
                # The row's own record is still pending (left by a version that keyed it otherwise):
                # finish that record, under its own event id (as the stored row has it).
                notification = build_notification(with_event_id(row, collision.event_id), self._notification_format)
                return Written(Next.NOTIFY, replace(message, event_id=collision.event_id), notification, republish=True)
            return Written(Next.SKIP, message)
        except PermanentError as exc:
            # parked from the record, not the row
            return Written(Next.PARK, message.without_item(), error=f"{exc.error_code}: {exc}", park=exc)
        except TransientError as exc:
            return Written(Next.RETRY, message.without_item(), error=f"{type(exc).__name__}: {exc}")
        except Exception as exc:  # a bug or an unforeseen SDK error: never acknowledge the record
            logger.exception("unexpected error", extra={"message_id": message_id})
            return Written(Next.RETRY, message.without_item(), error=f"{type(exc).__name__}: {exc}")

    # --- stage 2: notify, park ----------------------------------------------------------------------

    def _publish_and_park(
        self,
        pool: ThreadPoolExecutor,
        batch: _Batch,
        to_notify: Mapping[int, Notification],
        to_park: Mapping[int, PermanentError],
    ) -> tuple[dict[int, str | None], dict[int, str | None]]:
        """Publish the notifications and park the permanent failures, at the same time.

        Returns, per record: None when SNS accepted its notification (SQS took it into the DLQ),
        else why not; a record absent from the results was not finished in time.
        """
        publishing = [pool.submit(self._publish_one_call, batch, call) for call in self._publish_calls(to_notify)]
        parking = [pool.submit(self._park_one_call, batch, call) for call in self._park_calls(batch, to_park)]
        until = batch.deadlines.return_at
        return self._gather(batch, publishing, until), self._gather(batch, parking, until)

    def _publish_calls(self, to_notify: Mapping[int, Notification]) -> list[dict[int, Notification]]:
        """One PublishBatch's records per item, in record order; on a FIFO topic a group stays in one."""
        indexes = sorted(to_notify)
        calls: list[list[int]] = []
        if not self._notifier.fifo:
            calls = [indexes[i : i + MAX_BATCH_ENTRIES] for i in range(0, len(indexes), MAX_BATCH_ENTRIES)]
        else:
            by_group: dict[str, list[int]] = {}
            for index in indexes:
                by_group.setdefault(to_notify[index].group_id, []).append(index)
            for group in by_group.values():
                if not calls or len(calls[-1]) >= MAX_BATCH_ENTRIES:
                    calls.append([])
                calls[-1].extend(group)
        return [{i: to_notify[i] for i in sorted(call)} for call in calls]

    def _publish_one_call(self, batch: _Batch, notifications: Mapping[int, Notification]) -> dict[int, str | None]:
        """Per record: None when SNS accepted its notification, else why not."""
        if batch.stopped:
            return {}
        results = self._notifier.publish_batch(list(notifications.values()))
        return {
            index: None if result.ok else (result.error or "not accepted by SNS")
            for index, result in zip(notifications, results, strict=True)
        }

    @staticmethod
    def _park_calls(batch: _Batch, to_park: Mapping[int, PermanentError]) -> list[dict[int, PermanentError]]:
        """The parking jobs: all in one on a FIFO queue (order kept), else 10 records per job."""
        indexes = sorted(to_park)
        size = max(len(indexes), 1) if batch.fifo else MAX_BATCH_ENTRIES
        return [{i: to_park[i] for i in indexes[n : n + size]} for n in range(0, len(indexes), size)]

    def _park_one_call(self, batch: _Batch, errors: Mapping[int, PermanentError]) -> dict[int, str | None]:
        """Per record: None when SQS took it into the DLQ, else why not."""
        if batch.stopped:
            return {}
        requests = []
        for index, error in errors.items():
            record = batch.records[index]
            requests.append(
                ParkRequest(
                    body=str(record.get("body", "")),
                    attributes=record.get("messageAttributes") or {},
                    message_id=str(record["messageId"]),
                    error=error,
                    message_group_id=_message_group(record),
                )
            )
        return dict(zip(errors, self._dead_letters.park_batch(requests), strict=True))

    # --- stage 3: mark sent ---------------------------------------------------------------------------

    def _mark(
        self, pool: ThreadPoolExecutor, batch: _Batch, accepted: Mapping[int, Notification]
    ) -> dict[int, str | None]:
        """The sent marks of the records SNS accepted: one ``BatchExecuteStatement`` per
        :data:`MAX_BATCH_STATEMENTS` records (one for a batch of 10), each statement conditional on its record.

        Returns, per record: None when it is marked (or was already), else why it is still pending;
        a record absent from the results was not finished in time.
        """
        indexes = sorted(accepted)
        calls = [indexes[n : n + MAX_BATCH_STATEMENTS] for n in range(0, len(indexes), MAX_BATCH_STATEMENTS)]
        jobs = [pool.submit(self._mark_one_call, batch, {i: accepted[i] for i in call}) for call in calls]
        return self._gather(batch, jobs, batch.deadlines.return_at)

    def _mark_one_call(self, batch: _Batch, notifications: Mapping[int, Notification]) -> dict[int, str | None]:
        if batch.stopped:
            return {}
        try:
            results = self._store.mark_sent_batch(list(notifications.values()))
        except TransientError as exc:
            return dict.fromkeys(notifications, f"{type(exc).__name__}: {exc}")
        except Exception as exc:  # a bug, DynamoDB refusing the call, an unforeseen SDK error: unacknowledged
            logger.exception("unexpected error in the sent marks", extra={"records": len(notifications)})
            return dict.fromkeys(notifications, f"{type(exc).__name__}: {exc}")
        return {index: result.error for index, result in zip(notifications, results, strict=True)}

    # --- stage 4: the outcomes ----------------------------------------------------------------------

    def _results(
        self,
        batch: _Batch,
        written: Mapping[int, Written],
        published: Mapping[int, str | None],
        parked: Mapping[int, str | None],
        marked: Mapping[int, str | None],
    ) -> list[RecordResult]:
        """Every record's outcome, in record order, decided here and only here; then the log lines."""
        results: list[RecordResult] = []
        failed_groups: set[str | None] = set()
        for index, record in enumerate(batch.records):
            facts = written.get(index)
            message = facts.message if facts else None
            outcome, error = _outcome(index, index in batch.started, facts, published, parked, marked)
            group = _message_group(record) if batch.fifo else None
            if batch.fifo and group in failed_groups and (outcome is not Outcome.RETRY or index not in batch.started):
                outcome, error = Outcome.RETRY, GROUP_FAILED  # SQS must deliver the group's messages in order
            if batch.fifo and outcome is Outcome.RETRY:
                failed_groups.add(group)
            results.append(
                RecordResult(
                    message_id=str(record["messageId"]),
                    outcome=outcome,
                    event_id=message.event_id if message else None,
                    order_id=message.order_id if message else None,
                    order_written=bool(facts and facts.order_written),
                    published=index in published and published[index] is None,
                    error=error[:1000] if error else None,
                )
            )
        _log(batch, results)
        return results


def _job_error(job: Future[Any]) -> BaseException | None:
    return None if job.cancelled() else job.exception()


def _outcome(
    index: int,
    started: bool,
    facts: Written | None,
    published: Mapping[int, str | None],
    parked: Mapping[int, str | None],
    marked: Mapping[int, str | None],
) -> tuple[Outcome, str | None]:
    """One record's outcome and error from what each stage returned for it (absent: not finished)."""
    if facts is None:
        return Outcome.RETRY, NOT_FINISHED if started else NOT_STARTED
    if facts.next is Next.SKIP:
        return Outcome.DUPLICATE, None
    if facts.next is Next.RETRY:
        return Outcome.RETRY, facts.error
    if facts.next is Next.PARK:
        if index not in parked:
            return Outcome.RETRY, NOT_FINISHED
        if parked[index] is not None:
            return Outcome.RETRY, f"{facts.error}; {parked[index]}"
        if isinstance(facts.park, IdempotencyConflictError):
            return Outcome.CONFLICT, facts.error
        if isinstance(facts.park, SchemaViolationError):
            return Outcome.SCHEMA_VIOLATION, facts.error
        return Outcome.INVALID, facts.error
    for stage in (published, marked):  # Next.NOTIFY: published, then marked
        if index not in stage:
            return Outcome.RETRY, NOT_FINISHED
        if stage[index] is not None:
            return Outcome.RETRY, stage[index]
    return (Outcome.REPUBLISHED if facts.republish else Outcome.RECORDED), None


def _log(batch: _Batch, results: Sequence[RecordResult]) -> None:
    """One line per batch, and one per started record that failed or was parked (why, for the operator).

    Records that never started are only counted (O(1) work per record when the deadline comes).
    """
    for index, result in enumerate(results):
        if result.error and index in batch.started:
            logger.warning(
                "order message not processed" if result.failed else "order message parked",
                extra={
                    "message_id": result.message_id,
                    "event_id": result.event_id,
                    "order_id": result.order_id,
                    "outcome": result.outcome.value,
                    "receive_count": _receive_count(batch.records[index]),
                    "error": result.error[:500],
                },
            )
    outcomes = Counter(result.outcome.value for result in results)
    logger.info(
        "order batch processed",
        extra={
            "records": len(results),
            "outcomes": dict(sorted(outcomes.items())),
            "not_started": len(results) - len(batch.started),
        },
    )
