"""The producer client: send orders to the pipeline's queue carrying the key the consumer resolves.

The producer's half of recording each order once: the idempotency key is derived from the order's
content by :mod:`idempotent_order_pipeline.keys` (the function the consumer uses) and travels twice,
as the body field ``event_id`` and as the ``idempotency_key`` message attribute. Sending the same order twice - a
retry after a timeout, a replayed file - yields the same key, so the consumer records it once.

Every order is checked against the consumer's message contract before it is sent (with the
consumer's own parser, ``order_consumer.contract.message.parse_order_message``): an order the consumer would
park in the DLQ is refused here with :class:`~idempotent_order_pipeline.errors.InvalidMessageError`.

The body is the canonical JSON of the order (:func:`idempotent_order_pipeline.keys.canonical_json`): numbers are
written exactly, so a :class:`~decimal.Decimal` such as ``Decimal("0.10")`` arrives as ``0.1``,
never as a binary float. On a FIFO queue the message group is the order (``order_id`` as is when SQS accepts
it, else ``sha256:`` + its hash) and the deduplication id the hash of the event id and the content's
fingerprint (``payload_sha256``, the consumer's): SQS itself drops an exact resend within its
five-minute window, and delivers a conflict (the same event id with other content), which the
consumer parks as ``IDEMPOTENCY_CONFLICT`` instead of SQS dropping it unseen. Both ids come from
:mod:`order_consumer.contract.sns_ids`, the rule the consumer's SNS notifications follow.

Delivery is at least once: when a call fails in a way that leaves its outcome unknown (a timeout
after SQS accepted the batch), the retry may enqueue an order a second time. That is safe - the key
is the same, so the consumer records it once - and it is the only way not to lose it.

The key functions are re-exported here (and in :mod:`idempotent_order_pipeline.keys`), so a
producer needs one import path: ``from idempotent_order_pipeline.producer import OrderPublisher,
derive_event_id``.
"""

from __future__ import annotations

import json
import random
import threading
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

import boto3
from botocore.config import Config
from botocore.exceptions import BotoCoreError, ClientError

from idempotent_order_pipeline._lambda_asset.order_consumer.contract.batching import (
    batch_calls,
    message_bytes,
    sqs_text,
)
from idempotent_order_pipeline._lambda_asset.order_consumer.contract.message import (
    ORDER_ID_FIELD,
    parse_body,
    parse_order_message,
)
from idempotent_order_pipeline._lambda_asset.order_consumer.contract.order_schema import OrderSchema
from idempotent_order_pipeline._lambda_asset.order_consumer.contract.sns_ids import (
    queue_deduplication_id,
    sns_group_id,
)
from idempotent_order_pipeline.discovery import pipelines_in, select
from idempotent_order_pipeline.errors import InvalidMessageError, OrderSendError, PermanentError, SchemaViolationError
from idempotent_order_pipeline.keys import (
    DEFAULT_IDENTITY_FIELDS,
    EVENT_ID_FIELD,
    IDEMPOTENCY_KEY_ATTRIBUTE,
    canonical_json,
    derive_event_id,
    payload_sha256,
    resolve_event_id,
)
from idempotent_order_pipeline.order_schema import compile_order_schema

__all__ = [
    "InvalidMessageError",
    "OrderPublisher",
    "OrderSendError",
    "PreparedOrder",
    "SchemaViolationError",
    "SendResult",
    "canonical_json",
    "deployed_order_schema",
    "derive_event_id",
    "encode_body",
    "payload_sha256",
    "resolve_event_id",
]

if TYPE_CHECKING:
    from mypy_boto3_cloudformation.client import CloudFormationClient
    from mypy_boto3_sqs.client import SQSClient
    from mypy_boto3_sqs.type_defs import MessageAttributeValueTypeDef, SendMessageBatchRequestEntryTypeDef

#: Default of ``max_attempts``: calls per batch chunk before the remaining entries are given up.
DEFAULT_MAX_ATTEMPTS = 5
#: Default backoff before retry n: a random delay up to ``min(cap, base * 2**(n-1))`` seconds.
DEFAULT_BACKOFF_BASE_SECONDS = 0.1
DEFAULT_BACKOFF_CAP_SECONDS = 5.0
#: The default client retries throttling and 5xx errors inside each call (standard mode).
CLIENT_CONFIG = Config(retries={"mode": "standard", "max_attempts": 3}, connect_timeout=3, read_timeout=10)

