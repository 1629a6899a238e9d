"""Real kills: the handler in a process of its own, SIGKILLed at random moments, against a moto server.

The other chaos tests raise an exception where a crash would be; this one kills. Three kinds of
process take part:

* the moto server, in a child process (``idempotent_order_pipeline.sandbox.server.SandboxServerProcess``, the
  project's own local endpoint), holding the tables, topic and queues;
* the handler, ``order_consumer.handler.handler``, in processes forked from a zygote
  (:mod:`tests.reliability.kill_worker`) with the environment variables the construct sets; each
  builds its clients at its first invocation (a cold start) and is replaced when killed;
* this test, the poller: it receives a batch (1-10 messages) as Lambda's event source mapping does,
  hands the child an SQS event built like Lambda's, and deletes every record the child did not
  report in ``batchItemFailures``. With a fixed probability it SIGKILLs the child at a random moment
  of the invocation instead (uniform over 1.5 times the mean invocation so far, so a kill can land
  at any AWS call, between two of them, during the cold start, or after the handler returned but
  before its answer was read); then nothing is deleted and the batch is made visible again at
  once (its visibility timeout ended). The queue's redrive policy moves a message received more
  than ``maxReceiveCount`` times to the DLQ, as SQS does; when the queue is empty, the project's
  redrive loop moves those back (``MAX_RECEIVES`` only; on FIFO everything, see ``_redrive``), until
  the queue is empty and the DLQ holds no such message.

Traffic, on a standard and on a FIFO queue: new orders, duplicates (the same body sent again),
conflicts (the same order with other content) and invalid messages, shuffled, in rounds, until the
target number of kills is reached. The handler is a black box: only the contract's invariants are
checked, from the server's state after the run:

* exactly one order row and one state record per accepted order, with one of the contents sent;
* every accepted event is ``sent`` and was notified at least once (a queue subscribed to the topic);
* every message sent is recorded (its content is the stored one) or parked: each invalid message and
  each message whose content lost the conflict is in the DLQ with the right ``error_code``;
* nothing else is in the DLQ, and the queue is empty.

Scale: ``KILL_CHAOS_KILLS`` kills per queue type (default 15: about half a minute in all);
``make reliability`` runs 520 per type. The seed is fixed (``KILL_CHAOS_SEED``, default 11): it
fixes the traffic, the batch sizes and which invocations get a kill and when; where in the handler
a kill lands (and so how many rounds reach the target) depends on the machine's timing.
"""

from __future__ import annotations

import base64
import json
import os
import random
import select
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from boto3.dynamodb.types import TypeDeserializer

from idempotent_order_pipeline.cli.dead_letters import Selection, redrive_loop
from idempotent_order_pipeline.keys import derive_event_id
from idempotent_order_pipeline.sandbox.server import Endpoint, SandboxServerProcess

# Real SIGKILLs of handler processes against a moto server process.
pytestmark = pytest.mark.slow

#: Kills per queue type, and the seed of the traffic and of the kill moments.
KILLS = int(os.environ.get("KILL_CHAOS_KILLS", "15"))
SEED = int(os.environ.get("KILL_CHAOS_SEED", "11"))
#: The probability that an invocation is killed, and the queue's maxReceiveCount.
KILL_PROBABILITY = 0.5
MAX_RECEIVE_COUNT = 4
#: Orders per round (plus their duplicates, conflicts and invalid messages).
ORDERS_PER_ROUND = 12
#: The invocation's deadline (the handler sees it in its context) and how long the poller waits for an answer.
FUNCTION_TIMEOUT_MS = 30_000
ANSWER_TIMEOUT_SECONDS = 60.0
#: A received batch is hidden this long; the poller always deletes or releases it before.
VISIBILITY_TIMEOUT_SECONDS = 120
#: A bound on invocations per kill (a run needs about 3.3): beyond it the handler makes no progress.
INVOCATIONS_PER_KILL = 20
INVALID = "INVALID_MESSAGE"
CONFLICT = "IDEMPOTENCY_CONFLICT"

_deserializer = TypeDeserializer()


@dataclass
class KillStats:
    """What one run did (docs/reliability.md's table quotes the total of ``make reliability``)."""

    kills: int = 0
    invocations: int = 0
    completed: int = 0
    errors: list[str] = field(default_factory=list)
    hangs: int = 0
    cold_starts: int = 0
    messages: int = 0
    rounds: int = 0
    receives: int = 0
    redriven: int = 0
    seconds: float = 0.0

    def line(self, kind: str) -> str:
        return (
            f"kill chaos ({kind}): {self.kills} SIGKILLs in {self.invocations} invocations "
            f"({self.completed} answered, {len(self.errors)} raised, {self.hangs} hung), "
            f"{self.cold_starts} handler processes, {self.messages} messages in {self.rounds} rounds, "
            f"{self.redriven} redriven after maxReceiveCount, {self.seconds:.0f} s"
        )


