"""The dead-letter queue: read messages without consuming them, and move them back to the queue.

Two kinds of message end up there:

* parked by the consumer (a permanent failure: invalid, conflict, too large): the original body and
  attributes plus ``error_code``, ``error_message`` and ``source_message_id``;
* moved by SQS after ``maxReceiveCount`` failed receives (a transient failure that lasted): the
  original message, no reason attribute. Shown here with the code :data:`MAX_RECEIVES`.

Redrive uses SQS's StartMessageMoveTask where the endpoint has it (it moves messages as they are,
reason attributes included; the consumer ignores them and writes fresh ones if the message fails
again). Elsewhere - moto, the local sandbox - and whenever messages must be selected, a
receive-send-delete loop deletes a message only after its copy was accepted, and returns it as the
producer sent it: reason attributes removed, packed original attributes unpacked.
"""

from __future__ import annotations

import base64
import functools
import hashlib
import json
import time
from collections import Counter
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from botocore.exceptions import BotoCoreError, ClientError

from idempotent_order_pipeline._lambda_asset.order_events.message import ORDER_ID_FIELD, parse_body
from idempotent_order_pipeline._lambda_asset.order_events.parked import ORIGINAL_ATTRIBUTES, REASON_ATTRIBUTES
from idempotent_order_pipeline.cli.errors import MoveTaskUnsupportedError
from idempotent_order_pipeline.cli.render import timestamp
from idempotent_order_pipeline.errors import InvalidMessageError
from idempotent_order_pipeline.keys import DEFAULT_IDENTITY_FIELDS, IDEMPOTENCY_KEY_ATTRIBUTE, resolve_event_id
from idempotent_order_pipeline.producer import MAX_BATCH_BYTES, MAX_BATCH_ENTRIES, fifo_id

if TYPE_CHECKING:
    from mypy_boto3_sqs.client import SQSClient
    from mypy_boto3_sqs.type_defs import MessageAttributeValueTypeDef, MessageTypeDef

#: The code shown for a message SQS moved after maxReceiveCount (it has no ``error_code``).
MAX_RECEIVES = "MAX_RECEIVES"
#: Seconds a read or skipped message stays hidden before it is released (visibility back to 0).
HOLD_SECONDS = 120
#: Default long-poll wait: with long polling an empty answer means an empty queue.
DEFAULT_WAIT_SECONDS = 2
#: Default number of messages ``peek`` reads.
DEFAULT_PEEK_LIMIT = 100
#: How often a message move task is polled.
MOVE_TASK_POLL_SECONDS = 2.0
# Error codes of an endpoint that lacks an action (moto's server answers a bare HTTP 500 page, so
# the code is the status). Real SQS names its errors; a bare status means "not SQS".
_UNSUPPORTED_CODES = frozenset(
    {"InvalidAction", "UnknownOperation", "UnknownOperationException", "NotImplemented", "500", "501"}
)
# A move task still at work.
_TASK_ACTIVE = frozenset({"RUNNING", "CANCELLING"})


