"""The AWS stand-in: moto in-process, with a network round trip per call and a meter on every call.

Every AWS call a consumer makes leaves botocore at ``before-send``, where moto's stubber answers it.
:class:`Meter` wraps that stubber, so each call

1. waits the configured latency first, *outside* any lock: the round trips of concurrent calls
   overlap as they would on the network, and botocore's own work (serializing the request, parsing
   the response) stays on the consumer's side, where Lambda bills it;
2. then runs moto's own work under one lock: moto is not thread-safe. That work is the service's
   work, which in AWS happens on the service's machines, in parallel for parallel requests, and is
   part of the round trip the latency stands for. In-process it is neither parallel (the lock, and
   the GIL) nor free (about 1-2 ms of CPU per call, as much as a third of the latency), so the meter
   keeps a second clock that stops while the stand-in works (moto, and the meter's own accounting):
   :meth:`Meter.virtual_now`. Latency waits are measured on that clock, so a thread waiting out its
   round trip is not paid for moto's work on another thread's request, and a batch's time on that
   clock is its wall time minus the stand-in's time. Both times are reported; moto's own time per
   call too;
3. is counted by operation, and DynamoDB calls are metered in request units by :mod:`bench.units`
   from the request and the items as they were just before and after it (read from moto's backend
   under the same lock): the table's units, and apart from them the units of every global secondary
   index the table has, from the same two items (so whatever the consumer writes is what is billed).

Metering is on only inside :meth:`Meter.measuring`; set-up calls (tables, topic) are not counted,
not delayed and not metered.
"""

from __future__ import annotations

import json
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import parse_qs

from moto.core.botocore_stubber import BotocoreStubber

from bench import units

ACCOUNT_ID = "123456789012"
REGION = "us-east-1"


@dataclass
class Tally:
    """What the metered calls of one measurement did."""

    calls: Counter[str] = field(default_factory=Counter)
    moto_seconds: list[float] = field(default_factory=list)
    #: Table writes and reads.
    wru: float = 0.0
    rru: float = 0.0
    #: Writes to the tables' global secondary indexes (billed apart, see bench.units).
    index_wru: float = 0.0
    #: The same write units by table, and by ``table/index`` (what each partition key space takes).
    wru_by_table: Counter[str] = field(default_factory=Counter)
    wru_by_index: Counter[str] = field(default_factory=Counter)
    #: Notifications SNS accepted (Publish calls, PublishBatch entries).
    publishes: int = 0
    #: Billed SNS and SQS requests (per 64 KB chunk; a batch call once per chunk of its payload).
    sns_requests: int = 0
    sqs_requests: int = 0
    #: The largest item written (or attempted) per table, in bytes.
    item_bytes: dict[str, int] = field(default_factory=dict)

    @property
    def total_calls(self) -> int:
        return sum(self.calls.values())


def _dynamodb_backend() -> Any:
    from moto.dynamodb.models import dynamodb_backends

    return dynamodb_backends[ACCOUNT_ID][REGION]


def _existing(table: str, key: dict[str, Any]) -> dict[str, Any] | None:
    """The item at ``key`` as moto holds it now, in wire format (None if absent or no such table)."""
    try:
        found = _dynamodb_backend().get_item(table, key)
    except Exception:  # a missing table: the call itself will fail and say so
        return None
    if found is None:
        return None
    attributes: dict[str, Any] = found.to_json()["Attributes"]
    return attributes


def index_shapes(table: str) -> list[units.IndexShape]:
    """The global secondary indexes of a table, as moto holds them."""
    try:
        found = _dynamodb_backend().get_table(table)
    except Exception:  # a missing table: the call itself will fail and say so
        return []
    return [
        units.IndexShape(
            name=index.name,
            keys=tuple(index.schema_key_attrs),
            table_keys=tuple(index.table_key_attrs),
            projection=(index.projection or {}).get("ProjectionType", "ALL"),
            non_key_attributes=tuple((index.projection or {}).get("NonKeyAttributes", ())),
        )
        for index in found.global_indexes
    ]


