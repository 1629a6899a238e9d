"""``order-pipeline redrive``: the DLQ back to the queue, nothing lost, nothing recorded twice."""

from __future__ import annotations

import json
import time
from collections.abc import Mapping
from typing import Any

import pytest
from moto.sqs import models as moto_sqs_models

from idempotent_order_pipeline._lambda_asset.order_consumer.contract.batching import message_bytes
from idempotent_order_pipeline._lambda_asset.order_consumer.contract.parked import PARKED_ATTRIBUTE, REASON_ATTRIBUTES
from idempotent_order_pipeline.cli import dead_letters
from idempotent_order_pipeline.cli.dead_letters import RedriveReport, wait_for_move_task
from idempotent_order_pipeline.keys import derive_event_id
from idempotent_order_pipeline.producer import OrderPublisher
from tests.consumer.harness import ArmedFault, FaultBoard, GuardedClient, client_error
from tests.ops.conftest import FakeSleep, OpsWorld, PartialBatchSqs

ORDERS = [{"order_id": f"o-{i}", "amount": i + 0.5} for i in range(3)]


def test_redrive_of_pending_records_publishes_them_once_without_writing_rows_again(ops: OpsWorld) -> None:
    # GIVEN orders recorded while SNS was down: their records stay pending, every delivery fails,
    # and after maxReceiveCount receives SQS moves the messages to the DLQ
    OrderPublisher(ops.queue_url, client=ops.sqs).send_batch(ORDERS)
    ops.board.arm(ArmedFault(client_error("PublishBatch", "InternalError"), operation="publish_batch"))
    ops.fail_until_dead_lettered()
    event_ids = {derive_event_id(order) for order in ORDERS}
    assert {e: r["status"] for e, r in ops.event_records().items()} == dict.fromkeys(event_ids, "pending")
    rows_before = ops.order_rows()
    assert ops.visible_count(ops.dlq_url) == 3
    # WHEN SNS is back and the DLQ is redriven (moto lacks StartMessageMoveTask: the loop runs)
    ops.board.disarm()
    result = ops.run("redrive", "--yes", "--wait-seconds", "0")
    # THEN all three went back to the queue and the DLQ is empty
    assert result.exit_code == 0, result.output
    assert "StartMessageMoveTask is not available here" in result.stderr
    assert "redrive (loop): moved 3 message(s)" in result.stdout
    assert "[3 MAX_RECEIVES]" in result.stdout
    assert ops.visible_count(ops.dlq_url) == 0
    # AND once consumed, each event is published and marked sent
    assert ops.consume() == 3
    assert {e: r["status"] for e, r in ops.event_records().items()} == dict.fromkeys(event_ids, "sent")
    assert ops.notified_events() == dict.fromkeys(event_ids, 1)
    # AND no row was written again or duplicated
    assert ops.order_rows() == rows_before
    assert ops.dead_letters() == []


def test_the_loop_returns_parked_messages_as_the_producer_sent_them(ops: OpsWorld) -> None:
    # GIVEN a message with 8 attributes (idempotency_key among them) that the consumer parked: the
    # originals do not fit beside the 3 reason attributes, so they were packed into one
    attributes = {f"trace{i}": {"DataType": "String", "StringValue": f"t{i}"} for i in range(7)}
    attributes["idempotency_key"] = {"DataType": "String", "StringValue": "evt-x"}
    ops.sqs.send_message(QueueUrl=ops.queue_url, MessageBody='{"order_id": ""}', MessageAttributes=attributes)
    ops.consume()
    [parked] = ops.receive_all(ops.dlq_url, delete=False)
    assert set(parked["MessageAttributes"]) == {*REASON_ATTRIBUTES, PARKED_ATTRIBUTE}
    ops.sqs.change_message_visibility(QueueUrl=ops.dlq_url, ReceiptHandle=parked["ReceiptHandle"], VisibilityTimeout=0)
    # WHEN it is redriven with the loop
    result = ops.run("redrive", "--yes", "--method", "loop", "--wait-seconds", "0")
    assert result.exit_code == 0, result.output
    # THEN it is back in the queue with its body and its original attributes, without the reason
    [back] = ops.receive_all(ops.queue_url)
    assert back["Body"] == '{"order_id": ""}'
    assert back["MessageAttributes"] == attributes


