"""The dead-letter queue: read messages without consuming them, and move them back to the queue.

Two kinds of message end up there:

* parked by the consumer (a permanent failure: invalid, conflict, too large): the original body and
  attributes plus ``error_code``, ``error_message`` and ``source_message_id``, under the consumer's
  envelope (``order_consumer.contract.parked``); only a message with a valid envelope counts as parked;
* moved by SQS after ``maxReceiveCount`` failed receives (a transient failure that lasted): the
  original message, no reason attribute. Shown here with the code :data:`MAX_RECEIVES`.

Redrive uses SQS's StartMessageMoveTask where the endpoint has it (it moves messages as they are,
reason attributes included; the consumer ignores them and writes fresh ones if the message fails
again). Elsewhere - moto, the local sandbox - and whenever messages must be selected, a
receive-send-delete loop deletes a message only after its copy was accepted, and returns it as the
producer sent it: what the envelope says the consumer added removed, packed originals unpacked.

A message another queue's redrive policy moved here (its ``DeadLetterQueueSourceArn`` names a queue
other than the pipeline's) never goes to the pipeline's queue: the DLQ has no redrive-allow policy
(docs/security.md), so any queue of the account may name it as its dead-letter queue, and a redrive
would otherwise feed that queue's messages to the consumer. The loop leaves such messages in the
DLQ and reports them; a move task, which cannot select, is not used while another queue names the
DLQ (:func:`other_source_queues`).
"""

from __future__ import annotations

import base64
import contextlib
import functools
import time
from collections import Counter
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, cast

from botocore.exceptions import BotoCoreError, ClientError

