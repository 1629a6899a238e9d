"""End to end: ``order-pipeline smoke`` after ``cdk deploy`` of the dev stage onto the stand-in, as a team
runs it after each deploy; then with the consumer's code replaced by one that cannot import.

The installed command runs in a process of its own with the operator's options only (``--endpoint-url``,
``--region``, ``--stack``), against the deployed function run by the stand-in from its deployed asset.
Everything asserted about what is left is read from the endpoint. Both outputs are printed (``-s``)
for the record: the runbook quotes their shape.
"""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys
import time
import zipfile
from pathlib import Path
from typing import Any

import pytest

from idempotent_order_pipeline.cli.inbox import QUEUE_NAME_PREFIX
from idempotent_order_pipeline.sandbox.demo import Sandbox, SandboxOptions

pytestmark = pytest.mark.e2e

REPO = Path(__file__).resolve().parents[2]
ORDER_PIPELINE = Path(sys.executable).parent / "order-pipeline"
STACK = "dev-OrderPipeline"
#: A canary the worked app's order_schema accepts, for a country its fulfilment subscriber leaves alone.
CANARY = {
    "amount": 1,
    "currency": "EUR",
    "country": "ZZ",
    "customer": {"id": "smoke", "tier": "standard"},
    "items": [{"sku": "smoke", "quantity": 1}],
}
#: The consumer's handler module, replaced by one that fails at import (as a module the runtime cannot
#: compile would: every invocation fails before the handler exists).
BROKEN_HANDLER = "import order_consumer_dependency_that_was_not_packaged  # noqa\n"
PATIENCE_SECONDS = 120


def _smoke(endpoint: Any, *args: str) -> subprocess.CompletedProcess[str]:
    environment = {name: value for name, value in os.environ.items() if not name.startswith("AWS_")}
    environment |= {
        "AWS_ACCESS_KEY_ID": "testing",
        "AWS_SECRET_ACCESS_KEY": "testing",
        "PYTHONPATH": os.pathsep.join([str(REPO / "infra"), str(REPO)]),
    }
    command = [str(ORDER_PIPELINE), "--endpoint-url", endpoint.url, "--region", endpoint.region, "--stack", STACK]
    return subprocess.run(  # noqa: S603 - the installed command, arguments of this test
        [*command, "smoke", "--order", json.dumps(CANARY), *args],
        capture_output=True,
        text=True,
        env=environment,
        timeout=PATIENCE_SECONDS,
        check=False,
    )


def _left(endpoint: Any, outputs: dict[str, str], topic_subscriptions: list[str]) -> dict[str, Any]:
    """Everything of a smoke run the endpoint still holds (empty lists: nothing)."""
    dynamodb, sqs, sns = endpoint.client("dynamodb"), endpoint.client("sqs"), endpoint.client("sns")
    keys = {
        table: [
            value["S"]
            for item in dynamodb.scan(TableName=outputs[table], ConsistentRead=True)["Items"]
            for name, value in item.items()
            if name in ("event_id", "order_id") and value.get("S", "").startswith("smoke-")
        ]
        for table in ("ProcessedEventsTableName", "OrderRecordsTableName")
    }
    parked = sqs.receive_message(
        QueueUrl=outputs["DeadLetterQueueUrl"], MaxNumberOfMessages=10, VisibilityTimeout=0, WaitTimeSeconds=0
    ).get("Messages", [])
    subscriptions = sns.list_subscriptions_by_topic(TopicArn=outputs["TopicArn"])["Subscriptions"]
    return {
        **keys,
        "dlq": [m["Body"] for m in parked if '"smoke-' in m["Body"]],
        "queues": [url for url in sqs.list_queues().get("QueueUrls", []) if QUEUE_NAME_PREFIX in url],
        "subscriptions": sorted(s["Endpoint"] for s in subscriptions if s["Endpoint"] not in topic_subscriptions),
    }


def _broken_code() -> bytes:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive:
        archive.writestr("order_consumer/__init__.py", "")
        archive.writestr("order_consumer/handler.py", BROKEN_HANDLER)
    return buffer.getvalue()


def test_smoke_passes_on_the_deployed_stage_and_fails_on_a_consumer_that_cannot_import(tmp_path: Path) -> None:
    # GIVEN the dev stage deployed onto the stand-in with the real CDK CLI, its consumer live
    options = SandboxOptions(work_dir=tmp_path, concurrency=1, visibility_timeout=2)
    with Sandbox(options) as sandbox:
        endpoint, outputs = sandbox.endpoint, dict(sandbox.deployment.outputs)
        subscriptions = sorted(
            s["Endpoint"]
            for s in endpoint.client("sns").list_subscriptions_by_topic(TopicArn=outputs["TopicArn"])["Subscriptions"]
        )
        nothing = {
            "ProcessedEventsTableName": [],
            "OrderRecordsTableName": [],
            "dlq": [],
            "queues": [],
            "subscriptions": [],
        }

        # WHEN the smoke run checks it
        healthy = _smoke(endpoint)
        print(f"\n$ order-pipeline ... smoke (healthy), exit {healthy.returncode}\n{healthy.stdout}{healthy.stderr}")
        # THEN every check passed, and nothing of the run is left on the endpoint
        assert healthy.returncode == 0, healthy.stderr
        rows = [line.split()[:2] for line in healthy.stdout.splitlines()[2:]]
        assert rows == [
            [name, "pass"] for name in ("recorded", "sent", "notified", "resend_ignored", "invalid_parked", "cleanup")
        ]
        assert _left(endpoint, outputs, subscriptions) == nothing

        # WHEN the consumer's code is replaced by one that cannot import, and the stand-in runs it
        # (uploaded as `cdk deploy` uploads code: an object in the bootstrap bucket, which the stand-in reads)
        s3 = endpoint.client("s3")
        [bucket] = [b["Name"] for b in s3.list_buckets()["Buckets"] if b["Name"].startswith("cdk-")]
        s3.put_object(Bucket=bucket, Key="smoke-e2e/broken-consumer.zip", Body=_broken_code())
        updated = endpoint.client("lambda").update_function_code(
            FunctionName=sandbox.function.name, S3Bucket=bucket, S3Key="smoke-e2e/broken-consumer.zip"
        )
        deadline = time.monotonic() + PATIENCE_SECONDS
        while not any(
            mapping["code_sha256"] == updated["CodeSha256"] for mapping in sandbox.stand_in.status().get("mappings", [])
        ):
            assert time.monotonic() < deadline, "the stand-in never ran the new code"
            time.sleep(0.5)
        broken = _smoke(endpoint, "--timeout", "20s")
        print(
            f"\n$ order-pipeline ... smoke --timeout 20s (broken), exit {broken.returncode}\n"
            f"{broken.stdout}{broken.stderr}"
        )
        left = _left(endpoint, outputs, subscriptions)

    # THEN it fails, naming the checks, with the line that says the consumer recorded nothing
    assert broken.returncode == 1
    assert "smoke failed: recorded, sent, notified" in broken.stderr
    assert "(not run: resend_ignored, invalid_parked)" in broken.stderr
    assert "no canary was recorded within 20s: the consumer did not record anything; check its logs (" in broken.stdout
    # AND it still removed its queue and its subscription, wrote nothing, and left no DLQ copy of its
    # canaries but of those it names as not yet taken from the queue (SQS moves them on after the run)
    [cleanup] = [line for line in broken.stdout.splitlines() if line.startswith("cleanup ")]
    assert {**left, "dlq": []} == nothing
    assert all(json.loads(body)["event_id"] in cleanup for body in left["dlq"])
