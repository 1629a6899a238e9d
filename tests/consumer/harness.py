"""A moto-backed stand-in for the consumer's AWS world, with faults injectable at the client boundary.

Every AWS call the handler makes goes through :class:`GuardedClient`, which

* serializes calls with one lock: moto's ``transact_write_items`` copies and restores whole tables
  without a lock, so concurrent calls could undo each other inside moto, which real DynamoDB (linearizable
  per item) never does. The handler still interleaves its threads at call granularity;
* counts calls per operation;
* lets a test arm faults: raise before the call is sent, raise after it succeeded, or answer with a
  DynamoDB/SNS/SQS error response of its choice.
"""

from __future__ import annotations

import itertools
import json
import threading
import time
import uuid
from collections import Counter
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

import boto3
from boto3.dynamodb.types import TypeDeserializer
from botocore.exceptions import ClientError

from idempotent_order_pipeline._lambda_asset.order_consumer import handler as handler_module
from idempotent_order_pipeline._lambda_asset.order_consumer.contract.keys import derive_event_id, payload_sha256
from idempotent_order_pipeline._lambda_asset.order_consumer.contract.pending_index import CHECKPOINT_EVENT_ID
from idempotent_order_pipeline._lambda_asset.order_consumer.runtime import Clients
from idempotent_order_pipeline._lambda_asset.order_consumer.store import MARK_SENT_STATEMENT
from idempotent_order_pipeline.sandbox.partiql import parse_partiql_update


class Crash(BaseException):
    """The Lambda process dies here (the handler cannot catch it; the whole batch is redelivered)."""


def client_error(operation: str, code: str, message: str = "injected", **extra: Any) -> ClientError:
    return ClientError({"Error": {"Code": code, "Message": message}, **extra}, operation)


def cancelled(*codes: str) -> ClientError:
    """A TransactionCanceledException with the given per-item reason codes."""
    return client_error(
        "TransactWriteItems",
        "TransactionCanceledException",
        f"Transaction cancelled [{', '.join(codes)}]",
        CancellationReasons=[{"Code": code} for code in codes],
    )


def is_record_write(request: Mapping[str, Any]) -> bool:
    """Whether a TransactWriteItems request is a record's first write (two Puts)."""
    return "Put" in request.get("TransactItems", [{}])[0]


def is_mark_statement(statement: Mapping[str, Any]) -> bool:
    """Whether one statement of a BatchExecuteStatement is a sent mark (on whichever table)."""
    text = str(statement.get("Statement", ""))
    update = parse_partiql_update(text, list(statement.get("Parameters", [])))
    return text == MARK_SENT_STATEMENT.format(table=update.table)


def is_mark(request: Mapping[str, Any]) -> bool:
    """Whether a BatchExecuteStatement request is a call of sent marks."""
    statements = request.get("Statements", [])
    return bool(statements) and all(is_mark_statement(statement) for statement in statements)


def statement_event_id(statement: Mapping[str, Any]) -> str:
    """The event id a mark statement's WHERE names."""
    update = parse_partiql_update(statement["Statement"], list(statement.get("Parameters", [])))
    return str(dict(update.where)["event_id"]["S"])


def refuse_statements(refuse: Callable[[dict[str, Any]], bool], code: str = "ThrottlingError") -> Callable[..., Any]:
    """A BatchExecuteStatement rewrite: statements ``refuse`` picks answer ``code`` and are not run
    (as DynamoDB answers a statement throttled inside the batch); the others run."""

    def rewrite(request: dict[str, Any], send: Callable[..., Any]) -> Any:
        statements = request["Statements"]
        kept = [statement for statement in statements if not refuse(statement)]
        answers = iter(send(**{**request, "Statements": kept})["Responses"] if kept else [])
        injected = {"Error": {"Code": code, "Message": "injected"}}
        return {"Responses": [injected if refuse(statement) else next(answers) for statement in statements]}

    return rewrite


def written_event_ids(request: Mapping[str, Any]) -> list[str]:
    """The event ids a record write puts, in order (one transaction writes several records; none for other requests)."""
    if not is_record_write(request):
        return []
    return [str(item["Put"]["Item"]["event_id"]["S"]) for item in request["TransactItems"][0::2]]


def written_order_ids(request: Mapping[str, Any]) -> list[str]:
    """The order ids a record write puts, in order (none for other requests)."""
    if not is_record_write(request):
        return []
    return [str(item["Put"]["Item"]["order_id"]["S"]) for item in request["TransactItems"][1::2]]