# Whole-call error codes worth another attempt (boto3's standard mode has already retried them).
_THROTTLING_CODES = frozenset(
    {"Throttling", "ThrottlingException", "RequestThrottled", "AWS.SimpleQueueService.RequestThrottled"}
)


def fifo_id(value: str) -> str:
    """The SQS FIFO group id for ``value``: itself when SQS accepts it, else ``sha256:`` + its SHA-256 hex.

    SQS's rule is SNS's (1-128 alphanumeric or ASCII punctuation characters), so this is
    :func:`order_consumer.contract.sns_ids.sns_group_id`; a valid group id maps to itself (a redriven
    message keeps its group). Deduplication ids are never raw: see :meth:`OrderPublisher.send`.
    """
    return sns_group_id(value)


def encode_body(order: Mapping[str, Any]) -> str:
    """The canonical JSON of ``order``, with the characters SQS refuses written as ``\\u`` escapes.

    Raises:
        InvalidMessageError: a value is not JSON (a datetime, a set, NaN, ...), not valid Unicode, or
            a number DynamoDB cannot store exactly; the message names its path.
    """
    try:
        text = canonical_json(order)
    except InvalidMessageError as exc:  # numbers, text, types and nesting, named by their path
        raise type(exc)(f"order cannot be written as JSON: {exc}") from exc
    # A character SQS refuses can only stand inside a JSON string, where its \\u escape means the same.
    return sqs_text(text)


@dataclass(frozen=True)
class PreparedOrder:
    """One order as it will be sent: the body with its ``event_id``, and the key as an attribute."""

    event_id: str
    order_id: str
    body: str
    #: A FIFO queue's ``MessageDeduplicationId``; None: derived from the event id and the content
    #: (:func:`~order_consumer.contract.sns_ids.queue_deduplication_id`), so that SQS drops a
    #: producer's retry within its five-minute window but delivers a conflict. A deliberate second
    #: delivery (the CLI's ``pending --resend``) takes one of its own (:meth:`redelivered`), or SQS
    #: would accept it and drop it unseen.
    deduplication_id: str | None = None
    #: The fingerprint of the content (every body field but ``event_id``), as the consumer computes it.
    payload_sha256: str | None = None

    @property
    def fifo_deduplication_id(self) -> str:
        """The ``MessageDeduplicationId`` this order is sent with on a FIFO queue."""
        if self.deduplication_id is not None:
            return self.deduplication_id
        fingerprint = self.payload_sha256 or payload_sha256(parse_body(self.body))
        return queue_deduplication_id(self.event_id, fingerprint)

    def redelivered(self, delivery: str) -> PreparedOrder:
        """This order as a deliberate second delivery named ``delivery``: a deduplication id of its own.

        SQS drops no such copy as a duplicate of the first send (or of another delivery); sends of
        this one copy (retries) still share the id, so SQS drops those.
        """
        fingerprint = self.payload_sha256 or payload_sha256(parse_body(self.body))
        return replace(self, deduplication_id=queue_deduplication_id(self.event_id, fingerprint, delivery))

    @property
    def attributes(self) -> dict[str, MessageAttributeValueTypeDef]:
        """The message attributes: ``idempotency_key`` = the event id."""
        return {IDEMPOTENCY_KEY_ATTRIBUTE: {"DataType": "String", "StringValue": self.event_id}}

    @property
    def size(self) -> int:
        """Bytes SQS counts for the message (body, attribute names, types and values)."""
        return message_bytes(self.body, self.attributes)


@dataclass(frozen=True)
class SendResult:
    """What happened to one order of :meth:`OrderPublisher.send_batch` (``index``: its position)."""

    index: int
    event_id: str | None
    order_id: str | None
    message_id: str | None = None
    #: Why it was not sent (None when it was).
    error: str | None = None
    #: ``INVALID_MESSAGE``, ``ITEM_TOO_LARGE`` (refused before sending), ``REJECTED`` (SQS refused the
    #: entry: retrying cannot help) or ``GAVE_UP`` (still failing after ``max_attempts`` calls).
    error_code: str | None = None
    #: SendMessageBatch calls this order took part in.
    attempts: int = 0

    @property
    def ok(self) -> bool:
        """Whether SQS accepted the order."""
        return self.message_id is not None

    @classmethod
    def of(
        cls,
        index: int,
        prepared: PreparedOrder,
        attempts: int,
        *,
        message_id: str | None = None,
        error: str | None = None,
        error_code: str | None = None,
    ) -> SendResult:
        """The result of a prepared order after ``attempts`` calls: sent (``message_id``) or not (``error``)."""
        return cls(
            index=index,
            event_id=prepared.event_id,
            order_id=prepared.order_id,
            message_id=message_id,
            error=error,
            error_code=error_code,
            attempts=attempts,
        )


