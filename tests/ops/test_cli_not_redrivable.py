"""A parked message whose packed binary attribute is not base64 cannot be sent back as it came.

The consumer parks such a message (a hand-built event) with the attribute packed in its envelope
as it came (``tests/consumer/test_park_bad_binary.py``). No SendMessage can carry it, so the CLI
reports it as not redrivable, with its reason, leaves it in the DLQ and goes on with the others.
"""

from __future__ import annotations

import json

from tests.consumer.harness import sqs_record
from tests.ops.conftest import OpsWorld

BAD_BINARY = {"dataType": "Binary", "binaryValue": "%%% not base64 %%%"}


def park_one_bad_and_one_good(ops: OpsWorld) -> tuple[str, str]:
    bad = sqs_record({"amount": 1}, attributes={"blob": BAD_BINARY})
    good = sqs_record({"amount": 2})
    assert ops.invoke([bad, good]) == {"batchItemFailures": []}
    messages = ops.receive_all(ops.dlq_url, delete=False)
    ops.sqs.change_message_visibility_batch(
        QueueUrl=ops.dlq_url,
        Entries=[
            {"Id": str(i), "ReceiptHandle": m["ReceiptHandle"], "VisibilityTimeout": 0} for i, m in enumerate(messages)
        ],
    )
    parked = {m["MessageAttributes"]["source_message_id"]["StringValue"]: m["MessageId"] for m in messages}
    assert set(parked) == {bad["messageId"], good["messageId"]}
    return parked[bad["messageId"]], parked[good["messageId"]]


def test_redrive_reports_a_bad_base64_attribute_and_moves_the_rest(ops: OpsWorld) -> None:
    # GIVEN two parked messages, one with a packed binary attribute that is not base64
    bad_id, _good_id = park_one_bad_and_one_good(ops)

    # WHEN the DLQ is redriven with the loop
    result = ops.run("redrive", "--yes", "--method", "loop", "--wait-seconds", "0", "--json")

    # THEN the command ends (no traceback) as incomplete, naming the message and why it stays
    assert result.exception is None or isinstance(result.exception, SystemExit), result.exception
    assert result.exit_code == 1, result.output
    report = json.loads(result.stdout.splitlines()[0])
    assert report["moved"] == 1
    [failed] = report["failed"]
    assert failed["message_id"] == bad_id
    assert failed["reason"].startswith("not redrivable: packed attribute 'blob' is not base64")
    # AND the good one is back in the queue, the bad one still in the DLQ with its envelope (nothing lost)
    [back] = ops.receive_all(ops.queue_url)
    assert json.loads(back["Body"]) == {"amount": 2}
    [left] = ops.receive_all(ops.dlq_url, delete=False)
    assert left["MessageId"] == bad_id
    assert left["MessageAttributes"]["error_code"]["StringValue"] == "INVALID_MESSAGE"


def test_dlq_list_shows_a_message_that_is_not_redrivable(ops: OpsWorld) -> None:
    # GIVEN the same two parked messages
    bad_id, good_id = park_one_bad_and_one_good(ops)

    # WHEN the DLQ is listed
    result = ops.run("dlq", "list", "--json", "--wait-seconds", "0")

    # THEN both are listed (the bad attribute does not stop the listing)
    assert result.exit_code == 0, result.output
    listed = {json.loads(line)["message_id"] for line in result.stdout.splitlines()}
    assert listed == {bad_id, good_id}