@dataclass(frozen=True)
class CancellationFor:
    """A fault for record writes, as DynamoDB cancels a transaction of several records: ``codes`` (the
    record's, then the row's) for each record whose event id ``picks`` chooses (an int: the record at
    that position, modulo the transaction's records; None: the first), ``None`` for every other item."""

    picks: Callable[[str], bool] | int | None
    codes: tuple[str, ...]

    def __call__(self, request: dict[str, Any]) -> ClientError:
        event_ids = written_event_ids(request)
        reasons: list[str] = []
        for position, event_id in enumerate(event_ids):
            if self.picks is None or isinstance(self.picks, int):
                chosen = position == (self.picks or 0) % len(event_ids)
            else:
                chosen = self.picks(event_id)
            reasons.extend(self.codes if chosen else ("None", "None"))
        return cancelled(*reasons)


def cancelled_for(picks: Callable[[str], bool] | int | None, *codes: str) -> CancellationFor:
    """:class:`CancellationFor` ``codes`` on the records ``picks`` chooses."""
    return CancellationFor(picks, codes)


def marked_event_ids(requests: Iterable[Mapping[str, Any]]) -> list[str]:
    """The event ids the sent marks among ``requests`` (BatchExecuteStatement requests) name, in call order."""
    return [statement_event_id(s) for request in requests if is_mark(request) for s in request["Statements"]]


@dataclass
class ArmedFault:
    """Raise ``error`` on calls matching ``operation`` (None: any), at the ``at``-th match (None: every)."""

    #: The error, or a function of the request that makes it (:func:`cancelled_for`).
    error: BaseException | Callable[[dict[str, Any]], BaseException]
    operation: str | None = None
    at: int | None = None
    after_success: bool = False
    times: int | None = None
    when: Callable[[dict[str, Any]], bool] | None = None
    seen: int = 0
    fired: int = 0

    def fires(self, operation: str, request: dict[str, Any]) -> bool:
        if self.operation is not None and operation != self.operation:
            return False
        if self.when is not None and not self.when(request):
            return False
        self.seen += 1
        if self.at is not None and self.seen != self.at:
            return False
        if self.times is not None and self.fired >= self.times:
            return False
        self.fired += 1
        return True


class FaultBoard:
    """The faults shared by every guarded client, and the lock and counters."""

    def __init__(self) -> None:
        self.lock = threading.RLock()
        self.calls: Counter[str] = Counter()
        self.total = 0
        self.faults: list[ArmedFault] = []
        #: Per operation: ``rewrite(request, send) -> response``, to shape what AWS answers (for
        #: example refuse one entry of a batch: send the others, report that one as failed).
        self.rewrites: dict[str, Callable[[dict[str, Any], Callable[..., Any]], Any]] = {}
        #: Every request per operation, in call order.
        self.requests: dict[str, list[dict[str, Any]]] = {}

    def arm(self, fault: ArmedFault) -> ArmedFault:
        self.faults.append(fault)
        return fault

    def disarm(self) -> None:
        self.faults.clear()
        self.rewrites.clear()

    def check(self, operation: str, request: dict[str, Any], after_success: bool) -> None:
        for fault in self.faults:
            if fault.after_success == after_success and fault.fires(operation, request):
                raise fault.error if isinstance(fault.error, BaseException) else fault.error(request)


class GuardedClient:
    """Proxy of a boto3 client: every API method call is locked, counted and fault-checked."""

    def __init__(self, client: Any, board: FaultBoard) -> None:
        self._client = client
        self._board = board

    def __getattr__(self, name: str) -> Any:
        attribute = getattr(self._client, name)
        if name.startswith("_") or name in ("meta", "exceptions") or not callable(attribute):
            return attribute

        def call(*args: Any, **kwargs: Any) -> Any:
            with self._board.lock:
                self._board.calls[name] += 1
                self._board.total += 1
                self._board.requests.setdefault(name, []).append(kwargs)
                self._board.check(name, kwargs, after_success=False)
                rewrite = self._board.rewrites.get(name)
                result = attribute(*args, **kwargs) if rewrite is None else rewrite(kwargs, attribute)
                self._board.check(name, kwargs, after_success=True)
                return result

        return call


def refuse_entries(refuse: Callable[[dict[str, Any]], bool], code: str = "InternalError") -> Callable[..., Any]:
    """A PublishBatch/SendMessageBatch rewrite: entries ``refuse`` picks are reported failed and not sent."""

    def rewrite(request: dict[str, Any], send: Callable[..., Any]) -> Any:
        key = "PublishBatchRequestEntries" if "PublishBatchRequestEntries" in request else "Entries"
        refused = [entry for entry in request[key] if refuse(entry)]
        kept = [entry for entry in request[key] if not refuse(entry)]
        response = send(**{**request, key: kept}) if kept else {"Successful": [], "Failed": []}
        failed = [{"Id": e["Id"], "Code": code, "Message": "injected", "SenderFault": False} for e in refused]
        return {**response, "Failed": [*response.get("Failed", []), *failed]}

    return rewrite


