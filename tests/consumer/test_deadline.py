"""The invocation ends before its deadline, whatever a call does and however big the batch.

Against a stand-in endpoint over real HTTP on localhost (:mod:`tests.consumer.standin`), with the
consumer's own client configuration (:data:`order_consumer.runtime.CLIENT_CONFIG`): a call that
never answers, a call that trickles one byte every 0.25 s (a read timeout never fires), for the
record's transaction, the PublishBatch and the sent marks; and 10,000 records in a child process
held to 29 % of one core (Lambda's CPU share at 512 MB). Each test asserts that the handler
returned while ``get_remaining_time_in_millis()`` was still positive, and that the response is
consistent: a record is acknowledged only if the stand-in accepted its notification and its mark,
and every other record is in ``batchItemFailures``.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from pathlib import Path
from typing import Any

import boto3
import pytest

from idempotent_order_pipeline._lambda_asset.order_consumer import handler as handler_module
from idempotent_order_pipeline._lambda_asset.order_consumer import runtime
from idempotent_order_pipeline._lambda_asset.order_consumer.runtime import CLIENT_CONFIG, Clients
from tests.consumer.standin import ANSWER, HANG, TRICKLE, StandIn, running

ROOT = Path(__file__).resolve().parents[2]
ENV = {
    "PROCESSED_EVENTS_TABLE": "processed-events",
    "ORDER_RECORDS_TABLE": "order-records",
    "TOPIC_ARN": "arn:aws:sns:eu-west-1:123456789012:orders",
    "DEAD_LETTER_QUEUE_URL": "http://127.0.0.1:1/123456789012/orders-dlq",
    "RECORD_TTL_SECONDS": "2592000",
}
#: Invocation time of the single-batch tests: records may start during the first second.
BUDGET_MS = 4000
#: The control's budget: it answers every call, so it needs no tight deadline.
CONTROL_BUDGET_MS = 30_000
#: Lambda's CPU share at 512 MB: 512 / 1,769 of one core, with a 10 ms period.
CPU_SHARE = 0.29
PERIOD_US = 10_000


class RealContext:
    """A Lambda context whose remaining time runs with the monotonic clock."""

    function_name = "order-consumer"
    function_version = "$LATEST"
    memory_limit_in_mb = 512
    invoked_function_arn = "arn:aws:lambda:eu-west-1:123456789012:function:order-consumer"
    aws_request_id = "00000000-0000-0000-0000-000000000001"

    def __init__(self, budget_ms: int) -> None:
        self.deadline = time.monotonic() + budget_ms / 1000

    def get_remaining_time_in_millis(self) -> int:
        return int((self.deadline - time.monotonic()) * 1000)


def standin_clients(url: str) -> Clients:
    session = boto3.session.Session(
        aws_access_key_id="testing", aws_secret_access_key="testing", region_name="eu-west-1"
    )
    return Clients(
        dynamodb=session.client("dynamodb", endpoint_url=url, config=CLIENT_CONFIG),
        sns=session.client("sns", endpoint_url=url, config=CLIENT_CONFIG),
        sqs=session.client("sqs", endpoint_url=url, config=CLIENT_CONFIG),
    )


def records(count: int) -> list[dict[str, Any]]:
    return [
        {
            "messageId": f"m-{i}",
            "receiptHandle": "h",
            "body": json.dumps({"order_id": f"o-{i}", "event_id": f"e-{i}"}),
            "attributes": {"ApproximateReceiveCount": "1"},
            "messageAttributes": {},
            "eventSource": "aws:sqs",
            "eventSourceARN": "arn:aws:sqs:eu-west-1:123456789012:orders",
        }
        for i in range(count)
    ]


def acknowledged_are_notified_and_marked(standin: StandIn, failed: set[str], count: int) -> set[str]:
    """The acknowledged message ids, after checking each one's event was published and marked."""
    acknowledged = {f"m-{i}" for i in range(count)} - failed
    published, marked = set(standin.accepted["publish"]), set(standin.accepted["mark"])
    for message_id in acknowledged:
        event_id = "e-" + message_id.removeprefix("m-")
        assert event_id in published, message_id
        assert event_id in marked, message_id
    return acknowledged


