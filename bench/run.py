"""The measurement: four consumers, the same orders, one stand-in, interleaved batch by batch.

For every repetition one batch of 10 new orders is generated; each consumer, in an order that rotates
with the repetition (so that no consumer always runs right after another one's garbage), gets

1. fresh tables (outside the timing: moto's ``TransactWriteItems`` copies whole tables, so reused
   tables would charge the transactional consumers for moto's sake; see :func:`stand_in_note`);
2. the batch's first delivery: its time with the stand-in's own work off the clock and its wall time
   (see :mod:`bench.standin`), calls by operation, moto's own time per call, request units,
   publishes, log bytes;
3. the same messages again (a redelivery after success): the same figures;
4. a count of its order rows against the distinct orders (duplicate rows).

This runs once at the configured latency (5 ms per call by default) and once at 0 ms.
"""

from __future__ import annotations

import ast
import io
import os
import random
import statistics
import time
from collections import Counter
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager, redirect_stdout
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from bench import deployment, environment
from bench.environment import OURS_VARIABLES
from bench.orders import OrderSource, batch_event, redelivery
from bench.standin import REGION, Meter, Tally
from idempotent_order_pipeline._lambda_asset.order_consumer.contract.batching import EVENT_SOURCE_BATCH_SIZE

REPO_ROOT = Path(__file__).resolve().parent.parent
#: Records per batch: the event source's default, as the construct sets it.
BATCH_SIZE = EVENT_SOURCE_BATCH_SIZE
#: Messages in the "per 1,000 messages" figure.
PER_THOUSAND = 1000
CONSUMERS = ("naive", "seed", "powertools", "ours")
#: Environment every consumer runs with (the construct sets the Powertools ones on the function).
LAMBDA_ENVIRONMENT = {
    "AWS_DEFAULT_REGION": REGION,
    "POWERTOOLS_SERVICE_NAME": "order-consumer",
    "POWERTOOLS_METRICS_NAMESPACE": "OrderPipelineBench",
}
#: Memory used if the construct's default cannot be read (said so in the output).
FALLBACK_MEMORY_MB = 256


def construct_memory_mb() -> tuple[int, str]:
    """The construct's default Lambda memory, read from its source without importing the CDK.

    The default of the ``memory_size`` field of ``PipelineProps`` in ``props.py``, the one home of
    the props' defaults (the constructor's keywords default to it).
    """
    path = REPO_ROOT / "infra" / "idempotent_order_pipeline" / "props.py"
    try:
        tree = ast.parse(path.read_text(encoding="utf-8"))
    except OSError:
        return FALLBACK_MEMORY_MB, f"assumed {FALLBACK_MEMORY_MB} MB (props.py not found)"
    for node in ast.walk(tree):
        if isinstance(node, ast.ClassDef) and node.name == "PipelineProps":
            for statement in node.body:
                # memory_size: int = prop(1769, "...") (core.props: the field's default is prop's first argument)
                value = statement.value if isinstance(statement, ast.AnnAssign) else None
                if isinstance(value, ast.Call) and value.args:
                    value = value.args[0]
                if (
                    isinstance(statement, ast.AnnAssign)
                    and isinstance(statement.target, ast.Name)
                    and statement.target.id == "memory_size"
                    and isinstance(value, ast.Constant)
                    and type(value.value) is int
                ):
                    return value.value, "IdempotentOrderPipeline(memory_size=...) default"
    return FALLBACK_MEMORY_MB, f"assumed {FALLBACK_MEMORY_MB} MB (no memory_size default in PipelineProps)"


class ByteCounter(io.TextIOBase):
    """A stdout that counts what is written to it (log lines, EMF metrics) and keeps nothing."""

    def __init__(self) -> None:
        self.bytes = 0

    def writable(self) -> bool:
        return True

    def write(self, text: str) -> int:
        self.bytes += len(text.encode("utf-8"))
        return len(text)


class FakeContext:
    """The Lambda context attributes the handlers read."""

    function_name = "order-consumer"
    function_version = "$LATEST"
    memory_limit_in_mb = 512
    invoked_function_arn = f"arn:aws:lambda:{REGION}:123456789012:function:order-consumer"
    aws_request_id = "00000000-0000-4000-8000-000000000000"
    log_group_name = "/aws/lambda/order-consumer"
    log_stream_name = "bench"

    def get_remaining_time_in_millis(self) -> int:
        return 60_000


# --- the consumers in the stand-in ---------------------------------------------------------------


