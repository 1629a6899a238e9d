"""The CLI in scripts: one ``--json``, questions a script cannot answer, summaries, short endpoint errors.

A script runs ``order-pipeline`` without a terminal: the commands that delete or send in bulk
(``dlq drop``, ``redrive``, ``pending --resend``) refuse unless told ``--yes``, ask on a terminal,
and show what they would do with ``--dry-run``. The terminal is simulated by replacing
:func:`idempotent_order_pipeline.cli.output.on_terminal` (click's test runner has none).
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import boto3
import pytest
from botocore.exceptions import ClientError
from botocore.stub import Stubber
from click.testing import CliRunner

from idempotent_order_pipeline.cli import cli
from idempotent_order_pipeline.cli.aws import AwsClients
from tests.ops.conftest import OpsWorld, PartialBatchSqs
from tests.ops.test_cli_dlq import park_three_kinds
from tests.ops.test_cli_pending import record_pending

REPO = Path(__file__).resolve().parents[2]
TERMINAL = "idempotent_order_pipeline.cli.context.on_terminal"
#: What moto's server answers for an action it lacks (StartMessageMoveTask): a bare HTTP 500 page.
MOTO_SERVER_PAGE = (
    "<!doctype html>\n<html lang=en>\n<title>500 Internal Server Error</title>\n<h1>Internal Server Error</h1>\n"
    "<p>The server encountered an internal error and was unable to complete your request. Either the server is "
    "overloaded or there is an error in the application.</p>\n"
)


def _json_lines(text: str) -> list[dict[str, Any]]:
    return [json.loads(line) for line in text.splitlines()]


def _queues(ops: OpsWorld) -> tuple[int, int]:
    """(messages in the DLQ, messages in the queue), left in place."""
    return ops.visible_count(ops.dlq_url), ops.visible_count(ops.queue_url)


# --- one --json ----------------------------------------------------------------------------------


def test_json_before_the_command_is_the_same_as_after_it(ops: OpsWorld) -> None:
    # GIVEN three dead letters and two old pending records
    park_three_kinds(ops)
    record_pending(ops, {"o-old": 3600, "o-older": 7200})
    # WHEN listed with the global --json and with each command's own
    for command in (["dlq", "list", "--wait-seconds", "0"], ["pending"]):
        before = ops.run("--json", *command)
        after = ops.run(*command, "--json")
        # THEN both print the same JSON lines
        assert before.exit_code == after.exit_code == 0, before.output + after.output
        assert before.stdout.splitlines(), before.output
        key = "error_code" if command[0] == "dlq" else "event_id"
        assert sorted(r[key] for r in _json_lines(before.stdout)) == sorted(r[key] for r in _json_lines(after.stdout))


def test_redrive_takes_json_too(ops: OpsWorld) -> None:
    # GIVEN three dead letters
    park_three_kinds(ops)
    # WHEN redriven with --json (after the command)
    result = ops.run("redrive", "--json", "--yes", "--wait-seconds", "0")
    # THEN stdout is one JSON object: what moved, by code, and that it is complete
    assert result.exit_code == 0, result.output
    [report] = _json_lines(result.stdout)
    assert (report["method"], report["moved"], report["complete"]) == ("loop", 3, True)
    assert report["moved_by_code"] == {"IDEMPOTENCY_CONFLICT": 1, "INVALID_MESSAGE": 1, "MAX_RECEIVES": 1}
    # AND the global --json asks the same
    park_three_kinds(ops)
    ops.receive_all(ops.queue_url)
    [again] = _json_lines(ops.run("--json", "redrive", "--yes", "--wait-seconds", "0").stdout)
    assert again["moved"] >= 2


def test_drop_prints_json_only_when_asked(ops: OpsWorld) -> None:
    # GIVEN three dead letters
    park_three_kinds(ops)
    # WHEN the invalid one is dropped without --json
    text = ops.run("dlq", "drop", "--error-code", "INVALID_MESSAGE", "--yes", "--wait-seconds", "0")
    # THEN it is shown as a table row, not JSON
    assert text.exit_code == 0, text.output
    lines = text.stdout.splitlines()
    assert lines[0].startswith("ERROR_CODE")
    assert [line.split()[0] for line in lines[1:]] == ["INVALID_MESSAGE"]
    assert not any(line.lstrip().startswith("{") for line in lines)
    # AND with --json (global or its own) each dropped message is a JSON record with its body
    for args in (("dlq", "drop", "--json"), ("--json", "dlq", "drop")):
        code = "MAX_RECEIVES" if args[0] == "dlq" else "IDEMPOTENCY_CONFLICT"
        result = ops.run(*args, "--error-code", code, "--yes", "--wait-seconds", "0")
        [record] = _json_lines(result.stdout)
        assert record["error_code"] == code
        assert "body" in record


# --- questions, --yes and --dry-run --------------------------------------------------------------

DESTRUCTIVE = {
    "dlq drop": ["dlq", "drop", "--all", "--wait-seconds", "0"],
    "redrive": ["redrive", "--wait-seconds", "0"],
    "pending --resend": ["pending", "--resend", "--older-than", "30m"],
}


@pytest.fixture
def busy(ops: OpsWorld) -> OpsWorld:
    """Three dead letters and two old pending records whose messages are gone."""
    record_pending(ops, {"o-old": 3600, "o-older": 7200, "o-new": 60})
    park_three_kinds(ops)
    assert _queues(ops) == (3, 0)
    return ops


@pytest.mark.parametrize("command", DESTRUCTIVE.values(), ids=DESTRUCTIVE.keys())
def test_without_a_terminal_a_destructive_command_needs_yes(busy: OpsWorld, command: list[str]) -> None:
    # GIVEN no terminal (a script, a pipe) WHEN the command runs without --yes
    result = busy.run(*command)
    # THEN it refuses as a usage error, saying what to pass, and changes nothing
    assert result.exit_code == 2, result.output
    assert "no terminal to ask" in result.stderr
    assert "--yes" in result.stderr
    assert "--dry-run" in result.stderr
    assert _queues(busy) == (3, 0)


@pytest.mark.parametrize("command", DESTRUCTIVE.values(), ids=DESTRUCTIVE.keys())
def test_on_a_terminal_a_destructive_command_asks_and_no_means_nothing_changes(
    busy: OpsWorld, command: list[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    # GIVEN a terminal
    monkeypatch.setattr(TERMINAL, lambda: True)
    # WHEN the question is answered no
    result = busy.run(*command, input="n\n")
    # THEN it was asked, the command aborted, and nothing changed
    assert result.exit_code == 1, result.output
    assert "[y/N]" in result.stderr
    assert _queues(busy) == (3, 0)


def test_on_a_terminal_yes_goes_ahead(busy: OpsWorld, monkeypatch: pytest.MonkeyPatch) -> None:
    # GIVEN a terminal WHEN each question is answered yes
    monkeypatch.setattr(TERMINAL, lambda: True)
    resend = busy.run(*DESTRUCTIVE["pending --resend"], input="y\n")
    redrive = busy.run(*DESTRUCTIVE["redrive"], input="y\n")
    # THEN the two orders were resent and the three dead letters moved
    assert resend.exit_code == 0, resend.output
    assert "Re-enqueue the orders of 2 pending record(s)" in resend.stderr
    assert redrive.exit_code == 0, redrive.output
    assert "redrive (loop): moved 3 message(s)" in redrive.stdout
    assert _queues(busy) == (0, 5)


def test_dry_runs_change_nothing_and_say_what_they_would_do(busy: OpsWorld) -> None:
    # GIVEN no terminal and no --yes WHEN each destructive command runs with --dry-run
    drop = busy.run(*DESTRUCTIVE["dlq drop"], "--dry-run")
    redrive = busy.run(*DESTRUCTIVE["redrive"], "--dry-run")
    resend = busy.run(*DESTRUCTIVE["pending --resend"], "--dry-run")
    redrive_json = busy.run("--json", *DESTRUCTIVE["redrive"], "--dry-run", "--error-code", "MAX_RECEIVES")
    resend_json = busy.run(*DESTRUCTIVE["pending --resend"], "--dry-run", "--json")
    # THEN each says what it would do
    assert drop.exit_code == redrive.exit_code == resend.exit_code == 0, drop.output + redrive.output + resend.output
    assert len(drop.stdout.splitlines()) == 1 + 3  # the header and the three messages
    assert "would drop 3 message(s) from the DLQ (dry run: nothing deleted)" in drop.stderr
    assert "redrive (dry run): would move 3 message(s)" in redrive.stdout
    assert resend.stdout.count("-> would resend (dry run)") == 2
    assert "would resend 2 (dry run: nothing sent)" in resend.stderr
    [plan] = _json_lines(redrive_json.stdout)
    assert (plan["dry_run"], plan["would_move"], plan["moved_by_code"]) == (True, 1, {"MAX_RECEIVES": 1})
    assert [(r["resent"], r["dry_run"]) for r in _json_lines(resend_json.stdout)] == [(False, True)] * 2
    # AND nothing was deleted, moved or sent
    assert _queues(busy) == (3, 0)


# --- repeated errors, summarised -----------------------------------------------------------------


def test_fifty_orders_refused_for_one_cause_are_summarised_as_one_cause(ops: OpsWorld) -> None:
    # GIVEN 50 orders, and an SQS that refuses 48 for one reason and 2 for another
    orders = "".join(json.dumps({"order_id": f"o-{i}"}) + "\n" for i in range(50))

    def refuse(call: int, entry: Mapping[str, Any]) -> tuple[str, bool]:
        return (
            ("KmsThrottled", True)
            if json.loads(entry["MessageBody"])["order_id"] in ("o-3", "o-7")
            else (
                "AccessDenied",
                True,
            )
        )

    # WHEN they are sent
    result = ops.run("send", "-", input=orders, sqs=PartialBatchSqs(ops.sqs, refuse))
    # THEN each line is still named, and a summary counts each cause once
    assert result.exit_code == 1
    assert result.stderr.count(": not sent: ") == 50
    summary = result.stderr[result.stderr.index("not sent, by cause:") :].splitlines()
    assert summary[1:3] == [
        "  48 x SQS rejected the message: AccessDenied: injected",
        "  2 x SQS rejected the message: KmsThrottled: injected",
    ]


def test_resends_that_fail_for_one_cause_are_summarised(busy: OpsWorld) -> None:
    # GIVEN two old pending records whose order rows are gone
    for order_id in ("o-old", "o-older"):
        busy.dynamodb.delete_item(TableName="order-records", Key={"order_id": {"S": order_id}})
    # WHEN they are resent
    result = busy.run(*DESTRUCTIVE["pending --resend"], "--yes")
    # THEN both are named, and summarised as one cause
    assert result.exit_code == 1
    assert result.stdout.count("-> NOT resent: its order row is missing") == 2
    assert "not resent, by cause:\n  2 x its order row is missing\n" in result.stderr


# --- errors from the endpoint --------------------------------------------------------------------


class HtmlErrorSqs:
    """An SQS client whose chosen operations fail as moto's server answers an action it lacks."""

    def __init__(self, client: Any, *operations: str) -> None:
        self._client = client
        self._operations = operations

    def __getattr__(self, name: str) -> Any:
        if name in self._operations:
            operation = "".join(part.title() for part in name.split("_"))

            def fail(**kwargs: Any) -> Any:
                error: Any = {"Error": {"Code": "500", "Message": MOTO_SERVER_PAGE}}
                raise ClientError({**error, "ResponseMetadata": {"HTTPStatusCode": 500}}, operation)

            return fail
        return getattr(self._client, name)