@pytest.mark.slow
@pytest.mark.parametrize("kind", ["record", "publish", "mark"], ids=["transaction", "publish-batch", "sent-mark"])
@pytest.mark.parametrize("behaviour", [HANG, TRICKLE], ids=["never-answers", "trickles"])
def test_a_call_that_never_answers_or_trickles_cannot_make_the_invocation_overrun(kind: str, behaviour: str) -> None:
    with running() as standin:
        # GIVEN a stand-in whose answers to one kind of call never come, or trickle
        standin.behaviour[kind] = behaviour
        handler_module.configure(standin_clients(standin.url), ENV)
        batch = records(10)
        context = RealContext(BUDGET_MS)
        # WHEN the handler processes a batch of 10 new orders
        response = handler_module.handler({"Records": batch}, context)
        left_ms = context.get_remaining_time_in_millis()
        failed = {failure["itemIdentifier"] for failure in response["batchItemFailures"]}
        # THEN it returned before its deadline
        assert left_ms > 0, left_ms
        # AND the stalled call was made, and every record needed it, so none is acknowledged
        assert standin.received[kind] >= 1
        assert failed == {record["messageId"] for record in batch}
        assert acknowledged_are_notified_and_marked(standin, failed, 10) == set()
        # AND nothing after the stalled call was made for the stalled records
        if kind == "record":
            assert standin.received["publish"] == 0
        if kind == "publish":
            assert standin.received["mark"] == 0
        # WHEN the endpoint recovers while the stalled calls still hold their threads, and the
        # next invocation brings a new batch
        standin.behaviour[kind] = ANSWER
        after = RealContext(BUDGET_MS)
        response = handler_module.handler({"Records": records(20)[10:]}, after)
        # THEN that batch is processed completely (on a fresh pool), before its deadline
        assert response == {"batchItemFailures": []}
        assert after.get_remaining_time_in_millis() > 0
    handler_module.configure()


def test_every_call_is_bounded_within_the_time_a_record_is_allowed() -> None:
    # GIVEN the shipped client configuration, WHEN its worst case per call is computed
    # THEN it fits in the time from a record's latest start to the batch's return
    assert runtime.CLIENT_CONFIG.connect_timeout == runtime.CONNECT_TIMEOUT_S
    assert runtime.CLIENT_CONFIG.read_timeout == runtime.READ_TIMEOUT_S
    assert runtime.CLIENT_CONFIG.retries == {"mode": "standard", "total_max_attempts": runtime.MAX_ATTEMPTS}
    assert runtime.CALL_BOUND_S <= runtime.RECORD_ALLOWANCE_S


def test_the_stand_in_answers_so_a_clean_batch_is_acknowledged() -> None:
    # GIVEN the same stand-in answering every call (the control for the test above)
    with running() as standin:
        handler_module.configure(standin_clients(standin.url), ENV)
        # AND time enough for the batch on a loaded machine (the control returns once done, so its budget
        # only keeps a busy moment from turning into a refused record)
        context = RealContext(CONTROL_BUDGET_MS)
        # WHEN a batch of 10 is processed
        response = handler_module.handler({"Records": records(10)}, context)
        # THEN every record is acknowledged, notified and marked, in 3 calls (the ten records in one
        # transaction, the ten marks in one call)
        assert response == {"batchItemFailures": []}
        assert len(acknowledged_are_notified_and_marked(standin, set(), 10)) == 10
        assert standin.received == {"record": 1, "publish": 1, "mark": 1, "park": 0}
    handler_module.configure()


# --- 10,000 records at Lambda's CPU share ------------------------------------------------------------

CHILD = """
import json, sys, time
from idempotent_order_pipeline._lambda_asset.order_consumer import handler as handler_module
from tests.consumer.test_deadline import ENV, RealContext, records, standin_clients
handler_module.configure(standin_clients(sys.argv[1]), ENV)
batch = records(int(sys.argv[2]))
print("ready", flush=True)
sys.stdin.readline()  # the parent caps the CPU, then says go
context = RealContext(int(sys.argv[3]))
started = time.process_time()
response = handler_module.handler({"Records": batch}, context)
left_ms = context.get_remaining_time_in_millis()
failed = [f["itemIdentifier"] for f in response["batchItemFailures"]]
print(json.dumps({"left_ms": left_ms, "failed": failed, "cpu_s": time.process_time() - started}), flush=True)
"""


