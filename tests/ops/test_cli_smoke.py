"""``order-pipeline smoke`` on moto, in process: a healthy pipeline passes, a broken one fails naming the
checks, and either way nothing of the run is left behind.

The consumer runs when the smoke run waits: the test replaces the run's ``pause`` with a step of the
consumer (``OpsWorld.consume``, the handler over what the queue holds) and its ``clock`` with a fake
one that moves by the pauses asked for, so the timeout is checked without waiting for it. The run
against the stand-in, with the deployed function, is ``tests/sandbox/test_smoke_e2e.py``; Ctrl-C in
a process of its own, ``test_cli_smoke_processes.py``.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from decimal import Decimal
from pathlib import Path
from typing import Any

import boto3
import pytest
from click.testing import CliRunner, Result

from idempotent_order_pipeline.cli import cli
from idempotent_order_pipeline.cli import smoke as smoke_module
from idempotent_order_pipeline.cli.aws import AwsClients
from idempotent_order_pipeline.cli.inbox import QUEUE_NAME_PREFIX, Inbox, without_canaries
from tests.consumer.harness import ArmedFault, client_error
from tests.ops.conftest import MAX_RECEIVE_COUNT, STACK, OpsWorld

RUN_ID = re.compile(r"smoke run (\d{14}-[0-9a-f]{6})")
#: Another smoke run's copy and a real order's, both parked before the run: a run removes neither.
OTHER_RUNS_COPY = {"order_id": "smoke-20200101000000-aaaaaa-1", "event_id": "smoke-20200101000000-aaaaaa-1"}
REAL_PARKED = {"order_id": "real-parked-1"}


class FakeTime:
    """The run's clock and pause: each pause moves the clock and lets ``step`` (the consumer) run."""

    def __init__(self, step: Callable[[], Any] = lambda: None) -> None:
        self.now = 1000.0
        self.pauses: list[float] = []
        self.step = step

    def clock(self) -> float:
        return self.now

    def pause(self, seconds: float) -> None:
        self.pauses.append(seconds)
        self.now += seconds
        self.step()


@pytest.fixture
def fake_time(monkeypatch: pytest.MonkeyPatch) -> FakeTime:
    time = FakeTime()
    monkeypatch.setattr(smoke_module, "clock", time.clock)
    monkeypatch.setattr(smoke_module, "pause", time.pause)
    return time


def _lines(result: Result) -> list[str]:
    """What the command wrote to stdout, without the consumer's log and metric lines (it runs in this process)."""
    return [line for line in result.stdout.splitlines() if not line.startswith(('{"level":', '{"_aws":'))]


def _smoke_queues(world: OpsWorld) -> list[str]:
    return [url for url in world.sqs.list_queues().get("QueueUrls", []) if QUEUE_NAME_PREFIX in url]


def _subscriptions(world: OpsWorld) -> list[str]:
    return sorted(
        s["Endpoint"] for s in world.sns.list_subscriptions_by_topic(TopicArn=world.topic_arn)["Subscriptions"]
    )


def _smoke_items(world: OpsWorld) -> list[str]:
    """Every key of either table that a smoke run wrote (any run)."""
    return sorted(
        [key for key in world.event_records() if key.startswith("smoke-")]
        + [key for key in world.order_rows() if key.startswith("smoke-")]
    )


def _dlq_bodies(world: OpsWorld) -> list[dict[str, Any]]:
    """The DLQ's bodies, left in the queue and visible again at once."""
    messages = world.receive_all(world.dlq_url, delete=False)
    for message in messages:
        world.sqs.change_message_visibility(
            QueueUrl=world.dlq_url, ReceiptHandle=message["ReceiptHandle"], VisibilityTimeout=0
        )
    return sorted((json.loads(message["Body"]) for message in messages), key=lambda body: body["order_id"])


def _seed_the_dlq(world: OpsWorld) -> None:
    world.dead_letter(OTHER_RUNS_COPY)
    world.dead_letter(REAL_PARKED)