def test_an_endpoints_html_error_page_becomes_its_code_and_title(ops: OpsWorld) -> None:
    # GIVEN a dead letter and an endpoint that answers StartMessageMoveTask with an HTML page
    ops.dead_letter({"order_id": "o-1"})
    sqs = HtmlErrorSqs(ops.sqs, "start_message_move_task")
    # WHEN a move task is demanded
    result = ops.run("redrive", "--method", "move-task", "--yes", sqs=sqs)
    # THEN the error is one short line: the code and the page's title
    assert result.exit_code == 1
    [line] = result.stderr.splitlines()
    assert "lacks StartMessageMoveTask (500: 500 Internal Server Error); use --method loop" in line
    assert "<" not in result.stderr


def test_any_failed_call_is_reported_by_code_and_short_message(ops: OpsWorld) -> None:
    # GIVEN an endpoint whose ReceiveMessage answers an HTML page
    sqs = HtmlErrorSqs(ops.sqs, "receive_message")
    # WHEN the DLQ is listed
    result = ops.run("dlq", "list", "--wait-seconds", "0", sqs=sqs)
    # THEN one line names the call, the code and the title
    assert result.exit_code == 1
    assert result.stderr.strip() == "Error: ReceiveMessage failed: 500: 500 Internal Server Error"