from idempotent_order_pipeline._lambda_asset.order_consumer.contract.batching import (
    MAX_BATCH_ENTRIES,
    batch_calls,
    message_bytes,
    send_attribute,
)
from idempotent_order_pipeline._lambda_asset.order_consumer.contract.errors import MessageTooLargeError
from idempotent_order_pipeline._lambda_asset.order_consumer.contract.message import ORDER_ID_FIELD, parse_body
from idempotent_order_pipeline._lambda_asset.order_consumer.contract.parked import (
    MOVED_BY_SQS_ATTRIBUTE,
    Envelope,
    envelope_of,
    unparked,
)
from idempotent_order_pipeline._lambda_asset.order_consumer.contract.sns_ids import (
    REDRIVE_DELIVERY,
    queue_deduplication_id,
)
from idempotent_order_pipeline._lambda_asset.order_consumer.dead_letter import DeadLetterQueue, ParkRequest
from idempotent_order_pipeline.cli.aws import maximum_message_size, queue_arn
from idempotent_order_pipeline.cli.errors import (
    MoveTaskUnsupportedError,
    NotRedrivableError,
    describe,
    endpoint_message,
)
from idempotent_order_pipeline.cli.render import timestamp
from idempotent_order_pipeline.errors import InvalidMessageError
from idempotent_order_pipeline.keys import (
    DEFAULT_IDENTITY_FIELDS,
    IDEMPOTENCY_KEY_ATTRIBUTE,
    payload_sha256,
    resolve_event_id,
)
from idempotent_order_pipeline.producer import fifo_id

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

    @functools.cached_property
    def envelope(self) -> Envelope | None:
        """The consumer's mark if it parked this message; None for one SQS moved here, whatever it carries."""
        return envelope_of(self.attributes, string_key="StringValue", system_attributes=self.system_attributes)

    def _reason(self, name: str) -> str | None:
        """A reason attribute, trusted only when the envelope says the consumer added it."""
        return self._string(name) if self.envelope is not None and name in self.envelope.added else None

    @property
    def error_code(self) -> str:
        """The consumer's reason code, or MAX_RECEIVES for a message the queue itself moved here."""
        return self._reason("error_code") or MAX_RECEIVES

    @property
    def error_message(self) -> str | None:
        return self._reason("error_message")

    @property
    def source_message_id(self) -> str | None:
        return self._reason("source_message_id")

    @functools.cached_property
    def original_attributes(self) -> dict[str, MessageAttributeValueTypeDef]:
        """The attributes as the producer sent them (what a redrive sends).

        Raises:
            NotRedrivableError: a packed attribute cannot be sent (see :attr:`not_redrivable`).
        """
        return attributes_for_redrive(self.attributes)

    @functools.cached_property
    def not_redrivable(self) -> str | None:
        """Why this message cannot go back to the queue as the producer sent it; None when it can."""
        try:
            self.original_attributes  # noqa: B018 - computed for its error
        except NotRedrivableError as exc:
            return str(exc)
        return None

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
        if self.not_redrivable is None:
            original = self.original_attributes.get(IDEMPOTENCY_KEY_ATTRIBUTE)
            key = original.get("StringValue") if original is not None else None
        else:  # another attribute cannot be rebuilt; the key (a string) still can
            packed = self.envelope.packed if self.envelope is not None else {}
            key = packed.get(IDEMPOTENCY_KEY_ATTRIBUTE, {}).get("stringValue")
        attribute_key = key if isinstance(key, str) else None
        if self.order is None:
            return attribute_key
        try:
            return resolve_event_id(self.order, attribute_key, self.identity_fields)
        except InvalidMessageError:
            return attribute_key

    @property
    def redrive_size(self) -> int:
        """Bytes SQS counts for the loop's copy: the body and the attributes as the producer sent them."""
        return message_bytes(self.body, self.original_attributes)

    @property
    def payload_sha256(self) -> str | None:
        """The fingerprint of the order's content, as the consumer computes it; None if the body is no order."""
        return None if self.order is None else payload_sha256(self.order)

    @property
    def redrive_deduplication_id(self) -> str:
        """The ``MessageDeduplicationId`` of a redrive's copy of this message on a FIFO queue.

        The event, the content and ``redrive:`` + this DLQ message's id: unlike the first send's
        (:data:`~order_consumer.contract.sns_ids.FIRST_DELIVERY`), and unlike a redrive of any other
        DLQ message (a copy that failed again is another DLQ message, with another id).
        """
        return queue_deduplication_id(
            self.event_id or "", self.payload_sha256 or "", f"{REDRIVE_DELIVERY}{self.message_id}"
        )

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

    @property
    def source_queue_arn(self) -> str | None:
        """The queue whose redrive policy moved this message here (SQS's ``DeadLetterQueueSourceArn``);
        None for one sent here directly (parked by the consumer)."""
        return self.system_attributes.get(MOVED_BY_SQS_ATTRIBUTE)

    def from_another_queue(self, own_queue_arn: str) -> bool:
        """Whether another queue's redrive policy moved this message here: a redrive leaves it in the DLQ."""
        return self.source_queue_arn is not None and self.source_queue_arn != own_queue_arn

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
    #: Only the messages whose event id starts with this (the copies of one ``smoke`` run).
    event_id_prefix: str | None = None

    @classmethod
    def of(cls, error_codes: Iterable[str] = (), event_id: str | None = None, order_id: str | None = None) -> Selection:
        return cls(frozenset(code.upper() for code in error_codes), event_id, order_id)

    @property
    def everything(self) -> bool:
        return not self.error_codes and self.event_id is None and self.order_id is None and self.event_id_prefix is None

    def matches(self, letter: DeadLetter) -> bool:
        return (
            (not self.error_codes or letter.error_code in self.error_codes)
            and (self.event_id is None or letter.event_id == self.event_id)
            and (self.order_id is None or letter.order_id == self.order_id)
            and (self.event_id_prefix is None or (letter.event_id or "").startswith(self.event_id_prefix))
        )


