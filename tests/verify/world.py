"""The explorer's AWS world: moto resources, botocore hooks that make every call a scheduling point.

The actors' clients carry three botocore event handlers:

* ``before-parameter-build``: keeps the call's parameters for the next two;
* ``before-call``: the scheduling point. The actor waits there until the scheduler lets it through,
  crashes it, or answers the call with an injected fault (returning a response from this event
  short-circuits the HTTP request, and with it botocore's retries: the code sees the final error);
* ``after-call``: the call log (actor, call, result) and the checks made at the moment of a call.

A read no other actor's move can change the answer of (the reconciler's read of the order rows of
records it found pending) is made without stopping: it commutes with every move. A crash before a
read is the same as a crash before the actor's next write (a read changes nothing), so reads are
points of the interleaving but not crash points.
"""

from __future__ import annotations

import copy
import hashlib
import json
from collections import Counter
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from decimal import Decimal
from typing import Any

import boto3
from boto3.dynamodb.types import TypeDeserializer
from botocore.exceptions import ClientError
from moto.core.models import DEFAULT_ACCOUNT_ID
from moto.dynamodb.models import dynamodb_backends
from moto.sqs.models import Message as SqsMessage
from moto.sqs.models import sqs_backends

from idempotent_order_pipeline._lambda_asset.order_consumer.contract.parked import (
    MOVED_BY_SQS_ATTRIBUTE,
    Envelope,
    envelope_of,
)
from idempotent_order_pipeline._lambda_asset.order_consumer.contract.pending_index import (
    CHECKPOINT_EVENT_ID,
    CHECKPOINTS_ATTRIBUTE,
    PENDING_RECORD_ATTRIBUTES,
    PENDING_SHARD_ATTRIBUTE,
    PENDING_SINCE_ATTRIBUTE,
    pending_shard,
)
from idempotent_order_pipeline._lambda_asset.order_consumer.store import MARK_SENT_STATEMENT
from idempotent_order_pipeline.sandbox.partiql import parse_partiql_update
from tests.reconciler.harness import events_table_definition
from tests.verify.scheduler import CALL, FAULT_PREFIX, Access, Execution, Point, current_actor

REGION = "eu-west-1"
EVENTS_TABLE = "processed-events"
ORDERS_TABLE = "order-records"
#: The ``created_at`` of a record whose transaction runs after a reconciler run queried its shard:
#: a second after the frozen clock's (the explorer's ``FROZEN_NOW``), past the run's upper bound. The
#: wall clock is frozen, but a transaction that commits after the run's query was, in time, started
#: after the run's bound (``created_at`` is taken before the transaction, which commits within the
#: consumer's timeout, at most ``reconcile_after``): the run's checkpoint never passes it.
LATE_CREATED_AT = 1_800_000_001

#: The faults the scheduler may inject, per operation.
FAULTS: dict[str, tuple[str, ...]] = {
    "TransactWriteItems": ("TransactionConflict",),
    "UpdateItem": ("Throttling",),
    # The whole call throttled, or DynamoDB answering its first statement ThrottlingError (the others run).
    "BatchExecuteStatement": ("Throttling", "StatementThrottled"),
    "PublishBatch": ("EntryRefused",),
    "Query": ("Throttling",),
    "BatchGetItem": ("Throttling",),
    "SendMessage": ("Throttling",),
    "SendMessageBatch": ("Throttling",),
}

_deserializer = TypeDeserializer()


def plain(item: Mapping[str, Any]) -> dict[str, Any]:
    return {key: _deserializer.deserialize(value) for key, value in item.items()}


@dataclass(frozen=True)
class _Http:
    """The part of an HTTP response botocore reads after ``before-call`` answered for the server."""

    status_code: int
    headers: Mapping[str, str] = field(default_factory=dict)


def _error(code: str, message: str = "injected by the explorer", **extra: Any) -> tuple[_Http, dict[str, Any]]:
    return _Http(400), {
        "Error": {"Code": code, "Message": message},
        "ResponseMetadata": {"HTTPStatusCode": 400},
        **extra,
    }