@dataclass(frozen=True)
class DeadLetter:
    """One message of the dead-letter queue, as received."""

    message_id: str
    receipt_handle: str
    body: str
    #: Message attributes in ReceiveMessage's shape (``DataType``, ``StringValue``/``BinaryValue``).
    attributes: dict[str, Any]
    #: System attributes (``SentTimestamp``, ``ApproximateReceiveCount``, ``MessageGroupId``, ...).
    system_attributes: dict[str, str]
    identity_fields: tuple[str, ...] = DEFAULT_IDENTITY_FIELDS

    @classmethod
    def from_message(cls, message: MessageTypeDef, identity_fields: Sequence[str]) -> DeadLetter:
        return cls(
            message_id=message["MessageId"],
            receipt_handle=message["ReceiptHandle"],
            body=message.get("Body", ""),
            attributes=dict(message.get("MessageAttributes", {})),
            system_attributes={str(name): value for name, value in message.get("Attributes", {}).items()},
            identity_fields=tuple(identity_fields),
        )

    def _string(self, name: str) -> str | None:
        value = self.attributes.get(name, {}).get("StringValue")
        return value if isinstance(value, str) else None

    @property
    def error_code(self) -> str:
        """The consumer's reason code, or MAX_RECEIVES for a message the queue itself moved here."""
        return self._string("error_code") or MAX_RECEIVES

    @property
    def error_message(self) -> str | None:
        return self._string("error_message")

    @property
    def source_message_id(self) -> str | None:
        return self._string("source_message_id")

    @functools.cached_property
    def order(self) -> dict[str, Any] | None:
        """The body as an order, None if it is not a JSON object."""
        try:
            return parse_body(self.body)
        except InvalidMessageError:
            return None

    @property
    def order_id(self) -> str | None:
        order_id = (self.order or {}).get(ORDER_ID_FIELD)
        return order_id if isinstance(order_id, str) else None

    @property
    def event_id(self) -> str | None:
        """The idempotency key the consumer resolves for this message; None if it cannot resolve one."""
        attribute_key = self._string(IDEMPOTENCY_KEY_ATTRIBUTE)
        if self.order is None:
            return attribute_key
        try:
            return resolve_event_id(self.order, attribute_key, self.identity_fields)
        except InvalidMessageError:
            return attribute_key

    @property
    def sent_timestamp_ms(self) -> int:
        """When the message was sent (for one SQS moved here: when it was first sent), epoch ms."""
        return int(self.system_attributes.get("SentTimestamp", 0))

    @property
    def sent_at(self) -> str | None:
        return timestamp(self.sent_timestamp_ms / 1000) if self.sent_timestamp_ms else None

    @property
    def receive_count(self) -> int:
        return int(self.system_attributes.get("ApproximateReceiveCount", 0))

    def summary(self, *, with_body: bool = False) -> dict[str, Any]:
        """The fields ``dlq list`` shows (plus body and attributes when asked)."""
        result: dict[str, Any] = {
            "message_id": self.message_id,
            "error_code": self.error_code,
            "error_message": self.error_message,
            "event_id": self.event_id,
            "order_id": self.order_id,
            "source_message_id": self.source_message_id,
            "sent_at": self.sent_at,
            "receive_count": self.receive_count,
        }
        if with_body:
            result["body"] = self.body
            result["attributes"] = {
                name: value.get("StringValue", base64.b64encode(value.get("BinaryValue", b"")).decode())
                for name, value in self.attributes.items()
            }
        return result


def _receive(sqs: SQSClient, queue_url: str, *, count: int, wait_seconds: int) -> list[MessageTypeDef]:
    return sqs.receive_message(
        QueueUrl=queue_url,
        MaxNumberOfMessages=max(1, min(MAX_BATCH_ENTRIES, count)),
        VisibilityTimeout=HOLD_SECONDS,
        WaitTimeSeconds=wait_seconds,
        MessageAttributeNames=["All"],
        MessageSystemAttributeNames=["All"],
    ).get("Messages", [])


def release(sqs: SQSClient, queue_url: str, receipt_handles: Iterable[str]) -> None:
    """Make received messages visible again at once (visibility timeout 0), 10 per call."""
    handles = list(receipt_handles)
    for start in range(0, len(handles), MAX_BATCH_ENTRIES):
        sqs.change_message_visibility_batch(
            QueueUrl=queue_url,
            Entries=[
                {"Id": str(i), "ReceiptHandle": handle, "VisibilityTimeout": 0}
                for i, handle in enumerate(handles[start : start + MAX_BATCH_ENTRIES])
            ],
        )