def _cgroup(pid: int) -> tuple[str, Path, Path] | None:
    """Put ``pid`` in a new CPU-capped cgroup (v2 first, then v1); (how, root, group), or None if not writable."""
    quota = int(CPU_SHARE * PERIOD_US)
    v2 = Path("/sys/fs/cgroup")
    candidates: list[tuple[str, Path, dict[str, str]]] = []
    controllers = v2 / "cgroup.controllers"
    if controllers.exists() and "cpu" in controllers.read_text().split():
        candidates.append(("cgroup v2 cpu.max", v2, {"cpu.max": f"{quota} {PERIOD_US}"}))
    v1 = v2 / "cpu"
    if (v1 / "cpu.cfs_quota_us").exists():
        settings = {"cpu.cfs_period_us": str(PERIOD_US), "cpu.cfs_quota_us": str(quota)}
        candidates.append(("cgroup v1 cpu.cfs_quota_us", v1, settings))
    for how, root, files in candidates:
        group = root / f"test-deadline-{os.getpid()}-{pid}"
        try:
            group.mkdir()
            for file, value in files.items():
                (group / file).write_text(value)
            (group / "cgroup.procs").write_text(str(pid))
        except OSError:
            with suppress(OSError):
                group.rmdir()
            continue
        return how, root, group
    return None


@contextmanager
def cpu_cap(pid: int) -> Iterator[str]:
    """Hold ``pid`` to CPU_SHARE of one core; yields how (a cgroup, else a SIGSTOP/SIGCONT duty cycle)."""
    quota = int(CPU_SHARE * PERIOD_US)
    cgroup = _cgroup(pid)
    if cgroup is not None:
        how, root, group = cgroup
        try:
            yield how
        finally:
            with suppress(OSError):
                (root / "cgroup.procs").write_text(str(pid))  # back to the root (fails once it exited)
            with suppress(OSError):
                group.rmdir()
        return
    # No writable cgroup: stop and continue the child, 2.9 ms running in every 10 ms.
    stop = threading.Event()

    def duty_cycle() -> None:
        running_s, stopped_s = quota / 1e6, (PERIOD_US - quota) / 1e6
        while not stop.is_set():
            os.kill(pid, signal.SIGCONT)
            time.sleep(running_s)
            os.kill(pid, signal.SIGSTOP)
            time.sleep(stopped_s)
        os.kill(pid, signal.SIGCONT)

    thread = threading.Thread(target=duty_cycle, daemon=True)
    thread.start()
    try:
        yield "SIGSTOP/SIGCONT duty cycle"
    finally:
        stop.set()
        thread.join()


@pytest.mark.slow
def test_ten_thousand_records_at_lambdas_cpu_share_end_before_the_deadline() -> None:
    """10,000 records, a child process capped to 29 % of one core.

    The cap is a cgroup v2 ``cpu.max`` when the machine has a writable one, else a cgroup v1 CFS
    quota (this machine's case), else a SIGSTOP/SIGCONT duty cycle of the child (2.9 ms of every
    10 ms); the test's output line names the one used. The stand-in answers each call 5 ms late.
    """
    count, budget_ms = 10_000, 5000
    with running(latency_s=0.005) as standin:
        # GIVEN a child process with the handler wired to the stand-in and 10,000 new orders
        env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT / "infra"), str(ROOT)])}
        child = subprocess.Popen(  # noqa: S603 - this interpreter, this test's own code
            [sys.executable, "-c", CHILD, standin.url, str(count), str(budget_ms)],
            cwd=ROOT,
            env=env,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
        assert child.stdin is not None
        assert child.stdout is not None
        try:
            assert child.stdout.readline().strip() == "ready"
            # WHEN it is held to 29 % of a core and processes the batch with 5 s of invocation time
            with cpu_cap(child.pid) as how:
                child.stdin.write("go\n")
                child.stdin.flush()
                lines = [line for line in child.stdout.read().splitlines() if line.startswith('{"left_ms"')]
            child.wait(timeout=60)
        finally:
            if child.poll() is None:
                child.kill()
        [line] = lines
        outcome = json.loads(line)
        print(f"cap: {how}; {outcome['left_ms']} ms left; {count - len(outcome['failed'])} acknowledged")
        # THEN the handler returned before its deadline
        assert outcome["left_ms"] > 0, (how, outcome["left_ms"])
        # AND every record is either acknowledged (notified and marked) or reported, each once
        failed = set(outcome["failed"])
        assert len(failed) == len(outcome["failed"])
        acknowledged = acknowledged_are_notified_and_marked(standin, failed, count)
        assert len(acknowledged) + len(failed) == count
        # AND work was done: some records went all the way, most were left to SQS
        assert acknowledged
        assert len(failed) > count // 2