@dataclass(frozen=True)
class DeadLetter:
    """One message in the DLQ: its id there, body and attributes (in SQS's shape), group, and whether
    SQS's redrive policy moved it there (else the consumer sent it)."""

    message_id: str
    body: str
    attributes: dict[str, Any]
    group: str | None
    moved_by_sqs: bool

    def attribute(self, name: str) -> str:
        return str(self.attributes.get(name, {}).get("StringValue", ""))

    def envelope(self) -> Envelope | None:
        """The consumer's envelope: None for a message SQS moved here, whatever it carries."""
        system = {MOVED_BY_SQS_ATTRIBUTE: "source"} if self.moved_by_sqs else {}
        return envelope_of(self.attributes, string_key="StringValue", system_attributes=system)


@dataclass
class LoggedCall:
    """One line of an execution's trace."""

    actor: str
    call: str
    result: str

    def __str__(self) -> str:
        return f"{self.actor:<4} {self.call:<58} -> {self.result}"


@dataclass
class Clients:
    """The actors' (hooked) clients and the harness's own (unhooked) ones, made once per exploration."""

    dynamodb: Any
    sns: Any
    sqs: Any
    raw_dynamodb: Any
    raw_sns: Any
    raw_sqs: Any

    @classmethod
    def make(cls) -> Clients:
        return cls(*(boto3.client(service, region_name=REGION) for service in ("dynamodb", "sns", "sqs") * 2))


class EmptyShards:
    """The reconciler's DynamoDB client: a query of a shard that holds no item (and, holding none of the
    scenario's events, never will) is answered empty without a call; anything else goes to ``client``.

    A reconciler run queries all 32 shards; the scenario's events are in one. Those 31 answers are
    known, and making them through botocore took a third of an execution's time.
    """

    def __init__(self, client: Any, world: Callable[[], World | None]) -> None:
        self._client = client
        self._world = world

    def query(self, **request: Any) -> Any:
        world = self._world()
        shard = request["ExpressionAttributeValues"][":shard"]["S"]
        if world is not None and world.shard_is_empty(shard):
            return {"Items": [], "Count": 0, "ScannedCount": 0}
        return self._client.query(**request)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._client, name)


