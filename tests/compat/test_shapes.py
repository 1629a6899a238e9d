"""``tests/compat/shapes.py`` writes each release's records as that release really wrote them.

The migrate tests seed those shapes without starting a process; here the frozen releases write
records through their own consumers, and every attribute but the clock's is compared.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest

from tests.compat.released import V0_1_0, V0_2_0, released_functions
from tests.compat.shapes import record_0_1_0, record_0_2_0
from tests.consumer.harness import sqs_record
from tests.ops.conftest import OpsWorld

#: Starts processes (the test tiers' rule).
pytestmark = pytest.mark.slow

PENDING = {"order_id": "shape-pending", "amount": 1}
SENT = {"order_id": "shape-sent", "amount": 2}


def without_clock(item: Mapping[str, Any]) -> dict[str, Any]:
    """The item without the values taken from the clock (created_at, sent_at, ttl), their presence kept."""
    return {name: "<time>" if name in {"created_at", "sent_at", "ttl"} else value for name, value in item.items()}


@pytest.mark.parametrize(("root", "shape"), [(V0_1_0, record_0_1_0), (V0_2_0, record_0_2_0)], ids=["0.1.0", "0.2.0"])
def test_each_release_writes_the_shape_written_out_for_it(ops: OpsWorld, root: Path, shape: Any) -> None:
    # GIVEN a release as released, recording one order while SNS is down and one while it is up
    down = {**ops.env, "TOPIC_ARN": ops.topic_arn + "-gone", "RECONCILE_AFTER_SECONDS": "0"}
    with released_functions(root, down) as without_sns:
        without_sns.invoke([sqs_record(PENDING)])
    with released_functions(root, {**ops.env, "RECONCILE_AFTER_SECONDS": "0"}) as with_sns:
        assert with_sns.invoke([sqs_record(SENT)]) == {"batchItemFailures": []}

    # WHEN its records are read back as items
    items = {item["order_id"]["S"]: item for item in ops.dynamodb.scan(TableName=ops.events_table)["Items"]}

    # THEN each equals the written-out shape in every attribute (values from the clock aside)
    for order, sent in ((PENDING, False), (SENT, True)):
        item = items[order["order_id"]]
        expected = shape(item["event_id"]["S"], order["order_id"], item["payload_sha256"]["S"], created_at=0, sent=sent)
        assert without_clock(item) == without_clock(expected)