@dataclass
class Consumer:
    """One consumer wired to its own tables in the stand-in."""

    name: str
    #: The module a cold start imports.
    import_module: str
    #: Table name -> key attribute.
    tables: dict[str, str]
    #: The table holding the order rows, and the attribute naming the order.
    order_table: str
    handler: Callable[[dict[str, Any], Any], Any]
    configure: Callable[[], None]
    #: Table name -> its definition as deployed (key schema, attributes, global secondary indexes),
    #: for the tables whose deployment the bench knows (ours'); others get a plain key.
    definitions: dict[str, dict[str, Any]] = field(default_factory=dict)


class StandIn:
    """moto (``mock_aws``) with the meter, a topic, a DLQ and each consumer's tables.

    ``deployment`` is :func:`bench.deployment.load`'s answer: ours' tables are created as the
    construct deploys them, the pending index included, so the meter bills its writes.
    """

    def __init__(self, deployment: Mapping[str, Any]) -> None:
        self.deployment = deployment
        # The function's environment, restored by close(). The Powertools variables only matter if no
        # handler was imported yet (Powertools reads them when its objects are made); an existing
        # value is kept. The region is forced: every client must reach the same moto backend.
        self._saved_environment = {name: os.environ.get(name) for name in (*LAMBDA_ENVIRONMENT, *OURS_VARIABLES)}
        for name, value in LAMBDA_ENVIRONMENT.items():
            if name == "AWS_DEFAULT_REGION" or not os.environ.get(name):
                os.environ[name] = value
        import boto3
        from moto import mock_aws

        self.transact_fix, self._revert_transact_fix = _apply_transact_fix()
        self.meter = Meter()
        self.meter.install()
        self._mock = mock_aws()
        self._mock.start()
        self.dynamodb = boto3.client("dynamodb", region_name=REGION)
        self.sns = boto3.client("sns", region_name=REGION)
        self.sqs = boto3.client("sqs", region_name=REGION)
        self.topic_arn = self.sns.create_topic(Name="orders")["TopicArn"]
        self.dlq_url = self.sqs.create_queue(QueueName="orders-dlq")["QueueUrl"]
        self.consumers = self._consumers()

    def close(self) -> None:
        """Stop moto, take the meter and the transaction fix off, restore the environment."""
        self._mock.stop()
        self.meter.uninstall()
        self._revert_transact_fix()
        for name, value in self._saved_environment.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value

    def _consumers(self) -> dict[str, Consumer]:
        import boto3

        from bench.consumers import naive, ours, powertools, seed

        peer_clients = {
            "dynamodb": boto3.client("dynamodb", region_name=REGION),
            "sns": boto3.client("sns", region_name=REGION),
        }
        envs = {
            "naive": {"ORDERS_TABLE": "naive-orders", "TOPIC_ARN": self.topic_arn},
            "seed": {
                "PROCESSED_EVENTS_TABLE": "seed-processed-events",
                "ORDER_RECORDS_TABLE": "seed-order-records",
                "TOPIC_ARN": self.topic_arn,
            },
            "powertools": {
                "IDEMPOTENCY_TABLE": "powertools-idempotency",
                "ORDER_RECORDS_TABLE": "powertools-order-records",
                "TOPIC_ARN": self.topic_arn,
            },
            "ours": environment.ours(
                processed_events="ours-processed-events",
                order_records="ours-order-records",
                topic_arn=self.topic_arn,
                dead_letter_queue_url=self.dlq_url,
            ),
        }
        return {
            "naive": Consumer(
                name="naive",
                import_module="bench.consumers.naive",
                tables={"naive-orders": "row_id"},
                order_table="naive-orders",
                handler=naive.handler,
                configure=lambda: naive.configure(**peer_clients, env=envs["naive"]),
            ),
            "seed": Consumer(
                name="seed",
                import_module="bench.consumers.seed",
                tables={"seed-processed-events": "event_id", "seed-order-records": "order_id"},
                order_table="seed-order-records",
                handler=seed.handler,
                configure=lambda: seed.configure(**peer_clients, env=envs["seed"]),
            ),
            "powertools": Consumer(
                name="powertools",
                import_module="bench.consumers.powertools",
                tables={"powertools-idempotency": "id", "powertools-order-records": "order_id"},
                order_table="powertools-order-records",
                handler=powertools.handler,
                configure=lambda: powertools.configure(**peer_clients, env=envs["powertools"]),
            ),
            "ours": Consumer(
                name="ours",
                import_module="order_consumer.handler",
                tables={"ours-processed-events": "event_id", "ours-order-records": "order_id"},
                order_table="ours-order-records",
                handler=ours.handler,
                configure=lambda: _configure_ours(envs["ours"]),
                definitions={
                    "ours-processed-events": self.deployment["tables"]["processed_events_table"],
                    "ours-order-records": self.deployment["tables"]["order_records_table"],
                },
            ),
        }

    def fresh_tables(self, consumer: Consumer) -> None:
        """Drop and create the consumer's tables (unmetered)."""
        existing = set(self.dynamodb.list_tables()["TableNames"])
        for table, key in consumer.tables.items():
            if table in existing:
                self.dynamodb.delete_table(TableName=table)
            definition = consumer.definitions.get(table) or {
                "KeySchema": [{"AttributeName": key, "KeyType": "HASH"}],
                "AttributeDefinitions": [{"AttributeName": key, "AttributeType": "S"}],
            }
            deployment.create_table(self.dynamodb, table, definition)

    def order_rows(self, consumer: Consumer) -> list[dict[str, Any]]:
        """Every item of the consumer's order table (unmetered)."""
        items: list[dict[str, Any]] = []
        kwargs: dict[str, Any] = {"TableName": consumer.order_table}
        while True:
            page = self.dynamodb.scan(**kwargs)
            items.extend(page["Items"])
            if "LastEvaluatedKey" not in page:
                return items
            kwargs["ExclusiveStartKey"] = page["LastEvaluatedKey"]


