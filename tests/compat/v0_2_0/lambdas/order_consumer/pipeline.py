"""The per-record flow and the batch orchestration.

Per record (an SQS record of the Lambda event)::

    parse -> TransactWriteItems(pending record + order row)
        new event                      -> notify -> mark sent           -> recorded
        record sent, same payload      -> nothing                       -> duplicate
        record pending, same payload   -> notify -> mark sent           -> republished
        order row only, same payload   -> nothing                       -> duplicate
        other payload under either key -> park in DLQ (IDEMPOTENCY_CONFLICT)
    invalid message                    -> park in DLQ (INVALID_MESSAGE, ITEM_TOO_LARGE, ...)
    transient failure                  -> report in batchItemFailures; SQS redelivers

Per batch, in three stages:

1. the transactions, one per record, on the worker threads (each record's outcome depends on its
   own cancellation reasons);
2. one SNS ``PublishBatch`` per 10 records that need a notification, each followed by the ``sent``
   marks of the entries SNS accepted (one ``TransactWriteItems``); and the parking of the records
   that can never succeed (``SendMessageBatch`` when there are several), all on the worker threads.
   On a standard topic a full PublishBatch of 10 goes out as soon as its 10th transaction is done,
   while the others still run; on a FIFO topic all wait for the transactions, to keep the order;
3. the results: a record is acknowledged only once its order is durable and notified and marked,
   or once it is parked in the DLQ. A refused entry leaves its record pending and reported.

Records of a standard queue are independent. Records of a FIFO queue run in order within their
message group: after a failure the rest of the group is not started, and a record that follows a
failed one in its group is never acknowledged.

The invocation ends before its deadline: no record starts with less than ``min_remaining_ms`` of
invocation time left; the transactions are waited for until ``notify_reserve_ms`` is left and the
notifications until ``return_margin_ms`` is left. Whatever is unfinished then is reported as a
failure (O(1) work per record) while its thread runs on; a late result is discarded, and a
queued call that had not started is never made.
"""

from __future__ import annotations

import enum
import itertools
import threading
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from concurrent.futures import FIRST_EXCEPTION, Future, ThreadPoolExecutor, wait
from dataclasses import dataclass
from functools import partial
from typing import Any, TypeVar

from order_consumer.dead_letter import DeadLetterQueue, ParkRequest
from order_consumer.notifier import Notification, Notifier
from order_consumer.observability import logger
from order_consumer.store import STATUS_SENT, ExistingEvent, OrderStore
from order_events.errors import IdempotencyConflictError, PermanentError, TransientError
from order_events.keys import DEFAULT_IDENTITY_FIELDS
from order_events.message import OrderMessage, parse_order_message
from order_events.metric_names import (
    CONFLICTS,
    DUPLICATES_SKIPPED,
    INVALID_MESSAGES,
    NOTIFICATIONS_PUBLISHED,
    NOTIFICATIONS_REPUBLISHED,
    ORDERS_RECORDED,
    OUTCOME_METRICS,
    TRANSIENT_FAILURES,
)
from order_events.sns_ids import sns_group_id

#: Default worker threads: one per record of a default batch (10).
DEFAULT_MAX_WORKERS = 10
#: Default time a record needs to start: below this much invocation time left, it is left to SQS.
DEFAULT_MIN_REMAINING_MS = 3000
#: Default time left when the batch stops waiting for its transactions (the rest is for notifying).
DEFAULT_NOTIFY_RESERVE_MS = 1500
#: Default time left when the batch stops waiting for anything and returns.
DEFAULT_RETURN_MARGIN_MS = 500
#: Records per notification job: one PublishBatch call (SNS's limit is 10 entries).
NOTIFICATIONS_PER_JOB = 10

SqsRecord = Mapping[str, Any]
_Job = TypeVar("_Job")
RemainingTime = Callable[[], int]

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


def outcome_counts(results: Iterable[RecordResult]) -> dict[str, int]:
    """Counts per outcome metric (every metric present, zeros included)."""
    counts = dict.fromkeys(OUTCOME_METRICS, 0)
    for result in results:
        counts[ORDERS_RECORDED] += result.order_written
        if result.published:
            key = NOTIFICATIONS_REPUBLISHED if result.outcome is Outcome.REPUBLISHED else NOTIFICATIONS_PUBLISHED
            counts[key] += 1
        counts[DUPLICATES_SKIPPED] += result.outcome is Outcome.DUPLICATE
        counts[CONFLICTS] += result.outcome is Outcome.CONFLICT
        counts[INVALID_MESSAGES] += result.outcome is Outcome.INVALID
        counts[TRANSIENT_FAILURES] += result.outcome is Outcome.RETRY
    return counts


