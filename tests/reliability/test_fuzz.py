"""Fuzzed input: whatever arrives, the handler never raises out of the batch and never loses a record.

Each generated message is either recorded (its order row exists with its content) or parked in the
DLQ with a reason. Bodies only use the characters SQS can carry (anything else never reaches us).
"""

from __future__ import annotations

import base64
import json
import os
import re
from collections.abc import Iterator
from typing import Any

import boto3
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from moto import mock_aws

from order_consumer import handler as handler_module
from order_consumer.pipeline import Outcome
from order_consumer.runtime import Clients
from order_events.keys import payload_sha256
from order_events.message import parse_body
from tests.consumer.harness import FakeContext, World, sqs_record

settings.register_profile("fuzz-ci", max_examples=300, deadline=None, suppress_health_check=list(HealthCheck))
settings.register_profile(
    "fuzz-reliability", max_examples=5_000, deadline=None, suppress_health_check=list(HealthCheck)
)
FUZZ_PROFILE = "fuzz-reliability" if os.environ.get("HYPOTHESIS_PROFILE") == "reliability" else "fuzz-ci"

# What SQS accepts in a message body: #x9 #xA #xD #x20-#xD7FF #xE000-#xFFFD #x10000-#x10FFFF.
_SQS_INVALID = re.compile("[^\t\n\r\x20-\ud7ff\ue000-\ufffd\U00010000-\U0010ffff]")
sqs_text = st.text(st.characters(codec="utf-8", exclude_categories=["Cs"])).map(lambda s: _SQS_INVALID.sub("", s))

json_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(min_value=-(10**60), max_value=10**60)
    | st.floats(allow_nan=True, allow_infinity=True)
    | st.decimals(allow_nan=False, allow_infinity=False).map(lambda d: float(d) if abs(d) < 1e300 else 0.0)
    | sqs_text,
    lambda children: st.lists(children, max_size=4) | st.dictionaries(sqs_text, children, max_size=4),
    max_leaves=20,
)
order_ids = st.one_of(sqs_text, st.sampled_from(["o-1", "o-2", "", "x" * 256, "x" * 257]), st.integers())


def _dump(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, allow_nan=True)


bodies = st.one_of(
    json_values.map(_dump),
    st.builds(lambda oid, rest: _dump({**rest, "order_id": oid}), order_ids, st.dictionaries(sqs_text, json_values)),
    st.binary(max_size=200).map(lambda b: _SQS_INVALID.sub("", b.decode("utf-8", errors="replace"))),
    st.integers(300_000, 500_000).map(lambda n: _dump({"order_id": "big", "blob": "x" * n})),
    st.integers(30, 5_000).map(lambda n: '{"order_id": "deep", "x": ' + "[" * n + "]" * n + "}"),
    st.sampled_from(["1e400", "-1e-400", "123456789012345678901234567890123456789012", "NaN", "-Infinity"]).map(
        lambda number: '{"order_id": "num", "n": ' + number + "}"
    ),
    sqs_text,
)
attribute_sets = st.dictionaries(
    st.sampled_from(["idempotency_key", "trace", "blob"]),
    st.one_of(
        sqs_text.map(lambda s: {"dataType": "String", "stringValue": s}),
        st.binary(max_size=64).map(lambda b: {"dataType": "Binary", "binaryValue": base64.b64encode(b).decode()}),
        st.integers().map(lambda n: {"dataType": "Number", "stringValue": str(n)}),
    ),
    max_size=3,
)


@pytest.fixture(scope="module")
def fuzz_world() -> Iterator[World]:
    with mock_aws():
        aws = Clients(dynamodb=boto3.client("dynamodb"), sns=boto3.client("sns"), sqs=boto3.client("sqs"))
        world = World(aws=aws, prefix="fuzz-")
        yield world
    handler_module.configure()


@settings(settings.get_profile(FUZZ_PROFILE))
@given(body=bodies, attributes=attribute_sets)
def test_any_input_is_recorded_or_parked_never_lost(fuzz_world: World, body: str, attributes: dict[str, Any]) -> None:
    # GIVEN any message SQS could deliver
    if not body:
        body = " "  # SQS rejects empty bodies
    record = sqs_record(body, attributes=attributes)
    pipeline = handler_module._get_pipeline()
    # WHEN the handler's pipeline processes it (the handler itself must not raise either)
    [result] = pipeline.process_batch([record])
    # THEN it was handled, not left for retry: no fault was injected, so nothing is transient
    assert result.outcome is not Outcome.RETRY, result.error
    parked = [
        m
        for m in fuzz_world.dead_letters()
        if m["MessageAttributes"]["source_message_id"]["StringValue"] == record["messageId"]
    ]
    if result.outcome in (Outcome.INVALID, Outcome.CONFLICT):
        # parked with its reason and its exact body
        [message] = parked
        assert message["Body"] == body
        assert message["MessageAttributes"]["error_code"]["StringValue"] in {
            "INVALID_MESSAGE",
            "ITEM_TOO_LARGE",
            "VALIDATION_FAILED",
            "IDEMPOTENCY_CONFLICT",
        }
    else:
        # recorded: the order row holds exactly this content
        assert parked == []
        order = parse_body(body)
        row = fuzz_world.dynamodb.get_item(
            TableName=fuzz_world.orders_table, Key={"order_id": {"S": order["order_id"]}}, ConsistentRead=True
        )["Item"]
        assert row["payload_sha256"]["S"] == payload_sha256(order)


def test_handler_survives_a_fuzzed_batch(fuzz_world: World) -> None:
    # GIVEN a batch of hostile records
    records = [
        sqs_record("\ufffd" * 10),
        sqs_record("[" * 100_000),
        sqs_record('{"order_id": "ok-batch"}'),
        sqs_record('{"order_id": "o", "n": 1e400}'),
    ]
    # WHEN the handler runs
    response = handler_module.handler({"Records": records}, FakeContext())
    # THEN it returns normally with nothing left for retry
    assert response == {"batchItemFailures": []}