class _Sweep:
    """Receive each message of a queue once; whatever is not deleted is released when the sweep ends.

    Messages are received with a visibility timeout of HOLD_SECONDS, so that paging reaches the
    next ones instead of the same ten again. Every message received stays on the sweep's books until
    the caller reports it deleted; when the sweep ends - normally, or because something raised
    midway (a bug, a lost connection, Ctrl-C) - everything still on the books is made visible again
    at once (visibility 0), so nothing stays hidden for HOLD_SECONDS and a rerun finds it.

    A FIFO queue hands out no more of a message group while some of its messages are in flight, and
    releasing them only hands out the same first ones again: no receive reaches the rest of a group
    until its first messages are deleted. (moto differs: a released message lets the group's later
    ones through, so a sweep that released and received again would look complete there and not on
    SQS.) So on a FIFO queue, a sweep that ends with messages it could not reach counts them in
    :attr:`held_back` - what SQS still shows as visible while the sweep holds what it read.
    """

    def __init__(self, sqs: SQSClient, queue_url: str, *, wait_seconds: int, identity_fields: Sequence[str]) -> None:
        self._sqs = sqs
        self._queue_url = queue_url
        self._wait_seconds = wait_seconds
        self._identity_fields = identity_fields
        self._seen: set[str] = set()
        # Receipt handles received and not deleted (a dict as an ordered set).
        self._held: dict[str, None] = {}
        #: FIFO: messages left unread behind held ones of their group when the queue stopped answering.
        self.held_back = 0

    def __enter__(self) -> _Sweep:
        return self

    def __exit__(self, exc_type: type[BaseException] | None, *exc_info: object) -> None:
        if exc_type is None:
            release(self._sqs, self._queue_url, self._held)
            return
        # On the way out of a failure: release what can be, and let the failure through.
        with contextlib.suppress(ClientError, BotoCoreError):
            release(self._sqs, self._queue_url, self._held)

    def batches(self, budget: Callable[[], int]) -> Iterator[list[DeadLetter]]:
        """Batches of messages not seen before, while ``budget()`` is positive and the queue has more."""
        while (wanted := budget()) > 0:
            batch = _receive(self._sqs, self._queue_url, count=wanted, wait_seconds=self._wait_seconds)
            self._held.update(dict.fromkeys(m["ReceiptHandle"] for m in batch))
            fresh = [
                DeadLetter.from_message(m, self._identity_fields) for m in batch if m["MessageId"] not in self._seen
            ]
            if not fresh:
                self._count_held_back()
                return
            self._seen.update(letter.message_id for letter in fresh)
            yield fresh

    def _count_held_back(self) -> None:
        if self._queue_url.endswith(".fifo") and self._held:
            attributes = self._sqs.get_queue_attributes(
                QueueUrl=self._queue_url, AttributeNames=["ApproximateNumberOfMessages"]
            )["Attributes"]
            self.held_back = int(attributes.get("ApproximateNumberOfMessages", 0))

    def deleted(self, letters: Iterable[DeadLetter]) -> None:
        """These left the queue: nothing to release."""
        for letter in letters:
            self._held.pop(letter.receipt_handle, None)


@dataclass(frozen=True)
class Reading:
    """What :func:`peek` read, and (FIFO) how many messages SQS held back behind them in their groups."""

    letters: list[DeadLetter]
    held_back: int = 0


def peek(
    sqs: SQSClient,
    queue_url: str,
    *,
    max_messages: int = DEFAULT_PEEK_LIMIT,
    wait_seconds: int = DEFAULT_WAIT_SECONDS,
    identity_fields: Sequence[str] = DEFAULT_IDENTITY_FIELDS,
) -> Reading:
    """Read up to ``max_messages`` messages and leave them all in the queue.

    Reading raises each message's ApproximateReceiveCount; nothing else changes. On a FIFO queue,
    messages behind the first ones read of their group cannot be read without deleting those
    (see :class:`_Sweep`); they are counted in :attr:`Reading.held_back`.
    """
    letters: list[DeadLetter] = []
    with _Sweep(sqs, queue_url, wait_seconds=wait_seconds, identity_fields=identity_fields) as sweep:
        for batch in sweep.batches(lambda: max_messages - len(letters)):
            letters.extend(batch)
    return Reading(letters[:max_messages], sweep.held_back)


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


@dataclass(frozen=True)
class Dropped:
    """What :func:`drop` did: deleted, selected but not deleted, and (FIFO) messages it could not reach."""

    deleted: list[DeadLetter]
    left: list[DeadLetter]
    #: FIFO: messages behind ones not selected in their group; the selection may match some of them.
    held_back: int = 0