def test_error_code_selects_what_moves_and_the_rest_stays_visible(ops: OpsWorld) -> None:
    # GIVEN a parked invalid message and two moved by the queue
    ops.sqs.send_message(QueueUrl=ops.queue_url, MessageBody="not json")
    ops.consume()
    ops.dead_letter({"order_id": "o-1"})
    ops.dead_letter({"order_id": "o-2"})
    # WHEN only MAX_RECEIVES messages are redriven
    result = ops.run("redrive", "--yes", "--error-code", "MAX_RECEIVES", "--wait-seconds", "0")
    # THEN those two moved, the invalid one stays and is visible at once
    assert result.exit_code == 0, result.output
    assert "moved 2 message(s)" in result.stdout
    assert "left 1 not selected" in result.stdout
    assert sorted(json.loads(m["Body"])["order_id"] for m in ops.receive_all(ops.queue_url)) == ["o-1", "o-2"]
    [left] = ops.receive_all(ops.dlq_url)
    assert left["MessageAttributes"]["error_code"]["StringValue"] == "INVALID_MESSAGE"


def test_a_message_whose_send_fails_stays_in_the_dlq(ops: OpsWorld) -> None:
    # GIVEN three dead letters, and SQS refuses the copy of the second
    for order in ORDERS:
        ops.dead_letter(order)
    sqs = PartialBatchSqs(ops.sqs, lambda call, entry: ("InvalidParameterValue", True) if entry["Id"] == "1" else None)
    # WHEN the DLQ is redriven
    result = ops.run("redrive", "--yes", "--method", "loop", "--wait-seconds", "0", sqs=sqs)
    # THEN the command reports it incomplete
    assert result.exit_code == 1
    assert "moved 2 message(s)" in result.stdout
    assert "stays in the DLQ: InvalidParameterValue" in result.stderr
    # AND nothing was lost: two in the queue, the refused one still in the DLQ (visible)
    moved = [json.loads(m["Body"])["order_id"] for m in ops.receive_all(ops.queue_url)]
    left = [json.loads(m["Body"])["order_id"] for m in ops.receive_all(ops.dlq_url)]
    assert len(moved) == 2
    assert sorted(moved + left) == ["o-0", "o-1", "o-2"]


def test_a_failed_delete_leaves_a_copy_that_a_later_redrive_sends_again_harmlessly(
    ops: OpsWorld, monkeypatch: pytest.MonkeyPatch
) -> None:
    # GIVEN a dead letter, and DeleteMessageBatch fails once (the copy is already sent)
    monkeypatch.setattr(dead_letters, "HOLD_SECONDS", 0)  # so that the failed one is visible again at once
    ops.dead_letter(ORDERS[0])
    board = FaultBoard()
    board.arm(
        ArmedFault(client_error("DeleteMessageBatch", "InternalError"), operation="delete_message_batch", times=1)
    )
    # WHEN it is redriven, THEN the command says the copy is sent but the original stays
    result = ops.run("redrive", "--yes", "--method", "loop", "--wait-seconds", "0", sqs=GuardedClient(ops.sqs, board))
    assert result.exit_code == 0, result.output
    assert "sent but not deleted from the DLQ" in result.stderr
    # WHEN it is redriven again, THEN the DLQ is empty and the queue holds two copies
    assert ops.run("redrive", "--yes", "--method", "loop", "--wait-seconds", "0").exit_code == 0
    assert ops.visible_count(ops.dlq_url) == 0
    # AND the consumer records the order once (both copies in one batch may both publish: at least once)
    assert ops.consume() == 2
    assert list(ops.order_rows()) == ["o-0"]
    assert set(ops.notified_events()) == {derive_event_id(ORDERS[0])}
    assert ops.event_records()[derive_event_id(ORDERS[0])]["status"] == "sent"