def _subscribe_filtering_canaries_out(world: OpsWorld) -> str:
    """A real subscriber's queue with the documented filter policy that leaves canaries out."""
    suffix = ".fifo" if world.fifo else ""
    url = world.sqs.create_queue(
        QueueName=f"fulfilment{suffix}", Attributes={"FifoQueue": "true"} if world.fifo else {}
    )["QueueUrl"]
    world.sns.subscribe(
        TopicArn=world.topic_arn,
        Protocol="sqs",
        Endpoint=world.queue_arn(url),
        Attributes={"RawMessageDelivery": "true", "FilterPolicy": json.dumps(without_canaries())},
    )
    return url


@pytest.mark.parametrize("fifo", [False, True], ids=["standard", "fifo"])
def test_a_healthy_pipeline_passes_every_check_and_nothing_is_left(
    make_ops_world: Callable[..., OpsWorld], monkeypatch: pytest.MonkeyPatch, fifo: bool
) -> None:
    # GIVEN a pipeline whose consumer runs whenever the smoke run waits, a DLQ holding a real
    # parked order and another run's copy, and a real subscriber that filters canaries out
    world = make_ops_world(fifo=fifo)
    time = FakeTime(step=world.consume)
    monkeypatch.setattr(smoke_module, "clock", time.clock)
    monkeypatch.setattr(smoke_module, "pause", time.pause)
    _seed_the_dlq(world)
    filtered = _subscribe_filtering_canaries_out(world)
    subscriptions_before = _subscriptions(world)

    # WHEN the smoke run checks it, with a JSON report
    result = world.run("smoke", "--json")

    # THEN every check passed, and it says so in one JSON object
    assert result.exit_code == 0, result.output
    [line] = _lines(result)
    report = json.loads(line)
    assert report["passed"] is True
    assert {name: check["status"] for name, check in report["checks"].items()} == dict.fromkeys(
        smoke_module.CHECKS, "pass"
    )
    assert (report["failed"], report["skipped"], report["left_in_queue"]) == ([], [], [])
    assert report["fifo"] is fifo
    run_id = report["run_id"]
    assert report["canaries"] == [f"smoke-{run_id}-{n}" for n in (1, 2, 3)]
    assert report["checks"]["invalid_parked"]["detail"].startswith(f"smoke-{run_id}-invalid parked as INVALID_MESSAGE")
    # AND the canaries really went through: three notifications reached the harness's subscriber
    # (no filter), one per canary, none for the re-send
    notified = world.notified_events()
    assert {event_id: n for event_id, n in notified.items() if event_id.startswith("smoke-")} == {
        f"smoke-{run_id}-{n}": 1 for n in (1, 2, 3)
    }
    # AND the subscriber with the documented filter policy got none of them
    assert world.receive_all(filtered) == []
    # AND nothing of the run is left: no row, no record, no temporary queue or subscription
    assert _smoke_items(world) == []
    assert _smoke_queues(world) == []
    assert _subscriptions(world) == subscriptions_before
    # AND of the DLQ only its own copy went: the real parked order and the other run's copy stay
    assert _dlq_bodies(world) == [REAL_PARKED, OTHER_RUNS_COPY]
    assert report["removed"] == {"state_records": 3, "order_rows": 3, "dead_letters": 1}
    assert "1 DLQ copy (1 INVALID_MESSAGE)" in report["checks"]["cleanup"]["detail"]


def test_the_table_names_every_check_and_the_run(ops: OpsWorld, monkeypatch: pytest.MonkeyPatch) -> None:
    # GIVEN a healthy pipeline
    time = FakeTime(step=ops.consume)
    monkeypatch.setattr(smoke_module, "clock", time.clock)
    monkeypatch.setattr(smoke_module, "pause", time.pause)
    # WHEN the smoke run prints its table
    result = ops.run("smoke", "--canaries", "2")
    # THEN a header line names the run, the table has one passed row per check, stderr the verdict
    assert result.exit_code == 0, result.output
    lines = _lines(result)
    assert RUN_ID.match(lines[0])
    assert "2 canaries, timeout 60s" in lines[0]
    assert lines[1].split() == ["CHECK", "RESULT", "DETAIL"]
    assert [line.split()[:2] for line in lines[2:]] == [[name, "pass"] for name in smoke_module.CHECKS]
    assert re.search(r"smoke passed: 6 of 6 checks, run \d{14}-[0-9a-f]{6}", result.stderr)