def test_a_whole_call_refused_is_named_by_code_and_message_once_per_cause(ops: OpsWorld) -> None:
    # GIVEN orders for a queue that does not exist (every SendMessageBatch call is refused)
    orders = "".join(json.dumps({"order_id": f"o-{i}"}) + "\n" for i in range(12))
    missing = ops.queue_url.replace("orders", "no-such-queue")
    # WHEN they are sent
    result = ops.run("--queue-url", missing, "send", "-", "--json", input=orders)
    # THEN each line and the JSON give the code and the message, not botocore's sentence around them
    assert result.exit_code == 1
    assert "An error occurred" not in result.output
    cause = "SendMessageBatch failed: AWS.SimpleQueueService.NonExistentQueue: The specified queue does not exist."
    assert result.stderr.count(f": not sent: {cause}") == 12
    assert {line["error"] for line in _json_lines(result.stdout)} == {cause}
    # AND the summary counts them as one cause
    assert f"not sent, by cause:\n  12 x {cause}\n" in result.stderr


def test_a_long_endpoint_message_is_cut() -> None:
    from idempotent_order_pipeline.cli.errors import MAX_ENDPOINT_MESSAGE, describe

    # GIVEN an error whose message is a multi-line stack trace of 5,000 characters
    trace = "Traceback (most recent call last):\n" + "  File 'x.py', line 1, in f\n" * 200
    error = ClientError({"Error": {"Code": "InternalFailure", "Message": trace}}, "SendMessage")
    # WHEN described, THEN one line of at most the limit, starting with the code
    text = describe(error)
    assert text.startswith("InternalFailure: Traceback (most recent call last): File 'x.py'")
    assert "\n" not in text
    assert len(text) <= len("InternalFailure: ") + MAX_ENDPOINT_MESSAGE