class MoveTaskSqs:
    """An SQS client with StartMessageMoveTask: it moves everything at once, as SQS would in the background."""

    def __init__(self, client: Any, status: str = "COMPLETED", failure: str | None = None) -> None:
        self._client = client
        self._status = status
        self._failure = failure
        self.started: list[dict[str, Any]] = []
        self._moved = 0

    def __getattr__(self, name: str) -> Any:
        return getattr(self._client, name)

    def _url(self, arn: str) -> str:
        return str(self._client.get_queue_url(QueueName=arn.rsplit(":", 1)[1])["QueueUrl"])

    def start_message_move_task(self, **kwargs: Any) -> dict[str, Any]:
        self.started.append(kwargs)
        source, destination = self._url(kwargs["SourceArn"]), self._url(kwargs["DestinationArn"])
        while messages := self._client.receive_message(
            QueueUrl=source, MaxNumberOfMessages=10, MessageAttributeNames=["All"]
        ).get("Messages", []):
            for message in messages:
                self._client.send_message(
                    QueueUrl=destination,
                    MessageBody=message["Body"],
                    MessageAttributes=message.get("MessageAttributes", {}),
                )
                self._client.delete_message(QueueUrl=source, ReceiptHandle=message["ReceiptHandle"])
                self._moved += 1
        return {"TaskHandle": "task-1"}

    def list_message_move_tasks(self, **kwargs: Any) -> dict[str, Any]:
        task = {
            "TaskHandle": "task-1",
            "Status": self._status,
            "SourceArn": kwargs["SourceArn"],
            "ApproximateNumberOfMessagesMoved": self._moved,
            "ApproximateNumberOfMessagesToMove": self._moved,
        }
        if self._failure:
            task["FailureReason"] = self._failure
        return {"Results": [task]}


def test_where_sqs_has_message_move_tasks_redrive_uses_one(ops: OpsWorld) -> None:
    # GIVEN two dead letters and an endpoint with StartMessageMoveTask
    for order in ORDERS[:2]:
        ops.dead_letter(order)
    sqs = MoveTaskSqs(ops.sqs)
    # WHEN the DLQ is redriven
    result = ops.run("redrive", "--yes", "--rate", "50", sqs=sqs)
    # THEN one task moved them from the DLQ to the pipeline's queue (named explicitly)
    assert result.exit_code == 0, result.output
    assert sqs.started == [
        {
            "SourceArn": ops.queue_arn(ops.dlq_url),
            "DestinationArn": ops.queue_arn(ops.queue_url),
            "MaxNumberOfMessagesPerSecond": 50,
        }
    ]
    assert "redrive (move-task): moved 2 message(s)" in result.stdout
    assert "task COMPLETED" in result.stdout
    assert ops.visible_count(ops.dlq_url) == 0
    assert ops.consume() == 2


def test_a_failed_move_task_fails_the_command(ops: OpsWorld) -> None:
    ops.dead_letter(ORDERS[0])
    result = ops.run(
        "redrive", "--yes", sqs=MoveTaskSqs(ops.sqs, status="FAILED", failure="AccessDenied on destination")
    )
    assert result.exit_code == 1
    assert "task FAILED: AccessDenied on destination" in result.stdout
    assert "redrive incomplete" in result.stderr


def test_move_task_demanded_where_the_endpoint_lacks_it(ops: OpsWorld) -> None:
    # GIVEN moto, which lacks StartMessageMoveTask, WHEN --method move-task is demanded
    ops.dead_letter(ORDERS[0])
    result = ops.run("redrive", "--yes", "--method", "move-task")
    # THEN it fails, says why and what to use, and the message stays
    assert result.exit_code == 1
    assert "lacks StartMessageMoveTask" in result.stderr
    assert "--method loop" in result.stderr
    assert ops.visible_count(ops.dlq_url) == 1


def test_selection_options_need_the_loop(ops: OpsWorld) -> None:
    result = ops.run("redrive", "--method", "move-task", "--error-code", "MAX_RECEIVES")
    assert result.exit_code == 2
    assert "needs the loop" in result.stderr


def _limit_queue(ops: OpsWorld, size: int) -> None:
    """The orders queue's MaximumMessageSize (the DLQ keeps moto's default, 1 MiB, as the construct's does)."""
    ops.sqs.set_queue_attributes(QueueUrl=ops.queue_url, Attributes={"MaximumMessageSize": str(size)})