def _key_of(table: str, item: dict[str, Any]) -> dict[str, Any]:
    schema = _dynamodb_backend().get_table(table)
    key = {schema.hash_key_attr: item[schema.hash_key_attr]}
    if schema.range_key_attr is not None:
        key[schema.range_key_attr] = item[schema.range_key_attr]
    return key


def _partiql_update_key(statement: dict[str, Any]) -> tuple[str, dict[str, Any]] | None:
    """(table, key) of a PartiQL UPDATE of one item, read by the sandbox's PartiQL reader (the one moto
    runs such statements with); None for any other statement, or without the sandbox."""
    try:
        from idempotent_order_pipeline.sandbox import moto_patches  # type: ignore[import-not-found, unused-ignore]

        text, parameters = statement.get("Statement", ""), list(statement.get("Parameters", []))
        update = moto_patches.parse_partiql_update(text, parameters)
        schema = _dynamodb_backend().get_table(update.table)
    except Exception:  # not an UPDATE of the subset, no sandbox, or an unknown table: metered flat
        return None
    names = [schema.hash_key_attr] + ([schema.range_key_attr] if schema.range_key_attr else [])
    where = dict(update.where)
    if not all(name in where for name in names):
        return None
    return update.table, {name: where[name] for name in names}


class _DynamoDBCall:
    """Request units of one DynamoDB call: sized from the items before the call and after it."""

    def __init__(self, operation: str, request: dict[str, Any]) -> None:
        self.operation = operation
        self.request = request
        # (table, key, new item for a put or None, transactional) per written item, with the old item.
        self.writes: list[tuple[str, dict[str, Any], dict[str, Any] | None, bool, dict[str, Any] | None]] = []
        self.reads: list[tuple[str, dict[str, Any], bool, bool]] = []
        self.flat_wru = 0.0
        self.flat_rru = 0.0
        self._plan()

    def _plan(self) -> None:
        op, req = self.operation, self.request
        if op == "PutItem":
            self._write(req["TableName"], None, req["Item"], transactional=False)
        elif op in ("UpdateItem", "DeleteItem"):
            self._write(req["TableName"], req["Key"], None, transactional=False)
        elif op == "GetItem":
            self.reads.append((req["TableName"], req["Key"], bool(req.get("ConsistentRead")), False))
        elif op == "TransactWriteItems":
            for entry in req["TransactItems"]:
                ((kind, action),) = entry.items()
                if kind == "Put":
                    self._write(action["TableName"], None, action["Item"], transactional=True)
                elif kind in ("Update", "Delete"):
                    self._write(action["TableName"], action["Key"], None, transactional=True)
                else:  # ConditionCheck: a transactional read of the item
                    self.reads.append((action["TableName"], action["Key"], True, True))
        elif op == "TransactGetItems":
            for entry in req["TransactItems"]:
                action = entry["Get"]
                self.reads.append((action["TableName"], action["Key"], True, True))
        elif op == "BatchWriteItem":
            for table, requests in req["RequestItems"].items():
                for entry in requests:
                    if "PutRequest" in entry:
                        self._write(table, None, entry["PutRequest"]["Item"], transactional=False)
                    else:
                        self._write(table, entry["DeleteRequest"]["Key"], None, transactional=False)
        elif op in ("ExecuteStatement", "BatchExecuteStatement"):
            statements = [req] if op == "ExecuteStatement" else req.get("Statements", [])
            for statement in statements:
                update = _partiql_update_key(statement)
                if update is not None:  # an UPDATE of one item: sized and index-metered as its UpdateItem
                    self._write(update[0], update[1], None, transactional=False)
                elif statement.get("Statement", "").lstrip().upper().startswith("SELECT"):
                    self.flat_rru += units.read_units(0)  # keys not parsed: items under 1 KB (see bench.units)
                else:
                    self.flat_wru += units.write_units(0)
        elif op in ("Query", "BatchGetItem"):
            pass  # sized from the response (see units)
        elif op == "Scan":
            raise NotImplementedError(f"the bench does not meter {op}; no consumer should need it")

    def _write(
        self, table: str, key: dict[str, Any] | None, new: dict[str, Any] | None, *, transactional: bool
    ) -> None:
        resolved = key if key is not None else _key_of(table, new or {})
        self.writes.append((table, resolved, new, transactional, _existing(table, resolved)))

    def units(
        self, item_bytes: dict[str, int], response: dict[str, Any], tally: Tally | None = None
    ) -> tuple[float, float, float]:
        """(table WRU, RRU, index WRU), once moto has answered (updated items are read back).

        Also raises ``item_bytes[table]`` to the largest item this call wrote or tried to write. A
        write whose condition failed leaves the item as it was, so it writes no index entry.
        """
        wru, index_wru = self.flat_wru, 0.0
        for table, key, new, transactional, old in self.writes:
            after = _existing(table, key)
            size = max(units.item_size(old), units.item_size(new if new is not None else after))
            item_bytes[table] = max(item_bytes.get(table, 0), size)
            written = units.write_units(size, transactional=transactional)
            wru += written
            indexed = {index.name: units.index_write_units(index, old, after) for index in index_shapes(table)}
            index_wru += sum(indexed.values())
            if tally is not None:
                tally.wru_by_table[table] += written
                for name, value in indexed.items():
                    tally.wru_by_index[f"{table}/{name}"] += value
        rru = self.flat_rru
        for table, key, consistent, transactional in self.reads:
            size = units.item_size(_existing(table, key))
            rru += units.read_units(size, consistent=consistent, transactional=transactional)
        if self.operation == "Query":
            size = sum(units.item_size(item) for item in response.get("Items", []))
            rru += units.read_units(size, consistent=bool(self.request.get("ConsistentRead")))
        elif self.operation == "BatchGetItem":
            for table, request in self.request["RequestItems"].items():
                returned = response.get("Responses", {}).get(table, [])
                sizes = [units.item_size(item) for item in returned]
                sizes += [0] * (len(request["Keys"]) - len(returned))  # a missing item still costs the minimum
                consistent = bool(request.get("ConsistentRead"))
                rru += sum(units.read_units(size, consistent=consistent) for size in sizes)
        return wru, rru, index_wru


