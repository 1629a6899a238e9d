"""``order-pipeline`` as an operator runs it - the installed command, in a process of its own, with its
documented options only - against a moto server on ``localhost`` whose queue, DLQ and tables hold
control characters in bodies, ids and attribute names: nothing reaches its stdout or stderr raw, and
``--json`` still decodes to the exact values.

The pipeline's resources are made by the consumer's harness (``OpsWorld``) pointed at the server, and
the consumer itself parks what it receives: ids with ``\\r`` or a C1 character are refused and parked
as invalid, never written. The in-process tests of every output path are in ``test_cli_escapes.py``.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from moto import mock_aws
from moto.server import ThreadedMotoServer

from idempotent_order_pipeline._lambda_asset.order_consumer import handler as handler_module
from idempotent_order_pipeline._lambda_asset.order_consumer.contract.pending_index import (
    PENDING_SHARD_ATTRIBUTE,
    pending_shard,
)
from idempotent_order_pipeline.keys import derive_event_id, payload_sha256
from tests.ops.conftest import STACK, OpsWorld
from tests.ops.test_cli_escapes import HOSTILE, raw_controls

pytestmark = pytest.mark.slow

REPO = Path(__file__).resolve().parents[2]
REGION = "eu-west-1"
#: The installed command (the console script of the distribution), as an operator runs it.
ORDER_PIPELINE = Path(sys.executable).parent / "order-pipeline"

#: An order the consumer accepts: a bidi override is allowed in an id; the field names and values
#: (attribute names of its order row) hold an OSC title, C1 CSI and NEL, and the bidi override.
ACCEPTED = {"order_id": "o-\u202eevil", "note" + HOSTILE: "value" + HOSTILE, "\u202ekey\x85": "\x9b31m"}
#: Messages whose ids have no business in an id: a carriage return, a C1 CSI, a C1 NEL in the key.
REFUSED_IDS = {
    "carriage-return": ('{"order_id": "o-\\r1", "note": "\\u001b]0;owned\\u0007"}', {}),
    "c1-csi": ('{"order_id": "o-\\u009b31m"}', {}),
    "c1-in-the-key": ('{"order_id": "o-3"}', {"idempotency_key": {"DataType": "String", "StringValue": "k-\x85"}}),
}
#: Not JSON at all, with raw C1 and bidi characters in the body (SQS carries them as they are).
NOT_JSON = "not json \x9b31m \u202eevil \x85"


@dataclass
class Served:
    world: OpsWorld
    endpoint: str
    pending_event_id: str


@pytest.fixture(scope="module")
def served() -> Iterator[Served]:
    """A moto server on localhost holding the pipeline's resources and hostile data the consumer handled.

    One for the module: the commands only read, but for ``send``, which adds to the queue alone.
    """
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    server.start()
    host, port = server.get_host_and_port()
    endpoint = f"http://{host}:{port}"
    monkeypatch = pytest.MonkeyPatch()
    monkeypatch.setenv("AWS_ENDPOINT_URL", endpoint)  # the harness's own clients go to the server too
    try:
        world = OpsWorld()
        world.sqs.send_message(QueueUrl=world.queue_url, MessageBody=json.dumps(ACCEPTED))
        for body, attributes in REFUSED_IDS.values():
            world.sqs.send_message(QueueUrl=world.queue_url, MessageBody=body, MessageAttributes=attributes)
        world.sqs.send_message(QueueUrl=world.queue_url, MessageBody=NOT_JSON)
        assert world.consume() == 5
        yield Served(world, endpoint, _pending_left_by_an_older_consumer(world))
    finally:
        handler_module.configure()
        monkeypatch.undo()
        server.stop()
        mock_aws().reset()  # the server's backends are this process's: leave none to later tests


def _pending_left_by_an_older_consumer(world: OpsWorld) -> str:
    """A record an older consumer left pending an hour ago, its ids holding C1 and CR (refused today)."""
    order = {"order_id": "o-\x9b2J-pending\r", "n\x85ote": HOSTILE}
    event_id = "evt-\x9b2J\r"
    world.dynamodb.put_item(
        TableName=world.events_table,
        Item={
            "event_id": {"S": event_id},
            "status": {"S": "pending"},
            "order_id": {"S": order["order_id"]},
            "payload_sha256": {"S": payload_sha256(order)},
            "created_at": {"N": str(int(time.time()) - 3600)},
            PENDING_SHARD_ATTRIBUTE: {"S": pending_shard(event_id)},
        },
    )
    row = {name: {"S": value} for name, value in order.items()}
    world.dynamodb.put_item(
        TableName=world.orders_table,
        Item={**row, "event_id": {"S": event_id}, "payload_sha256": {"S": payload_sha256(order)}},
    )
    return event_id


def order_pipeline(served: Served, *args: str, input: str | None = None) -> subprocess.CompletedProcess[str]:
    """``order-pipeline --endpoint-url URL --region R --stack S ARGS`` in a process of its own."""
    environment = {
        name: value for name, value in os.environ.items() if not name.startswith("AWS_") and name != "PYTHONPATH"
    }
    environment |= {
        "AWS_ACCESS_KEY_ID": "testing",
        "AWS_SECRET_ACCESS_KEY": "testing",
        "PYTHONPATH": os.pathsep.join([str(REPO / "infra"), str(REPO)]),  # this tree's code
    }
    result = subprocess.run(  # noqa: S603 - the installed command, arguments of this test
        [str(ORDER_PIPELINE), "--endpoint-url", served.endpoint, "--region", REGION, "--stack", STACK, *args],
        input=input,
        capture_output=True,
        text=True,
        encoding="utf-8",
        errors="strict",
        env=environment,
        timeout=120,
        check=False,
    )
    # Nothing written raw, on either stream, whatever the command and its exit code.
    assert raw_controls(result.stdout) == set(), result.stdout
    assert raw_controls(result.stderr) == set(), result.stderr
    return result


def json_lines(result: subprocess.CompletedProcess[str]) -> list[Any]:
    return [json.loads(line) for line in result.stdout.splitlines()]


def test_the_command_is_installed_and_the_data_is_hostile(served: Served) -> None:
    # GIVEN the installed command and the data WHEN checked THEN both are what the tests think they are
    assert ORDER_PIPELINE.is_file()
    assert raw_controls("".join([*ACCEPTED, *ACCEPTED.values()])) >= {"\x1b", "\x07", "\x9b", "\x85", "\u202e"}
    assert raw_controls(NOT_JSON) == {"\x9b", "\x85", "\u202e"}


def test_ids_with_a_carriage_return_or_a_c1_character_are_parked_as_invalid(served: Served) -> None:
    # GIVEN what the consumer made of the messages
    world = served.world
    # WHEN the DLQ is listed as JSON with bodies
    listed = order_pipeline(served, "dlq", "list", "--json", "--body", "--wait-seconds", "0")
    # THEN the three refused ids and the body that is not JSON are parked as invalid, bodies exact
    assert listed.returncode == 0, listed.stderr
    by_body = {letter["body"]: letter for letter in json_lines(listed)}
    assert set(by_body) == {body for body, _ in REFUSED_IDS.values()} | {NOT_JSON}
    assert {letter["error_code"] for letter in by_body.values()} == {"INVALID_MESSAGE"}
    assert "has the character '\\r'" in by_body[REFUSED_IDS["carriage-return"][0]]["error_message"]
    assert "has the character '\\x9b'" in by_body[REFUSED_IDS["c1-csi"][0]]["error_message"]
    assert "has the character '\\x85'" in by_body[REFUSED_IDS["c1-in-the-key"][0]]["error_message"]
    assert by_body[REFUSED_IDS["c1-in-the-key"][0]]["attributes"]["idempotency_key"] == "k-\x85"
    # AND none of them was written: the accepted order and the older consumer's record are all there is
    assert set(world.order_rows()) == {ACCEPTED["order_id"], "o-\x9b2J-pending\r"}
    assert set(world.event_records()) == {derive_event_id(ACCEPTED), served.pending_event_id}


def test_dlq_list_shows_the_parked_messages_escaped(served: Served) -> None:
    # WHEN the DLQ is listed as a table
    table = order_pipeline(served, "dlq", "list", "--wait-seconds", "0")
    # THEN it shows the parked messages with their controls escaped
    assert table.returncode == 0, table.stderr
    assert table.stdout.count("INVALID_MESSAGE") == 4
    assert "o-\\u000d1" in table.stdout
    assert "o-\\u009b31m" in table.stdout


def test_inspect_escapes_ids_and_the_order_rows_attribute_names(served: Served) -> None:
    # WHEN the accepted order and the older consumer's pending record are inspected, as text and JSON
    text = order_pipeline(served, "inspect", "--order", ACCEPTED["order_id"])
    as_json = order_pipeline(served, "inspect", "--order", ACCEPTED["order_id"], "--json")
    pending_text = order_pipeline(served, "inspect", served.pending_event_id)
    # THEN they are found and shown escaped (the escapes are there, so the hostile text was printed)
    for result in (text, as_json, pending_text):
        assert result.returncode == 0, result.stderr
    assert "\\u202e" in text.stdout
    assert "\\u001b]0;owned\\u0007" in text.stdout
    assert "\\u009b" in pending_text.stdout
    # AND the JSON decodes to the exact names and values of the order row
    report = json.loads(as_json.stdout)
    assert report["order_id"] == ACCEPTED["order_id"]
    assert report["order_row"]["note" + HOSTILE] == "value" + HOSTILE
    assert report["order_row"]["\u202ekey\x85"] == "\x9b31m"


def test_pending_lists_the_older_consumers_record_escaped(served: Served) -> None:
    # WHEN the records pending longer than a minute are listed, as text and JSON
    text = order_pipeline(served, "pending", "--older-than", "1m")
    as_json = order_pipeline(served, "pending", "--older-than", "1m", "--json")
    # THEN the record is listed with its ids escaped, and the JSON holds them exactly
    assert text.returncode == 0, text.stderr
    assert "evt-\\u009b2J\\u000d  order o-\\u009b2J-pending\\u000d" in text.stdout
    [listed] = json_lines(as_json)
    assert (listed["event_id"], listed["order_id"]) == (served.pending_event_id, "o-\x9b2J-pending\r")


def test_redrive_dry_run_and_send_escape_what_they_print(served: Served) -> None:
    # WHEN a redrive is rehearsed, and orders with hostile ids and fields are sent (one id is refused)
    dry = order_pipeline(served, "redrive", "--dry-run", "--wait-seconds", "0")
    lines = (
        json.dumps({"order_id": "o-\u202e5", "k\x85": HOSTILE}) + "\n" + json.dumps({"order_id": "o-\x9b31m"}) + "\n"
    )
    sent = order_pipeline(served, "send", "-", "--on-invalid", "skip", input=lines)
    sent_json = order_pipeline(served, "send", "-", "--on-invalid", "skip", "--json", input=lines)
    # THEN the dry run counts the parked messages
    assert dry.returncode == 0, dry.stderr
    assert "would move 4 message(s)" in dry.stdout
    # AND send sends the order whose id holds a bidi override and refuses the C1 one, both shown escaped
    for result in (sent, sent_json):
        assert result.returncode == 0, result.stderr
        assert "line 2: invalid: INVALID_MESSAGE: body field 'order_id' has the character '\\x9b'" in result.stderr
    assert "sent 1 of 2 order(s)" in sent.stdout
    assert '"order_id":"o-\\u202e5"' in sent_json.stdout
    results = sorted(json_lines(sent_json), key=lambda result: result["line"])
    assert [(r["line"], r["sent"], r.get("order_id")) for r in results] == [(1, True, "o-\u202e5"), (2, False, None)]