def drop(
    sqs: SQSClient,
    queue_url: str,
    selection: Selection,
    *,
    dry_run: bool = False,
    wait_seconds: int = DEFAULT_WAIT_SECONDS,
    identity_fields: Sequence[str] = DEFAULT_IDENTITY_FIELDS,
    limit: int | None = None,
) -> Dropped:
    """Delete the selected messages for good; the others stay. ``dry_run``: only find them.

    ``limit``: stop reading once that many are deleted (found, in a dry run); None reads the whole queue.
    On a FIFO queue the sweep gets past a group's first ten messages only by deleting them, so a
    group whose first messages are not selected (or a dry run) hides the rest: counted in
    :attr:`Dropped.held_back`.
    """
    deleted: list[DeadLetter] = []
    left: list[DeadLetter] = []

    def budget() -> int:
        return MAX_BATCH_ENTRIES if limit is None or len(deleted) < limit else 0

    with _Sweep(sqs, queue_url, wait_seconds=wait_seconds, identity_fields=identity_fields) as sweep:
        for batch in sweep.batches(budget):
            chosen = [letter for letter in batch if selection.matches(letter)]
            if dry_run:
                deleted.extend(chosen)
                continue
            failed = _delete(sqs, queue_url, chosen)
            left.extend(failed)
            deleted.extend(letter for letter in chosen if letter not in failed)
            sweep.deleted(letter for letter in chosen if letter not in failed)
    return Dropped(deleted, left, sweep.held_back)


# --- redrive ---------------------------------------------------------------------------------------


def attributes_for_redrive(attributes: Mapping[str, Any]) -> dict[str, MessageAttributeValueTypeDef]:
    """The message attributes as the producer sent them: what the consumer added removed, packed ones unpacked.

    Only a message that carries the consumer's envelope (``order_consumer.contract.parked``: an attribute of
    that name whose value is a versioned JSON envelope of the exact shape) is changed: the names the
    envelope lists are removed and the originals it packed are unpacked, so the consumer sees the
    message as it first did (a new failure gets a fresh reason) and a packed ``idempotency_key`` is a
    key again. Any other message - moved by SQS, or parked before the envelope existed - goes back
    with its attributes as they are: an attribute is never interpreted because of its name alone.

    Raises:
        NotRedrivableError: a packed binary attribute is not base64 (the consumer packs an attribute
            of a hand-built event as it came); no SendMessage can carry it as it came.
    """
    envelope = envelope_of(attributes, string_key="StringValue")
    result = {name: _send_shape(value) for name, value in unparked(attributes, envelope).items()}
    for name, value in (envelope.packed if envelope is not None else {}).items():
        try:
            result[name] = cast("MessageAttributeValueTypeDef", send_attribute(value))
        except ValueError as exc:  # binascii.Error
            raise NotRedrivableError(f"not redrivable: packed attribute {name!r} is not base64 ({exc})") from exc
    return result


def _send_shape(value: Mapping[str, Any]) -> MessageAttributeValueTypeDef:
    data_type = str(value.get("DataType", "String"))
    if data_type.startswith("Binary"):
        return {"DataType": data_type, "BinaryValue": value.get("BinaryValue", b"")}
    return {"DataType": data_type, "StringValue": str(value.get("StringValue", ""))}


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
    #: FIFO loop: messages behind ones not selected in their group, which no receive could reach.
    held_back: int = 0
    #: (message id, source queue ARN) of messages another queue's redrive policy moved to the DLQ:
    #: left there, never sent to the pipeline's queue.
    from_other_queues: list[tuple[str, str]] = field(default_factory=list)
    #: (message id, why) of messages larger than the queue's MaximumMessageSize: they stay in the DLQ,
    #: parked again with the code MESSAGE_TOO_LARGE (:func:`redrive_loop`).
    too_large: list[tuple[str, str]] = field(default_factory=list)

    @property
    def complete(self) -> bool:
        """Whether everything selected was moved (a move task: it completed)."""
        return not self.failed and not self.too_large and self.task_status in (None, "COMPLETED")