def test_no_consumer_fails_naming_the_checks_within_the_timeout_and_cleans_up(
    ops: OpsWorld, fake_time: FakeTime
) -> None:
    # GIVEN a pipeline whose consumer never runs (a function that cannot import records nothing)
    _seed_the_dlq(ops)
    subscriptions_before = _subscriptions(ops)
    # WHEN the smoke run checks it with a 5-second timeout
    result = ops.run("smoke", "--timeout", "5s")
    # THEN it fails, naming the failed checks and those not run
    assert result.exit_code == 1
    assert "smoke failed: recorded, sent, notified, cleanup (not run: resend_ignored, invalid_parked)" in result.stderr
    rows = {line.split()[0]: line for line in _lines(result)[2:]}
    assert rows["recorded"].split()[1] == "fail"
    assert (
        "no canary was recorded within 5s: the consumer did not record anything (function order-consumer has no "
        "event source mapping on the queue); check its logs (" in rows["recorded"]
    )
    assert "aws logs tail /aws/lambda/order-consumer --since 10m" in rows["recorded"]
    # AND it waited, and never past the timeout: the pauses it asked for add up to 5 s at most
    assert fake_time.pauses
    assert sum(fake_time.pauses) <= 5
    # AND it removed its queue and subscription and says which canaries may still be in the queue
    assert _smoke_queues(ops) == []
    assert _subscriptions(ops) == subscriptions_before
    run_id = RUN_ID.match(result.stdout).group(1)  # type: ignore[union-attr]
    assert f"3 message(s) the consumer did not take may still be in the queue (smoke-{run_id}-1" in rows["cleanup"]
    assert f"`order-pipeline smoke --clean-up {run_id}`" in rows["cleanup"]
    assert _dlq_bodies(ops) == [REAL_PARKED, OTHER_RUNS_COPY]

    # WHEN the consumer comes back and records them, and the clean-up of that run runs
    assert ops.consume() == 3
    assert len(_smoke_items(ops)) == 6
    cleaned = ops.run("smoke", "--clean-up", run_id)
    # THEN its rows and records are gone (and nothing else was touched)
    assert cleaned.exit_code == 0, cleaned.output
    assert "removed 3 order row(s), 3 state record(s), 0 DLQ copies" in cleaned.stdout
    assert _smoke_items(ops) == []
    assert _dlq_bodies(ops) == [REAL_PARKED, OTHER_RUNS_COPY]


def test_a_consumer_that_fails_every_message_fails_the_run_and_its_dlq_copies_go(
    ops: OpsWorld, fake_time: FakeTime
) -> None:
    # GIVEN a consumer whose every write fails (the records are retried, then SQS dead-letters them)
    ops.board.arm(
        ArmedFault(client_error("TransactWriteItems", "InternalServerError"), operation="transact_write_items")
    )

    def failing_delivery() -> None:
        records = ops.lambda_records(delete=False)
        if records:
            ops.invoke(records)
        for record in records:  # their visibility timeout runs out: visible again
            ops.sqs.change_message_visibility(
                QueueUrl=ops.queue_url, ReceiptHandle=record["receiptHandle"], VisibilityTimeout=0
            )

    fake_time.step = failing_delivery
    _seed_the_dlq(ops)
    # WHEN the smoke run checks it
    result = ops.run("smoke", "--timeout", f"{MAX_RECEIVE_COUNT + 3}s", "--json")
    # THEN it fails on the canaries, and its clean-up removed their DLQ copies and only those
    assert result.exit_code == 1
    [report] = [json.loads(line) for line in _lines(result)]
    assert report["failed"] == ["recorded", "sent", "notified"]
    assert report["checks"]["cleanup"]["status"] == "pass"
    assert report["removed"]["dead_letters"] == 3
    assert "3 DLQ copies (3 MAX_RECEIVES)" in report["checks"]["cleanup"]["detail"]
    assert report["checks"]["recorded"]["detail"].endswith(
        "; 3 canaries reached the DLQ after max_receive_count receives: every delivery of them failed"
    )
    assert report["left_in_queue"] == []
    assert _dlq_bodies(ops) == [REAL_PARKED, OTHER_RUNS_COPY]
    assert _smoke_items(ops) == []