def _configure_ours(env: Mapping[str, str]) -> None:
    """The product's settings are its environment variables (restored by :meth:`StandIn.close`)."""
    os.environ.update(env)


def _apply_transact_fix() -> tuple[str, Callable[[], None]]:
    """Apply the sandbox's item-journal fix of moto's TransactWriteItems when it is available.

    Returns what happened, for the output, and how to undo it (nothing if it was already applied).
    """
    try:
        from idempotent_order_pipeline.sandbox import moto_patches  # type: ignore[import-not-found, unused-ignore]
    except ImportError:
        return "not available", lambda: None
    if moto_patches.is_applied():
        return "applied (already in effect)", lambda: None
    try:
        moto_patches.apply()
    except RuntimeError as exc:
        return f"not applied ({exc})", lambda: None
    return "applied", moto_patches.revert


def stand_in_note(transact_fix: str) -> str:
    import moto

    return (
        f"moto {moto.__version__} in-process; fresh tables per measured batch (tables are dropped and created "
        f"outside the timing, so moto's whole-table copy in TransactWriteItems never grows); "
        f"idempotent_order_pipeline.sandbox.moto_patches item-journal fix: {transact_fix}; moto's own work runs one "
        f"call at a time under a lock, the injected latency is waited outside it"
    )


# --- samples ---------------------------------------------------------------------------------------


@dataclass
class Delivery:
    """One delivery of one batch to one consumer."""

    #: Wall time of the handler call, the stand-in's own work included.
    wall_ms: float
    #: The stand-in's own work during the call (moto and the meter, under the lock).
    stand_in_ms: float
    tally: Tally
    log_bytes: int
    failures: int

    @property
    def ms(self) -> float:
        """The consumer's time: wall time with the stand-in's work taken off the clock."""
        return self.wall_ms - self.stand_in_ms


#: First delivery of a batch, or its redelivery.
Which = Literal["first", "again"]


@dataclass
class Samples:
    """Everything measured for one consumer at one latency."""

    first: list[Delivery] = field(default_factory=list)
    again: list[Delivery] = field(default_factory=list)
    duplicate_rows: int = 0
    messages: int = 0

    def deliveries(self, which: Which) -> list[Delivery]:
        """The first deliveries or the redeliveries."""
        return self.first if which == "first" else self.again

    def calls(self, which: Which) -> Counter[str]:
        total: Counter[str] = Counter()
        for delivery in self.deliveries(which):
            total.update(delivery.tally.calls)
        return total

    def per_msg(self, which: Which, value: Callable[[Delivery], float]) -> float:
        return sum(value(d) for d in self.deliveries(which)) / max(self.messages, 1)

    def batch_ms(self, which: Which = "first", *, wall: bool = False) -> float:
        """Median time per batch (``wall``: with the stand-in's own work on the clock)."""
        return statistics.median(d.wall_ms if wall else d.ms for d in self.deliveries(which))

    def per_thousand_ms(self, *, wall: bool = False) -> float:
        """Time of the first deliveries, scaled to 1,000 messages (exact when 1,000 were run)."""
        total = sum(d.wall_ms if wall else d.ms for d in self.first)
        return total * PER_THOUSAND / max(self.messages, 1)

    def moto_ms(self) -> list[float]:
        return [s * 1000.0 for d in self.first + self.again for s in d.tally.moto_seconds]