@dataclass(frozen=True)
class Selection:
    """Which DLQ messages a command acts on: those matching every criterion given (all when none is)."""

    error_codes: frozenset[str] = frozenset()
    event_id: str | None = None
    order_id: str | None = None

    @classmethod
    def of(cls, error_codes: Iterable[str] = (), event_id: str | None = None, order_id: str | None = None) -> Selection:
        return cls(frozenset(code.upper() for code in error_codes), event_id, order_id)

    @property
    def everything(self) -> bool:
        return not self.error_codes and self.event_id is None and self.order_id is None

    def matches(self, letter: DeadLetter) -> bool:
        return (
            (not self.error_codes or letter.error_code in self.error_codes)
            and (self.event_id is None or letter.event_id == self.event_id)
            and (self.order_id is None or letter.order_id == self.order_id)
        )


class _Sweep:
    """Receive each message of a queue once; hold the ones not taken and release them at the end.

    Messages are received with a visibility timeout of HOLD_SECONDS, so that paging reaches the
    next ones instead of the same ten again; whatever the caller does not delete is made visible
    again (visibility 0) when the sweep ends, also when it fails.
    """

    def __init__(self, sqs: SQSClient, queue_url: str, *, wait_seconds: int, identity_fields: Sequence[str]) -> None:
        self._sqs = sqs
        self._queue_url = queue_url
        self._wait_seconds = wait_seconds
        self._identity_fields = identity_fields
        self._seen: set[str] = set()
        self._held: list[str] = []

    def __enter__(self) -> _Sweep:
        return self

    def __exit__(self, *exc_info: object) -> None:
        release(self._sqs, self._queue_url, self._held)

    def batches(self, budget: Callable[[], int]) -> Iterator[list[DeadLetter]]:
        """Batches of messages not seen before, while ``budget()`` is positive and the queue has more."""
        while (wanted := budget()) > 0:
            batch = _receive(self._sqs, self._queue_url, count=wanted, wait_seconds=self._wait_seconds)
            self._held.extend(m["ReceiptHandle"] for m in batch if m["MessageId"] in self._seen)
            fresh = [
                DeadLetter.from_message(m, self._identity_fields) for m in batch if m["MessageId"] not in self._seen
            ]
            if not fresh:
                return
            self._seen.update(letter.message_id for letter in fresh)
            yield fresh

    def hold(self, letters: Iterable[DeadLetter]) -> None:
        """Leave these in the queue (released when the sweep ends)."""
        self._held.extend(letter.receipt_handle for letter in letters)


def peek(
    sqs: SQSClient,
    queue_url: str,
    *,
    max_messages: int = DEFAULT_PEEK_LIMIT,
    wait_seconds: int = DEFAULT_WAIT_SECONDS,
    identity_fields: Sequence[str] = DEFAULT_IDENTITY_FIELDS,
) -> list[DeadLetter]:
    """Read up to ``max_messages`` messages and leave them all in the queue.

    Reading raises each message's ApproximateReceiveCount; nothing else changes.
    """
    letters: list[DeadLetter] = []
    with _Sweep(sqs, queue_url, wait_seconds=wait_seconds, identity_fields=identity_fields) as sweep:
        for batch in sweep.batches(lambda: max_messages - len(letters)):
            sweep.hold(batch)
            letters.extend(batch)
    return letters[:max_messages]


def _delete(sqs: SQSClient, queue_url: str, letters: Sequence[DeadLetter]) -> list[DeadLetter]:
    """Delete messages, 10 per call; return those not deleted."""
    left: list[DeadLetter] = []
    for start in range(0, len(letters), MAX_BATCH_ENTRIES):
        chunk = letters[start : start + MAX_BATCH_ENTRIES]
        try:
            response = sqs.delete_message_batch(
                QueueUrl=queue_url,
                Entries=[{"Id": str(i), "ReceiptHandle": letter.receipt_handle} for i, letter in enumerate(chunk)],
            )
        except (ClientError, BotoCoreError):
            left.extend(chunk)
            continue
        left.extend(chunk[int(failure["Id"])] for failure in response.get("Failed", []))
    return left


