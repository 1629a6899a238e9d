"""FIFO queues: message groups a sweep cannot read past, and resends SQS would deduplicate.

SQS hands out no more of a FIFO message group while some of its messages are in flight, and a
released message comes back first: no receive reaches a group's 11th message until its first ten
are deleted. moto (``moto/sqs/models.py``, ``receive_message``) blocks a group whose messages are
pending as SQS does, but lets the group's later messages through once the held ones are released;
so these tests hold what they read, as the CLI does, and never count on that difference.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from idempotent_order_pipeline.keys import derive_event_id
from tests.ops.conftest import OpsWorld
from tests.ops.test_cli_pending import record_pending

#: More dead letters than one receive returns, all in one message group (OpsWorld.dead_letter's "g").
IN_ONE_GROUP = 12


def _depth(ops: OpsWorld) -> int:
    """Messages in the DLQ, visible or not (counted by SQS: a receive could not reach past ten of a group)."""
    attributes = ops.sqs.get_queue_attributes(
        QueueUrl=ops.dlq_url, AttributeNames=["ApproximateNumberOfMessages", "ApproximateNumberOfMessagesNotVisible"]
    )["Attributes"]
    return int(attributes["ApproximateNumberOfMessages"]) + int(attributes["ApproximateNumberOfMessagesNotVisible"])


def _fill_one_group(ops: OpsWorld) -> None:
    for i in range(IN_ONE_GROUP):
        ops.dead_letter({"order_id": f"o-{i:02d}"})
    assert _depth(ops) == IN_ONE_GROUP


def test_list_says_what_a_fifo_group_holds_back(make_ops_world: Callable[..., OpsWorld]) -> None:
    # GIVEN 12 dead letters in one FIFO message group
    ops = make_ops_world(fifo=True)
    _fill_one_group(ops)
    # WHEN they are listed
    result = ops.run("dlq", "list", "--json", "--wait-seconds", "0")
    # THEN the first ten are shown, and the summary says two more are held back, why, and what reaches them
    assert result.exit_code == 0, result.output
    assert [json.loads(line)["order_id"] for line in result.stdout.splitlines()] == [f"o-{i:02d}" for i in range(10)]
    assert "10 shown of 10 read (~12 in the queue)" in result.stderr
    assert "~2 more not reached: a FIFO queue hands out no more of a message group while its first" in result.stderr
    assert "(redrive or drop those first)" in result.stderr


def test_drop_all_reaches_past_ten_in_a_group(make_ops_world: Callable[..., OpsWorld]) -> None:
    # GIVEN 12 dead letters in one FIFO message group
    ops = make_ops_world(fifo=True)
    _fill_one_group(ops)
    # WHEN all are dropped
    result = ops.run("dlq", "drop", "--all", "--yes", "--json", "--wait-seconds", "0")
    # THEN all twelve are gone: deleting the first ten let SQS hand out the rest
    assert result.exit_code == 0, result.output
    assert len(result.stdout.splitlines()) == IN_ONE_GROUP
    assert _depth(ops) == 0


def test_drop_behind_unselected_messages_says_it_could_not_reach_them(
    make_ops_world: Callable[..., OpsWorld],
) -> None:
    # GIVEN 12 dead letters in one FIFO message group
    ops = make_ops_world(fifo=True)
    _fill_one_group(ops)
    # WHEN the twelfth is selected for dropping (behind ten that are not)
    result = ops.run("dlq", "drop", "--order-id", "o-11", "--yes", "--wait-seconds", "0")
    # THEN the command fails, saying messages were not reached and why, instead of "dropped 0" and success
    assert result.exit_code == 1, result.output
    assert "dropped 0 message(s) from the DLQ; ~2 more not reached: a FIFO queue" in result.stderr
    assert "~2 message(s) not reached (FIFO groups held back; see above)" in result.stderr
    # AND all twelve are still there, none left hidden
    assert _depth(ops) == IN_ONE_GROUP
    assert (
        ops.sqs.get_queue_attributes(QueueUrl=ops.dlq_url, AttributeNames=["ApproximateNumberOfMessagesNotVisible"])[
            "Attributes"
        ]["ApproximateNumberOfMessagesNotVisible"]
        == "0"
    )


def test_redrive_moves_every_message_of_a_long_group(make_ops_world: Callable[..., OpsWorld]) -> None:
    # GIVEN 12 dead letters in one FIFO message group
    ops = make_ops_world(fifo=True)
    _fill_one_group(ops)
    # WHEN redriven
    result = ops.run("redrive", "--yes", "--json", "--wait-seconds", "0")
    # THEN all twelve moved, in their order, and nothing is held back
    assert result.exit_code == 0, result.output
    [report] = [json.loads(line) for line in result.stdout.splitlines()]
    assert (report["moved"], report["held_back"]) == (IN_ONE_GROUP, 0)
    moved = [json.loads(m["Body"])["order_id"] for m in ops.receive_all(ops.queue_url)]  # deleting reaches them all
    assert moved == [f"o-{i:02d}" for i in range(IN_ONE_GROUP)]
    assert _depth(ops) == 0


def test_a_resend_is_not_deduplicated_by_sqs(make_ops_world: Callable[..., OpsWorld]) -> None:
    # GIVEN a FIFO pipeline with two old pending records whose messages are gone
    ops = make_ops_world(fifo=True)
    record_pending(ops, {"o-old": 3600, "o-older": 7200, "o-new": 60})
    # WHEN they are resent twice within SQS's five-minute deduplication window
    first = ops.run("pending", "--resend", "--yes", "--json")
    second = ops.run("pending", "--resend", "--yes", "--json")
    # THEN every resend the CLI reports is in the queue: SQS dropped none as a duplicate
    reported: list[dict[str, Any]] = [json.loads(line) for r in (first, second) for line in r.stdout.splitlines()]
    assert [r["resent"] for r in reported] == [True] * 4
    queued = ops.receive_all(ops.queue_url, delete=False)
    assert sorted(m["MessageId"] for m in queued) == sorted(r["message_id"] for r in reported)
    # AND each copy keeps its order's message group
    assert {m["Attributes"]["MessageGroupId"] for m in queued} == {"o-old", "o-older"}
    for message in queued:  # released for the consumer
        ops.sqs.change_message_visibility(
            QueueUrl=ops.queue_url, ReceiptHandle=message["ReceiptHandle"], VisibilityTimeout=0
        )
    # AND once consumed, each event is published once and marked sent
    ops.consume()
    old, older = (derive_event_id({"order_id": o}) for o in ("o-old", "o-older"))
    records = ops.event_records()
    assert (records[old]["status"], records[older]["status"]) == ("sent", "sent")
    assert ops.notified_events() == {old: 1, older: 1}