def deployed_order_schema(
    stack_name: str, *, pipeline: str | None = None, cloudformation: CloudFormationClient | None = None
) -> Mapping[str, Any] | None:
    """The ``order_schema`` of a deployed pipeline, for ``OrderPublisher(order_schema=...)``; None if it has none.

    Found as the operator CLI finds it: in the function's discovery mark of the stack's template
    (:mod:`idempotent_order_pipeline.discovery`). ``pipeline`` selects one of several pipelines (its
    path in the stack, or its construct id). Needs ``cloudformation:GetTemplate`` on the stack.

    The schema is the JSON text the consumer's validator was generated from, checked against the
    SHA-256 beside it; parsed, it equals the ``order_schema`` the construct was given (``None``
    values, integers of any size and every key included), and compiles to the consumer's code.

    Raises:
        ValueError: the stack holds no pipeline, or several and ``pipeline`` names not exactly one; or
            the template's schema does not match its hash.
    """
    client = cloudformation or boto3.client("cloudformation", config=CLIENT_CONFIG)
    body: Any = client.get_template(StackName=stack_name, TemplateStage="Original")["TemplateBody"]
    template = json.loads(body) if isinstance(body, str) else body
    found = pipelines_in(template if isinstance(template, Mapping) else {}, {})
    chosen = select(found, pipeline) if pipeline is not None else found
    if len(chosen) != 1:
        paths = ", ".join(p.path for p in found) or "none"
        raise ValueError(
            f"stack {stack_name!r}: pipeline={pipeline!r} names {len(chosen)} of its pipelines ({paths}); "
            "pass pipeline= with one path"
        )
    if chosen[0].order_schema_problem is not None:
        raise ValueError(f"stack {stack_name!r}: {chosen[0].order_schema_problem}")
    return chosen[0].order_schema


def _refused(index: int, order: object, error: str, error_code: str) -> SendResult:
    """The result of an order refused before sending (its ``order_id`` when it has a string one)."""
    try:
        order_id = order.get(ORDER_ID_FIELD) if isinstance(order, Mapping) else None
    except Exception:
        order_id = None
    return SendResult(
        index=index,
        event_id=None,
        order_id=order_id if isinstance(order_id, str) else None,
        error=error[:1000],
        error_code=error_code,
    )


def _retryable(exc: Exception) -> bool:
    """Whether a whole-call failure may succeed on another attempt."""
    if isinstance(exc, BotoCoreError):
        return True  # connection or timeout: SQS may not have received the call
    if isinstance(exc, ClientError):
        code = exc.response.get("Error", {}).get("Code", "")
        status = exc.response.get("ResponseMetadata", {}).get("HTTPStatusCode", 0)
        return code in _THROTTLING_CODES or status >= 500
    return False