class FakeContext:
    """The slice of the Lambda context the handler and Powertools read."""

    function_name = "order-consumer"
    function_version = "$LATEST"
    memory_limit_in_mb = 512
    invoked_function_arn = "arn:aws:lambda:eu-west-1:123456789012:function:order-consumer"
    aws_request_id = "00000000-0000-0000-0000-000000000000"

    def __init__(self, remaining_ms: int = 60_000) -> None:
        self.remaining_ms = remaining_ms

    def get_remaining_time_in_millis(self) -> int:
        return self.remaining_ms


_deserializer = TypeDeserializer()
_message_numbers = itertools.count(1)


def plain(item: Mapping[str, Any]) -> dict[str, Any]:
    return {key: _deserializer.deserialize(value) for key, value in item.items()}


def sqs_record(
    body: str | Mapping[str, Any],
    *,
    key: str | None = None,
    attributes: Mapping[str, Any] | None = None,
    message_id: str | None = None,
    receive_count: int = 1,
    group: str | None = None,
    queue_arn: str = "arn:aws:sqs:eu-west-1:123456789012:orders",
) -> dict[str, Any]:
    """An SQS record in the Lambda event shape (``key`` sets the ``idempotency_key`` attribute)."""
    message_attributes = dict(attributes or {})
    if key is not None:
        message_attributes["idempotency_key"] = {"stringValue": key, "dataType": "String"}
    record_attributes = {"ApproximateReceiveCount": str(receive_count)}
    if group is not None:
        record_attributes["MessageGroupId"] = group
    return {
        "messageId": message_id or f"msg-{next(_message_numbers)}-{uuid.uuid4().hex[:8]}",
        "receiptHandle": "handle",
        "body": body if isinstance(body, str) else json.dumps(body),
        "attributes": record_attributes,
        "messageAttributes": message_attributes,
        "eventSource": "aws:sqs",
        "eventSourceARN": queue_arn + (".fifo" if group is not None and not queue_arn.endswith(".fifo") else ""),
    }


def seed(world: World, order: dict[str, Any], *, status: str, event_id: str | None = None) -> str:
    """Put a state record and an order row as an earlier delivery would have left them."""
    event_id = event_id or derive_event_id(order)
    fingerprint = payload_sha256(order)
    world.dynamodb.put_item(
        TableName=world.events_table,
        Item={
            "event_id": {"S": event_id},
            "status": {"S": status},
            "order_id": {"S": order["order_id"]},
            "payload_sha256": {"S": fingerprint},
            "ttl": {"N": str(int(time.time()) + 3600)},
            "created_at": {"N": str(int(time.time()))},
        },
    )
    world.dynamodb.put_item(
        TableName=world.orders_table,
        Item={
            "order_id": {"S": order["order_id"]},
            "event_id": {"S": event_id},
            "payload_sha256": {"S": fingerprint},
        },
    )
    return event_id