# --- where it looked -----------------------------------------------------------------------------


def test_a_missing_stack_names_the_endpoint_and_region_really_asked() -> None:
    # GIVEN a local endpoint in eu-west-1 (the region from the environment) without the stack
    cloudformation = boto3.client("cloudformation", endpoint_url="http://localhost:4566")
    stubber = Stubber(cloudformation)
    stubber.add_client_error(
        "get_template", service_error_code="ValidationError", service_message="Stack with id Nope does not exist"
    )
    # WHEN a command asks for it
    with stubber:
        result = CliRunner().invoke(
            cli, ["--stack", "Nope", "pending"], obj=AwsClients(overrides={"cloudformation": cloudformation})
        )
    # THEN the message says where it looked
    assert result.exit_code == 1
    assert "stack 'Nope' not found (endpoint http://localhost:4566, region eu-west-1)" in result.stderr


def test_where_resolves_the_environments_region_and_endpoint(monkeypatch: pytest.MonkeyPatch) -> None:
    # GIVEN no options, and the environment naming an endpoint and a region
    monkeypatch.setenv("AWS_ENDPOINT_URL", "http://127.0.0.1:5000")
    monkeypatch.setenv("AWS_DEFAULT_REGION", "ap-southeast-2")
    # WHEN the clients say where they go, THEN they name both
    assert AwsClients().where() == "endpoint http://127.0.0.1:5000, region ap-southeast-2"
    # AND without an endpoint, AWS's own for the region
    monkeypatch.delenv("AWS_ENDPOINT_URL")
    assert AwsClients().where() == "endpoint https://cloudformation.ap-southeast-2.amazonaws.com, region ap-southeast-2"


# --- without the ops extra -----------------------------------------------------------------------

_WITHOUT = """
import runpy, sys

class NotInstalled:
    # Finds nothing for {module!r}, as if the ops extra had not installed it.
    def find_spec(self, name, path=None, target=None):
        if name == {module!r} or name.startswith({module!r} + "."):
            raise ModuleNotFoundError(f"No module named {{name!r}}", name=name)
        return None

sys.meta_path.insert(0, NotInstalled())
sys.argv = ["order-pipeline", "--help"]
{run}
"""
_ENTRIES: dict[str, str] = {
    "python -m": 'runpy.run_module("idempotent_order_pipeline.cli", run_name="__main__", alter_sys=True)',
    "console script": "from idempotent_order_pipeline.cli import main; main()",
}


@pytest.mark.slow
@pytest.mark.parametrize("module", ["click", "boto3"])
@pytest.mark.parametrize("entry", _ENTRIES.values(), ids=_ENTRIES.keys())
def test_without_the_ops_extra_help_is_a_one_line_hint(module: str, entry: str) -> None:
    # GIVEN an installation without the ops extra (the module cannot be found)
    # WHEN order-pipeline --help runs
    completed = subprocess.run(  # noqa: S603 - this interpreter, a script of this file
        [sys.executable, "-c", _WITHOUT.format(module=module, run=entry)],
        cwd=REPO,
        capture_output=True,
        text=True,
        check=False,
        timeout=120,
    )
    # THEN it prints one line naming the extra and how to install it, no traceback, and exits with 1
    assert completed.returncode == 1, completed.stderr
    assert completed.stderr.splitlines() == [
        f"order-pipeline needs the 'ops' extra ({module} is not installed): "
        "pip install 'idempotent-order-pipeline[ops]'"
    ]
    assert "Traceback" not in completed.stderr


def test_the_hint_names_the_extra_pyproject_declares() -> None:
    import tomllib

    # GIVEN the packaging metadata, WHEN its extras are read, THEN 'ops' installs click and boto3
    extras = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["optional-dependencies"]
    assert {re.split(r"[<>=\[ ]", requirement)[0] for requirement in extras["ops"]} >= {"click", "boto3"}