class World:
    """One execution's AWS resources and what happened to them."""

    def __init__(self, clients: Clients, *, fifo: bool, event_ids: Iterable[str]) -> None:
        self.clients = clients
        self.fifo = fifo
        self.execution: Execution | None = None
        #: The index shards the scenario's events live in: queries of other shards are not points.
        self.shards = {pending_shard(event_id) for event_id in event_ids}
        self.log: list[LoggedCall] = []
        self.violations: list[str] = []
        #: Accepted notifications, in order: (event_id, payload_sha256, position in the log).
        self.notifications: list[tuple[str, str, int]] = []
        #: Position in the log of each event's commit (its first transaction).
        self.commits: dict[str, int] = {}
        self.expired: set[str] = set()
        #: What redrives moved out of the DLQ, in order.
        self.moved_back: list[DeadLetter] = []
        #: The message id of each copy a redrive put back on the queue -> the producer's message it is.
        self.origins: dict[str, str] = {}
        #: Logical time spent per actor (ms): each call it makes costs ``call_ms``.
        self.clock_ms: Counter[str] = Counter()
        self.call_ms = 1000
        #: Checks at the moment of a call: ``(world, actor, operation, request, response) -> None``.
        self.call_checks: list[Callable[[World, str, str, Mapping[str, Any], Mapping[str, Any]], None]] = []
        #: Per operation, a replacement answer for the actors' calls (negative controls).
        self.overrides: dict[str, Callable[[World, str, Mapping[str, Any]], Any]] = {}
        #: The shards a reconciler run has queried: a transaction of a record on one of them is later
        #: than that run's bound (through the shard, the two moves are ordered: they never commute).
        self.reconciler_queried: set[str] = set()
        #: The drain has begun (its reconciler runs later than every move).
        self.draining = False
        self._create()

    # --- resources ----------------------------------------------------------------------------------

    def _create(self) -> None:
        """The tables, the DLQ and the topic, empty: made once per moto backend, emptied for every execution
        (making them takes most of an execution's time; moto keeps no other state between executions)."""
        raw = self.clients
        suffix = ".fifo" if self.fifo else ""
        fifo_queue = {"FifoQueue": "true"} if self.fifo else {}
        backend = dynamodb_backends[DEFAULT_ACCOUNT_ID][REGION]
        if EVENTS_TABLE not in backend.tables:
            raw.raw_dynamodb.create_table(**events_table_definition(EVENTS_TABLE))
            raw.raw_dynamodb.create_table(
                TableName=ORDERS_TABLE,
                KeySchema=[{"AttributeName": "order_id", "KeyType": "HASH"}],
                AttributeDefinitions=[{"AttributeName": "order_id", "AttributeType": "S"}],
                BillingMode="PAY_PER_REQUEST",
            )
        for table in (EVENTS_TABLE, ORDERS_TABLE):
            backend.get_table(table).items.clear()
        self.dlq_name = "orders-dlq" + suffix
        queues = sqs_backends[DEFAULT_ACCOUNT_ID][REGION].queues
        if self.dlq_name not in queues:
            raw.raw_sqs.create_queue(QueueName=self.dlq_name, Attributes=fifo_queue)
            raw.raw_sns.create_topic(Name="orders" + suffix, Attributes={"FifoTopic": "true"} if self.fifo else {})
        queue = queues[self.dlq_name]
        queue._messages.clear()
        queue._pending_messages.clear()
        queue.deleted_messages.clear()
        self.dlq_url = f"https://sqs.{REGION}.amazonaws.com/{DEFAULT_ACCOUNT_ID}/{self.dlq_name}"
        self.topic_arn = f"arn:aws:sns:{REGION}:{DEFAULT_ACCOUNT_ID}:orders{suffix}"
        self.env = {
            "PROCESSED_EVENTS_TABLE": EVENTS_TABLE,
            "ORDER_RECORDS_TABLE": ORDERS_TABLE,
            "TOPIC_ARN": self.topic_arn,
            "DEAD_LETTER_QUEUE_URL": self.dlq_url,
            "RECORD_TTL_SECONDS": "2592000",
        }

    # --- reading the state (moto's backends: no call, no scheduling point) ---------------------------

    def items(self, table: str) -> dict[str, dict[str, Any]]:
        key = "event_id" if table == EVENTS_TABLE else "order_id"
        backend = dynamodb_backends[DEFAULT_ACCOUNT_ID][REGION]
        found = [plain(item.to_json()["Attributes"]) for item in backend.get_table(table).all_items()]
        return {str(item[key]): item for item in found}

    def records(self) -> dict[str, dict[str, Any]]:
        """The state records (the reconciler's checkpoint item is not one: :meth:`checkpoints`)."""
        return {key: item for key, item in self.items(EVENTS_TABLE).items() if key != CHECKPOINT_EVENT_ID}

    def checkpoints(self) -> dict[str, Decimal]:
        """The reconciler's stored checkpoints, shard -> created_at (none stored: empty)."""
        item = self.items(EVENTS_TABLE).get(CHECKPOINT_EVENT_ID) or {}
        return {shard: Decimal(str(start)) for shard, start in item.get(CHECKPOINTS_ATTRIBUTE, {}).items()}

    def behind_checkpoint(self, record: Mapping[str, Any]) -> bool:
        """Whether the record's index entry is behind its shard's checkpoint (no run reads it again)."""
        shard = record.get(PENDING_SHARD_ATTRIBUTE)
        return shard is not None and Decimal(str(record[PENDING_SINCE_ATTRIBUTE])) < self.checkpoints().get(
            str(shard), Decimal(0)
        )

    def rows(self) -> dict[str, dict[str, Any]]:
        return self.items(ORDERS_TABLE)

    def _dlq(self) -> Any:
        return sqs_backends[DEFAULT_ACCOUNT_ID][REGION].queues[self.dlq_name]

    def dlq(self) -> list[DeadLetter]:
        """Every message in the DLQ, in queue order."""
        return [
            DeadLetter(
                message_id=message.id,
                body=message.body,
                attributes=copy.deepcopy(message.message_attributes),
                group=message.group_id,
                moved_by_sqs=MOVED_BY_SQS_ATTRIBUTE in message.system_attributes,
            )
            for message in self._dlq()._messages
        ]

    def dead_letters(self) -> list[tuple[str, str, str]]:
        """(source message id, error code, body) of every message the consumer parked in the DLQ.

        A message SQS's redrive policy moved there is not the consumer's, whatever attributes it
        carries (:func:`~order_consumer.contract.parked.envelope_of` with its system attributes).
        """
        return [
            (entry.attribute("source_message_id"), entry.attribute("error_code"), entry.body)
            for entry in self.dlq()
            if entry.envelope() is not None
        ]

    def parked(self) -> dict[str, list[str]]:
        """Error codes per source message id of what the DLQ holds now."""
        parked: dict[str, list[str]] = {}
        for source, code, _ in self.dead_letters():
            parked.setdefault(source, []).append(code)
        return parked

    def parked_ever(self) -> dict[str, list[str]]:
        """Error codes per source message id of every park, those a redrive moved out of the DLQ included."""
        parked = self.parked()
        for entry in self.moved_back:
            if entry.envelope() is not None:
                parked.setdefault(entry.attribute("source_message_id"), []).append(entry.attribute("error_code"))
        return parked

    # --- SQS moving messages (no call of the consumer's: the harness's model of SQS) ----------------

    def dead_letter(self, record: Mapping[str, Any], queue_arn: str) -> None:
        """SQS's redrive policy moving a message (a Lambda event record) into the DLQ as it is: its id,
        body and attributes kept, marked with the system attribute SQS adds."""
        message = SqsMessage(record["messageId"], record["body"], {MOVED_BY_SQS_ATTRIBUTE: queue_arn})
        message.message_attributes = {
            name: {"DataType": value["dataType"], "StringValue": value["stringValue"]}
            for name, value in record.get("messageAttributes", {}).items()
        }
        group = record.get("attributes", {}).get("MessageGroupId")
        if group is not None:
            message.group_id = group
            message.deduplication_id = record["messageId"]  # SQS sets it to the message id
        message.mark_sent()
        self._dlq().add_message(message)

    def move_back(self) -> list[DeadLetter]:
        """A move task: every message the DLQ holds now taken out of it, returned in queue order."""
        moved = self.dlq()
        queue = self._dlq()
        queue._messages.clear()
        self.moved_back += moved
        return moved

    def notified(self) -> Counter[str]:
        return Counter(event_id for event_id, _, _ in self.notifications)

    def state_hash(self, extra: object = None) -> str:
        """A digest of the tables, the DLQ, the notifications and ``extra`` (the queue model)."""
        state = (
            sorted(json.dumps(item, sort_keys=True, default=str) for item in self.items(EVENTS_TABLE).values()),
            sorted(json.dumps(item, sort_keys=True, default=str) for item in self.rows().values()),
            sorted(self.dead_letters()),
            sorted(entry.message_id for entry in self.dlq() if entry.moved_by_sqs),
            sorted(self.origins.items()),
            sorted(Counter((event_id, sha) for event_id, sha, _ in self.notifications).items()),
            extra,
        )
        return hashlib.sha256(repr(state).encode()).hexdigest()

    def expire(self, event_id: str) -> bool:
        """DynamoDB's TTL deleting a sent record (its ``ttl`` passed); False when it is not sent."""
        record = self.records().get(event_id)
        if record is None or record.get("status") != "sent":
            self.log.append(LoggedCall(current_actor() or "-", f"TTL expiry of {event_id}", "not sent: kept"))
            return False
        self.clients.raw_dynamodb.delete_item(TableName=EVENTS_TABLE, Key={"event_id": {"S": event_id}})
        self.expired.add(event_id)
        self.log.append(LoggedCall(current_actor() or "-", f"TTL expiry of {event_id}", "deleted"))
        return True

    # --- the hooks ----------------------------------------------------------------------------------

    @staticmethod
    def install(clients: Clients, current: Callable[[], World | None]) -> None:
        """Register the hooks on the actors' clients; they act on whatever world ``current`` returns."""

        def keep_params(params: Mapping[str, Any], context: dict[str, Any], **_: Any) -> None:
            context["explorer_params"] = copy.deepcopy(dict(params))

        def before(model: Any, context: dict[str, Any], **_: Any) -> Any:
            world = current()
            if world is None:
                return None
            return world._before(model.service_model.service_name, model.name, context.get("explorer_params", {}))

        def after(model: Any, http_response: Any, parsed: Mapping[str, Any], context: dict[str, Any], **_: Any) -> None:
            world = current()
            if world is not None:
                world._after(model.name, context.get("explorer_params", {}), http_response.status_code, parsed)

        for client in (clients.dynamodb, clients.sns, clients.sqs):
            client.meta.events.register("before-parameter-build", keep_params)
            client.meta.events.register("before-call", before)
            client.meta.events.register("after-call", after)

    def _before(self, service: str, operation: str, request: Mapping[str, Any]) -> Any:
        actor = current_actor()
        point = self.point_of(service, operation, request)
        if point is not None and self.execution is not None and actor is not None:
            action = self.execution.point(point)
            self.clock_ms[actor] += self.call_ms
            if action.startswith(FAULT_PREFIX):
                return self._fault(operation, request, action[len(FAULT_PREFIX) :])
            assert action == CALL
        if actor is not None and actor.startswith("R") and operation == "Query" and service == "dynamodb":
            self.reconciler_queried.add(str(request["ExpressionAttributeValues"][":shard"]["S"]))
        override = self.overrides.get(operation)
        if override is not None and actor is not None:
            answer = override(self, actor, request)
            if answer is not None:
                return answer
        # every record of a transaction commits after the reconciler's query: all of them are late
        late = any(pending_shard(event_id) in self.reconciler_queried for event_id in _events_of_transaction(request))
        if operation == "TransactWriteItems" and late:
            return self._late_transaction(request)
        return None

    def _late_transaction(self, request: Mapping[str, Any]) -> Any:
        """The transaction as sent, its record created at :data:`LATE_CREATED_AT` (see there)."""
        rewritten = copy.deepcopy(dict(request))
        for item in rewritten["TransactItems"]:
            put = item.get("Put")
            if put and put["TableName"] == EVENTS_TABLE and PENDING_SINCE_ATTRIBUTE in put["Item"]:
                put["Item"][PENDING_SINCE_ATTRIBUTE] = {"N": str(LATE_CREATED_AT)}
        try:
            return _Http(200), dict(self.clients.raw_dynamodb.transact_write_items(**rewritten))
        except ClientError as exc:
            return _Http(400), dict(exc.response)

    def _after(self, operation: str, request: Mapping[str, Any], status: int, response: Mapping[str, Any]) -> None:
        actor = current_actor() or "-"
        result = _summary(operation, status, response)
        self.log.append(LoggedCall(actor, _describe(operation, request), result))
        position = len(self.log) - 1
        if status < 300 and operation == "PublishBatch":
            entries = {entry["Id"]: json.loads(entry["Message"]) for entry in request["PublishBatchRequestEntries"]}
            for accepted in response.get("Successful", []):
                body = entries[accepted["Id"]]
                self.notifications.append((body["event_id"], body["payload_sha256"], position))
        if status < 300 and operation == "TransactWriteItems":
            for event_id in _events_of_transaction(request):
                self.commits.setdefault(event_id, position)
        for check in self.call_checks:
            try:
                check(self, actor, operation, request, response if status < 300 else {"Error": response.get("Error")})
            except AssertionError as exc:
                self.violations.append(f"at {self.log[position]}: {exc}")

    def shard_is_empty(self, shard: str) -> bool:
        """Whether no item of the events table is in this shard of the pending index, nor can be."""
        if shard in self.shards:
            return False
        return all(item.get(PENDING_SHARD_ATTRIBUTE) != shard for item in self.records().values())

    # --- points and footprints ----------------------------------------------------------------------

    def point_of(self, service: str, operation: str, request: Mapping[str, Any]) -> Point | None:
        """The scheduling point of a call, or None for a call no other actor's move can conflict with."""
        accesses: set[Access] = set()
        if service == "dynamodb":
            if operation == "Query":
                shard = request["ExpressionAttributeValues"][":shard"]["S"]
                if shard not in self.shards:
                    return None
                accesses.add((f"shard:{shard}", "r"))
            elif operation == "TransactWriteItems":
                for item in request["TransactItems"]:
                    (kind, body), *_ = item.items()
                    key = body["Item"] if kind == "Put" else body["Key"]
                    accesses |= _item_access(body["TableName"], key, "w")
            elif operation in ("UpdateItem", "PutItem", "DeleteItem"):
                accesses |= _item_access(request["TableName"], request.get("Key") or request["Item"], "w")
            elif operation == "BatchExecuteStatement":
                for statement in request["Statements"]:
                    update = parse_partiql_update(statement["Statement"], list(statement.get("Parameters", [])))
                    accesses |= _item_access(update.table, dict(update.where), "w")
            elif operation == "GetItem":
                accesses |= _item_access(request["TableName"], request["Key"], "r")
            elif operation == "BatchGetItem":
                if set(request["RequestItems"]) == {ORDERS_TABLE}:
                    # The reconciler reads the rows of records it just read pending: each row was
                    # written with its record, and a row is never written again, so this read
                    # commutes with every move that can come between.
                    return None
                for table, part in request["RequestItems"].items():
                    for key in part["Keys"]:
                        accesses |= _item_access(table, key, "r")
            else:
                accesses.add(("dynamodb:*", "w"))
        elif service == "sns":
            accesses.add(("topic", "w"))
            for entry in request.get("PublishBatchRequestEntries", []):
                accesses.add((f"events:{json.loads(entry['Message'])['event_id']}", "r"))
        else:
            accesses.add(("queue:" + str(request.get("QueueUrl", "")).rsplit("/", 1)[-1], "w"))
        read_only = all(mode == "r" for _, mode in accesses)
        return Point(
            label=_describe(operation, request),
            footprint=frozenset(accesses),
            crashable=not read_only,  # a crash before a read equals one before the actor's next write
            faults=FAULTS.get(operation, ()),
        )

    # --- faults -------------------------------------------------------------------------------------

    def _fault(self, operation: str, request: Mapping[str, Any], kind: str) -> Any:
        if kind == "TransactionConflict":
            reasons = [{"Code": "TransactionConflict", "Message": "injected"}] + [{"Code": "None"}] * (
                len(request["TransactItems"]) - 1
            )
            return _error(
                "TransactionCanceledException",
                "Transaction cancelled, please refer cancellation reasons for specific reasons",
                CancellationReasons=reasons,
            )
        if kind == "Throttling":
            return _error("ThrottlingException", "Rate exceeded (injected)")
        if kind == "StatementThrottled":
            statements = list(request["Statements"])
            answers = (
                self.clients.raw_dynamodb.batch_execute_statement(Statements=statements[1:])["Responses"]
                if statements[1:]
                else []
            )
            throttled = {"Error": {"Code": "ThrottlingError", "Message": "Rate exceeded (injected)"}}
            return _Http(200), {"Responses": [throttled, *answers]}
        assert kind == "EntryRefused", kind
        entries = list(request["PublishBatchRequestEntries"])
        refused, kept = entries[0], entries[1:]
        response: dict[str, Any] = {"Successful": [], "Failed": []}
        if kept:
            response = dict(
                self.clients.raw_sns.publish_batch(TopicArn=request["TopicArn"], PublishBatchRequestEntries=kept)
            )
        failed = {"Id": refused["Id"], "Code": "InternalError", "Message": "injected", "SenderFault": False}
        response["Failed"] = [*response.get("Failed", []), failed]
        return _Http(200), response