def test_a_canary_the_pipeline_would_refuse_stops_the_run_before_anything_is_made(ops: OpsWorld) -> None:
    # GIVEN a canary template with a field the consumer reserves
    # WHEN the smoke run is asked to send it
    result = ops.run("smoke", "--order", '{"payload_sha256": "x"}')
    # THEN it stops with the reason and what to do, having made and sent nothing
    assert result.exit_code == 1
    assert "the canary order is refused before sending (INVALID_MESSAGE:" in result.stderr
    assert "pass --order with an order the pipeline accepts" in result.stderr
    assert _smoke_queues(ops) == []
    assert ops.receive_all(ops.queue_url, delete=False) == []


def test_the_order_template_comes_from_a_file_and_canaries_carry_its_fields(
    ops: OpsWorld, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    # GIVEN a template file, and a healthy pipeline whose rows are read while the run waits
    template = tmp_path / "canary.json"
    template.write_text('{"country": "ZZ", "amount": 0.10}')
    rows: dict[str, dict[str, Any]] = {}

    def consume_and_read() -> None:
        ops.consume()
        rows.update(ops.order_rows())

    time = FakeTime(step=consume_and_read)
    monkeypatch.setattr(smoke_module, "clock", time.clock)
    monkeypatch.setattr(smoke_module, "pause", time.pause)
    # WHEN the smoke run sends canaries built from it
    result = ops.run("smoke", "--order", f"@{template}", "--canaries", "1")
    # THEN it passes, and the canary was recorded with the template's fields (numbers exact) and its own ids
    assert result.exit_code == 0, result.output
    [(order_id, row)] = [(key, row) for key, row in rows.items() if key.startswith("smoke-")]
    assert (row["country"], row["amount"], row["event_id"]) == ("ZZ", Decimal("0.1"), order_id)


def test_ctrl_c_while_waiting_removes_what_the_run_made(ops: OpsWorld, fake_time: FakeTime) -> None:
    # GIVEN a run interrupted (Ctrl-C) at its second wait, the consumer never having run
    def interrupt() -> None:
        if len(fake_time.pauses) == 2:
            raise KeyboardInterrupt

    fake_time.step = interrupt
    subscriptions_before = _subscriptions(ops)
    # WHEN the smoke run is interrupted
    result = ops.run("smoke")
    # THEN it exits with 130 after removing its queue and subscription
    assert result.exit_code == smoke_module.EXIT_INTERRUPTED
    assert "interrupted; removed 0 order row(s), 0 state record(s), 0 DLQ copies" in result.stderr
    assert _smoke_queues(ops) == []
    assert _subscriptions(ops) == subscriptions_before


@pytest.mark.parametrize("fifo", [False, True], ids=["standard", "fifo"])
def test_clean_up_finds_the_queue_and_subscription_of_a_run_killed_outright(
    make_ops_world: Callable[..., OpsWorld], fifo: bool
) -> None:
    # GIVEN what a run killed with SIGKILL leaves: its queue, subscribed, and a canary's record and row
    world = make_ops_world(fifo=fifo)
    before = _subscriptions(world)
    run_id = "20261130091500-3fa9c1"
    Inbox(world.sqs, world.sns, world.topic_arn, run_id).open()
    world.sqs.send_message(
        QueueUrl=world.queue_url,
        MessageBody=json.dumps({"order_id": f"smoke-{run_id}-2", "event_id": f"smoke-{run_id}-2"}),
        **({"MessageGroupId": "g", "MessageDeduplicationId": "d"} if fifo else {}),  # type: ignore[arg-type]
    )
    world.consume()
    assert len(_smoke_queues(world)) == 1
    assert len(_subscriptions(world)) == len(before) + 1
    assert len(_smoke_items(world)) == 2
    # WHEN its clean-up runs, knowing only the run id
    result = world.run("smoke", "--clean-up", run_id, "--json")
    # THEN the queue, the subscription, the record and the row are gone
    assert result.exit_code == 0, result.output
    [report] = [json.loads(line) for line in _lines(result)]
    assert report["cleanup"]["status"] == "pass"
    assert _smoke_queues(world) == []
    assert _subscriptions(world) == before
    assert _smoke_items(world) == []


def test_clean_up_refuses_what_is_not_a_run_id(ops: OpsWorld) -> None:
    # WHEN the clean-up is given a prefix that would match every run
    result = ops.run("smoke", "--clean-up", "")
    # THEN it is a usage error and nothing is deleted
    assert result.exit_code == 2
    assert "is not a run id (such as 20261130091500-3fa9c1)" in result.output


# --- the documented permissions ------------------------------------------------------------------------

REPO = Path(__file__).resolve().parents[2]
#: API operations whose IAM action has another name (a batch call needs its single call's permission).
IAM_ACTION_OF = {
    "SendMessageBatch": "SendMessage",
    "DeleteMessageBatch": "DeleteMessage",
    "ChangeMessageVisibilityBatch": "ChangeMessageVisibility",
}
#: Actions the policy grants that no call names: the key's, which SQS and DynamoDB use on the caller's behalf.
IMPLIED = frozenset({"kms:GenerateDataKey", "kms:Decrypt"})


def documented_policy() -> dict[str, Any]:
    """The policy document of docs/operations.md's section "Permissions `smoke` needs"."""
    text = (REPO / "docs" / "operations.md").read_text(encoding="utf-8")
    section = text.split("### Permissions `smoke` needs", 1)[1]
    policy: dict[str, Any] = json.loads(section.split("```json\n", 1)[1].split("```", 1)[0])
    return policy


def _allowed_actions(policy: dict[str, Any]) -> set[str]:
    actions: set[str] = set()
    for statement in policy["Statement"]:
        assert statement["Effect"] == "Allow"
        named = statement["Action"]
        actions.update([named] if isinstance(named, str) else named)
    return actions


def test_every_call_a_run_and_a_clean_up_make_is_in_the_documented_policy_and_no_action_is_unused(
    ops: OpsWorld, fake_time: FakeTime
) -> None:
    # GIVEN the CLI's clients, each call recorded as the IAM action it needs, and a DLQ with others' messages
    _seed_the_dlq(ops)
    called: set[str] = set()

    def record(model: Any, **kwargs: Any) -> None:
        called.add(f"{model.service_model.signing_name}:{IAM_ACTION_OF.get(model.name, model.name)}")

    clients = {}
    for service in ("cloudformation", "lambda", "sqs", "sns", "dynamodb"):
        clients[service] = boto3.client(service)
        clients[service].meta.events.register("before-call", record)

    def smoke(*args: str) -> Result:
        return CliRunner().invoke(cli, ["--stack", STACK, "smoke", *args], obj=AwsClients(overrides=clients))

    # WHEN a run finds no consumer (its diagnosis), a healthy run passes, and a clean-up runs
    assert smoke("--timeout", "2s").exit_code == 1
    fake_time.step = ops.consume
    healthy = smoke("--json")
    assert healthy.exit_code == 0, healthy.output
    [report] = [json.loads(line) for line in _lines(healthy)]
    assert smoke("--clean-up", report["run_id"]).exit_code == 0
    # THEN every action called is granted by the documented policy, and every action it grants was called
    allowed = _allowed_actions(documented_policy())
    assert called  # the recording works
    assert called - allowed == set()
    assert allowed - IMPLIED - called == set()
