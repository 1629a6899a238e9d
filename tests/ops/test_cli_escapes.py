"""Nothing a producer wrote reaches the operator's terminal raw: every line goes out escaped.

Any producer can put terminal control sequences into an order id, a body key or value, or an
attribute; the consumer parks ids holding control characters (tests/consumer), but bodies, values and
records written before that still hold them. Every output path - tables, ``--json``, summaries,
prompts, errors - writes them as ``\\uXXXX``, and ``--json`` still decodes to the exact value.
"""

from __future__ import annotations

import ast
import json
import time
import unicodedata
from pathlib import Path
from typing import Any

from click.testing import Result

from idempotent_order_pipeline._lambda_asset.order_consumer.contract.pending_index import (
    PENDING_SHARD_ATTRIBUTE,
    pending_shard,
)
from idempotent_order_pipeline.cli import commands
from idempotent_order_pipeline.cli.render import safe
from idempotent_order_pipeline.keys import derive_event_id, payload_sha256
from tests.ops.conftest import OpsWorld, PartialBatchSqs

#: An OSC window title, an OSC 8 hyperlink, a C1 CSI (``\x9b``), a bidi override, CR and DEL.
HOSTILE = "\x1b]0;owned\x07\x1b]8;;https://evil.example/\x1b\\click here\x1b]8;;\x1b\\\x9b31m\u202eevil\rok\x7f"
HOSTILE_ID = "o-" + HOSTILE
#: Characters a terminal obeys or reorders by: C0 but the line break, DEL, C1, and the bidi controls.
BIDI_CONTROLS = frozenset("\u061c\u200e\u200f\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069")


def raw_controls(text: str) -> set[str]:
    return {c for c in text if (unicodedata.category(c) == "Cc" and c != "\n") or c in BIDI_CONTROLS}


def assert_escaped(result: Result) -> None:
    """Neither stdout nor stderr holds a control character, and what was hostile shows as an escape."""
    assert raw_controls(result.stdout) == set(), result.stdout
    assert raw_controls(result.stderr) == set(), result.stderr


def test_hostile_text_is_what_the_tests_think_it_is() -> None:
    # GIVEN the hostile text WHEN searched THEN it holds each kind of control (so the assertions can fail)
    assert raw_controls(HOSTILE) >= {"\x1b", "\x07", "\x9b", "\u202e", "\r", "\x7f"}


def test_safe_escapes_exactly_the_controls_and_json_decodes_back() -> None:
    # GIVEN text with every kind of control beside ordinary non-ASCII text
    text = HOSTILE + " café 東京 🚀 \u00a0"
    # WHEN escaped
    escaped = safe(text)
    # THEN no control is left, the ordinary text is untouched, and a JSON string decodes back exactly
    assert raw_controls(escaped) == set()
    assert "café 東京 🚀 \u00a0" in escaped
    assert "\\u001b]0;owned\\u0007" in escaped
    assert json.loads(safe(json.dumps(text, ensure_ascii=False))) == text
    assert safe(escaped) == escaped


def _park_hostile(ops: OpsWorld) -> None:
    """A dead letter whose order id, body key, body value and attribute value are hostile."""
    body = {"order_id": HOSTILE_ID, "key" + HOSTILE: "value" + HOSTILE}
    # SQS refuses C0 in a body or attribute, but JSON carries it escaped, and C1 and bidi as they are.
    ops.dead_letter(json.dumps(body), {"note": {"DataType": "String", "StringValue": "\x9b31m\u202eevil"}})


def test_dlq_list_and_drop_escape_ids_bodies_and_attributes(ops: OpsWorld) -> None:
    # GIVEN a hostile dead letter
    _park_hostile(ops)
    # WHEN listed as a table, as JSON with bodies, and dropped (table and JSON)
    table = ops.run("dlq", "list", "--wait-seconds", "0")
    listed = ops.run("dlq", "list", "--json", "--body", "--wait-seconds", "0")
    dry = ops.run("dlq", "drop", "--all", "--dry-run", "--wait-seconds", "0")
    dropped = ops.run("--json", "dlq", "drop", "--all", "--yes", "--wait-seconds", "0")
    # THEN nothing is written raw
    for result in (table, listed, dry, dropped):
        assert result.exit_code == 0, result.output
        assert_escaped(result)
    assert "o-\\u001b]0;owned" in table.stdout
    # AND the JSON still holds the exact values
    for result in (listed, dropped):
        [message] = [json.loads(line) for line in result.stdout.splitlines()]
        assert message["order_id"] == HOSTILE_ID
        assert json.loads(message["body"])["key" + HOSTILE] == "value" + HOSTILE
        assert message["attributes"]["note"] == "\x9b31m\u202eevil"