@contextmanager
def quiet_logs(sink: ByteCounter) -> Iterator[None]:
    """Send stdout (EMF metrics, log lines) and the product logger's stream to ``sink``.

    The product's Powertools logger holds the stdout it was made with; when it is not where this
    expects it, its lines go to that stdout and are not counted (said so by a zero count).
    """
    handler: Any = None
    try:
        from order_consumer.observability import logger

        handler = logger.registered_handler
    except (ImportError, AttributeError):
        handler = None
    previous = handler.setStream(sink) if handler is not None else None
    try:
        with redirect_stdout(sink):
            yield
    finally:
        if handler is not None:
            handler.setStream(previous)


def _deliver(
    stand_in: StandIn, consumer: Consumer, event: dict[str, Any], latency_ms: float, sink: ByteCounter
) -> Delivery:
    context = FakeContext()
    logged = sink.bytes
    meter = stand_in.meter
    with meter.measuring(latency_ms) as tally:
        stand_in_started = meter.stand_in_seconds()
        started = time.perf_counter()
        response = consumer.handler(event, context)
        wall_ms = (time.perf_counter() - started) * 1000.0
        stand_in_ms = (meter.stand_in_seconds() - stand_in_started) * 1000.0
    failures = len((response or {}).get("batchItemFailures", []))
    return Delivery(
        wall_ms=wall_ms, stand_in_ms=stand_in_ms, tally=tally, log_bytes=sink.bytes - logged, failures=failures
    )


def measure(
    stand_in: StandIn,
    *,
    latency_ms: float,
    batches: int,
    source: OrderSource,
    rng: random.Random,
    progress: Callable[[float, int, int], None] | None = None,
) -> dict[str, Samples]:
    """Run ``batches`` batches through every consumer at ``latency_ms`` per call."""
    names = list(stand_in.consumers)
    samples = {name: Samples() for name in names}
    sink = ByteCounter()
    with quiet_logs(sink):
        for index in range(batches):
            orders = list(source.orders(BATCH_SIZE))
            first = batch_event(orders, rng)
            again = redelivery(first)
            turn = names[index % len(names) :] + names[: index % len(names)]
            for name in turn:
                consumer = stand_in.consumers[name]
                stand_in.fresh_tables(consumer)
                got = samples[name]
                for deliveries, event in ((got.first, first), (got.again, again)):
                    delivery = _deliver(stand_in, consumer, event, latency_ms, sink)
                    if delivery.failures:
                        raise AssertionError(f"{name}: {delivery.failures} records failed; the figures would be void")
                    deliveries.append(delivery)
                got.messages += len(orders)
                rows = stand_in.order_rows(consumer)
                distinct = {row["order_id"]["S"] for row in rows}
                if distinct != {order["order_id"] for order in orders}:
                    raise AssertionError(f"{name}: order rows {sorted(distinct)} do not match the batch")
                got.duplicate_rows += len(rows) - len(distinct)
            if progress is not None:
                progress(latency_ms, index + 1, batches)
    return samples


def warm_up(stand_in: StandIn, source: OrderSource, rng: random.Random) -> None:
    """Configure every consumer and run a batch through each, unmeasured (a warm Lambda container)."""
    for consumer in stand_in.consumers.values():
        consumer.configure()
    measure(stand_in, latency_ms=0, batches=1, source=source, rng=rng)


#: Orders delivered (10 per batch) before the run that measures what an order adds to the reconciler.
RECONCILER_ORDERS = 50


@dataclass
class ReconcilerRuns:
    """The reconciler's scheduled runs on an index with nothing new (the steady state's fixed part:
    nothing left pending), and what a run reading orders' entries adds per order."""

    runs: int
    #: Median run time at the latency, with the stand-in's own work off the clock, and at 0 ms (its CPU).
    run_ms: float
    cpu_ms: float
    calls_per_run: dict[str, float]
    rru_per_run: float
    log_bytes_per_run: float
    wru_per_run: float = 0.0
    #: A run over RECONCILER_ORDERS sent orders' entries, less a run over none, per order.
    rru_per_order: float = 0.0
    wru_per_order: float = 0.0
    calls_per_order_run: dict[str, float] = field(default_factory=dict)