def drop(
    sqs: SQSClient,
    queue_url: str,
    selection: Selection,
    *,
    wait_seconds: int = DEFAULT_WAIT_SECONDS,
    identity_fields: Sequence[str] = DEFAULT_IDENTITY_FIELDS,
) -> tuple[list[DeadLetter], list[DeadLetter]]:
    """Delete the selected messages for good; return (deleted, not deleted). The others stay."""
    deleted: list[DeadLetter] = []
    left: list[DeadLetter] = []
    with _Sweep(sqs, queue_url, wait_seconds=wait_seconds, identity_fields=identity_fields) as sweep:
        for batch in sweep.batches(lambda: MAX_BATCH_ENTRIES):
            chosen = [letter for letter in batch if selection.matches(letter)]
            sweep.hold(letter for letter in batch if not selection.matches(letter))
            failed = _delete(sqs, queue_url, chosen)
            sweep.hold(failed)
            left.extend(failed)
            deleted.extend(letter for letter in chosen if letter not in failed)
    return deleted, left


# --- redrive ---------------------------------------------------------------------------------------


def attributes_for_redrive(attributes: Mapping[str, Any]) -> dict[str, MessageAttributeValueTypeDef]:
    """The message attributes as the producer sent them: the DLQ reason removed, packed ones unpacked.

    The consumer parks a message with ``error_code``, ``error_message`` and ``source_message_id``
    and, when the original attributes do not fit beside those, packs them into
    ``original_attributes``. Both are undone, so that the consumer sees the message as it first
    did (a new failure gets a fresh reason) and a packed ``idempotency_key`` is a key again.
    """
    result: dict[str, MessageAttributeValueTypeDef] = {}
    for name, value in attributes.items():
        if name in REASON_ATTRIBUTES:
            continue
        if name == ORIGINAL_ATTRIBUTES:
            for original_name, original in json.loads(value.get("StringValue") or "{}").items():
                result[original_name] = _from_lambda_shape(original)
            continue
        result[name] = _send_shape(value)
    return result


def _send_shape(value: Mapping[str, Any]) -> MessageAttributeValueTypeDef:
    data_type = str(value.get("DataType", "String"))
    if data_type.startswith("Binary"):
        return {"DataType": data_type, "BinaryValue": value.get("BinaryValue", b"")}
    return {"DataType": data_type, "StringValue": str(value.get("StringValue", ""))}


def _from_lambda_shape(value: Mapping[str, Any]) -> MessageAttributeValueTypeDef:
    """An attribute in the Lambda event shape (camelCase, base64 binary) in SendMessage's shape."""
    data_type = str(value.get("dataType", "String"))
    if data_type.startswith("Binary"):
        return {"DataType": data_type, "BinaryValue": base64.b64decode(value.get("binaryValue") or "")}
    return {"DataType": data_type, "StringValue": str(value.get("stringValue", ""))}


def _message_size(body: str, attributes: Mapping[str, MessageAttributeValueTypeDef]) -> int:
    size = len(body.encode("utf-8"))
    for name, value in attributes.items():
        payload = value.get("StringValue") or value.get("BinaryValue") or b""
        size += len(name) + len(value["DataType"])
        size += len(payload.encode("utf-8")) if isinstance(payload, str) else len(bytes(payload))  # type: ignore[arg-type]
    return size


@dataclass
class RedriveReport:
    """What a redrive did."""

    method: str
    moved: int = 0
    skipped: int = 0
    #: Messages that reached the DLQ after the redrive started (failed again): left for the next look.
    arrived_later: int = 0
    moved_by_code: Counter[str] = field(default_factory=Counter)
    #: (message id, why) for messages that stay in the DLQ because their send failed.
    failed: list[tuple[str, str]] = field(default_factory=list)
    #: Sent but not deleted from the DLQ: a later redrive sends them again (the consumer deduplicates).
    not_deleted: list[str] = field(default_factory=list)
    task_handle: str | None = None
    task_status: str | None = None
    task_failure: str | None = None
    to_move: int | None = None

    @property
    def complete(self) -> bool:
        """Whether everything selected was moved (a move task: it completed)."""
        return not self.failed and self.task_status in (None, "COMPLETED")


