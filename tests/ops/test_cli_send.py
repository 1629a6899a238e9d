"""``order-pipeline send`` and what every command shares: stack outputs, clear errors, exit codes."""

from __future__ import annotations

import io
import json
import subprocess
import sys
import zipfile
from pathlib import Path
from typing import Any

import boto3
import pytest
from click.testing import CliRunner

from idempotent_order_pipeline.cli import cli
from idempotent_order_pipeline.cli.aws import AwsClients
from idempotent_order_pipeline.keys import derive_event_id
from tests.consumer.harness import ArmedFault, FaultBoard, GuardedClient, client_error
from tests.ops.conftest import OpsWorld

REPO = Path(__file__).resolve().parents[2]
ORDERS = [
    {"order_id": "o-1", "amount": 12.5, "items": [{"sku": "A", "qty": 2}]},
    {"order_id": "o-2", "amount": 0.1},
    {"order_id": "o-3", "event_id": "evt-own", "amount": 7},
]


def jsonl(orders: list[Any]) -> str:
    return "".join((order if isinstance(order, str) else json.dumps(order)) + "\n" for order in orders)


def test_send_file_enqueues_each_order_with_its_key_and_the_consumer_records_them(
    ops: OpsWorld, tmp_path: Path
) -> None:
    # GIVEN a JSON-lines file of orders (with a blank line)
    source = tmp_path / "orders.jsonl"
    source.write_text(jsonl(ORDERS[:2]) + "\n" + jsonl(ORDERS[2:]))
    # WHEN it is sent with JSON output
    result = ops.run("send", str(source), "--json")
    # THEN it succeeds and reports one result per order, with the consumer's keys
    assert result.exit_code == 0, result.output
    lines = [json.loads(line) for line in result.stdout.splitlines()]
    assert [(r["line"], r["order_id"], r["sent"]) for r in lines] == [
        (1, "o-1", True),
        (2, "o-2", True),
        (4, "o-3", True),
    ]
    expected = {"o-1": derive_event_id(ORDERS[0]), "o-2": derive_event_id(ORDERS[1]), "o-3": "evt-own"}
    assert {r["order_id"]: r["event_id"] for r in lines} == expected
    assert "sent 3 of 3 order(s)" in result.stderr
    # AND the consumer records them exactly under those keys
    assert ops.consume() == 3
    rows = ops.order_rows()
    assert {order_id: row["event_id"] for order_id, row in rows.items()} == expected
    assert str(rows["o-2"]["amount"]) == "0.1"
    assert {record["status"] for record in ops.event_records().values()} == {"sent"}


def test_sending_the_same_file_twice_records_each_order_once(ops: OpsWorld, tmp_path: Path) -> None:
    # GIVEN a file already sent and consumed
    source = tmp_path / "orders.jsonl"
    source.write_text(jsonl(ORDERS))
    assert ops.run("send", str(source)).exit_code == 0
    ops.consume()
    # WHEN it is sent and consumed again (a replay after a timeout)
    assert ops.run("send", str(source)).exit_code == 0
    assert ops.consume() == 3
    # THEN there is still one row per order and one notification per event
    assert sorted(ops.order_rows()) == ["o-1", "o-2", "o-3"]
    assert sorted(ops.notified_events().values()) == [1, 1, 1]


def test_send_reads_standard_input(ops: OpsWorld) -> None:
    # GIVEN orders on stdin, WHEN sent with "-"
    result = ops.run("send", "-", input=jsonl(ORDERS[:2]))
    # THEN both are in the queue
    assert result.exit_code == 0, result.output
    assert "sent 2 of 2 order(s)" in result.stdout
    assert sorted(json.loads(m["Body"])["order_id"] for m in ops.receive_all(ops.queue_url)) == ["o-1", "o-2"]


BAD_LINES = [ORDERS[0], "{not json", {"amount": 3}, ORDERS[1], '["o-9"]']


def test_invalid_lines_fail_the_whole_send_by_default(ops: OpsWorld) -> None:
    # GIVEN a file with invalid lines 2, 3 and 5
    # WHEN it is sent without --on-invalid
    result = ops.run("send", "-", input=jsonl(BAD_LINES))
    # THEN nothing is sent, the command fails and names every invalid line with its reason
    assert result.exit_code == 1
    assert "line 2: invalid: INVALID_MESSAGE: body is not valid JSON" in result.stderr
    # AND a malformed line names one line number, its own (the JSON error's position is a column)
    [malformed] = [line for line in result.stderr.splitlines() if line.startswith("line 2: ")]
    assert malformed.endswith("body is not valid JSON: Expecting property name enclosed in double quotes at column 2")
    assert malformed.count("line") == 1
    assert "line 3: invalid: INVALID_MESSAGE" in result.stderr
    assert "order_id" in result.stderr
    assert "line 5: invalid: INVALID_MESSAGE: body must be a JSON object" in result.stderr
    assert "3 invalid line(s) of 5; nothing sent" in result.stderr
    assert ops.receive_all(ops.queue_url) == []