def _record(ops: OpsWorld, order: dict[str, Any], *, pending: bool) -> str:
    """A state record and order row as an older consumer wrote them, ids included, age one hour."""
    event_id = "evt-" + HOSTILE
    created = int(time.time()) - 3600
    state: dict[str, Any] = {
        "event_id": {"S": event_id},
        "status": {"S": "pending" if pending else "sent"},
        "order_id": {"S": order["order_id"]},
        "payload_sha256": {"S": payload_sha256(order)},
        "created_at": {"N": str(created)},
    }
    if pending:
        state[PENDING_SHARD_ATTRIBUTE] = {"S": pending_shard(event_id)}
    ops.dynamodb.put_item(TableName="processed-events", Item=state)
    row = {name: {"S": value} for name, value in order.items()}
    ops.dynamodb.put_item(
        TableName="order-records",
        Item={**row, "event_id": {"S": event_id}, "payload_sha256": {"S": payload_sha256(order)}},
    )
    return event_id


def test_inspect_escapes_the_records_it_reads(ops: OpsWorld) -> None:
    # GIVEN a record and row full of hostile text
    event_id = _record(ops, {"order_id": HOSTILE_ID, "note" + HOSTILE: HOSTILE}, pending=False)
    # WHEN inspected, as text and as JSON
    text = ops.run("inspect", event_id)
    as_json = ops.run("inspect", "--order", HOSTILE_ID, "--json")
    # THEN nothing is written raw, and the JSON decodes to the exact values
    for result in (text, as_json):
        assert result.exit_code == 0, result.output
        assert_escaped(result)
    report = json.loads(as_json.stdout)
    assert (report["event_id"], report["order_id"]) == (event_id, HOSTILE_ID)
    assert report["order_row"]["note" + HOSTILE] == HOSTILE


def test_pending_escapes_ids_listed_resent_and_refused(ops: OpsWorld) -> None:
    # GIVEN an old pending record whose ids are hostile (the consumer now parks such ids; an older one did not)
    event_id = _record(ops, {"order_id": HOSTILE_ID}, pending=True)
    # WHEN listed, as text and JSON, and resent (the producer's check refuses the id now)
    text = ops.run("pending")
    as_json = ops.run("pending", "--json")
    resent = ops.run("pending", "--resend", "--yes")
    # THEN nothing is written raw
    for result in (text, as_json, resent):
        assert_escaped(result)
    assert json.loads(as_json.stdout)["event_id"] == event_id
    assert resent.exit_code == 1
    assert "-> NOT resent: the consumer would refuse it: INVALID_MESSAGE" in resent.stdout


def test_send_escapes_ids_and_the_reasons_sqs_gives(ops: OpsWorld) -> None:
    # GIVEN an order whose id holds a bidi override (valid in an id), and an SQS answering hostile text
    line = json.dumps({"order_id": "o-\u202e1"}) + "\n"

    def refuse(call: int, entry: Any) -> tuple[str, bool]:
        return ("Denied\x1b]0;owned\x07\x9b31m", True)

    # WHEN sent, as JSON and as text
    as_json = ops.run("send", "-", "--json", input=line, sqs=PartialBatchSqs(ops.sqs, refuse))
    text = ops.run("send", "-", input=line, sqs=PartialBatchSqs(ops.sqs, refuse))
    # THEN nothing is written raw, and the JSON decodes to the exact id
    for result in (as_json, text):
        assert result.exit_code == 1
        assert_escaped(result)
        assert "Denied\\u001b]0;owned" in result.stderr
    [sent] = [json.loads(out) for out in as_json.stdout.splitlines()]
    assert sent["order_id"] == "o-\u202e1"
    assert sent["event_id"] == derive_event_id({"order_id": "o-\u202e1"})


CLI_PACKAGE = Path(commands.__file__).parent
#: Calls that write to the terminal (or raise a message click writes) without escaping.
RAW_WRITERS = frozenset(
    {"click.echo", "click.secho", "click.confirm", "click.prompt", "click.ClickException", "print"}
    | {"sys.stdout.write", "sys.stderr.write"}
)


def _raw_writes(module: Path) -> list[str]:
    tree = ast.parse(module.read_text())
    return [
        f"{module.name}:{node.lineno} {ast.unparse(node.func)}"
        for node in ast.walk(tree)
        if isinstance(node, ast.Call) and ast.unparse(node.func) in RAW_WRITERS
    ]


def test_every_line_goes_out_through_the_one_escaping_module() -> None:
    # GIVEN the CLI package's modules, and the output module, which must be found writing (the search works)
    modules = sorted(CLI_PACKAGE.glob("*.py"))
    assert _raw_writes(CLI_PACKAGE / "output.py")
    # WHEN the others' calls are read
    raw = [write for module in modules if module.name != "output.py" for write in _raw_writes(module)]
    # THEN none writes or raises a message except through idempotent_order_pipeline.cli.output
    assert len(modules) > 5
    assert raw == []