#: Every run of this process, by queue type (printed at the end of the session by conftest.py).
RUNS: dict[str, KillStats] = {}


# --- the world on the moto server ----------------------------------------------------------------


@dataclass
class World:
    """Tables, topic, queues and a subscriber queue on the server, created as the construct would."""

    endpoint: Endpoint
    fifo: bool

    def __post_init__(self) -> None:
        self.dynamodb = self.endpoint.client("dynamodb")
        self.sqs = self.endpoint.client("sqs")
        self.sns = self.endpoint.client("sns")
        suffix = ".fifo" if self.fifo else ""
        name = "kills-fifo" if self.fifo else "kills"
        self.events_table, self.orders_table = f"{name}-processed-events", f"{name}-order-records"
        for table, key in ((self.events_table, "event_id"), (self.orders_table, "order_id")):
            self.dynamodb.create_table(
                TableName=table,
                KeySchema=[{"AttributeName": key, "KeyType": "HASH"}],
                AttributeDefinitions=[{"AttributeName": key, "AttributeType": "S"}],
                BillingMode="PAY_PER_REQUEST",
            )
        fifo_attributes = {"FifoQueue": "true"} if self.fifo else {}
        self.dlq_url = self.sqs.create_queue(QueueName=f"{name}-dlq{suffix}", Attributes=fifo_attributes)["QueueUrl"]
        redrive = {"deadLetterTargetArn": self.arn(self.dlq_url), "maxReceiveCount": MAX_RECEIVE_COUNT}
        self.queue_url = self.sqs.create_queue(
            QueueName=f"{name}{suffix}",
            Attributes={**fifo_attributes, "RedrivePolicy": json.dumps(redrive)},
        )["QueueUrl"]
        self.queue_arn = self.arn(self.queue_url)
        topic_attributes = {"FifoTopic": "true"} if self.fifo else {}
        self.topic_arn = self.sns.create_topic(Name=f"{name}{suffix}", Attributes=topic_attributes)["TopicArn"]
        self.subscriber_url = self.sqs.create_queue(QueueName=f"{name}-subscriber{suffix}", Attributes=fifo_attributes)[
            "QueueUrl"
        ]
        self.sns.subscribe(TopicArn=self.topic_arn, Protocol="sqs", Endpoint=self.arn(self.subscriber_url))

    def arn(self, queue_url: str) -> str:
        return str(
            self.sqs.get_queue_attributes(QueueUrl=queue_url, AttributeNames=["QueueArn"])["Attributes"]["QueueArn"]
        )

    def function_environment(self) -> dict[str, str]:
        """The variables the construct sets on the function (order_consumer/config.py reads them)."""
        return {
            "PROCESSED_EVENTS_TABLE": self.events_table,
            "ORDER_RECORDS_TABLE": self.orders_table,
            "TOPIC_ARN": self.topic_arn,
            "DEAD_LETTER_QUEUE_URL": self.dlq_url,
            "RECORD_TTL_SECONDS": str(30 * 24 * 3600),
            "IDENTITY_FIELDS": "order_id",
            "POWERTOOLS_SERVICE_NAME": "order-consumer",
            "POWERTOOLS_METRICS_NAMESPACE": "KillChaos",
        }

    def depth(self, queue_url: str) -> int:
        names = [
            "ApproximateNumberOfMessages",
            "ApproximateNumberOfMessagesNotVisible",
            "ApproximateNumberOfMessagesDelayed",
        ]
        attributes = self.sqs.get_queue_attributes(QueueUrl=queue_url, AttributeNames=names)["Attributes"]  # type: ignore[arg-type]
        return sum(int(attributes.get(name, 0)) for name in names)

    def drain(self, queue_url: str) -> list[dict[str, Any]]:
        """Every message of a queue, received and deleted."""
        messages: list[dict[str, Any]] = []
        while batch := self.sqs.receive_message(
            QueueUrl=queue_url,
            MaxNumberOfMessages=10,
            VisibilityTimeout=VISIBILITY_TIMEOUT_SECONDS,
            MessageAttributeNames=["All"],
            MessageSystemAttributeNames=["All"],
        ).get("Messages", []):
            messages.extend(batch)
            self.sqs.delete_message_batch(
                QueueUrl=queue_url,
                Entries=[{"Id": str(i), "ReceiptHandle": m["ReceiptHandle"]} for i, m in enumerate(batch)],
            )
        return messages

    def scan(self, table: str) -> list[dict[str, Any]]:
        items: list[dict[str, Any]] = []
        kwargs: dict[str, Any] = {"TableName": table, "ConsistentRead": True}
        while True:
            page = self.dynamodb.scan(**kwargs)
            items.extend({k: _deserializer.deserialize(v) for k, v in item.items()} for item in page["Items"])
            if "LastEvaluatedKey" not in page:
                return items
            kwargs["ExclusiveStartKey"] = page["LastEvaluatedKey"]