class Meter:
    """Wraps moto's botocore stubber: latency, lock, counts, moto's own time, request units."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.latency_s = 0.0
        self._tally: Tally | None = None
        self._original: Callable[..., Any] | None = None
        # (seconds the stand-in has worked, perf_counter() when its current work started or None),
        # replaced as one tuple so that readers on other threads never see half an update.
        self._stand_in_clock: tuple[float, float | None] = (0.0, None)

    # --- clocks ------------------------------------------------------------------------------------

    def stand_in_seconds(self) -> float:
        """Seconds the stand-in has spent working (under the lock) since the meter was made."""
        total, since = self._stand_in_clock
        return total + (time.perf_counter() - since if since is not None else 0.0)

    def virtual_now(self) -> float:
        """A clock that stops while the stand-in works: wall time minus :meth:`stand_in_seconds`."""
        return time.perf_counter() - self.stand_in_seconds()

    def _round_trip(self, seconds: float) -> None:
        """Wait ``seconds`` on the virtual clock (longer in wall time if the stand-in works meanwhile)."""
        deadline = self.virtual_now() + seconds
        while (remaining := deadline - self.virtual_now()) > 0:
            time.sleep(remaining)

    # --- installation ------------------------------------------------------------------------------

    def install(self) -> None:
        """Put the meter around moto's stubber (before ``mock_aws`` starts or while it runs)."""
        if self._original is not None:
            return
        original = BotocoreStubber.__call__
        meter = self

        def metered(stubber: BotocoreStubber, event_name: str, request: Any, **kwargs: Any) -> Any:
            return meter._call(original, stubber, event_name, request, **kwargs)

        self._original = original
        BotocoreStubber.__call__ = metered  # type: ignore[method-assign, assignment]

    def uninstall(self) -> None:
        if self._original is not None:
            BotocoreStubber.__call__ = self._original  # type: ignore[method-assign]
            self._original = None

    @contextmanager
    def measuring(self, latency_ms: float) -> Iterator[Tally]:
        """Meter the calls made inside the block, each delayed by ``latency_ms``."""
        tally = Tally()
        self.latency_s = latency_ms / 1000.0
        self._tally = tally
        try:
            yield tally
        finally:
            self._tally = None
            self.latency_s = 0.0

    @contextmanager
    def _stand_in_working(self) -> Iterator[None]:
        """Stop the virtual clock for the block (call with the lock held)."""
        total, _ = self._stand_in_clock
        started = time.perf_counter()
        self._stand_in_clock = (total, started)
        try:
            yield
        finally:
            self._stand_in_clock = (total + time.perf_counter() - started, None)

    # --- one call ----------------------------------------------------------------------------------

    def _call(self, original: Callable[..., Any], stubber: Any, event_name: str, request: Any, **kwargs: Any) -> Any:
        tally = self._tally
        if tally is None or not stubber.enabled:
            with self.lock, self._stand_in_working():
                return original(stubber, event_name, request, **kwargs)
        # event_name: before-send.<service-id>.<Operation>
        _, service, operation = event_name.split(".", 2)
        if self.latency_s:
            self._round_trip(self.latency_s)  # outside the lock: round trips overlap between threads
        with self.lock, self._stand_in_working():
            metered = None
            if service == "dynamodb":
                metered = _DynamoDBCall(operation, json.loads(request.body or b"{}"))
            started = time.perf_counter()
            response = original(stubber, event_name, request, **kwargs)
            moto_seconds = time.perf_counter() - started
            tally.calls[operation] += 1
            tally.moto_seconds.append(moto_seconds)
            if metered is not None:
                answered = response is not None and response.status_code == 200
                wru, rru, index_wru = metered.units(
                    tally.item_bytes, json.loads(response.content) if answered else {}, tally
                )
                tally.wru += wru
                tally.rru += rru
                tally.index_wru += index_wru
            if response is not None and response.status_code == 200:
                _count_messages(tally, service, operation, request.body, response)
        return response