def test_auto_redrive_runs_the_loop_when_a_parked_message_may_not_fit_the_queue(ops: OpsWorld) -> None:
    # GIVEN a queue of 2 KiB beside its 1 MiB DLQ, and an endpoint with StartMessageMoveTask
    _limit_queue(ops, 2048)
    sqs = MoveTaskSqs(ops.sqs)
    # AND an order of 1,900 bytes the consumer parked: with its reason and envelope, over 2 KiB
    order = {"order_id": "", "note": "n" * 1860}
    ops.sqs.send_message(QueueUrl=ops.queue_url, MessageBody=json.dumps(order))
    assert ops.consume() == 1
    [parked] = ops.receive_all(ops.dlq_url, delete=False)
    ops.sqs.change_message_visibility(QueueUrl=ops.dlq_url, ReceiptHandle=parked["ReceiptHandle"], VisibilityTimeout=0)
    assert message_bytes(parked["Body"], parked["MessageAttributes"]) > 2048 >= len(json.dumps(order))
    # WHEN the DLQ is redriven with the default method
    result = ops.run("redrive", "--yes", "--wait-seconds", "0", sqs=sqs)
    # THEN no move task started: the command says why and runs the loop
    assert result.exit_code == 0, result.output
    assert sqs.started == []
    assert "the DLQ accepts messages of up to 1048576 bytes and the queue of up to 2048" in result.stderr
    assert "redrive (loop): moved 1 message(s)" in result.stdout
    # AND the loop sent it back as the producer sent it, which fits
    [back] = ops.receive_all(ops.queue_url)
    assert back["Body"] == json.dumps(order)
    assert ops.visible_count(ops.dlq_url) == 0


def test_a_move_task_runs_when_the_queue_accepts_whatever_the_dlq_holds(ops: OpsWorld) -> None:
    # GIVEN a DLQ whose MaximumMessageSize is the queue's, and an endpoint with StartMessageMoveTask
    ops.sqs.set_queue_attributes(QueueUrl=ops.dlq_url, Attributes={"MaximumMessageSize": "262144"})
    _limit_queue(ops, 262144)
    ops.dead_letter(ORDERS[0])
    sqs = MoveTaskSqs(ops.sqs)
    # WHEN the DLQ is redriven / THEN a move task moved it
    result = ops.run("redrive", "--yes", sqs=sqs)
    assert result.exit_code == 0, result.output
    assert len(sqs.started) == 1
    assert "redrive (move-task): moved 1 message(s)" in result.stdout


def test_a_move_task_demanded_when_a_message_may_not_fit_fails(ops: OpsWorld) -> None:
    # GIVEN a queue smaller than its DLQ and an endpoint with StartMessageMoveTask
    _limit_queue(ops, 262144)
    ops.dead_letter(ORDERS[0])
    sqs = MoveTaskSqs(ops.sqs)
    # WHEN --method move-task is demanded
    result = ops.run("redrive", "--yes", "--method", "move-task", sqs=sqs)
    # THEN it fails, says why and what to use, starts no task, and the message stays
    assert result.exit_code == 1
    assert sqs.started == []
    assert "a move task moves messages as they are, and the DLQ accepts messages of up to 1048576" in result.stderr
    assert "use --method loop, which parks what does not fit as MESSAGE_TOO_LARGE" in result.stderr
    assert ops.visible_count(ops.dlq_url) == 1


def test_the_loop_parks_what_does_not_fit_with_its_reason_and_moves_the_rest(ops: OpsWorld) -> None:
    # GIVEN a DLQ holding a small message and one of 3,000 bytes, and a queue of 2 KiB
    _limit_queue(ops, 2048)
    big = {"order_id": "o-big", "note": "n" * 3000}
    ops.dead_letter(big, {"trace": {"DataType": "String", "StringValue": "t-1"}})
    ops.dead_letter(ORDERS[0])
    # WHEN a dry run looks / THEN it says one would move and one would be parked as too large
    dry = ops.run("redrive", "--dry-run", "--json", "--wait-seconds", "0")
    assert dry.exit_code == 0, dry.output
    assert {k: json.loads(dry.stdout)[k] for k in ("would_move", "too_large", "skipped")} == {
        "would_move": 1,
        "too_large": 1,
        "skipped": 0,
    }
    # WHEN the DLQ is redriven
    result = ops.run("redrive", "--yes", "--json", "--wait-seconds", "0")
    # THEN the small one moved, and the command fails naming the one that stays and why
    assert result.exit_code == 1, result.output
    [report] = [json.loads(line) for line in result.stdout.splitlines()]
    assert (report["moved"], report["complete"], report["failed"]) == (1, False, [])
    [too_large] = report["too_large"]
    assert too_large["reason"].startswith("3047 bytes as the producer sent it; the queue accepts at most 2048")
    assert "as MESSAGE_TOO_LARGE" in result.stderr
    assert [json.loads(m["Body"])["order_id"] for m in ops.receive_all(ops.queue_url)] == ["o-0"]
    # AND the big one is parked again with the code MESSAGE_TOO_LARGE in the consumer's envelope,
    # its reason, and the producer's attributes
    listed = ops.run("dlq", "list", "--json", "--body", "--wait-seconds", "0")
    [entry] = [json.loads(line) for line in listed.stdout.splitlines()]
    assert (entry["order_id"], entry["error_code"]) == ("o-big", "MESSAGE_TOO_LARGE")
    assert entry["error_message"] == too_large["reason"]
    assert "parked before as MAX_RECEIVES (moved by the queue)" in entry["error_message"]
    assert entry["attributes"]["trace"] == "t-1"
    assert json.loads(entry["body"]) == big

    # WHEN the DLQ is redriven again
    again = ops.run("redrive", "--yes", "--json", "--wait-seconds", "0")
    # THEN it stays as it is (not parked once more), reported with the same reason
    assert again.exit_code == 1, again.output
    [second] = [json.loads(line) for line in again.stdout.splitlines()]
    assert second["moved"] == 0
    assert [(t["message_id"], t["reason"]) for t in second["too_large"]] == [(entry["message_id"], too_large["reason"])]
    # AND once the queue accepts it, a redrive moves it, as the producer sent it
    _limit_queue(ops, 262144)
    moved = ops.run("redrive", "--yes", "--wait-seconds", "0")
    assert moved.exit_code == 0, moved.output
    [back] = ops.receive_all(ops.queue_url)
    assert json.loads(back["Body"]) == big
    assert back["MessageAttributes"] == {"trace": {"DataType": "String", "StringValue": "t-1"}}


