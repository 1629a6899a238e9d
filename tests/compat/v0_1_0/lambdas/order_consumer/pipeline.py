"""The per-record flow and the batch orchestration.

Per record (an SQS record of the Lambda event)::

    parse -> TransactWriteItems(pending record + order row)
        new event                      -> publish -> mark sent          -> recorded
        record sent, same payload      -> nothing                       -> duplicate
        record pending, same payload   -> publish -> mark sent          -> republished
        order row only, same payload   -> nothing                       -> duplicate
        other payload under either key -> park in DLQ (IDEMPOTENCY_CONFLICT)
    invalid message                    -> park in DLQ (INVALID_MESSAGE, ITEM_TOO_LARGE, ...)
    transient failure                  -> report in batchItemFailures; SQS redelivers

A record is acknowledged only once its order is durable and notified, or once it is parked in the
DLQ. Records of a standard queue are independent and run concurrently; records of a FIFO queue run
in order within their message group, and after a failure the rest of the group is not started.
"""

from __future__ import annotations

import enum
from collections.abc import Callable, Iterable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor, wait
from dataclasses import dataclass
from typing import Any

from order_consumer.dead_letter import DeadLetterQueue
from order_consumer.notifier import Notifier
from order_consumer.observability import logger
from order_consumer.store import STATUS_SENT, ExistingEvent, OrderStore
from order_events.errors import (
    IdempotencyConflictError,
    OutOfTimeError,
    PermanentError,
    TransientError,
)
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

#: Default worker threads: one per record of a default batch (10).
DEFAULT_MAX_WORKERS = 10
#: Default time a record needs to start: below this much invocation time left, it is left to SQS.
DEFAULT_MIN_REMAINING_MS = 2000

SqsRecord = Mapping[str, Any]
RemainingTime = Callable[[], int]


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


def _receive_count(record: SqsRecord) -> int:
    try:
        return int(record.get("attributes", {}).get("ApproximateReceiveCount", 0))
    except (TypeError, ValueError):
        return 0


def _message_group(record: SqsRecord) -> str | None:
    group = record.get("attributes", {}).get("MessageGroupId")
    return str(group) if group is not None else None


class _Progress:
    """Mutable per-record facts, so that a failure late in the flow still reports what was done."""

    def __init__(self) -> None:
        self.message: OrderMessage | None = None
        self.order_written = False
        self.published = False


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
    ) -> None:
        self._store = store
        self._notifier = notifier
        self._dead_letters = dead_letters
        self._identity_fields = tuple(identity_fields)
        self._min_remaining_ms = min_remaining_ms
        self._executor = ThreadPoolExecutor(max_workers=max_workers, thread_name_prefix="order")

    def close(self) -> None:
        """Stop the worker threads (a container never needs this; tests that build many pipelines do)."""
        self._executor.shutdown(wait=True)

    # --- one record -----------------------------------------------------------------------------

    def process_record(self, record: SqsRecord, remaining_ms: RemainingTime | None = None) -> RecordResult:
        """Process one record; never raises for a domain error, only for a crash (BaseException)."""
        message_id = str(record["messageId"])
        progress = _Progress()
        error: str | None = None
        try:
            if remaining_ms is not None and remaining_ms() < self._min_remaining_ms:
                raise OutOfTimeError(f"less than {self._min_remaining_ms} ms of invocation time left")
            progress.message = parse_order_message(
                str(record.get("body", "")), record.get("messageAttributes") or {}, self._identity_fields
            )
            outcome = self._deliver(progress.message, progress)
        except PermanentError as exc:
            error = f"{exc.error_code}: {exc}"
            outcome = self._park(record, exc)
        except TransientError as exc:
            error = f"{type(exc).__name__}: {exc}"
            outcome = Outcome.RETRY
        except Exception as exc:  # a bug or an unforeseen SDK error: never acknowledge the record
            logger.exception("unexpected error", extra={"message_id": message_id})
            error = f"{type(exc).__name__}: {exc}"
            outcome = Outcome.RETRY
        result = RecordResult(
            message_id=message_id,
            outcome=outcome,
            event_id=progress.message.event_id if progress.message else None,
            order_id=progress.message.order_id if progress.message else None,
            order_written=progress.order_written,
            published=progress.published,
            error=error,
        )
        self._log(result, record)
        return result

    def _deliver(self, message: OrderMessage, progress: _Progress) -> Outcome:
        collision = self._store.record(message)
        if collision is None:
            progress.order_written = True
            self._notify(message, progress)
            return Outcome.RECORDED
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
            # A previous delivery wrote the order but did not get to mark it sent: publish again.
            self._notify(message, progress)
            return Outcome.REPUBLISHED
        return Outcome.DUPLICATE

    def _notify(self, message: OrderMessage, progress: _Progress) -> None:
        self._notifier.publish(message)
        progress.published = True
        # Only after SNS accepted the notification; losing this race to another delivery is fine.
        self._store.mark_sent(message.event_id)

    def _park(self, record: SqsRecord, error: PermanentError) -> Outcome:
        try:
            self._dead_letters.park(
                body=str(record.get("body", "")),
                attributes=record.get("messageAttributes") or {},
                message_id=str(record["messageId"]),
                error=error,
                message_group_id=_message_group(record),
            )
        except TransientError:
            return Outcome.RETRY
        return Outcome.CONFLICT if isinstance(error, IdempotencyConflictError) else Outcome.INVALID

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

    # --- a batch ----------------------------------------------------------------------------------

    def process_batch(
        self, records: Sequence[SqsRecord], remaining_ms: RemainingTime | None = None
    ) -> list[RecordResult]:
        """Process every record and return their results in record order.

        All work started for this batch has finished when this returns or raises: no thread
        outlives the invocation. A crash (BaseException) in any record is re-raised after that.
        """
        if not records:
            return []
        fifo = str(records[0].get("eventSourceARN", "")).endswith(".fifo")
        if fifo:
            groups: dict[str | None, list[int]] = {}
            for index, record in enumerate(records):
                groups.setdefault(_message_group(record), []).append(index)
            tasks = [[records[i] for i in indexes] for indexes in groups.values()]
            order = [i for indexes in groups.values() for i in indexes]
        else:
            tasks = [[record] for record in records]
            order = list(range(len(records)))
        futures = [self._executor.submit(self._process_in_order, task, remaining_ms) for task in tasks]
        wait(futures)
        flat = [result for future in futures for result in future.result()]
        results: list[RecordResult | None] = [None] * len(records)
        for index, result in zip(order, flat, strict=True):
            results[index] = result
        return [r for r in results if r is not None]

    def _process_in_order(self, records: Sequence[SqsRecord], remaining_ms: RemainingTime | None) -> list[RecordResult]:
        results: list[RecordResult] = []
        for record in records:
            if results and results[-1].failed:
                results.append(
                    RecordResult(
                        message_id=str(record["messageId"]),
                        outcome=Outcome.RETRY,
                        error="an earlier message of its FIFO group failed; not started",
                    )
                )
                continue
            results.append(self.process_record(record, remaining_ms))
        return results