def _item_access(table: str, key: Mapping[str, Any], mode: str) -> set[Access]:
    if table == EVENTS_TABLE:
        event_id = key["event_id"]["S"]
        return {(f"events:{event_id}", mode), (f"shard:{pending_shard(event_id)}", mode)}
    return {(f"orders:{key['order_id']['S']}", mode)}


def _events_of_transaction(request: Mapping[str, Any]) -> list[str]:
    """The event ids whose records a transaction puts, in order (the consumer writes several records in one)."""
    events = []
    for item in request.get("TransactItems", []):
        put = item.get("Put")
        if put and put["TableName"] == EVENTS_TABLE:
            events.append(str(put["Item"]["event_id"]["S"]))
    return events


def is_mark_statement(statement: Mapping[str, Any]) -> bool:
    """Whether one statement of a BatchExecuteStatement is a sent mark."""
    return statement.get("Statement") == MARK_SENT_STATEMENT.format(table=EVENTS_TABLE)


def is_mark(request: Mapping[str, Any]) -> bool:
    """Whether a BatchExecuteStatement is a call of sent marks."""
    statements = request.get("Statements", [])
    return bool(statements) and all(is_mark_statement(statement) for statement in statements)


def marked(request: Mapping[str, Any]) -> list[tuple[str, str]]:
    """(event id, notified content) of each mark statement of a BatchExecuteStatement, in order."""
    found = []
    for statement in request.get("Statements", []):
        if is_mark_statement(statement):
            where = dict(parse_partiql_update(statement["Statement"], list(statement["Parameters"])).where)
            found.append((str(where["event_id"]["S"]), str(where["payload_sha256"]["S"])))
    return found


