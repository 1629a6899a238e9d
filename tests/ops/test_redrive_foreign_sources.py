"""``redrive`` never feeds the orders queue with messages another queue dead-lettered into the DLQ.

The DLQ has no redrive-allow policy (docs/security.md), so any queue of the account may name it as
its dead-letter queue. SQS marks each message a redrive policy moves with the system attribute
``DeadLetterQueueSourceArn`` (the source queue's ARN). moto does not set it, so
:func:`emulate_dead_letter_source_arn` adds it at the client, in ReceiveMessage's documented shape
(``Attributes.DeadLetterQueueSourceArn``), to the messages each test moved there through a redrive policy.
"""

from __future__ import annotations

import json
from typing import Any

from idempotent_order_pipeline._lambda_asset.order_consumer.contract.parked import MOVED_BY_SQS_ATTRIBUTE
from tests.ops.conftest import MAX_RECEIVE_COUNT, OpsWorld
from tests.ops.test_cli_redrive import MoveTaskSqs

FOREIGN_ORDER = {"order_id": "another-apps-job", "amount": 1}
TRACE = {"trace": {"DataType": "String", "StringValue": "another-app"}}


def emulate_dead_letter_source_arn(sqs: Any, dlq_url: str, sources: dict[str, str]) -> None:
    """Add ``DeadLetterQueueSourceArn`` to the DLQ's messages listed in ``sources`` (message id -> source
    queue ARN) when a ReceiveMessage on the DLQ asks for system attributes, as SQS does."""

    def remember(params: dict[str, Any], context: dict[str, Any], **_: Any) -> None:
        context["queue_url"] = params.get("QueueUrl")
        context["system_attributes"] = params.get("MessageSystemAttributeNames", [])

    def add(parsed: dict[str, Any], context: dict[str, Any], **_: Any) -> None:
        wanted = {"All", MOVED_BY_SQS_ATTRIBUTE} & set(context.get("system_attributes", []))
        if context.get("queue_url") != dlq_url or not wanted:
            return
        for message in parsed.get("Messages", []):
            if message["MessageId"] in sources:
                message.setdefault("Attributes", {})[MOVED_BY_SQS_ATTRIBUTE] = sources[message["MessageId"]]

    sqs.meta.events.register("before-parameter-build.sqs.ReceiveMessage", remember)
    sqs.meta.events.register("after-call.sqs.ReceiveMessage", add)


def dead_letter_through(ops: OpsWorld, queue_url: str, body: dict[str, Any], receives: int) -> str:
    """Send ``body`` to ``queue_url`` and receive it until its redrive policy moves it to the DLQ; its id."""
    message_id = str(
        ops.sqs.send_message(QueueUrl=queue_url, MessageBody=json.dumps(body), MessageAttributes=TRACE)["MessageId"]
    )
    for _ in range(receives):
        assert ops.sqs.receive_message(QueueUrl=queue_url, VisibilityTimeout=0).get("Messages")
    assert ops.sqs.receive_message(QueueUrl=queue_url).get("Messages") is None  # moved on this receive
    return message_id


def another_queue_using_the_dlq(ops: OpsWorld) -> tuple[str, str]:
    """A queue of the account whose redrive policy names the pipeline's DLQ: its URL and ARN."""
    policy = {"deadLetterTargetArn": ops.queue_arn(ops.dlq_url), "maxReceiveCount": 1}
    url = ops.sqs.create_queue(QueueName="another-app", Attributes={"RedrivePolicy": json.dumps(policy)})["QueueUrl"]
    return url, ops.queue_arn(url)


def world_with_a_foreign_dead_letter(ops: OpsWorld) -> tuple[str, str, str]:
    """The DLQ holding a message the orders queue dead-lettered and one another queue did: both ids, the other's ARN."""
    other_url, other_arn = another_queue_using_the_dlq(ops)
    ours = dead_letter_through(ops, ops.queue_url, {"order_id": "o-1", "amount": 2}, MAX_RECEIVE_COUNT)
    foreign = dead_letter_through(ops, other_url, FOREIGN_ORDER, 1)
    emulate_dead_letter_source_arn(ops.sqs, ops.dlq_url, {ours: ops.queue_arn(ops.queue_url), foreign: other_arn})
    return ours, foreign, other_arn