# --- the handler processes -------------------------------------------------------------------------


class HandlerProcesses:
    """The zygote and the current handler process; SIGKILL the latter, a new one replaces it on demand."""

    def __init__(self, environment: Mapping[str, str], endpoint: Endpoint, log_path: Path) -> None:
        self._directory = tempfile.mkdtemp(prefix="kills-")
        socket_path = os.path.join(self._directory, "handler.sock")
        self._listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self._listener.bind(socket_path)
        self._listener.listen(1)
        self._listener.settimeout(30)
        env = {
            **os.environ,
            **endpoint.environment(),
            **environment,
            "PYTHONPATH": os.pathsep.join(sys.path),
        }
        env.pop("AWS_SESSION_TOKEN", None)
        self._log = open(log_path, "ab")  # noqa: SIM115 - closed in close()
        self._zygote = subprocess.Popen(  # noqa: S603 - our own interpreter and module
            [sys.executable, "-m", "tests.reliability.kill_worker", socket_path],
            stdin=subprocess.PIPE,
            stdout=self._log,
            stderr=self._log,
            env=env,
        )
        self._child: tuple[int, socket.socket] | None = None
        self._buffer = b""
        self.started = 0

    def _ensure_child(self) -> tuple[int, socket.socket]:
        if self._child is None:
            assert self._zygote.stdin is not None
            self._zygote.stdin.write(b"fork\n")
            self._zygote.stdin.flush()
            connection, _ = self._listener.accept()
            self._buffer = b""
            pid = int(json.loads(self._read_line(connection, time.monotonic() + 30) or b"{}")["pid"])
            self._child = (pid, connection)
            self.started += 1
        return self._child

    def _read_line(self, connection: socket.socket, deadline: float) -> bytes | None:
        """One line from the child, or None if it did not come before the deadline."""
        while b"\n" not in self._buffer:
            left = deadline - time.monotonic()
            if left <= 0 or not select.select([connection], [], [], left)[0]:
                return None
            chunk = connection.recv(1 << 20)
            if not chunk:
                return None
            self._buffer += chunk
        line, self._buffer = self._buffer.split(b"\n", 1)
        return line

    def invoke(self, event: Mapping[str, Any], kill_after: float | None) -> dict[str, Any] | None:
        """Invoke the handler; kill it ``kill_after`` seconds in unless it answered. None: killed or hung."""
        _pid, connection = self._ensure_child()
        connection.sendall(json.dumps({"event": event, "timeout_ms": FUNCTION_TIMEOUT_MS}).encode() + b"\n")
        wait = ANSWER_TIMEOUT_SECONDS if kill_after is None else kill_after
        line = self._read_line(connection, time.monotonic() + wait)
        if line is None:
            self.kill()
            return None
        return dict(json.loads(line))

    def kill(self) -> None:
        if self._child is None:
            return
        pid, connection = self._child
        self._child = None
        os.kill(pid, signal.SIGKILL)
        connection.close()

    def close(self) -> None:
        self.kill()
        if self._zygote.stdin is not None:
            self._zygote.stdin.close()
        try:
            self._zygote.wait(10)
        except subprocess.TimeoutExpired:
            self._zygote.kill()
            self._zygote.wait()
        self._listener.close()
        self._log.close()


# --- the poller ------------------------------------------------------------------------------------


def _lambda_attribute(value: Mapping[str, Any]) -> dict[str, Any]:
    if str(value["DataType"]).startswith("Binary"):
        encoded = base64.b64encode(value["BinaryValue"]).decode()
        return {"dataType": value["DataType"], "binaryValue": encoded, "stringListValues": [], "binaryListValues": []}
    return {
        "dataType": value["DataType"],
        "stringValue": value["StringValue"],
        "stringListValues": [],
        "binaryListValues": [],
    }