def _call(job: Callable[[], None]) -> None:
    job()


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


class _Record:
    """Mutable facts of one started record, so that a failure late in the flow still reports them."""

    __slots__ = ("error", "message", "order_written", "outcome", "published", "republish")

    def __init__(self) -> None:
        self.message: OrderMessage | None = None
        self.order_written = False
        self.published = False
        self.republish = False
        self.outcome: Outcome | None = None  # None while a later stage still has to decide
        self.error: str | None = None


class _Batch:
    """The state of one batch in flight. Workers write it under ``lock`` until it is ``closed``."""

    def __init__(self, records: Sequence[SqsRecord], deadlines: Deadlines) -> None:
        self.records = records
        self.deadlines = deadlines
        self.lock = threading.Lock()
        self.closed = False
        self.stopped = False  # a crash: start nothing more
        self.crash: BaseException | None = None
        self.state: list[_Record | None] = [None] * len(records)
        self.to_notify: list[int] = []
        self.to_park: list[tuple[int, PermanentError]] = []

    def may_start(self) -> bool:
        return not (self.stopped or self.closed or Deadlines.passed(self.deadlines.start_until))


class OrderPipeline:
    """Processes SQS records of order messages. Build once per container; thread-safe."""

    def __init__(
        self,
        *,
        store: OrderStore,
        notifier: Notifier,
        dead_letters: DeadLetterQueue,
        identity_fields: Sequence[str] = DEFAULT_IDENTITY_FIELDS,
        max_workers: int = DEFAULT_MAX_WORKERS,
        min_remaining_ms: int = DEFAULT_MIN_REMAINING_MS,
        notify_reserve_ms: int = DEFAULT_NOTIFY_RESERVE_MS,
        return_margin_ms: int = DEFAULT_RETURN_MARGIN_MS,
    ) -> None:
        self._store = store
        self._notifier = notifier
        self._dead_letters = dead_letters
        self._identity_fields = tuple(identity_fields)
        self._max_workers = max_workers
        self._min_remaining_ms = min_remaining_ms
        self._notify_reserve_ms = notify_reserve_ms
        self._return_margin_ms = return_margin_ms
        self._executor_lock = threading.Lock()
        self._executor = ThreadPoolExecutor(max_workers=max_workers, thread_name_prefix="order")
        self._lingering: list[Future[None]] = []

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
        fifo = str(records[0].get("eventSourceARN", "")).endswith(".fifo")
        groups: list[list[int]]
        if fifo:
            by_group: dict[str | None, list[int]] = {}
            for index, record in enumerate(records):
                by_group.setdefault(_message_group(record), []).append(index)
            groups = list(by_group.values())
        else:
            groups = [[index] for index in range(len(records))]

        pool = self._pool()
        # Stage 1: the transactions.
        self._run(pool, batch, partial(self._first_stage, batch), groups, deadlines.transactions_until, batch.may_start)
        if batch.crash is not None:
            raise batch.crash
        with batch.lock:
            to_notify, to_park = list(batch.to_notify), list(batch.to_park)
            batch.to_notify, batch.to_park = [], []
        # Stage 2: notifications and their marks, and the parking.
        jobs = [partial(self._notify, batch, job) for job in self._notification_jobs(batch, to_notify)]
        jobs.extend(partial(self._park, batch, job) for job in self._park_jobs(to_park, fifo))
        self._run(pool, batch, _call, jobs, deadlines.return_at)
        with batch.lock:
            batch.closed = True
        if batch.crash is not None:
            raise batch.crash
        return self._results(batch, groups if fifo else None)

    def _run(
        self,
        pool: ThreadPoolExecutor,
        batch: _Batch,
        run_one: Callable[[_Job], None],
        jobs: Sequence[_Job],
        until: float | None,
        may_take: Callable[[], bool] | None = None,
    ) -> None:
        """``run_one(job)`` for each of ``jobs`` on the pool's threads, each thread taking the next
        job, until all are done or ``until``.

        A thread stops taking jobs once ``may_take`` says no (so jobs never taken cost nothing).
        Jobs not taken by then are never started; jobs still running are left to finish on their
        own (their late results are discarded by the closed batch).
        """
        if not jobs:
            return
        order = itertools.count()
        take = threading.Lock()

        def worker() -> None:
            while not batch.stopped and not batch.closed and not Deadlines.passed(until):
                if may_take is not None and not may_take():
                    return
                with take:
                    index = next(order)
                if index >= len(jobs):
                    return
                try:
                    run_one(jobs[index])
                except Exception:  # a bug in the orchestration itself: the records stay unacknowledged
                    logger.exception("unexpected error in a batch job")
                except BaseException as crash:
                    with batch.lock:
                        batch.stopped = True
                        batch.crash = batch.crash or crash
                    raise

        futures = [pool.submit(worker) for _ in range(min(self._max_workers, len(jobs)))]
        timeout = None if until is None else max(0.0, until - time.monotonic())
        _, not_done = wait(futures, timeout=timeout, return_when=FIRST_EXCEPTION)
        if not_done and batch.crash is not None:
            # A crash: the other threads stop after their current job; let them, within the bound.
            _, not_done = wait(not_done, timeout=None if until is None else max(0.0, until - time.monotonic()))
        if not_done:
            # The bound passed with calls in flight: they run on; the next batch gets a fresh pool.
            with self._executor_lock:
                self._lingering.extend(not_done)

    # --- stage 1: parse and transaction ------------------------------------------------------------

    def _first_stage(self, batch: _Batch, indexes: Sequence[int]) -> None:
        """The transactions of one record or one FIFO group, in order; a group stops at a failure."""
        for index in indexes:
            if not batch.may_start():
                return
            state = _Record()
            with batch.lock:
                if batch.closed:
                    return
                batch.state[index] = state
            self._transact(batch, index, state)
            if state.outcome is Outcome.RETRY:
                return  # the rest of a FIFO group is not started

    def _transact(self, batch: _Batch, index: int, state: _Record) -> None:
        """Parse and write one record; its facts are applied under the batch lock unless it closed."""
        record = batch.records[index]
        message: OrderMessage | None = None
        written = republish = False
        outcome: Outcome | None = None
        error: str | None = None
        park: PermanentError | None = None
        try:
            message = parse_order_message(
                str(record.get("body", "")), record.get("messageAttributes") or {}, self._identity_fields
            )
            collision = self._store.record(message)
            if collision is None:
                written = True
            elif collision.payload_sha256 != message.payload_sha256:
                if isinstance(collision, ExistingEvent):
                    raise IdempotencyConflictError(
                        f"event_id {message.event_id!r:.80} is already recorded with another payload"
                    )
                raise IdempotencyConflictError(
                    f"order_id {message.order_id!r:.80} is already recorded with another payload "
                    f"(by event_id {collision.event_id!r:.80})"
                )
            elif isinstance(collision, ExistingEvent) and collision.status != STATUS_SENT:
                # A previous delivery wrote the order but did not get to mark it sent: publish again.
                republish = True
            else:
                outcome = Outcome.DUPLICATE
        except PermanentError as exc:
            error, park = f"{exc.error_code}: {exc}", exc
        except TransientError as exc:
            error, outcome = f"{type(exc).__name__}: {exc}", Outcome.RETRY
        except Exception as exc:  # a bug or an unforeseen SDK error: never acknowledge the record
            logger.exception("unexpected error", extra={"message_id": str(record["messageId"])})
            error, outcome = f"{type(exc).__name__}: {exc}", Outcome.RETRY
        ready: list[int] = []
        with batch.lock:
            if batch.closed:
                return  # reported as unfinished; whatever was written is redelivered and found again
            state.message, state.order_written, state.republish = message, written, republish
            state.outcome, state.error = outcome, error
            if park is not None:
                batch.to_park.append((index, park))
            elif outcome is None:
                batch.to_notify.append(index)
                if not self._notifier.fifo and len(batch.to_notify) >= NOTIFICATIONS_PER_JOB:
                    # A full PublishBatch is ready: send it now, while the other transactions run
                    # (a standard topic promises no order; a FIFO topic's waits for stage 2).
                    ready, batch.to_notify = batch.to_notify, []
        if ready:
            self._notify(batch, ready)

    # --- stage 2: notify and mark, park -------------------------------------------------------------

    def _notification_jobs(self, batch: _Batch, to_notify: list[int]) -> list[list[int]]:
        """Record indexes per PublishBatch job, in record order; on a FIFO topic a group stays in one job."""
        indexes = sorted(to_notify)
        if not self._notifier.fifo:
            return [indexes[i : i + NOTIFICATIONS_PER_JOB] for i in range(0, len(indexes), NOTIFICATIONS_PER_JOB)]
        by_group: dict[str, list[int]] = {}
        for index in indexes:
            message = self._message(batch, index)
            by_group.setdefault(sns_group_id(message.order_id), []).append(index)
        jobs: list[list[int]] = [[]]
        for group in by_group.values():
            if len(jobs[-1]) >= NOTIFICATIONS_PER_JOB:
                jobs.append([])
            jobs[-1].extend(group)
        return [sorted(job) for job in jobs if job]

    @staticmethod
    def _message(batch: _Batch, index: int) -> OrderMessage:
        state = batch.state[index]
        assert state is not None
        assert state.message is not None
        return state.message

    def _notify(self, batch: _Batch, indexes: list[int]) -> None:
        """One PublishBatch for these records, then the sent marks of the accepted entries."""
        notifications = [Notification.of(self._message(batch, index)) for index in indexes]
        results = self._notifier.publish_batch(notifications)
        accepted = [i for i, result in enumerate(results) if result.ok]
        marked = [False] * len(results)
        mark_error = "the invocation ended before the sent mark"
        if accepted and not batch.closed:
            try:
                flags = self._store.mark_sent_batch([notifications[i] for i in accepted])
            except TransientError as exc:
                mark_error = f"{type(exc).__name__}: {exc}"
            except Exception as exc:  # a bug or an unforeseen SDK error: the records stay unacknowledged
                logger.exception("unexpected error in the sent marks")
                mark_error = f"{type(exc).__name__}: {exc}"
            else:
                mark_error = "the sent mark did not apply (still pending)"
                for i, flag in zip(accepted, flags, strict=True):
                    marked[i] = flag
        with batch.lock:
            if batch.closed:
                return
            for i, (index, result) in enumerate(zip(indexes, results, strict=True)):
                state = batch.state[index]
                assert state is not None
                state.published = result.ok
                if marked[i]:
                    state.outcome = Outcome.REPUBLISHED if state.republish else Outcome.RECORDED
                else:
                    state.outcome = Outcome.RETRY
                    state.error = (result.error or mark_error)[:1000]

    @staticmethod
    def _park_jobs(to_park: list[tuple[int, PermanentError]], fifo: bool) -> list[list[tuple[int, PermanentError]]]:
        """Parking jobs: all in one on a FIFO queue (order kept), else 10 records per job."""
        parked = sorted(to_park, key=lambda item: item[0])
        if not parked:
            return []
        if fifo:
            return [parked]
        return [parked[i : i + 10] for i in range(0, len(parked), 10)]

    def _park(self, batch: _Batch, items: list[tuple[int, PermanentError]]) -> None:
        requests = []
        for index, error in items:
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
        failures = self._dead_letters.park_batch(requests)
        with batch.lock:
            if batch.closed:
                return
            for (index, error), failure in zip(items, failures, strict=True):
                state = batch.state[index]
                assert state is not None
                if failure is not None:
                    state.outcome = Outcome.RETRY
                    state.error = f"{state.error}; {failure}"[:1000]
                else:
                    state.outcome = Outcome.CONFLICT if isinstance(error, IdempotencyConflictError) else Outcome.INVALID

    # --- stage 3: results --------------------------------------------------------------------------

    def _results(self, batch: _Batch, fifo_groups: list[list[int]] | None) -> list[RecordResult]:
        results: list[RecordResult] = []
        for index, record in enumerate(batch.records):
            state = batch.state[index]
            if state is None:
                results.append(
                    RecordResult(message_id=str(record["messageId"]), outcome=Outcome.RETRY, error=NOT_STARTED)
                )
                continue
            message = state.message
            results.append(
                RecordResult(
                    message_id=str(record["messageId"]),
                    outcome=state.outcome or Outcome.RETRY,
                    event_id=message.event_id if message else None,
                    order_id=message.order_id if message else None,
                    order_written=state.order_written,
                    published=state.published,
                    error=state.error if state.outcome is not None else NOT_FINISHED,
                )
            )
        if fifo_groups is not None:
            for group in fifo_groups:
                failed = False
                for index in group:
                    if failed and (not results[index].failed or batch.state[index] is None):
                        result = results[index]
                        results[index] = RecordResult(
                            message_id=result.message_id,
                            outcome=Outcome.RETRY,
                            event_id=result.event_id,
                            order_id=result.order_id,
                            order_written=result.order_written,
                            published=result.published,
                            error=GROUP_FAILED,
                        )
                    failed = failed or results[index].failed
        not_started = 0
        for index, result in enumerate(results):
            if batch.state[index] is not None:
                self._log(result, batch.records[index])
            else:
                not_started += 1  # one summary line for these: O(1) work per record
        if not_started:
            logger.warning(
                "order messages not started",
                extra={"not_started": not_started, "records": len(batch.records)},
            )
        return results

    @staticmethod
    def _log(result: RecordResult, record: SqsRecord) -> None:
        fields = {
            "message_id": result.message_id,
            "event_id": result.event_id,
            "order_id": result.order_id,
            "outcome": result.outcome.value,
            "receive_count": _receive_count(record),
        }
        if result.error:
            logger.warning("order message not processed", extra={**fields, "error": result.error[:500]})
        else:
            logger.info("order message processed", extra=fields)