def other_source_queues(sqs: SQSClient, dead_letter_queue_url: str, queue_url: str) -> list[str]:
    """The URLs of the queues other than ``queue_url`` whose redrive policy names the DLQ.

    A move task moves every message of the DLQ, so while this is not empty a redrive must use the loop,
    which leaves their messages where they are.

    Raises:
        ClientError, BotoCoreError: the list could not be read (then nothing is known).
    """
    others: list[str] = []
    for page in sqs.get_paginator("list_dead_letter_source_queues").paginate(QueueUrl=dead_letter_queue_url):
        others.extend(
            url for url in page.get("queueUrls", []) if _account_and_name(url) != _account_and_name(queue_url)
        )
    return others


def _account_and_name(queue_url: str) -> list[str]:
    """A queue URL's last two path parts (account, name): the same queue whatever the endpoint's host."""
    return queue_url.rstrip("/").split("/")[-2:]


def move_task_size_problem(sqs: SQSClient, dead_letter_queue_url: str, queue_url: str) -> str | None:
    """Why a move task might bring the queue a message larger than it accepts; None when it cannot.

    A move task moves each message as it is - for one the consumer parked, the original plus its
    reason and envelope - and nothing says what it does with one the destination refuses. Only the
    queues' limits prove, without reading every message, that each one fits: SQS refuses any message
    over the DLQ's ``MaximumMessageSize``, so when that is at most the queue's, every DLQ message
    fits. The construct's DLQ accepts 1 MiB (``DEAD_LETTER_MAX_MESSAGE_BYTES``, room for a parked
    copy of the largest order) and its queue at most 256 KiB, so on a pipeline it built this
    returns a reason and the redrive runs the loop, which checks each message (docs/redrive.md).
    """
    try:
        dlq_limit = maximum_message_size(sqs, dead_letter_queue_url)
        queue_limit = maximum_message_size(sqs, queue_url)
    except (ClientError, BotoCoreError) as exc:
        return f"the queues' MaximumMessageSize could not be read ({describe(exc)})"
    if dlq_limit is None or queue_limit is None:
        return "the endpoint did not say the queues' MaximumMessageSize"
    if dlq_limit <= queue_limit:
        return None
    return (
        f"the DLQ accepts messages of up to {dlq_limit} bytes and the queue of up to {queue_limit} "
        "(MaximumMessageSize), so a parked message may not fit the queue as it is"
    )


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
            raise MoveTaskUnsupportedError(describe(exc)) from exc
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


