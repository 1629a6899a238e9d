"""The AWS calls a batch costs, counted where botocore sends them (a contract: issue 32's budget).

Each call is counted by a ``before-call`` hook on the very clients the handler is given, so a call
made through any path (the pipeline, a retry inside botocore excluded: a retry is the same call) is
seen. Counts only, never times: speed belongs to ``make bench``.
"""

from __future__ import annotations

import re
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from idempotent_order_pipeline.sandbox.chaos import CALLS_OF_A_BATCH_OF_NEW_ORDERS
from tests.consumer.harness import World, seed, sqs_record

#: At most this many AWS calls for a batch of 10 new orders: 1 transaction of the ten records, 1 PublishBatch,
#: 1 call of marks (issue 32's budget is 12; a regression towards it fails here first). The stand-in's
#: crash plan picks its crash points among these calls, from the same constant.
CALLS_PER_BATCH_OF_TEN = CALLS_OF_A_BATCH_OF_NEW_ORDERS


def count_calls(world: World) -> Counter[str]:
    """Every call the world's clients send from now on, by operation name (botocore's boundary)."""
    counted: Counter[str] = Counter()

    def before_call(model: Any, **_: Any) -> None:
        counted[model.name] += 1

    for client in (world.dynamodb, world.sns, world.sqs):
        client.meta.events.register("before-call", before_call)
    return counted


@pytest.mark.parametrize("fifo", [False, True], ids=["standard", "fifo"])
def test_a_batch_of_ten_new_orders_costs_at_most_three_calls(make_world: Any, fifo: bool) -> None:
    # GIVEN ten new orders (on a FIFO pipeline: two message groups)
    world = make_world(fifo=fifo)
    records = [
        sqs_record({"order_id": f"o-{i}", "event_id": f"evt-{i}"}, **({"group": f"g-{i % 2}"} if fifo else {}))
        for i in range(10)
    ]
    calls = count_calls(world)
    # WHEN they are delivered in one batch
    assert world.invoke(records) == {"batchItemFailures": []}
    # THEN botocore sent one transaction of the ten records, one PublishBatch and one BatchExecuteStatement
    # of the ten marks
    assert calls == {"TransactWriteItems": 1, "PublishBatch": 1, "BatchExecuteStatement": 1}
    assert sum(calls.values()) <= CALLS_PER_BATCH_OF_TEN
    # AND every record is sent
    assert {r["status"] for r in world.event_records().values()} == {"sent"}


def test_a_batch_of_ten_duplicates_costs_one_call(world: World) -> None:
    # GIVEN ten orders already sent
    for i in range(10):
        seed(world, {"order_id": f"o-{i}"}, status="sent", event_id=f"evt-{i}")
    calls = count_calls(world)
    # WHEN they are delivered again
    assert world.invoke([sqs_record({"order_id": f"o-{i}", "event_id": f"evt-{i}"}) for i in range(10)]) == {
        "batchItemFailures": []
    }
    # THEN one transaction for the ten (cancelled: each record's own reasons say it exists), nothing else
    assert calls == {"TransactWriteItems": 1}


def test_the_readme_diagram_names_the_calls_a_batch_makes(make_world: Any) -> None:
    # GIVEN the README's diagram: the operations on the consumer's edges to the tables and the topic
    readme = (Path(__file__).resolve().parents[2] / "README.md").read_text(encoding="utf-8")
    edges = re.findall(r'^\s*fn -- "([^"]+)" --> (pe|orders|topic)\b', readme, flags=re.MULTILINE)
    named = {word for label, _ in edges for word in re.findall(r"\b[A-Z][a-z]+(?:[A-Z][a-z]+)+\b", label)}
    # AND ten new orders delivered in one batch, every call counted
    world = make_world()
    calls = count_calls(world)
    assert world.invoke([sqs_record({"order_id": f"o-{i}", "event_id": f"evt-{i}"}) for i in range(10)]) == {
        "batchItemFailures": []
    }
    # THEN the diagram names exactly the DynamoDB and SNS operations the batch sent
    assert named == set(calls), (named, calls)