def _sns_payloads(form: dict[str, list[str]], prefix: str) -> list[int]:
    """Payload bytes (message plus attribute names, types and values) per message of an SNS request."""
    sizes: dict[str, int] = {}
    for name, values in form.items():
        if not name.startswith(prefix):
            continue
        rest = name[len(prefix) :]
        entry, _, field_name = rest.partition(".") if prefix else ("", "", rest)
        if field_name == "Message" or field_name.startswith("MessageAttributes."):
            sizes[entry] = sizes.get(entry, 0) + len(values[0].encode("utf-8"))
    return list(sizes.values()) or [0]


def _sqs_payload(entry: dict[str, Any]) -> int:
    size = len(entry.get("MessageBody", "").encode("utf-8"))
    for name, attribute in (entry.get("MessageAttributes") or {}).items():
        size += len(name.encode()) + len(attribute.get("DataType", "")) + len(str(attribute.get("StringValue", "")))
    return size


def _count_messages(tally: Tally, service: str, operation: str, body: Any, response: Any) -> None:
    """Notifications accepted and billed SNS and SQS requests of one successful call (bench.units' rules)."""
    text = body.decode("utf-8") if isinstance(body, bytes) else (body or "")
    if service == "sns" and operation == "Publish":
        tally.publishes += 1
        tally.sns_requests += units.payload_requests(sum(_sns_payloads(parse_qs(text), "")))
    elif service == "sns" and operation == "PublishBatch":
        tally.publishes += response.content.count(b"<MessageId>")
        tally.sns_requests += units.batch_requests(_sns_payloads(parse_qs(text), "PublishBatchRequestEntries.member."))
    elif service == "sqs" and operation == "SendMessage":
        tally.sqs_requests += units.payload_requests(_sqs_payload(json.loads(text or "{}")))
    elif service == "sqs" and operation == "SendMessageBatch":
        entries = json.loads(text or "{}").get("Entries", [])
        tally.sqs_requests += units.batch_requests([_sqs_payload(entry) for entry in entries])
