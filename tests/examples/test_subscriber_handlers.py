"""The examples' handlers as Lambda runs them: their code and the construct's layer on ``sys.path``, in a
process of their own (the helper is the top-level ``idempotent_subscriber`` there, as in Lambda)."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap

import pytest

from idempotent_order_pipeline.subscriber.layer import LAYER_ROOT
from tests.examples.conftest import SUBSCRIBER_EXAMPLE

pytestmark = pytest.mark.slow

RUN = textwrap.dedent(
    """
    import json, os, sys
    sys.path[:0] = [sys.argv[1], sys.argv[2]]  # the function's code, then the layer's /opt/python
    import boto3
    from moto import mock_aws

    with mock_aws():
        dynamodb = boto3.client("dynamodb", region_name="eu-west-1")
        for name, key in (("dedup-shipping", "event_id"), ("dedup-payments", "event_id"), ("counters", "order_id")):
            dynamodb.create_table(
                TableName=name,
                KeySchema=[{"AttributeName": key, "KeyType": "HASH"}],
                AttributeDefinitions=[{"AttributeName": key, "AttributeType": "S"}],
                BillingMode="PAY_PER_REQUEST",
            )
        os.environ.update(
            ORDER_SUBSCRIBER_DEDUP_TABLE="dedup-shipping",
            ORDER_SUBSCRIBER_LEASE_SECONDS="30",
            ORDER_SUBSCRIBER_RECORD_TTL_SECONDS="2592000",
            COUNTERS_TABLE="counters",
            PAYMENTS_URL="https://payments.invalid/charges",
        )
        import idempotent_subscriber, payments, shipping

        calls = []
        payments.charge = lambda order_id, idempotency_key: calls.append([order_id, idempotency_key])
        records = [
            {"messageId": f"m-{i}-{c}", "body": json.dumps({"event_id": f"e-{i}", "order_id": f"o-{i}"})}
            for i in range(3) for c in range(2)
        ]
        answers = [shipping.handler({"Records": records}, None)]
        os.environ["ORDER_SUBSCRIBER_DEDUP_TABLE"] = "dedup-payments"  # each subscriber has its own table
        answers.append(payments.handler({"Records": records}, None))
        counters = {
            item["order_id"]["S"]: item["shipments"]["N"] for item in dynamodb.scan(TableName="counters")["Items"]
        }
        print(json.dumps({
            "helper": idempotent_subscriber.__file__,
            "answers": answers,
            "counters": counters,
            "charged": sorted(order for order, _ in calls),
        }))
    """
)


def test_the_examples_act_once_per_order_beside_the_layer() -> None:
    # GIVEN the examples' code and the layer's python/ directory, as Lambda puts them on sys.path
    # WHEN two copies of 3 notifications are handled by each example in a fresh interpreter
    completed = subprocess.run(  # noqa: S603  (our interpreter, our paths)
        [sys.executable, "-c", RUN, str(SUBSCRIBER_EXAMPLE / "subscriber_lambda"), str(LAYER_ROOT / "python")],
        capture_output=True,
        text=True,
        check=False,
        env={
            "PATH": "/usr/bin:/bin",
            "AWS_ACCESS_KEY_ID": "testing",
            "AWS_SECRET_ACCESS_KEY": "testing",
            "AWS_DEFAULT_REGION": "eu-west-1",
        },
    )
    assert completed.returncode == 0, completed.stderr[-3000:]
    found = json.loads(completed.stdout.strip().splitlines()[-1])
    # THEN the helper came from the layer, every record was acknowledged, one effect per order each
    assert found["helper"].startswith(str(LAYER_ROOT / "python" / "idempotent_subscriber"))
    assert found["answers"] == [{"batchItemFailures": []}] * 2
    assert found["counters"] == {"o-0": "1", "o-1": "1", "o-2": "1"}
    assert found["charged"] == ["o-0", "o-1", "o-2"]