def measure_reconciler(stand_in: StandIn, *, latency_ms: float, runs: int) -> ReconcilerRuns:
    """Run ours' reconciler ``runs`` times at ``latency_ms`` and at 0 ms, as its schedule does."""
    from order_consumer import reconciler

    consumer = stand_in.consumers["ours"]
    consumer.configure()
    stand_in.fresh_tables(consumer)
    saved = os.environ.get("RECONCILE_AFTER_SECONDS")
    os.environ["RECONCILE_AFTER_SECONDS"] = "900"
    sink = ByteCounter()
    timed: dict[float, list[float]] = {latency_ms: [], 0.0: []}
    calls: Counter[str] = Counter()
    rru = wru = 0.0
    logged = 0
    try:
        with quiet_logs(sink):
            for latency in (latency_ms, 0.0):
                for _ in range(runs):
                    before = sink.bytes
                    with stand_in.meter.measuring(latency) as tally:
                        stand_in_started = stand_in.meter.stand_in_seconds()
                        started = time.perf_counter()
                        reconciler.handler({}, FakeContext())
                        wall_ms = (time.perf_counter() - started) * 1000.0
                        stand_in_ms = (stand_in.meter.stand_in_seconds() - stand_in_started) * 1000.0
                    timed[latency].append(wall_ms - stand_in_ms)
                    if latency == latency_ms:
                        calls.update(tally.calls)
                        rru += tally.rru
                        wru += tally.wru
                        logged += sink.bytes - before
            per_order = _reconciler_per_order(stand_in, consumer, sink, latency_ms)
    finally:
        if saved is None:
            os.environ.pop("RECONCILE_AFTER_SECONDS", None)
        else:
            os.environ["RECONCILE_AFTER_SECONDS"] = saved
    return ReconcilerRuns(
        runs=runs,
        run_ms=statistics.median(timed[latency_ms]),
        cpu_ms=statistics.median(timed[0.0]),
        calls_per_run={op: count / runs for op, count in sorted(calls.items())},
        rru_per_run=rru / runs,
        log_bytes_per_run=logged / runs,
        wru_per_run=wru / runs,
        rru_per_order=per_order[0],
        wru_per_order=per_order[1],
        calls_per_order_run=per_order[2],
    )


def _reconciler_per_order(
    stand_in: StandIn, consumer: Consumer, sink: ByteCounter, latency_ms: float
) -> tuple[float, float, dict[str, float]]:
    """What a run reading RECONCILER_ORDERS sent orders' index entries costs more than a run reading none,
    per order: the consumer delivers them (unmetered), then one run reads them all (threshold 0, no
    index margin: moto's index has no lag), then one more run reads nothing new."""
    from order_consumer import reconciler, reconciliation

    source, rng = OrderSource(RECONCILER_ORDERS), random.Random(RECONCILER_ORDERS)  # noqa: S311 - test data
    stand_in.fresh_tables(consumer)
    for _ in range(RECONCILER_ORDERS // BATCH_SIZE):
        delivery = _deliver(stand_in, consumer, batch_event(list(source.orders(BATCH_SIZE)), rng), 0.0, sink)
        if delivery.failures:
            raise AssertionError(f"ours: {delivery.failures} records failed before the reconciler's run")
    time.sleep(1.05)  # the entries' created_at (whole seconds) is then in the past
    saved_margin = reconciliation.INDEX_PROPAGATION_MARGIN_SECONDS
    os.environ["RECONCILE_AFTER_SECONDS"] = "0"
    reconciliation.INDEX_PROPAGATION_MARGIN_SECONDS = 0
    tallies = []
    try:
        for _ in range(2):  # the run over the orders' entries, then a run over none
            with stand_in.meter.measuring(latency_ms) as tally:
                answer = reconciler.handler({}, FakeContext())
            tallies.append((tally, answer))
    finally:
        reconciliation.INDEX_PROPAGATION_MARGIN_SECONDS = saved_margin
    (reading, read_answer), (empty, empty_answer) = tallies
    if (read_answer["found"], read_answer["already_sent"], empty_answer["found"]) != (
        RECONCILER_ORDERS,
        RECONCILER_ORDERS,
        0,
    ):
        raise AssertionError(
            f"the reconciler's runs over {RECONCILER_ORDERS} sent orders: {read_answer}, {empty_answer}"
        )
    calls = {op: (reading.calls[op] - empty.calls.get(op, 0)) / RECONCILER_ORDERS for op in sorted(reading.calls)}
    return (
        (reading.rru - empty.rru) / RECONCILER_ORDERS,
        (reading.wru - empty.wru) / RECONCILER_ORDERS,
        calls,
    )
