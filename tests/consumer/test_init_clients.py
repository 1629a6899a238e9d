"""Clients made at import (Lambda's init phase): they reach moto, and a bad environment never fails the import.

Each test runs a fresh interpreter, since what matters is what happens at the first import.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

# Each test imports the handler in a fresh interpreter (a subprocess).
pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[2]

WITH_MOTO = """
import json, os
from moto import mock_aws
from idempotent_order_pipeline.sandbox import moto_patches

moto_patches.apply_partiql_fix()  # the sent marks are PartiQL statements (tests/conftest.py)

with mock_aws():
    import boto3
    ddb = boto3.client("dynamodb")
    for table, key in (("events", "event_id"), ("orders", "order_id")):
        ddb.create_table(TableName=table, KeySchema=[{"AttributeName": key, "KeyType": "HASH"}],
                         AttributeDefinitions=[{"AttributeName": key, "AttributeType": "S"}],
                         BillingMode="PAY_PER_REQUEST")
    topic = boto3.client("sns").create_topic(Name="orders")["TopicArn"]
    dlq = boto3.client("sqs").create_queue(QueueName="dlq")["QueueUrl"]
    os.environ.update(PROCESSED_EVENTS_TABLE="events", ORDER_RECORDS_TABLE="orders", TOPIC_ARN=topic,
                      DEAD_LETTER_QUEUE_URL=dlq)

    # the clients are made here, inside the mock
    from idempotent_order_pipeline._lambda_asset.order_consumer import handler, runtime
    from tests.consumer.harness import FakeContext, sqs_record

    made_at_import = runtime._init_clients
    response = handler.handler({"Records": [sqs_record({"order_id": "o-1", "event_id": "e-1"}),
                                            sqs_record("not json")]}, FakeContext())
    pipeline = handler._pipeline
    item = ddb.get_item(TableName="events", Key={"event_id": {"S": "e-1"}})["Item"]
    parked = boto3.client("sqs").receive_message(QueueUrl=dlq, MessageAttributeNames=["All"])["Messages"]
    print(json.dumps({
        "made_at_import": made_at_import is not None,
        "sqs_at_import": made_at_import is not None and made_at_import.sqs is not None,
        "store_uses_them": pipeline._store._client is made_at_import.dynamodb,
        "notifier_uses_them": pipeline._notifier._client is made_at_import.sns,
        "response": response,
        "status": item["status"]["S"],
        "parked": [m["MessageAttributes"]["error_code"]["StringValue"] for m in parked],
    }))
"""

WITHOUT_ENVIRONMENT = """
import json
# no region, no credentials, no variables: must not fail
from idempotent_order_pipeline._lambda_asset.order_consumer import handler, runtime
from idempotent_order_pipeline._lambda_asset.order_consumer.contract.errors import ConfigurationError
from tests.consumer.harness import FakeContext, sqs_record

try:
    handler.handler({"Records": [sqs_record({"order_id": "o"})]}, FakeContext())
except ConfigurationError as exc:
    print(json.dumps({"made_at_import": runtime._init_clients is not None, "error": str(exc)}))
"""


def run(script: str, env: dict[str, str]) -> dict[str, Any]:
    python_path = os.pathsep.join([str(ROOT / "infra"), str(ROOT)])
    completed = subprocess.run(  # noqa: S603 - this interpreter, this test's own code
        [sys.executable, "-c", script],
        cwd=ROOT,
        env={"PATH": os.environ.get("PATH", ""), "PYTHONPATH": python_path, **env},
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert completed.returncode == 0, completed.stderr[-3000:]
    [line] = [line for line in completed.stdout.splitlines() if line.startswith('{"made_at_import"')]
    return dict(json.loads(line))


def test_clients_made_at_import_reach_moto_started_before_the_import() -> None:
    # GIVEN a fresh interpreter that starts mock_aws() and only then imports the handler
    # WHEN the handler processes a new order and an invalid message with its default clients
    outcome = run(WITH_MOTO, {"AWS_DEFAULT_REGION": "eu-west-1", "POWERTOOLS_METRICS_NAMESPACE": "Tests"})
    # THEN the DynamoDB and SNS clients were made at import, not the SQS one, and the pipeline uses them
    assert outcome["made_at_import"] is True
    assert outcome["sqs_at_import"] is False
    assert outcome["store_uses_them"] is True
    assert outcome["notifier_uses_them"] is True
    # AND they reached moto: the order is sent, the invalid message parked (by the SQS client made then)
    assert outcome["response"] == {"batchItemFailures": []}
    assert outcome["status"] == "sent"
    assert outcome["parked"] == ["INVALID_MESSAGE"]


def test_a_missing_region_or_variable_never_fails_the_import_only_the_invocation() -> None:
    # GIVEN a fresh interpreter without region, credentials or any of the function's variables
    # WHEN it imports the handler and invokes it
    outcome = run(WITHOUT_ENVIRONMENT, {})
    # THEN the import succeeded (no clients could be made) and the invocation names every missing variable
    assert outcome["made_at_import"] is False
    assert "PROCESSED_EVENTS_TABLE, ORDER_RECORDS_TABLE, TOPIC_ARN, DEAD_LETTER_QUEUE_URL" in outcome["error"]