def test_waiting_for_a_move_task_polls_until_it_ends() -> None:
    # GIVEN a task that runs for two polls and then completes
    statuses = iter(["RUNNING", "RUNNING", "COMPLETED"])

    class Sqs:
        def list_message_move_tasks(self, **kwargs: Any) -> dict[str, Any]:
            status = next(statuses)
            moved = {"RUNNING": 4, "COMPLETED": 9}[status]
            return {"Results": [{"TaskHandle": "t", "Status": status, "ApproximateNumberOfMessagesMoved": moved}]}

    sleep, progress = FakeSleep(), []
    # WHEN waited for
    report = wait_for_move_task(
        Sqs(),  # type: ignore[arg-type]
        "arn:dlq",
        RedriveReport(method="move-task", task_handle="t"),
        timeout_seconds=60,
        sleep=sleep,
        on_progress=lambda moved, total: progress.append(moved),
    )
    # THEN it polled three times with a pause between, and reports the end state
    assert (report.task_status, report.moved, report.complete) == ("COMPLETED", 9, True)
    assert progress == [4, 4, 9]
    assert sleep.delays == [2.0, 2.0]


class DeduplicatingSqs:
    """SQS's FIFO deduplication window, which moto lacks once a message has left the queue.

    Within five minutes SQS accepts a second message with a deduplication id it has seen and drops
    it silently. moto only compares with messages still in the queue, so this proxy remembers.
    """

    def __init__(self, client: Any) -> None:
        self._client = client
        self._seen: set[tuple[str, str]] = set()
        self.dropped = 0

    def __getattr__(self, name: str) -> Any:
        return getattr(self._client, name)

    def _first(self, queue_url: str, entry: Mapping[str, Any]) -> bool:
        key = (queue_url, str(entry.get("MessageDeduplicationId")))
        if key in self._seen:
            self.dropped += 1
            return False
        self._seen.add(key)
        return True

    def send_message(self, **kwargs: Any) -> dict[str, Any]:
        if not self._first(kwargs["QueueUrl"], kwargs):
            return {"MessageId": "dropped-as-duplicate"}
        return dict(self._client.send_message(**kwargs))

    def send_message_batch(self, *, QueueUrl: str, Entries: list[dict[str, Any]]) -> dict[str, Any]:
        fresh = [entry for entry in Entries if self._first(QueueUrl, entry)]
        dropped = [{"Id": e["Id"], "MessageId": "dropped-as-duplicate"} for e in Entries if e not in fresh]
        response = dict(self._client.send_message_batch(QueueUrl=QueueUrl, Entries=fresh)) if fresh else {}
        return {"Successful": [*response.get("Successful", []), *dropped], "Failed": response.get("Failed", [])}