class OrderPublisher:
    """Sends orders to the pipeline's queue. Thread-safe.

    Args:
        queue_url: the pipeline's queue (the stack output ``QueueUrl``); a URL ending in ``.fifo``
            gets a message group (the order id) and a deduplication id (the event id and the content).
        identity_fields: the fields hashed into the key of an order without ``event_id``; use the
            consumer's ``IDENTITY_FIELDS`` so that both sides derive the same key.
        client: an SQS client; by default one is created from boto3's default session at first use.
        order_schema: the pipeline's ``order_schema`` (a JSON Schema dict, or one compiled by
            :func:`idempotent_order_pipeline.order_schema.compile_order_schema`): orders that break it
            are refused before sending. Default: None (the message contract only).
        max_attempts: SendMessageBatch calls per chunk of 10 before the entries still failing are
            given up (reported with ``GAVE_UP``).
        sleep: how to wait between attempts (tests pass a fake).
    """

    def __init__(
        self,
        queue_url: str,
        *,
        identity_fields: Sequence[str] = DEFAULT_IDENTITY_FIELDS,
        client: SQSClient | None = None,
        max_attempts: int = DEFAULT_MAX_ATTEMPTS,
        backoff_base_seconds: float = DEFAULT_BACKOFF_BASE_SECONDS,
        backoff_cap_seconds: float = DEFAULT_BACKOFF_CAP_SECONDS,
        sleep: Callable[[float], None] = time.sleep,
        order_schema: Mapping[str, Any] | OrderSchema | None = None,
    ) -> None:
        if max_attempts < 1:
            raise ValueError(f"max_attempts={max_attempts!r}: expected at least 1")
        if not identity_fields:
            raise ValueError("identity_fields is empty; expected at least one field name, e.g. ('order_id',)")
        self.queue_url = queue_url
        self.identity_fields = tuple(identity_fields)
        self.fifo = queue_url.endswith(".fifo")
        self._client = client
        self._client_lock = threading.Lock()
        self._max_attempts = max_attempts
        self._backoff_base = backoff_base_seconds
        self._backoff_cap = backoff_cap_seconds
        self._sleep = sleep
        self._schema = order_schema if not isinstance(order_schema, Mapping) else compile_order_schema(order_schema)

    @property
    def client(self) -> SQSClient:
        """The SQS client (created at first use unless one was injected)."""
        with self._client_lock:
            if self._client is None:
                self._client = boto3.client("sqs", config=CLIENT_CONFIG)
            return self._client

    # --- one order ---------------------------------------------------------------------------------

    def prepare(self, order: Mapping[str, Any]) -> PreparedOrder:
        """Resolve the order's key and build the message the consumer will accept.

        The key is the order's own ``event_id`` when it has one, else derived from the identity
        fields (:func:`order_consumer.contract.keys.resolve_event_id`, as the consumer resolves it).

        Raises:
            InvalidMessageError: the consumer would park this order in the DLQ (the message says why).
            ItemTooLargeError: its order row would exceed DynamoDB's 400 KB item limit.
            SchemaViolationError: the order breaks the pipeline's ``order_schema`` (the consumer's message).
        """
        if not isinstance(order, Mapping):
            raise InvalidMessageError(f"an order must be a JSON object, got {type(order).__name__}")
        event_id = resolve_event_id(order, None, self.identity_fields)
        body = encode_body({**order, EVENT_ID_FIELD: event_id})
        # The consumer's own checks, in its order, on the exact message it will receive.
        message = parse_order_message(
            body,
            {IDEMPOTENCY_KEY_ATTRIBUTE: {"dataType": "String", "stringValue": event_id}},
            self.identity_fields,
        )
        if self._schema is not None:
            self._schema.check(body)
        return PreparedOrder(
            event_id=message.event_id, order_id=message.order_id, body=body, payload_sha256=message.payload_sha256
        )

    def _fifo_parameters(self, prepared: PreparedOrder) -> dict[str, str]:
        if not self.fifo:
            return {}
        return {
            "MessageGroupId": sns_group_id(prepared.order_id),
            "MessageDeduplicationId": prepared.fifo_deduplication_id,
        }

    def send(self, order: Mapping[str, Any]) -> str:
        """Send one order; return its event id (the idempotency key).

        Raises:
            InvalidMessageError, ItemTooLargeError: the consumer would refuse the order; nothing was sent.
            OrderSendError: SQS did not accept it (after the client's retries); sending the same
                order again is safe.
        """
        prepared = self.prepare(order)
        try:
            self.client.send_message(
                QueueUrl=self.queue_url,
                MessageBody=prepared.body,
                MessageAttributes=prepared.attributes,
                **self._fifo_parameters(prepared),  # type: ignore[arg-type]
            )
        except (ClientError, BotoCoreError) as exc:
            raise OrderSendError(
                f"order {prepared.order_id!r:.80} (event {prepared.event_id}) not sent: {exc}"
            ) from exc
        return prepared.event_id

    # --- many orders -------------------------------------------------------------------------------

    def send_batch(self, orders: Iterable[Mapping[str, Any]]) -> list[SendResult]:
        """Send orders with SendMessageBatch, 10 at a time; return one result per order, in order.

        Entries SQS reports as failed through no fault of the sender are retried, alone, with
        backoff; entries it rejects (``SenderFault``) and invalid orders are reported, not retried.
        A whole call that fails with a throttling, 5xx or network error is retried too. Never
        raises for a single order, whatever it holds (not a mapping, a lone surrogate, a number
        DynamoDB cannot store, a value with no JSON form): check :attr:`SendResult.ok` and
        :attr:`SendResult.error_code`.
        """
        results: dict[int, SendResult] = {}
        prepared: list[tuple[int, PreparedOrder]] = []
        for index, order in enumerate(orders):
            try:
                prepared.append((index, self.prepare(order)))
            except PermanentError as exc:  # InvalidMessageError, ItemTooLargeError: nothing to send
                results[index] = _refused(index, order, str(exc), exc.error_code)
            except Exception as exc:  # a value our encoder does not know: still this order's result
                results[index] = _refused(
                    index, order, f"order cannot be sent: {type(exc).__name__}: {exc}", InvalidMessageError.error_code
                )
        sent = self.send_prepared([entry for _, entry in prepared])
        for (index, _), result in zip(prepared, sent, strict=True):
            results[index] = replace(result, index=index)
        return [results[index] for index in sorted(results)]

    def send_prepared(self, prepared: Sequence[PreparedOrder]) -> list[SendResult]:
        """Send orders already checked by :meth:`prepare`, as :meth:`send_batch` does; one result each."""
        results: dict[int, SendResult] = {}
        for chunk in batch_calls(enumerate(prepared), get_len=lambda pair: pair[1].size):
            results.update(self._send_chunk(chunk))
        return [results[index] for index in range(len(prepared))]

    def _backoff(self, attempt: int) -> float:
        ceiling = min(self._backoff_cap, self._backoff_base * 2 ** (attempt - 1))
        return random.uniform(0, ceiling)  # noqa: S311 - jitter, not cryptography

    def _send_chunk(self, chunk: list[tuple[int, PreparedOrder]]) -> dict[int, SendResult]:
        # Entry ids are the positions in the chunk: unique within each call, as SQS requires.
        waiting = {str(position): entry for position, entry in enumerate(chunk)}
        results: dict[int, SendResult] = {}
        last_error: dict[str, str] = {}
        attempt = 0
        while waiting and attempt < self._max_attempts:
            if attempt:
                self._sleep(self._backoff(attempt))
            attempt += 1
            entries: list[SendMessageBatchRequestEntryTypeDef] = [
                {
                    "Id": entry_id,
                    "MessageBody": prepared.body,
                    "MessageAttributes": prepared.attributes,
                    **self._fifo_parameters(prepared),  # type: ignore[typeddict-item]
                }
                for entry_id, (_, prepared) in waiting.items()
            ]
            try:
                response = self.client.send_message_batch(QueueUrl=self.queue_url, Entries=entries)
            except (ClientError, BotoCoreError) as exc:
                if not _retryable(exc):
                    for entry_id in list(waiting):
                        index, prepared = waiting.pop(entry_id)
                        results[index] = SendResult.of(
                            index,
                            prepared,
                            attempt,
                            error=f"SendMessageBatch failed: {exc}",
                            error_code="REJECTED",
                        )
                    break
                last_error.update(dict.fromkeys(waiting, f"SendMessageBatch failed: {exc}"))
                continue
            for success in response.get("Successful", []):
                index, prepared = waiting.pop(success["Id"])
                results[index] = SendResult.of(
                    index,
                    prepared,
                    attempt,
                    message_id=success["MessageId"],
                )
            for failure in response.get("Failed", []):
                reason = f"{failure.get('Code', '?')}: {failure.get('Message', '')}".strip()
                if failure.get("SenderFault") and failure["Id"] in waiting:
                    index, prepared = waiting.pop(failure["Id"])
                    results[index] = SendResult.of(
                        index,
                        prepared,
                        attempt,
                        error=f"SQS rejected the message: {reason}",
                        error_code="REJECTED",
                    )
                else:
                    last_error[failure["Id"]] = reason
            # Entries in neither list stay waiting: their outcome is unknown, so they are sent again.
        for entry_id, (index, prepared) in waiting.items():
            results[index] = SendResult.of(
                index,
                prepared,
                attempt,
                error=f"not accepted after {attempt} attempt(s): {last_error.get(entry_id, 'no answer for the entry')}",
                error_code="GAVE_UP",
            )
        return results