def lambda_event(messages: Sequence[Mapping[str, Any]], queue_arn: str) -> dict[str, Any]:
    """The SQS event Lambda's event source mapping sends for these received messages."""
    return {
        "Records": [
            {
                "messageId": message["MessageId"],
                "receiptHandle": message["ReceiptHandle"],
                "body": message["Body"],
                "attributes": dict(message.get("Attributes", {})),
                "messageAttributes": {
                    name: _lambda_attribute(value) for name, value in message.get("MessageAttributes", {}).items()
                },
                "md5OfBody": message.get("MD5OfBody", ""),
                "eventSource": "aws:sqs",
                "eventSourceARN": queue_arn,
                "awsRegion": queue_arn.split(":")[3],
            }
            for message in messages
        ]
    }


@dataclass
class Traffic:
    """Everything sent: body -> what it must become."""

    #: order id -> the contents (JSON bodies) sent for it; the first one listed is the original.
    variants: dict[str, list[str]] = field(default_factory=dict)
    invalid: set[str] = field(default_factory=set)

    def round(self, rng: random.Random, number: int, kind: str) -> list[tuple[str, str]]:
        """(group, body) of one round's messages, shuffled."""
        messages: list[tuple[str, str]] = []
        for i in range(ORDERS_PER_ROUND):
            order_id = f"{kind}-{number}-{i}"
            original = json.dumps({"order_id": order_id, "amount": rng.randint(1, 10_000), "variant": "a"})
            self.variants[order_id] = [original]
            messages.append((order_id, original))
            if rng.random() < 0.3:  # a duplicate: the same order sent again
                messages.append((order_id, original))
            if rng.random() < 0.2:  # a conflict: the same order with other content
                other = json.dumps({"order_id": order_id, "amount": rng.randint(1, 10_000), "variant": "b"})
                self.variants[order_id].append(other)
                messages.append((order_id, other))
        for i in range(ORDERS_PER_ROUND // 4):
            body = rng.choice(
                [
                    f"not json {kind}-{number}-{i}",
                    json.dumps({"amount": i, "tag": f"{kind}-{number}-{i}"}),  # no order_id
                    json.dumps([f"{kind}-{number}-{i}"]),  # not an object
                    json.dumps({"order_id": "", "tag": f"{kind}-{number}-{i}"}),
                ]
            )
            self.invalid.add(body)
            messages.append((f"invalid-{number}-{i}", body))
        rng.shuffle(messages)
        return messages


class KillChaos:
    """One run: traffic in rounds, the poller with kills, redrive, until the kill target is reached."""

    def __init__(self, world: World, processes: HandlerProcesses, rng: random.Random, stats: KillStats) -> None:
        self.world = world
        self.processes = processes
        self.rng = rng
        self.stats = stats
        self.traffic = Traffic()
        self._durations: list[float] = [0.2]
        self._sent = 0
        #: Messages whose last delivery failed at maxReceiveCount: SQS moves them at the next receive.
        self._at_risk: set[str] = set()
        #: Every message taken out of the DLQ after a round (the final check reads them all).
        self.parked: list[dict[str, Any]] = []

    def run(self, kills: int) -> None:
        started = time.monotonic()
        kind = "fifo" if self.world.fifo else "std"
        while self.stats.kills < kills:
            self.send(self.traffic.round(self.rng, self.stats.rounds, kind))
            self.stats.rounds += 1
            self.consume_until_done()
            # The DLQ is emptied after each round (a FIFO redrive moves all of it back; see _redrive).
            self.parked += self.world.drain(self.world.dlq_url)
        self.stats.cold_starts = self.processes.started
        self.stats.seconds = time.monotonic() - started

    def send(self, messages: Sequence[tuple[str, str]]) -> None:
        for start in range(0, len(messages), 10):
            entries: list[dict[str, Any]] = []
            for group, body in messages[start : start + 10]:
                entry: dict[str, Any] = {"Id": str(len(entries)), "MessageBody": body}
                if self.world.fifo:
                    self._sent += 1
                    entry |= {"MessageGroupId": group, "MessageDeduplicationId": f"m-{self._sent}"}
                entries.append(entry)
            response = self.world.sqs.send_message_batch(QueueUrl=self.world.queue_url, Entries=entries)  # type: ignore[arg-type]
            assert not response.get("Failed"), response
        self.stats.messages += len(messages)

    def consume_until_done(self) -> None:
        while True:
            while self.world.depth(self.world.queue_url):
                # A handler that never gets a message through must fail the test, not hang it.
                assert self.stats.invocations < INVOCATIONS_PER_KILL * (self.stats.kills + 100), self.stats
                self.poll_once()
            if not self._redrive():
                return

    def _redrive(self) -> int:
        """Move what SQS's redrive policy dead-lettered back to the queue with the redrive loop; how many moved.

        Standard queue: the messages without the consumer's reason (``MAX_RECEIVES``), after every
        drain. FIFO queue: a DLQ group is delivered in order, so a selection could not reach a message
        queued behind a parked one it leaves in place; there everything goes back (the consumer parks
        the permanent failures again, with a fresh reason), when a delivery at ``maxReceiveCount``
        failed.
        """
        if self.world.fifo:
            if not self._at_risk:
                return 0
            selection = Selection()
        else:
            selection = Selection.of(["MAX_RECEIVES"])
        dead_lettered = len(self._at_risk)
        self._at_risk.clear()
        report = redrive_loop(
            self.world.sqs, self.world.dlq_url, self.world.queue_url, selection=selection, wait_seconds=0
        )
        assert report.complete, report
        self.stats.redriven += report.moved_by_code["MAX_RECEIVES"]
        assert report.moved_by_code["MAX_RECEIVES"] == dead_lettered or not self.world.fifo, report
        return report.moved

    def poll_once(self) -> None:
        messages = self.world.sqs.receive_message(
            QueueUrl=self.world.queue_url,
            MaxNumberOfMessages=self.rng.randint(1, 10),
            VisibilityTimeout=VISIBILITY_TIMEOUT_SECONDS,
            MessageAttributeNames=["All"],
            MessageSystemAttributeNames=["All"],
        ).get("Messages", [])
        self.stats.receives += 1
        if not messages:
            return
        event = lambda_event(messages, self.world.queue_arn)
        kill_after = None
        if self.rng.random() < KILL_PROBABILITY:
            mean = sum(self._durations[-50:]) / len(self._durations[-50:])
            kill_after = self.rng.uniform(0, 1.5 * mean)
        self.stats.invocations += 1
        started = time.monotonic()
        answer = self.processes.invoke(event, kill_after)
        handles = {m["MessageId"]: m["ReceiptHandle"] for m in messages}
        last_chance = {
            m["MessageId"] for m in messages if int(m["Attributes"]["ApproximateReceiveCount"]) >= MAX_RECEIVE_COUNT
        }
        self._at_risk |= last_chance
        if answer is None:
            if kill_after is None:
                self.stats.hangs += 1
            else:
                self.stats.kills += 1
            self._release(handles.values())  # the invocation failed: the whole batch comes back
            return
        if "error" in answer:
            self.stats.errors.append(answer["error"])
            self._release(handles.values())
            return
        self.stats.completed += 1
        self._durations.append(time.monotonic() - started)
        failures = {item.get("itemIdentifier") for item in answer["response"].get("batchItemFailures", [])}
        if not failures <= set(handles):  # an invalid report fails the whole batch, as in Lambda
            self.stats.errors.append(f"batchItemFailures names unknown records: {failures - set(handles)}")
            self._release(handles.values())
            return
        self._at_risk -= last_chance - failures
        done = [handle for message_id, handle in handles.items() if message_id not in failures]
        for start in range(0, len(done), 10):
            self.world.sqs.delete_message_batch(
                QueueUrl=self.world.queue_url,
                Entries=[{"Id": str(i), "ReceiptHandle": h} for i, h in enumerate(done[start : start + 10])],
            )
        self._release(handles[message_id] for message_id in failures)

    def _release(self, handles: Iterator[str] | Any) -> None:
        """Visible again at once: the visibility timeout of a failed delivery, fast-forwarded."""
        handles = list(handles)
        for start in range(0, len(handles), 10):
            self.world.sqs.change_message_visibility_batch(
                QueueUrl=self.world.queue_url,
                Entries=[
                    {"Id": str(i), "ReceiptHandle": h, "VisibilityTimeout": 0}
                    for i, h in enumerate(handles[start : start + 10])
                ],
            )


# --- the invariants --------------------------------------------------------------------------------


def check_invariants(world: World, traffic: Traffic, parked_messages: Sequence[Mapping[str, Any]]) -> list[str]:
    """The contract's promises, read from the server's state; one line per violation."""
    problems: list[str] = []
    if world.depth(world.queue_url):
        problems.append(f"the queue still holds {world.depth(world.queue_url)} message(s)")
    rows = world.scan(world.orders_table)
    records = world.scan(world.events_table)
    rows_by_order = Counter(row["order_id"] for row in rows)
    problems += [f"order {o}: {n} rows" for o, n in rows_by_order.items() if n != 1]
    if set(rows_by_order) != set(traffic.variants):
        missing, extra = set(traffic.variants) - set(rows_by_order), set(rows_by_order) - set(traffic.variants)
        problems.append(f"orders without a row: {sorted(missing)[:5]}; rows for no order sent: {sorted(extra)[:5]}")
    expected_events = {derive_event_id({"order_id": order_id}): order_id for order_id in traffic.variants}
    records_by_event = Counter(record["event_id"] for record in records)
    if set(records_by_event) != set(expected_events):
        problems.append(
            f"state records {len(records_by_event)} for {len(expected_events)} accepted events "
            f"(missing {sorted(set(expected_events) - set(records_by_event))[:3]})"
        )
    problems += [f"event {r['event_id']}: status {r.get('status')}" for r in records if r.get("status") != "sent"]
    # The content stored for each order is one of those sent; every message with another content lost.
    losers: set[str] = set()
    for row in rows:
        sent = traffic.variants.get(row["order_id"], [])
        stored = [body for body in sent if _same_content(json.loads(body), row)]
        if len(stored) != 1:
            problems.append(f"order {row['order_id']}: stored content matches {len(stored)} of the {len(sent)} sent")
            continue
        losers.update(body for body in sent if body != stored[0])
    notified = Counter(_notified_event(message) for message in world.drain(world.subscriber_url))
    problems += [f"event of order {o} never notified" for e, o in expected_events.items() if not notified[e]]
    problems += [f"notification for an event never accepted: {e}" for e in notified if e not in expected_events]
    parked: dict[str, set[str]] = {}
    for message in [*parked_messages, *world.drain(world.dlq_url)]:
        code = message.get("MessageAttributes", {}).get("error_code", {}).get("StringValue", "none (moved by SQS)")
        parked.setdefault(message["Body"], set()).add(code)
    for body, codes in parked.items():
        expected = {INVALID} if body in traffic.invalid else {CONFLICT} if body in losers else set()
        if not expected or codes != expected:
            problems.append(f"DLQ holds {body[:60]!r} with {sorted(codes)}, expected {sorted(expected) or 'nothing'}")
    problems += [f"invalid message never parked: {body[:60]!r}" for body in traffic.invalid - set(parked)]
    problems += [f"losing conflict never parked: {body[:60]!r}" for body in losers - set(parked)]
    return problems


def _same_content(order: Mapping[str, Any], row: Mapping[str, Any]) -> bool:
    return all(row.get(name) == value for name, value in order.items())


def _notified_event(message: Mapping[str, Any]) -> str:
    """The event id of a notification as a subscribed queue receives it (SNS's JSON envelope)."""
    envelope = json.loads(message["Body"])
    return str(json.loads(envelope["Message"])["event_id"])


# --- the test --------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def endpoint(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Endpoint]:
    log = tmp_path_factory.mktemp("kills") / "moto-server.log"
    with SandboxServerProcess(log_path=log) as endpoint:
        yield endpoint


@pytest.mark.parametrize("fifo", [False, True], ids=["standard", "fifo"])
def test_sigkilled_handler_processes_keep_every_promise(endpoint: Endpoint, tmp_path: Path, fifo: bool) -> None:
    # GIVEN the pipeline's resources on a moto server in another process, and the handler in a
    # process of its own with the construct's environment
    world = World(endpoint, fifo=fifo)
    stats = RUNS.setdefault("fifo" if fifo else "standard", KillStats())
    processes = HandlerProcesses(world.function_environment(), endpoint, tmp_path / "handler.log")
    chaos = KillChaos(world, processes, random.Random(SEED + fifo), stats)
    # WHEN new, duplicate, conflicting and invalid messages are consumed while the handler process
    # is SIGKILLed at random moments, and redelivered (and redriven) until none is left
    try:
        chaos.run(KILLS)
    finally:
        processes.close()
    print(stats.line("fifo" if fifo else "standard"))
    # THEN the kills happened, and the handler never raised or hung
    assert stats.kills >= KILLS
    assert stats.completed > 0
    assert stats.errors == []
    assert stats.hangs == 0
    # AND every promise of the contract holds in the server's state
    assert check_invariants(world, chaos.traffic, chaos.parked) == []