def test_fifo_redrive_keeps_the_group_and_is_not_dropped_as_a_duplicate(make_ops_world: Any) -> None:
    # GIVEN a FIFO pipeline where an order just sent (deduplication id = its event id) failed until
    # SQS moved it to the DLQ, all within SQS's five-minute deduplication window
    ops: OpsWorld = make_ops_world(fifo=True)
    sqs = DeduplicatingSqs(ops.sqs)
    OrderPublisher(ops.queue_url, client=sqs).send(ORDERS[0])  # type: ignore[arg-type]
    ops.board.arm(
        ArmedFault(client_error("TransactWriteItems", "InternalServerError"), operation="transact_write_items")
    )
    ops.fail_until_dead_lettered()
    ops.board.disarm()
    # WHEN the DLQ is redriven at once
    result = ops.run("redrive", "--yes", "--wait-seconds", "0", sqs=sqs)
    assert result.exit_code == 0, result.output
    # THEN SQS did not drop the copy: it is in the queue, in the order's group
    assert sqs.dropped == 0
    [message] = ops.receive_all(ops.queue_url, delete=False)
    assert message["Attributes"]["MessageGroupId"] == "o-0"
    ops.sqs.change_message_visibility(
        QueueUrl=ops.queue_url, ReceiptHandle=message["ReceiptHandle"], VisibilityTimeout=0
    )
    # AND the consumer records it
    assert ops.consume() == 1
    assert ops.event_records()[derive_event_id(ORDERS[0])]["status"] == "sent"


def test_an_empty_dlq_moves_nothing(ops: OpsWorld) -> None:
    result = ops.run("redrive", "--yes", "--method", "loop", "--wait-seconds", "0")
    assert result.exit_code == 0
    assert "moved 0 message(s)" in result.stdout


def test_redrive_one_order_after_its_cause_was_fixed(ops: OpsWorld) -> None:
    # GIVEN a conflict parked in the DLQ: the stored order differs from a redelivered one
    publisher = OrderPublisher(ops.queue_url, client=ops.sqs)
    publisher.send({"order_id": "o-1", "amount": 5})
    ops.consume()
    publisher.send({"order_id": "o-1", "amount": 6})
    ops.consume()
    ops.dead_letter({"order_id": "o-2"})
    # AND the operator decided the new content is right and removed the old row and record
    event_id = derive_event_id({"order_id": "o-1"})
    ops.dynamodb.delete_item(TableName="order-records", Key={"order_id": {"S": "o-1"}})
    ops.dynamodb.delete_item(TableName="processed-events", Key={"event_id": {"S": event_id}})
    # WHEN only that order's message is redriven and consumed
    result = ops.run("redrive", "--yes", "--order-id", "o-1", "--wait-seconds", "0")
    assert result.exit_code == 0, result.output
    assert "[1 IDEMPOTENCY_CONFLICT]" in result.stdout
    ops.consume()
    # THEN the order holds the new content, and the other dead letter is untouched
    assert ops.order_rows()["o-1"]["amount"] == 6
    assert ops.event_records()[event_id]["status"] == "sent"
    assert [json.loads(m["Body"])["order_id"] for m in ops.receive_all(ops.dlq_url)] == ["o-2"]


class ReparkingSqs:
    """An SQS client whose copies sent to the queue are parked again at once, as a consumer does with a
    message that fails permanently: each comes back to the DLQ as a new message."""

    def __init__(self, client: Any, queue_url: str, dlq_url: str) -> None:
        self._client = client
        self._queue_url = queue_url
        self._dlq_url = dlq_url
        self.sends = 0

    def __getattr__(self, name: str) -> Any:
        return getattr(self._client, name)

    def send_message_batch(self, *, QueueUrl: str, Entries: list[dict[str, Any]]) -> dict[str, Any]:
        self.sends += 1
        assert self.sends < 20, "the redrive keeps moving the messages it parked"
        target = self._dlq_url if QueueUrl == self._queue_url else QueueUrl
        return dict(self._client.send_message_batch(QueueUrl=target, Entries=Entries))