def _describe(operation: str, request: Mapping[str, Any]) -> str:
    """A call in a few words: the operation and the items, shard, entries or messages it names."""
    if operation == "TransactWriteItems":
        return f"TransactWriteItems record+row of {', '.join(_events_of_transaction(request)) or None}"
    if operation == "UpdateItem":
        return f"UpdateItem {request.get('UpdateExpression', '')[:24]} {request['Key']['event_id']['S']}"
    if operation == "BatchExecuteStatement":
        return f"BatchExecuteStatement mark sent {[event_id for event_id, _ in marked(request)]}"
    if operation == "Query":
        return f"Query pending index shard {request['ExpressionAttributeValues'][':shard']['S']}"
    if operation == "BatchGetItem":
        parts = [
            f"{table} {[next(iter(key.values()))['S'] for key in part['Keys']]}"
            for table, part in request["RequestItems"].items()
        ]
        return "BatchGetItem " + "; ".join(parts)
    if operation == "PublishBatch":
        events = [json.loads(entry["Message"])["event_id"] for entry in request["PublishBatchRequestEntries"]]
        return f"PublishBatch {events}"
    if operation in ("SendMessage", "SendMessageBatch"):
        entries = request.get("Entries") or [request]
        codes = [entry["MessageAttributes"]["error_code"]["StringValue"] for entry in entries]
        return f"{operation} to the DLQ {codes}"
    return operation