def start_move_task(sqs: SQSClient, source_arn: str, destination_arn: str, rate: int | None = None) -> str:
    """Start an SQS message move task from the DLQ to the queue; return its handle.

    The destination is always given: messages the consumer parked were sent to the DLQ directly, so
    SQS knows no "original source queue" for them.

    Raises:
        MoveTaskUnsupportedError: the endpoint lacks the action.
        ClientError: SQS refused (for example, a task already runs on this queue).
    """
    kwargs: dict[str, Any] = {"SourceArn": source_arn, "DestinationArn": destination_arn}
    if rate is not None:
        kwargs["MaxNumberOfMessagesPerSecond"] = rate
    try:
        return sqs.start_message_move_task(**kwargs)["TaskHandle"]
    except NotImplementedError as exc:  # moto in-process
        raise MoveTaskUnsupportedError(str(exc)) from exc
    except ClientError as exc:
        if str(exc.response.get("Error", {}).get("Code", "")) in _UNSUPPORTED_CODES:
            raise MoveTaskUnsupportedError(str(exc)) from exc
        raise


def wait_for_move_task(
    sqs: SQSClient,
    source_arn: str,
    report: RedriveReport,
    *,
    timeout_seconds: float,
    poll_seconds: float = MOVE_TASK_POLL_SECONDS,
    sleep: Callable[[float], None] = time.sleep,
    on_progress: Callable[[int, int | None], None] | None = None,
) -> RedriveReport:
    """Poll ListMessageMoveTasks until the report's task stops running or the timeout passes.

    Fills in ``task_status`` (``TIMED_OUT`` if it was still running), ``moved``, ``to_move`` and
    ``task_failure``.
    """
    deadline = time.monotonic() + timeout_seconds
    while True:
        tasks = sqs.list_message_move_tasks(SourceArn=source_arn, MaxResults=10).get("Results", [])
        # Only a running task lists its handle; the most recent task comes first.
        task: Mapping[str, Any] | None = next(
            (t for t in tasks if t.get("TaskHandle") == report.task_handle), tasks[0] if tasks else None
        )
        if task is not None:
            report.moved = int(task.get("ApproximateNumberOfMessagesMoved", 0))
            to_move = task.get("ApproximateNumberOfMessagesToMove")
            report.to_move = None if to_move is None else int(to_move)
            report.task_status = str(task.get("Status", "UNKNOWN"))
            report.task_failure = task.get("FailureReason")
            if on_progress is not None:
                on_progress(report.moved, report.to_move)
            if report.task_status not in _TASK_ACTIVE:
                return report
        if time.monotonic() >= deadline:
            report.task_status = "TIMED_OUT"
            return report
        sleep(poll_seconds)


def _chunks(letters: Sequence[tuple[DeadLetter, dict[str, Any]]]) -> Iterator[list[tuple[DeadLetter, dict[str, Any]]]]:
    """Consecutive groups of at most 10 entries and MAX_BATCH_BYTES bytes."""
    chunk: list[tuple[DeadLetter, dict[str, Any]]] = []
    size = 0
    for letter, entry in letters:
        entry_size = _message_size(entry["MessageBody"], entry["MessageAttributes"])
        if chunk and (len(chunk) == MAX_BATCH_ENTRIES or size + entry_size > MAX_BATCH_BYTES):
            yield chunk
            chunk, size = [], 0
        chunk.append((letter, entry))
        size += entry_size
    if chunk:
        yield chunk


def _entry(letter: DeadLetter, fifo: bool) -> dict[str, Any]:
    entry: dict[str, Any] = {"MessageBody": letter.body, "MessageAttributes": attributes_for_redrive(letter.attributes)}
    if fifo:
        # Same group as before; a deduplication id new to this receive, so that SQS does not drop
        # the copy as a duplicate of the message's first send (within its five-minute window).
        group = letter.system_attributes.get("MessageGroupId") or letter.order_id or letter.message_id
        entry["MessageGroupId"] = fifo_id(group)
        entry["MessageDeduplicationId"] = hashlib.sha256(letter.receipt_handle.encode("utf-8")).hexdigest()
    return entry