def test_messages_that_fail_again_during_the_redrive_are_not_moved_again(ops: OpsWorld) -> None:
    # GIVEN two dead letters that the consumer parks again the moment they are back in the queue
    ops.dead_letter({"order_id": "o-1"})
    ops.dead_letter({"order_id": "o-2"})
    time.sleep(0.01)  # SentTimestamp has millisecond resolution
    sqs = ReparkingSqs(ops.sqs, ops.queue_url, ops.dlq_url)
    # WHEN the DLQ is redriven
    result = ops.run("redrive", "--yes", "--method", "loop", "--wait-seconds", "0", sqs=sqs)
    # THEN each was moved once, the loop ended, and the parked copies are left in the DLQ
    assert result.exit_code == 0, result.output
    assert "moved 2 message(s)" in result.stdout
    assert "left 2 that arrived after the redrive started" in result.stdout
    assert sqs.sends == 1
    assert ops.visible_count(ops.dlq_url) == 2


# --- robustness of the loop -------------------------------------------------------------------------

PRODUCER_ATTRIBUTE_SETS = [
    pytest.param({"original_attributes": "not json"}, id="original_attributes-not-json"),
    pytest.param({"original_attributes": '{"a": 1}', "trace": "t-1"}, id="original_attributes-other-json"),
    pytest.param({"original_attributes": "{}", "error_code": "MINE", "source_message_id": "m-0"}, id="reason-names"),
    pytest.param(
        {
            "original_attributes": "x",
            "error_code": "MINE",
            **{f"t{i}": f"{i}" for i in range(7)},
            "idempotency_key": "k",
        },
        id="ten-attributes-packed",
    ),
]


def _string_attributes(values: Mapping[str, str]) -> dict[str, Any]:
    return {name: {"DataType": "String", "StringValue": value} for name, value in values.items()}


@pytest.mark.parametrize("values", PRODUCER_ATTRIBUTE_SETS)
def test_producer_attributes_with_the_consumers_names_pass_through_a_park_and_a_redrive(
    ops: OpsWorld, values: Mapping[str, str]
) -> None:
    # GIVEN a producer's message whose own attributes include original_attributes (and, in some
    # cases, the reason attributes' names), with a body the consumer parks as invalid
    attributes = _string_attributes(values)
    ops.sqs.send_message(QueueUrl=ops.queue_url, MessageBody='{"order_id": ""}', MessageAttributes=attributes)
    ops.consume()
    # WHEN the consumer has parked it: the reason is the consumer's, not the producer's
    [letter] = json.loads("[" + ",".join(ops.run("dlq", "list", "--json").stdout.splitlines()) + "]")
    assert letter["error_code"] == "INVALID_MESSAGE"
    # AND it is redriven with the loop
    result = ops.run("redrive", "--yes", "--method", "loop", "--wait-seconds", "0")
    # THEN the loop did not crash and the message is back with exactly the producer's attributes
    assert result.exit_code == 0, result.output
    assert "moved 1 message(s)" in result.stdout
    [back] = ops.receive_all(ops.queue_url)
    assert back["Body"] == '{"order_id": ""}'
    assert back["MessageAttributes"] == attributes
    assert ops.visible_count(ops.dlq_url) == 0


def test_a_producer_attribute_named_original_attributes_survives_a_move_by_the_queue(ops: OpsWorld) -> None:
    # GIVEN a message SQS moved to the DLQ (no consumer mark) with a producer's original_attributes
    attributes = _string_attributes({"original_attributes": "not json", "error_code": "MINE"})
    ops.dead_letter(ORDERS[0], attributes)
    # WHEN it is listed and redriven
    [listed] = ops.run("dlq", "list", "--json").stdout.splitlines()
    result = ops.run("redrive", "--yes", "--method", "loop", "--wait-seconds", "0")
    # THEN it counts as moved by the queue (the producer's error_code is not a reason) and goes back as it was
    assert json.loads(listed)["error_code"] == "MAX_RECEIVES"
    assert result.exit_code == 0, result.output
    assert "[1 MAX_RECEIVES]" in result.stdout
    [back] = ops.receive_all(ops.queue_url)
    assert back["MessageAttributes"] == attributes


class ConsumingSqs:
    """An SQS client after whose every SendMessageBatch to the queue the real consumer runs at once,
    as a busy Lambda would: a message that always fails is parked again while the redrive runs."""

    def __init__(self, ops: OpsWorld) -> None:
        self._ops = ops
        self.sends = 0

    def __getattr__(self, name: str) -> Any:
        return getattr(self._ops.sqs, name)

    def send_message_batch(self, *, QueueUrl: str, Entries: list[dict[str, Any]]) -> dict[str, Any]:
        self.sends += 1
        assert self.sends < 20, "the redrive keeps moving the messages the consumer parked again"
        response = dict(self._ops.sqs.send_message_batch(QueueUrl=QueueUrl, Entries=Entries))
        if QueueUrl == self._ops.queue_url:
            self._ops.consume()
        return response