def _entry(letter: DeadLetter, fifo: bool) -> dict[str, Any]:
    entry: dict[str, Any] = {"MessageBody": letter.body, "MessageAttributes": letter.original_attributes}
    if fifo:
        # Same group as before; the deduplication id of a redrive's copy of this DLQ message
        # (docs/redrive.md): never the first send's, so SQS does not drop the copy within its
        # five-minute window, and the same for every send of this one DLQ message, so a second
        # redrive of a message whose delete failed is dropped, not delivered twice.
        group = letter.system_attributes.get("MessageGroupId") or letter.order_id or letter.message_id
        entry["MessageGroupId"] = fifo_id(group)
        entry["MessageDeduplicationId"] = letter.redrive_deduplication_id
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
) -> RedriveReport:
    """Move DLQ messages back to the queue: receive, send, and delete only what was sent.

    Each message is moved at most once per run, so one that always fails cannot circle between the
    queues. That needs no clock: the loop remembers the MessageId SQS gave each copy it sent, and a
    message that comes back is recognised by SQS's own ids, whatever the operator's clock says:

    * moved back by the redrive policy after ``maxReceiveCount``, it keeps its MessageId (SQS moves
      the message itself; on FIFO queues it even replaces the deduplication id with that id);
    * parked again by the consumer, it is a new message whose ``source_message_id`` - trusted only
      under the consumer's envelope - is the id of the copy it received.

    Either way it is left in the DLQ and counted in ``arrived_later``. (Not ``SentTimestamp``: it is
    SQS's clock, and against the operator's ``time.time()`` a clock 120 s ahead makes a message
    parked again look old, so it would go round once per receive.) A message some other failure
    parks while the loop runs is moved if the loop reaches it - it cannot be told from one that came
    just before the start - and it, too, is then moved only once.

    A message leaves the DLQ only after SendMessageBatch accepted its copy; one whose send failed
    stays. A crash between the send and the delete leaves a copy in both queues, which is harmless:
    the consumer records an event once. Whatever the loop received and did not delete is made
    visible again when it ends, also when it ends by an exception, so a rerun moves what is left.
    ``selection`` (e.g. error code ``MAX_RECEIVES``) picks the messages to move; the others stay.
    A message another queue's redrive policy moved to the DLQ is never moved (whatever the selection):
    it stays and is listed in ``from_other_queues``. ``on_moved`` gets the running total after each batch.
    """
    report = RedriveReport(method="loop")
    fifo = queue_url.endswith(".fifo")
    own_arn = queue_arn(sqs, queue_url)
    limit = maximum_message_size(sqs, queue_url)
    # MessageIds of the copies this run sent to the queue.
    copies: set[str] = set()
    # MessageIds of the DLQ messages this run parked again as too large (their new copies name them).
    reparked: set[str] = set()

    def budget() -> int:
        if max_messages is None:
            return MAX_BATCH_ENTRIES
        return max_messages - report.moved - len(report.failed) - len(report.too_large)

    def came_back(letter: DeadLetter) -> bool:
        return letter.message_id in copies or (letter.source_message_id or "") in copies

    with _Sweep(sqs, dead_letter_queue_url, wait_seconds=wait_seconds, identity_fields=identity_fields) as sweep:
        for batch in sweep.batches(budget):
            later = [letter for letter in batch if came_back(letter)]
            # This run's own parkings of messages too large (already reported): left alone.
            ours = [letter for letter in batch if letter not in later and (letter.source_message_id or "") in reparked]
            foreign = [
                letter
                for letter in batch
                if letter not in later and letter not in ours and letter.from_another_queue(own_arn)
            ]
            chosen = [
                letter
                for letter in batch
                if letter not in later and letter not in ours and letter not in foreign and selection.matches(letter)
            ]
            report.arrived_later += len(later)
            report.from_other_queues.extend((letter.message_id, str(letter.source_queue_arn)) for letter in foreign)
            report.skipped += len(batch) - len(later) - len(ours) - len(foreign) - len(chosen)
            # Left in the DLQ (the sweep releases it) and reported with its reason; the others go on.
            report.failed.extend(
                (letter.message_id, letter.not_redrivable or "") for letter in chosen if letter.not_redrivable
            )
            chosen = [letter for letter in chosen if letter.not_redrivable is None]
            too_large = [letter for letter in chosen if limit is not None and letter.redrive_size > limit]
            if too_large:
                _park_too_large(sqs, dead_letter_queue_url, too_large, limit or 0, report, sweep, reparked)
                chosen = [letter for letter in chosen if letter not in too_large]
            failed_before = len(report.failed)
            for chunk in batch_calls(
                [(letter, _entry(letter, fifo)) for letter in chosen],
                get_len=lambda pair: message_bytes(pair[1]["MessageBody"], pair[1]["MessageAttributes"]),
            ):
                _send_and_delete(sqs, dead_letter_queue_url, queue_url, chunk, report, sweep, copies)
            if on_moved is not None:
                on_moved(report.moved)
            if chosen and len(report.failed) - failed_before == len(chosen):
                break  # nothing got through (no queue, no permission): stop rather than spin
    report.held_back = sweep.held_back
    return report


def _too_large_reason(letter: DeadLetter, limit: int) -> str:
    before = letter.error_code if letter.envelope is not None else f"{MAX_RECEIVES} (moved by the queue)"
    reason = (
        f"{letter.redrive_size} bytes as the producer sent it; the queue accepts at most {limit} "
        f"(its MaximumMessageSize), so no redrive can send it back; parked before as {before}"
    )
    return reason + (f": {letter.error_message}" if letter.error_message else "")


