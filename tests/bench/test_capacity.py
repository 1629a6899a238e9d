"""docs/capacity.md is the capacity model's output, and the model computes what it says it does."""

from __future__ import annotations

import math
from typing import Any

import pytest

from bench import capacity
from bench.capacity import GENERATED_END, GENERATED_START, QUOTAS, UnitsPerOrder, ceilings, first_limit

UNITS = UnitsPerOrder(tables={"events": 4.0, "rows": 2.0}, indexes={"events/pending-by-age": 2.0})


def by_component(rows: list[capacity.Ceiling]) -> dict[str, float]:
    return {row.component: row.orders_per_second for row in rows}


def test_the_page_is_the_model_of_the_current_code_and_props(deployed: dict[str, Any]) -> None:
    # GIVEN what the real consumer writes per order on tables as deployed, the props' defaults and the quotas
    generated = capacity.render(capacity.measure_units(deployed), capacity.pending_shards())
    # WHEN docs/capacity.md is read
    page = capacity.PAGE.read_text(encoding="utf-8")
    # THEN its generated part is exactly the model's output
    written = page[page.index(GENERATED_START) : page.index(GENERATED_END) + len(GENERATED_END)] + "\n"
    assert written == generated, "docs/capacity.md is stale: run `make capacity` and commit the page"


def test_the_default_profile_is_the_construct_signature() -> None:
    # GIVEN the construct's defaults, read from its signature
    props = capacity.defaults()
    # WHEN the model runs on them
    rows = by_component(ceilings(props, UNITS, shards=16))
    # THEN the event source is on demand (1,250 invocations of batch_size records per 100 ms), Lambda
    # the account's 1,000, the tables 40,000 WRU over their WRU per order, the index 16 x 1,000 over 2
    batch = props["batch_size"]
    assert rows["SQS event source mapping"] == pytest.approx(1250 * batch / capacity.BATCH_SECONDS)
    assert rows["Lambda concurrency"] == pytest.approx(1000 * batch / capacity.BATCH_SECONDS)
    assert rows["DynamoDB events"] == pytest.approx(40_000 / 4)
    assert rows["DynamoDB rows"] == pytest.approx(40_000 / 2)
    assert rows["DynamoDB index pending-by-age (16 shards)"] == pytest.approx(16 * 1000 / 2)
    assert rows["SNS topic"] == QUOTAS["sns_publish_per_second"].value


def test_each_prop_moves_its_own_ceiling() -> None:
    # GIVEN the defaults with max_concurrency=2, then provisioned pollers, then reserved concurrency
    base = capacity.defaults()
    capped = by_component(ceilings({**base, "max_concurrency": 2}, UNITS, shards=16))
    pollers = type("Pollers", (), {"maximum_pollers": 50})()
    polled = by_component(ceilings({**base, "provisioned_pollers": pollers}, UNITS, shards=16))
    reserved = by_component(ceilings({**base, "reserved_concurrency": 7}, UNITS, shards=16))
    # THEN each caps what it should: 2 invocations, 50 pollers x 10, 7 executions (10 records per 100 ms each)
    assert capped["SQS event source mapping"] == pytest.approx(2 * 100)
    assert polled["SQS event source mapping"] == pytest.approx(500 * 100)
    assert reserved["Lambda concurrency"] == pytest.approx(7 * 100)
    assert first_limit(ceilings({**base, "reserved_concurrency": 7}, UNITS, shards=16)).component == (
        "Lambda concurrency"
    )


def test_the_index_ceiling_follows_its_shards_and_its_writes() -> None:
    base = capacity.defaults()
    # GIVEN twice the shards, or an index the happy path never writes
    doubled = by_component(ceilings(base, UNITS, shards=32))
    unwritten = UnitsPerOrder(tables=UNITS.tables, indexes={"events/pending-by-age": 0.0})
    # THEN the ceiling doubles (up to the index's own 40,000 WRU), or the index limits nothing
    assert doubled["DynamoDB index pending-by-age (32 shards)"] == pytest.approx(16_000)
    assert math.isinf(by_component(ceilings(base, unwritten, shards=16))["DynamoDB index pending-by-age (16 shards)"])


def test_fifo_counts_the_fifo_quotas() -> None:
    base = capacity.defaults()
    # GIVEN a FIFO pipeline, then one with high throughput
    fifo = by_component(ceilings({**base, "fifo": True}, UNITS, shards=16))
    fast = by_component(ceilings({**base, "fifo": True, "fifo_high_throughput": True}, UNITS, shards=16))
    # THEN the topic takes 3,000 messages/s (30,000 with message group scope), the queue 300 (70,000) calls x 10
    assert (fifo["SNS FIFO topic"], fifo["SQS FIFO queue"]) == (3000, 3000)
    assert (fast["SNS FIFO topic"], fast["SQS FIFO queue"]) == (30_000, 700_000)