@pytest.mark.parametrize("skew_seconds", [120, -120], ids=["operator-ahead", "operator-behind"])
@pytest.mark.parametrize("way_back", ["parked-by-the-consumer", "moved-by-the-queue"])
def test_an_always_failing_message_goes_round_once_whatever_the_operators_clock(
    ops: OpsWorld, monkeypatch: pytest.MonkeyPatch, skew_seconds: int, way_back: str
) -> None:
    # GIVEN SQS's clock (SentTimestamp, visibility) differs from the operator's by 120 s
    real = moto_sqs_models.unix_time_millis
    monkeypatch.setattr(moto_sqs_models, "unix_time_millis", lambda: real() - skew_seconds * 1000)
    # AND two messages that always fail are in the DLQ (parked as invalid by the consumer)
    for _ in range(2):
        ops.sqs.send_message(QueueUrl=ops.queue_url, MessageBody="not json")
    ops.consume()
    assert ops.visible_count(ops.dlq_url) == 2
    # AND each copy sent back fails again during the redrive: the consumer parks it again, or (as
    # SQS's redrive policy does after maxReceiveCount) it lands in the DLQ as the same message
    sqs = (
        ConsumingSqs(ops) if way_back == "parked-by-the-consumer" else ReparkingSqs(ops.sqs, ops.queue_url, ops.dlq_url)
    )
    # WHEN the DLQ is redriven
    result = ops.run("redrive", "--yes", "--method", "loop", "--wait-seconds", "0", sqs=sqs)
    # THEN each went round exactly once and the copies that came back are left in the DLQ, visible
    assert result.exit_code == 0, result.output
    assert "moved 2 message(s)" in result.stdout
    assert "left 2 that arrived after the redrive started" in result.stdout
    assert sqs.sends == 1
    assert ops.visible_count(ops.dlq_url) == 2
    assert ops.visible_count(ops.queue_url) == 0


class CrashingSqs:
    """An SQS client whose n-th SendMessageBatch raises an unexpected error (a bug, a lost process)."""

    def __init__(self, client: Any, crash_on_call: int) -> None:
        self._client = client
        self._crash_on_call = crash_on_call
        self.calls = 0

    def __getattr__(self, name: str) -> Any:
        return getattr(self._client, name)

    def send_message_batch(self, **kwargs: Any) -> dict[str, Any]:
        self.calls += 1
        if self.calls == self._crash_on_call:
            raise RuntimeError("injected crash in the middle of the loop")
        return dict(self._client.send_message_batch(**kwargs))


def test_a_crash_in_the_middle_of_the_loop_hides_nothing_and_a_rerun_moves_the_rest(ops: OpsWorld) -> None:
    # GIVEN 25 dead letters, and the loop's second SendMessageBatch raises
    orders = [{"order_id": f"o-{i}"} for i in range(25)]
    for order in orders:
        ops.dead_letter(order)
    # WHEN the DLQ is redriven
    result = ops.run(
        "redrive", "--yes", "--method", "loop", "--wait-seconds", "0", sqs=CrashingSqs(ops.sqs, crash_on_call=2)
    )
    # THEN the command failed with the error
    assert isinstance(result.exception, RuntimeError)
    # AND nothing it had received stays hidden: the 15 not moved are visible at once
    counts = ops.sqs.get_queue_attributes(
        QueueUrl=ops.dlq_url, AttributeNames=["ApproximateNumberOfMessages", "ApproximateNumberOfMessagesNotVisible"]
    )["Attributes"]
    assert counts == {"ApproximateNumberOfMessages": "15", "ApproximateNumberOfMessagesNotVisible": "0"}
    # WHEN it is run again at once
    rerun = ops.run("redrive", "--yes", "--method", "loop", "--wait-seconds", "0")
    # THEN it moves the rest: every order is in the queue once and the DLQ is empty
    assert rerun.exit_code == 0, rerun.output
    assert "moved 15 message(s)" in rerun.stdout
    moved = sorted(json.loads(m["Body"])["order_id"] for m in ops.receive_all(ops.queue_url))
    assert moved == sorted(order["order_id"] for order in orders)
    assert ops.visible_count(ops.dlq_url) == 0