def _summary(operation: str, status: int, response: Mapping[str, Any]) -> str:
    if status >= 300:
        error = response.get("Error", {})
        reasons = [reason.get("Code") for reason in response.get("CancellationReasons", [])]
        return f"{error.get('Code')}{reasons if reasons else ''}"
    if operation == "PublishBatch":
        return f"accepted {len(response.get('Successful', []))}, refused {len(response.get('Failed', []))}"
    if operation == "Query":
        return f"{len(response.get('Items', []))} entries"
    if operation == "BatchGetItem":
        return "; ".join(
            f"{[{k: next(iter(v.values())) for k, v in item.items() if k in ('status', 'event_id')} for item in items]}"
            for items in response.get("Responses", {}).values()
        )
    if operation == "BatchExecuteStatement":
        return str([answer.get("Error", {}).get("Code", "ok") for answer in response.get("Responses", [])])
    return "ok"


def stale_read(snapshot: Mapping[str, Mapping[str, Any]], request: Mapping[str, Any]) -> Any:
    """A BatchGetItem answered from ``snapshot`` (DynamoDB JSON items of the events table by key)."""
    responses: dict[str, list[dict[str, Any]]] = {}
    for table, part in request["RequestItems"].items():
        found = []
        for key in part["Keys"]:
            item = snapshot.get(key["event_id"]["S"]) if table == EVENTS_TABLE else None
            if item is not None:
                found.append({name: value for name, value in item.items() if name in PENDING_RECORD_ATTRIBUTES})
        responses[table] = found
    return _Http(200), {"Responses": responses, "UnprocessedKeys": {}}


__all__ = [
    "PENDING_SHARD_ATTRIBUTE",
    "Clients",
    "DeadLetter",
    "EmptyShards",
    "LoggedCall",
    "World",
    "is_mark",
    "stale_read",
]