def test_invalid_lines_are_skipped_on_request(ops: OpsWorld) -> None:
    # GIVEN the same file, WHEN sent with --on-invalid skip --json
    result = ops.run("send", "-", "--on-invalid", "skip", "--json", input=jsonl(BAD_LINES))
    # THEN the valid lines are sent and the invalid ones reported, with line numbers
    assert result.exit_code == 0, result.output
    lines = [json.loads(line) for line in result.stdout.splitlines()]
    assert sorted((r["line"], r["sent"]) for r in lines) == [(1, True), (2, False), (3, False), (4, True), (5, False)]
    assert "sent 2 of 5 order(s)" in result.stderr
    assert sorted(json.loads(m["Body"])["order_id"] for m in ops.receive_all(ops.queue_url)) == ["o-1", "o-2"]


def test_orders_sqs_does_not_take_make_the_send_fail_and_are_named(ops: OpsWorld) -> None:
    # GIVEN SQS refuses every batch
    board = FaultBoard()
    board.arm(ArmedFault(client_error("SendMessageBatch", "AccessDenied"), operation="send_message_batch"))
    # WHEN a file is sent
    result = ops.run("send", "-", input=jsonl(ORDERS[:2]), sqs=GuardedClient(ops.sqs, board))
    # THEN the command fails, names each unsent order, and says a resend is safe
    assert result.exit_code == 1
    assert "line 1: order o-1: not sent" in result.stderr
    assert "AccessDenied" in result.stderr
    assert "2 order(s) not sent; sending the same lines again is safe" in result.stderr


def test_identity_fields_come_from_the_consumer_function(ops: OpsWorld) -> None:
    # GIVEN the consumer function is configured with IDENTITY_FIELDS=order_id,customer_id
    iam = boto3.client("iam")
    role = iam.create_role(RoleName="consumer", AssumeRolePolicyDocument="{}")["Role"]["Arn"]
    code = io.BytesIO()
    with zipfile.ZipFile(code, "w") as archive:
        archive.writestr("index.py", "def handler(event, context):\n    return None\n")
    boto3.client("lambda").create_function(
        FunctionName="order-consumer",
        Runtime="python3.13",
        Role=role,
        Handler="index.handler",
        Code={"ZipFile": code.getvalue()},
        Environment={"Variables": {"IDENTITY_FIELDS": "order_id,customer_id"}},
    )
    order = {"order_id": "o-1", "customer_id": "c-7"}
    # WHEN an order without event_id is sent
    result = ops.run("send", "-", "--json", input=jsonl([order]))
    # THEN its key is derived from both fields, as the consumer would derive it
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)["event_id"] == derive_event_id(order, ("order_id", "customer_id"))
    assert "identity fields order_id,customer_id from function order-consumer" in result.stderr
    # AND --identity-fields overrides it
    result = ops.run("--identity-fields", "customer_id", "send", "-", "--json", input=jsonl([order]))
    assert json.loads(result.stdout)["event_id"] == derive_event_id(order, ("customer_id",))


def test_a_missing_stack_is_a_clear_error(ops: OpsWorld) -> None:
    # GIVEN no stack of that name
    # WHEN any command runs against it
    result = CliRunner().invoke(cli, ["--stack", "prod-OrderPipeline", "pending"], obj=AwsClients())
    # THEN it fails with exit code 1 and says what to do
    assert result.exit_code == 1
    assert "stack 'prod-OrderPipeline' not found" in result.stderr
    assert "--stack NAME" in result.stderr


def test_a_missing_output_is_a_clear_error(ops: OpsWorld) -> None:
    # GIVEN a stack that is not an order pipeline
    template = {"Resources": {"Topic": {"Type": "AWS::SNS::Topic"}}, "Outputs": {"TopicArn": {"Value": "x"}}}
    boto3.client("cloudformation").create_stack(StackName="other", TemplateBody=json.dumps(template))
    # WHEN a command needs the queue
    result = CliRunner().invoke(cli, ["--stack", "other", "send", "-"], input="{}\n", obj=AwsClients())
    # THEN it fails naming the missing output and the ones the stack has
    assert result.exit_code == 1
    assert "stack 'other' (CREATE_COMPLETE) has no output 'QueueUrl'; it has TopicArn" in result.stderr


@pytest.mark.slow
def test_module_entry_point_runs_the_cli() -> None:
    # GIVEN the package as installed, WHEN run with python -m
    completed = subprocess.run(
        [sys.executable, "-m", "idempotent_order_pipeline.cli", "--help"],
        cwd=REPO,
        capture_output=True,
        text=True,
        check=False,
        timeout=120,
    )
    # THEN it prints the commands
    assert completed.returncode == 0, completed.stderr
    for command in ("send", "inspect", "dlq", "redrive", "pending"):
        assert command in completed.stdout


def test_clients_go_to_the_given_endpoint_and_region() -> None:
    # GIVEN the options an operator passes for the sandbox
    clients = AwsClients(endpoint_url="http://localhost:4566", region="ap-southeast-2")
    # WHEN the clients are created, THEN each talks to that endpoint in that region, created once
    for client in (clients.sqs, clients.dynamodb, clients.cloudformation, clients.lambda_):
        assert client.meta.endpoint_url == "http://localhost:4566"
        assert client.meta.region_name == "ap-southeast-2"
    assert clients.sqs is clients.sqs