@dataclass
class World:
    """The tables, topic and queues of one test, inside ``mock_aws``, and the handler wired to them.

    ``aws`` reuses boto3 clients across worlds (client creation is the slow part of a world);
    ``prefix`` keeps the resources of worlds that share one moto backend apart.
    """

    fifo: bool = False
    identity_fields: str | None = None
    env: dict[str, str] = field(default_factory=dict)
    board: FaultBoard = field(default_factory=FaultBoard)
    notifications: list[dict[str, Any]] = field(default_factory=list)
    aws: Clients | None = None
    prefix: str = ""

    def __post_init__(self) -> None:
        aws = self.aws or Clients(dynamodb=boto3.client("dynamodb"), sns=boto3.client("sns"), sqs=boto3.client("sqs"))
        self.dynamodb, self.sqs, self.sns = aws.dynamodb, aws.sqs, aws.sns
        suffix = ".fifo" if self.fifo else ""
        self.events_table = self.prefix + "processed-events"
        self.orders_table = self.prefix + "order-records"
        for table, key in ((self.events_table, "event_id"), (self.orders_table, "order_id")):
            self.dynamodb.create_table(
                TableName=table,
                KeySchema=[{"AttributeName": key, "KeyType": "HASH"}],
                AttributeDefinitions=[{"AttributeName": key, "AttributeType": "S"}],
                BillingMode="PAY_PER_REQUEST",
            )
        queue_attributes = {"FifoQueue": "true"} if self.fifo else {}
        self.dlq_url = self.sqs.create_queue(
            QueueName=self.prefix + "orders-dlq" + suffix, Attributes=queue_attributes
        )["QueueUrl"]
        topic_attributes = {"FifoTopic": "true"} if self.fifo else {}
        self.topic_arn = self.sns.create_topic(Name=self.prefix + "orders" + suffix, Attributes=topic_attributes)[
            "TopicArn"
        ]
        self.subscriber_url = self.sqs.create_queue(
            QueueName=self.prefix + "subscriber" + suffix, Attributes=queue_attributes
        )["QueueUrl"]
        subscriber_arn = self.sqs.get_queue_attributes(QueueUrl=self.subscriber_url, AttributeNames=["QueueArn"])[
            "Attributes"
        ]["QueueArn"]
        self.sns.subscribe(TopicArn=self.topic_arn, Protocol="sqs", Endpoint=subscriber_arn)
        self.env = {
            "PROCESSED_EVENTS_TABLE": self.events_table,
            "ORDER_RECORDS_TABLE": self.orders_table,
            "TOPIC_ARN": self.topic_arn,
            "DEAD_LETTER_QUEUE_URL": self.dlq_url,
            "RECORD_TTL_SECONDS": "2592000",
            **({"IDENTITY_FIELDS": self.identity_fields} if self.identity_fields else {}),
            **self.env,
        }
        self.clients = Clients(
            dynamodb=GuardedClient(self.dynamodb, self.board),  # type: ignore[arg-type]
            sns=GuardedClient(self.sns, self.board),  # type: ignore[arg-type]
            sqs=GuardedClient(self.sqs, self.board),  # type: ignore[arg-type]
        )
        handler_module.configure(self.clients, self.env)

    # --- driving the handler -------------------------------------------------------------------

    def invoke(self, records: Iterable[Mapping[str, Any]], remaining_ms: int = 60_000) -> dict[str, Any]:
        return handler_module.handler({"Records": list(records)}, FakeContext(remaining_ms))

    @staticmethod
    def failures(response: Mapping[str, Any]) -> set[str]:
        return {failure["itemIdentifier"] for failure in response["batchItemFailures"]}

    def deliver_until_done(self, records: list[dict[str, Any]], max_rounds: int = 50) -> int:
        """Redeliver like SQS until every record is acknowledged; return the crashes seen."""
        pending, crashes = list(records), 0
        for _ in range(max_rounds):
            try:
                response = self.invoke(pending)
            except Crash:
                crashes += 1  # the invocation died: SQS redelivers the whole batch
                continue
            failed = self.failures(response)
            pending = [record for record in pending if record["messageId"] in failed]
            if not pending:
                return crashes
        raise AssertionError(f"{len(pending)} records still failing after {max_rounds} deliveries")

    # --- reading the world -----------------------------------------------------------------------

    def _scan(self, table: str) -> list[dict[str, Any]]:
        items = self.dynamodb.scan(TableName=table, ConsistentRead=True)["Items"]  # one page: tests stay small
        return [plain(item) for item in items]

    def order_rows(self) -> dict[str, dict[str, Any]]:
        return {row["order_id"]: row for row in self._scan(self.orders_table)}

    def event_records(self) -> dict[str, dict[str, Any]]:
        """The state records (the reconciler's checkpoint item, never a record, left out)."""
        return {
            record["event_id"]: record
            for record in self._scan(self.events_table)
            if record["event_id"] != CHECKPOINT_EVENT_ID
        }

    def _drain(self, queue_url: str) -> list[dict[str, Any]]:
        messages: list[dict[str, Any]] = []
        while True:
            batch = self.sqs.receive_message(
                QueueUrl=queue_url, MaxNumberOfMessages=10, MessageAttributeNames=["All"], WaitTimeSeconds=0
            ).get("Messages", [])
            if not batch:
                return messages
            messages.extend(batch)
            self.sqs.delete_message_batch(
                QueueUrl=queue_url,
                Entries=[{"Id": str(i), "ReceiptHandle": m["ReceiptHandle"]} for i, m in enumerate(batch)],
            )

    def new_notifications(self) -> list[dict[str, Any]]:
        """Notifications that reached the subscriber queue since the last call (SNS envelope parsed)."""
        fresh = [json.loads(message["Body"]) for message in self._drain(self.subscriber_url)]
        self.notifications.extend(fresh)
        return fresh

    def notified_events(self) -> Counter[str]:
        self.new_notifications()
        return Counter(json.loads(n["Message"])["event_id"] for n in self.notifications)

    def dead_letters(self) -> list[dict[str, Any]]:
        return self._drain(self.dlq_url)