def test_the_loop_leaves_what_another_queue_dead_lettered_in_the_dlq_and_reports_it(ops: OpsWorld) -> None:
    # GIVEN the DLQ with a message the orders queue dead-lettered and one another queue of the account did
    _, foreign, other_arn = world_with_a_foreign_dead_letter(ops)
    # WHEN the DLQ is redriven (the loop), with --json
    result = ops.run("redrive", "--yes", "--method", "loop", "--wait-seconds", "0", "--json", sqs=ops.sqs)
    # THEN only the pipeline's own message went to the orders queue
    assert result.exit_code == 0, result.output
    report = json.loads(result.stdout)
    assert report["moved"] == 1
    assert [json.loads(m["Body"])["order_id"] for m in ops.receive_all(ops.queue_url)] == ["o-1"]
    # AND the other queue's message is reported, with its source, on stdout's JSON and on stderr
    assert report["from_other_queues"] == [{"message_id": foreign, "source_queue_arn": other_arn}]
    assert report["complete"] is True
    assert f"{foreign}: stays in the DLQ: dead-lettered by {other_arn}, not the pipeline's queue" in result.stderr
    # AND it is still in the DLQ, visible, as it came: same id, body and attributes
    [left] = ops.receive_all(ops.dlq_url)
    assert (left["MessageId"], json.loads(left["Body"]), left["MessageAttributes"]) == (foreign, FOREIGN_ORDER, TRACE)


def test_the_summary_line_and_the_dry_run_say_it_too(ops: OpsWorld) -> None:
    # GIVEN the same DLQ
    _, foreign, other_arn = world_with_a_foreign_dead_letter(ops)
    # WHEN a dry run looks, as text and as JSON
    text = ops.run("redrive", "--dry-run", "--wait-seconds", "0", sqs=ops.sqs)
    as_json = ops.run("redrive", "--dry-run", "--wait-seconds", "0", "--json", sqs=ops.sqs)
    # THEN it would move the pipeline's message alone, and names the other one
    assert text.exit_code == 0, text.output
    assert "would move 1 message(s)" in text.stdout
    assert "left 1 that another queue dead-lettered (never sent to this pipeline)" in text.stdout
    assert as_json.exit_code == 0, as_json.output
    dry = json.loads(as_json.stdout)
    assert (dry["would_move"], dry["skipped"]) == (1, 0)
    assert dry["from_other_queues"] == [{"message_id": foreign, "source_queue_arn": other_arn}]
    # AND the real run's summary line says what it left
    result = ops.run("redrive", "--yes", "--method", "loop", "--wait-seconds", "0", sqs=ops.sqs)
    assert "moved 1 message(s)" in result.stdout
    assert "left 1 that another queue dead-lettered" in result.stdout
    assert ops.visible_count(ops.dlq_url) == 1


def test_no_move_task_while_another_queue_uses_the_dlq(ops: OpsWorld) -> None:
    # GIVEN an endpoint with move tasks, and another queue whose redrive policy names the DLQ
    _, foreign, _ = world_with_a_foreign_dead_letter(ops)
    sqs = MoveTaskSqs(ops.sqs)
    # WHEN a move task is demanded
    demanded = ops.run("redrive", "--yes", "--method", "move-task", sqs=sqs)
    # THEN the command fails, says why and what to use, and moves nothing
    assert demanded.exit_code == 1
    assert "a move task moves every message of the DLQ" in demanded.stderr
    assert "another-app" in demanded.stderr
    assert "--method loop" in demanded.stderr
    assert sqs.started == []
    assert ops.visible_count(ops.dlq_url) == 2
    # WHEN the default method runs
    result = ops.run("redrive", "--yes", "--wait-seconds", "0", "--json", sqs=sqs)
    # THEN it takes the loop (no task), which leaves the other queue's message in the DLQ
    assert result.exit_code == 0, result.output
    assert sqs.started == []
    assert "use the DLQ as their dead-letter queue" in result.stderr
    report = json.loads(result.stdout)
    assert (report["method"], report["moved"]) == ("loop", 1)
    assert [m["MessageId"] for m in ops.receive_all(ops.dlq_url)] == [foreign]


def test_a_move_task_still_runs_when_only_the_orders_queue_uses_the_dlq(ops: OpsWorld) -> None:
    # GIVEN an endpoint with move tasks and a DLQ that only the orders queue names
    ours = dead_letter_through(ops, ops.queue_url, {"order_id": "o-1", "amount": 2}, MAX_RECEIVE_COUNT)
    emulate_dead_letter_source_arn(ops.sqs, ops.dlq_url, {ours: ops.queue_arn(ops.queue_url)})
    sqs = MoveTaskSqs(ops.sqs)
    # WHEN the DLQ is redriven
    result = ops.run("redrive", "--yes", sqs=sqs)
    # THEN a move task moved it, as before
    assert result.exit_code == 0, result.output
    assert len(sqs.started) == 1
    assert "redrive (move-task): moved 1 message(s)" in result.stdout