def _park_too_large(
    sqs: SQSClient,
    dead_letter_queue_url: str,
    letters: Sequence[DeadLetter],
    limit: int,
    report: RedriveReport,
    sweep: _Sweep,
    reparked: set[str],
) -> None:
    """Keep in the DLQ, under the code MESSAGE_TOO_LARGE, messages no copy of which the queue accepts.

    Each is parked again as the consumer parks (``order_consumer.dead_letter``: the producer's
    attributes, the reason, the envelope), so ``dlq list`` shows why it stays, and only then
    deleted. One already parked as MESSAGE_TOO_LARGE stays as it is. When the new parking fails (no
    ``sqs:SendMessage`` on the DLQ, or the copy with its reason is over the DLQ's limit) the message
    stays as it is too, and the report says why. Either way it is reported in ``too_large``.
    """
    code = MessageTooLargeError.error_code
    again = [letter for letter in letters if letter.error_code != code]
    report.too_large.extend(
        (letter.message_id, letter.error_message or _too_large_reason(letter, limit))
        for letter in letters
        if letter not in again
    )
    if not again:
        return
    requests = [
        ParkRequest(
            body=letter.body,
            attributes=_lambda_shape(letter.original_attributes),
            message_id=letter.message_id,
            error=MessageTooLargeError(_too_large_reason(letter, limit)),
            message_group_id=letter.system_attributes.get("MessageGroupId"),
        )
        for letter in again
    ]
    results = DeadLetterQueue(queue_url=dead_letter_queue_url, client=sqs).park_batch(requests)
    parked = [letter for letter, result in zip(again, results, strict=True) if result is None]
    for letter, request, result in zip(again, requests, results, strict=True):
        left = "" if result is None else f"; left as it was: {endpoint_message(result)}"
        report.too_large.append((letter.message_id, f"{request.error}{left}"))
    reparked.update(letter.message_id for letter in parked)
    not_deleted = _delete(sqs, dead_letter_queue_url, parked)
    sweep.deleted(letter for letter in parked if letter not in not_deleted)
    report.not_deleted.extend(letter.message_id for letter in not_deleted)


def _lambda_shape(attributes: Mapping[str, MessageAttributeValueTypeDef]) -> dict[str, dict[str, str]]:
    """SendMessage attributes in the Lambda event's shape (what the consumer's parking reads)."""
    shaped: dict[str, dict[str, str]] = {}
    for name, value in attributes.items():
        binary = value.get("BinaryValue")
        if isinstance(binary, bytes | bytearray):
            shaped[name] = {"dataType": value["DataType"], "binaryValue": base64.b64encode(binary).decode()}
        else:
            shaped[name] = {"dataType": value["DataType"], "stringValue": str(value.get("StringValue", ""))}
    return shaped


def _send_and_delete(
    sqs: SQSClient,
    dead_letter_queue_url: str,
    queue_url: str,
    chunk: list[tuple[DeadLetter, dict[str, Any]]],
    report: RedriveReport,
    sweep: _Sweep,
    copies: set[str],
) -> None:
    letters = {str(i): letter for i, (letter, _) in enumerate(chunk)}
    entries: list[Any] = [{"Id": str(i), **entry} for i, (_, entry) in enumerate(chunk)]
    try:
        response = sqs.send_message_batch(QueueUrl=queue_url, Entries=entries)
    except (ClientError, BotoCoreError) as exc:
        report.failed.extend(
            (letter.message_id, f"SendMessageBatch failed: {describe(exc)}") for letter in letters.values()
        )
        return
    refused = [
        (letters[f["Id"]], f"{f.get('Code')}: {endpoint_message(f.get('Message', ''))}")
        for f in response.get("Failed", [])
    ]
    report.failed.extend((letter.message_id, reason) for letter, reason in refused)
    successful = response.get("Successful", [])
    copies.update(success["MessageId"] for success in successful)
    sent = [letters[success["Id"]] for success in successful]
    # Only now that SQS holds the copies may the originals go.
    not_deleted = _delete(sqs, dead_letter_queue_url, sent)
    sweep.deleted(letter for letter in sent if letter not in not_deleted)
    report.not_deleted.extend(letter.message_id for letter in not_deleted)
    report.moved += len(sent)
    report.moved_by_code.update(letter.error_code for letter in sent)