def redrive_loop(
    sqs: SQSClient,
    dead_letter_queue_url: str,
    queue_url: str,
    *,
    selection: Selection = Selection(),
    max_messages: int | None = None,
    wait_seconds: int = DEFAULT_WAIT_SECONDS,
    identity_fields: Sequence[str] = DEFAULT_IDENTITY_FIELDS,
    on_moved: Callable[[int], None] | None = None,
    clock: Callable[[], float] = time.time,
) -> RedriveReport:
    """Move DLQ messages back to the queue: receive, send, and delete only what was sent.

    Only messages already in the DLQ when the loop starts are moved: one sent to it later - the
    consumer parking a redriven message again, within a second - is left for the operator (else a
    message that always fails would circle between the queues for ever). ``SentTimestamp`` tells
    them apart: SQS keeps a message's first send time when its redrive policy moves it.

    A message leaves the DLQ only after SendMessageBatch accepted its copy; one whose send failed
    is made visible again at once and stays. A crash between the send and the delete leaves a copy
    in both queues, which is harmless: the consumer records an event once. ``selection`` (e.g.
    error code ``MAX_RECEIVES``) picks the messages to move; the others are held while the loop
    runs and released at the end. ``on_moved`` gets the running total after each batch.
    """
    report = RedriveReport(method="loop")
    fifo = queue_url.endswith(".fifo")
    started_ms = int(clock() * 1000)

    def budget() -> int:
        if max_messages is None:
            return MAX_BATCH_ENTRIES
        return max_messages - report.moved - len(report.failed)

    with _Sweep(sqs, dead_letter_queue_url, wait_seconds=wait_seconds, identity_fields=identity_fields) as sweep:
        for batch in sweep.batches(budget):
            later = [letter for letter in batch if letter.sent_timestamp_ms > started_ms]
            chosen = [letter for letter in batch if letter not in later and selection.matches(letter)]
            skipped = [letter for letter in batch if letter not in later and letter not in chosen]
            sweep.hold([*later, *skipped])
            report.arrived_later += len(later)
            report.skipped += len(skipped)
            failed_before = len(report.failed)
            for chunk in _chunks([(letter, _entry(letter, fifo)) for letter in chosen]):
                _send_and_delete(sqs, dead_letter_queue_url, queue_url, chunk, report, sweep)
            if on_moved is not None:
                on_moved(report.moved)
            if chosen and len(report.failed) - failed_before == len(chosen):
                break  # nothing got through (no queue, no permission): stop rather than spin
    return report


def _send_and_delete(
    sqs: SQSClient,
    dead_letter_queue_url: str,
    queue_url: str,
    chunk: list[tuple[DeadLetter, dict[str, Any]]],
    report: RedriveReport,
    sweep: _Sweep,
) -> None:
    letters = {str(i): letter for i, (letter, _) in enumerate(chunk)}
    entries: list[Any] = [{"Id": str(i), **entry} for i, (_, entry) in enumerate(chunk)]
    try:
        response = sqs.send_message_batch(QueueUrl=queue_url, Entries=entries)
    except (ClientError, BotoCoreError) as exc:
        report.failed.extend((letter.message_id, f"SendMessageBatch failed: {exc}") for letter in letters.values())
        sweep.hold(letters.values())
        return
    refused = [(letters[f["Id"]], f"{f.get('Code')}: {f.get('Message', '')}") for f in response.get("Failed", [])]
    report.failed.extend((letter.message_id, reason) for letter, reason in refused)
    sweep.hold(letter for letter, _ in refused)
    sent = [letters[success["Id"]] for success in response.get("Successful", [])]
    # Only now that SQS holds the copies may the originals go.
    report.not_deleted.extend(letter.message_id for letter in _delete(sqs, dead_letter_queue_url, sent))
    report.moved += len(sent)
    report.moved_by_code.update(letter.error_code for letter in sent)
