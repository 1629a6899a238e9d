"""The bench's accounting rules: item sizes, request units, cost per million orders, the README's headline block."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from bench import units
from bench.prices import ASSUMPTIONS, MILLION, PRICES, ReconcilerRun, cost_per_million, fixed_monthly
from bench.report import HEADLINE_END, HEADLINE_START, update_headline


@pytest.mark.parametrize(
    ("item", "size"),
    [
        pytest.param({"id": {"S": "abc"}}, 2 + 3, id="string"),
        pytest.param({"id": {"S": "é"}}, 2 + 2, id="string-utf8"),
        pytest.param({"n": {"N": "12345"}}, 1 + 4, id="number-5-digits"),
        pytest.param({"n": {"N": "100"}}, 1 + 2, id="number-trailing-zeros-trimmed"),
        pytest.param({"n": {"N": "-0.0012"}}, 1 + 2, id="number-leading-zeros-trimmed"),
        pytest.param({"b": {"BOOL": True}, "z": {"NULL": True}}, 2 + 2, id="bool-null"),
        pytest.param({"l": {"L": [{"S": "ab"}, {"N": "1"}]}}, 1 + 3 + (1 + 2) + (1 + 2), id="list"),
        pytest.param({"m": {"M": {"k": {"S": "v"}}}}, 1 + 3 + (1 + 1 + 1), id="map"),
        pytest.param({}, 0, id="no-item"),
    ],
)
def test_item_size_follows_dynamodb_rules(item: dict[str, Any], size: int) -> None:
    assert units.item_size(item) == size


@pytest.mark.parametrize(
    ("size", "transactional", "expected"),
    [
        pytest.param(0, False, 1.0, id="minimum-one"),
        pytest.param(1024, False, 1.0, id="one-kb"),
        pytest.param(1025, False, 2.0, id="started-kb"),
        pytest.param(300, True, 2.0, id="transactional-doubles"),
        pytest.param(2048, True, 4.0, id="transactional-two-kb"),
    ],
)
def test_write_units(size: int, transactional: bool, expected: float) -> None:
    assert units.write_units(size, transactional=transactional) == expected


@pytest.mark.parametrize(
    ("size", "consistent", "transactional", "expected"),
    [
        pytest.param(0, False, False, 0.5, id="missing-item-still-costs"),
        pytest.param(4096, False, False, 0.5, id="eventually-consistent"),
        pytest.param(4097, False, False, 1.0, id="started-4kb"),
        pytest.param(100, True, False, 1.0, id="strongly-consistent"),
        pytest.param(100, True, True, 2.0, id="transactional"),
    ],
)
def test_read_units(size: int, consistent: bool, transactional: bool, expected: float) -> None:
    assert units.read_units(size, consistent=consistent, transactional=transactional) == expected


@pytest.mark.parametrize(
    ("payload", "requests"),
    [
        pytest.param(0, 1, id="empty-still-one"),
        pytest.param(65_536, 1, id="one-chunk"),
        pytest.param(65_537, 2, id="started-chunk"),
        pytest.param(262_144, 4, id="256-kb-is-four"),
    ],
)
def test_sns_and_sqs_bill_each_64_kb_chunk(payload: int, requests: int) -> None:
    assert units.payload_requests(payload) == requests


def test_a_batch_of_ten_small_messages_is_one_request() -> None:
    # GIVEN ten 1 KB notifications in one PublishBatch (or SendMessageBatch)
    # THEN the batch is billed as one request, where ten Publish calls are ten
    assert units.batch_requests([1024] * 10) == 1
    assert sum(units.payload_requests(1024) for _ in range(10)) == 10


def test_a_batch_is_billed_by_its_whole_payload() -> None:
    # GIVEN ten 7 KB messages: 70 KB in all, two started 64 KB chunks
    assert units.batch_requests([7 * 1024] * 10) == 2


@pytest.mark.parametrize("count", [0, 11])
def test_a_batch_holds_one_to_ten_messages(count: int) -> None:
    with pytest.raises(ValueError, match=r"1\.\.10 messages"):
        units.batch_requests([10] * count)


def test_batch_write_item_bills_each_put_or_delete_alone() -> None:
    # GIVEN a BatchWriteItem of three items of 300 B, 1,025 B and 0 B (a delete of a missing item)
    # THEN each costs what its own PutItem or DeleteItem would: 1 + 2 + 1 WRU, never transactional
    assert units.batch_write_units([300, 1025, 0]) == 4.0


def test_cost_per_million_adds_every_line() -> None:
    # GIVEN 5 table WRU, 2 index WRU, 0.5 RRU, one SNS request, 0.1 SQS request and 600 log bytes per
    # message, batches of 10 taking 20.2 ms at 1024 MB, a 180.5 ms cold start, and a reconciler
    # (8 RRU and 1 WRU a run, 1.02 RRU per order read)
    reconciler = ReconcilerRun(
        memory_mb=512, every_s=300, billed_ms=99.5, init_ms=180, rru=8, log_bytes=400, wru=1, rru_per_order=1.02
    )
    cost = cost_per_million(
        wru_per_msg=5,
        index_wru_per_msg=2,
        rru_per_msg=0.5,
        sns_requests_per_msg=1,
        sqs_requests_per_msg=0.1,
        batch_ms=20.2,
        batch_size=10,
        memory_mb=1024,
        init_ms=180.5,
        log_bytes_per_msg=600,
        reconciler=reconciler,
    )
    # THEN each line follows the price list; durations are billed per started millisecond (21 ms, 181 ms)
    gb_s = PRICES.lambda_arm64_per_gb_second
    assert cost.dynamodb_table_writes == pytest.approx(5 * PRICES.dynamodb_per_million_wru)
    assert cost.dynamodb_index_writes == pytest.approx(2 * PRICES.dynamodb_per_million_wru)
    assert cost.dynamodb_reads == pytest.approx(0.5 * PRICES.dynamodb_per_million_rru)
    assert cost.sns_requests == pytest.approx(PRICES.sns_per_million_requests)
    assert cost.sqs_producer_sends == pytest.approx(PRICES.sqs_per_million_requests / 10)
    assert cost.sqs_receives_and_deletes == pytest.approx(2 * 0.1 * PRICES.sqs_per_million_requests)
    assert cost.sqs_parking == pytest.approx(0.1 * PRICES.sqs_per_million_requests)
    assert cost.lambda_duration == pytest.approx(100_000 * 0.021 * 1.0 * gb_s)
    assert cost.lambda_requests == pytest.approx(0.1 * PRICES.lambda_per_million_requests)
    assert cost.lambda_init == pytest.approx(100_000 * ASSUMPTIONS.cold_start_rate * 0.181 * 1.0 * gb_s)
    assert cost.cloudwatch_logs == pytest.approx(600 * MILLION / 1e9 * PRICES.cloudwatch_logs_per_gb_ingested)
    runs = 30 * 86_400 / 300
    per_run = (
        PRICES.lambda_per_million_requests / MILLION
        + 0.1 * 0.5 * gb_s
        + ASSUMPTIONS.cold_start_rate * 0.18 * 0.5 * gb_s
        + 8 * PRICES.dynamodb_per_million_rru / MILLION
        + 1 * PRICES.dynamodb_per_million_wru / MILLION
        + 400 / 1e9 * PRICES.cloudwatch_logs_per_gb_ingested
    )
    per_order = 1.02 * PRICES.dynamodb_per_million_rru / MILLION
    assert cost.reconciler == pytest.approx(
        runs * per_run * MILLION / ASSUMPTIONS.orders_per_month + per_order * MILLION
    )
    # THEN the total is the sum of the line items, every one of them
    assert cost.total == pytest.approx(sum(cost.as_dict().values()))
    assert all(value > 0 for value in cost.as_dict().values())


def test_fixed_monthly_lists_alarms_dashboard_and_custom_metrics() -> None:
    # GIVEN a deployment with 14 alarm metrics, one dashboard and 9 custom metrics
    # WHEN its fixed monthly cost is listed
    lines = fixed_monthly({"alarm_metrics": 14, "dashboards": 1, "custom_metrics": 9})
    # THEN each line follows CloudWatch's list prices, and the total adds them
    assert lines == {"alarm_metrics": 1.4, "dashboards": 3.0, "custom_metrics": 2.7, "total": 7.1}


PENDING = units.IndexShape(name="pending-by-age", keys=("pending_shard", "created_at"), table_keys=("event_id",))


@pytest.mark.parametrize(
    ("before", "after", "expected"),
    [
        # a new record without the index keys: not in the index
        (None, {"event_id": {"S": "e"}, "created_at": {"N": "1"}}, 0.0),
        # a new pending record: one index entry put
        (None, {"event_id": {"S": "e"}, "created_at": {"N": "1"}, "pending_shard": {"S": "3"}}, 1.0),
        # the sent mark removes the shard: one index entry deleted
        (
            {"event_id": {"S": "e"}, "created_at": {"N": "1"}, "pending_shard": {"S": "3"}},
            {"event_id": {"S": "e"}, "created_at": {"N": "1"}, "status": {"S": "sent"}},
            1.0,
        ),
        # an index key changes value: delete and put
        (
            {"event_id": {"S": "e"}, "created_at": {"N": "1"}, "pending_shard": {"S": "3"}},
            {"event_id": {"S": "e"}, "created_at": {"N": "2"}, "pending_shard": {"S": "3"}},
            2.0,
        ),
        # only an attribute the index does not project changes: nothing
        (
            {"event_id": {"S": "e"}, "created_at": {"N": "1"}, "pending_shard": {"S": "3"}, "x": {"S": "a"}},
            {"event_id": {"S": "e"}, "created_at": {"N": "1"}, "pending_shard": {"S": "3"}, "x": {"S": "b"}},
            0.0,
        ),
        # an entry over 1 KB (a long table key): 2 WRU, not transactional however the table write was
        (None, {"event_id": {"S": "e" * 1100}, "created_at": {"N": "1"}, "pending_shard": {"S": "3"}}, 2.0),
    ],
)
def test_index_writes_follow_dynamodbs_rules(
    before: dict[str, Any] | None, after: dict[str, Any] | None, expected: float
) -> None:
    # GIVEN the item before and after one table write, and the keys-only pending index
    # THEN the index costs what the Developer Guide's rules say
    assert units.index_write_units(PENDING, before, after) == expected


def test_an_index_projecting_an_attribute_is_written_when_it_changes() -> None:
    # GIVEN an index that includes "status", and a write that changes only that attribute
    index = units.IndexShape(
        name="by-shard",
        keys=("pending_shard",),
        table_keys=("event_id",),
        projection="INCLUDE",
        non_key_attributes=("status",),
    )
    before = {"event_id": {"S": "e"}, "pending_shard": {"S": "3"}, "status": {"S": "pending"}}
    after = {**before, "status": {"S": "sent"}}
    # THEN one index write updates the entry
    assert units.index_write_units(index, before, after) == 1.0


def test_headline_block_is_replaced_in_place_and_the_rest_kept(tmp_path: Path) -> None:
    # GIVEN a README with text before and after an old headline block
    readme = tmp_path / "README.md"
    old = f"{HEADLINE_START}\n| old |\n{HEADLINE_END}\n"
    readme.write_text(f"# Top\n\nintro\n\n{old}\nafter\n\n## Later\n\nkept\n", encoding="utf-8")
    # WHEN the block is written twice
    update_headline(readme, f"{HEADLINE_START}\n| new |\n{HEADLINE_END}\n")
    update_headline(readme, f"{HEADLINE_START}\n| newer |\n{HEADLINE_END}\n")
    # THEN only the block changed, once
    assert readme.read_text(encoding="utf-8") == (
        f"# Top\n\nintro\n\n{HEADLINE_START}\n| newer |\n{HEADLINE_END}\n\nafter\n\n## Later\n\nkept\n"
    )


def test_headline_block_is_appended_when_absent(tmp_path: Path) -> None:
    # GIVEN a README without the markers
    readme = tmp_path / "README.md"
    readme.write_text("# Top\n\nintro\n", encoding="utf-8")
    # WHEN the block is written
    update_headline(readme, f"{HEADLINE_START}\n| figures |\n{HEADLINE_END}\n")
    # THEN it is appended after a blank line
    assert readme.read_text(encoding="utf-8") == f"# Top\n\nintro\n\n{HEADLINE_START}\n| figures |\n{HEADLINE_END}\n"


def test_batched_notifications_cut_the_sns_line_tenfold() -> None:
    # GIVEN the same orders notified one Publish each, or one PublishBatch per batch of 10
    common = {"wru_per_msg": 5, "rru_per_msg": 0, "batch_ms": 100, "batch_size": 10, "memory_mb": 512}
    one_by_one = cost_per_million(sns_requests_per_msg=1, **common)
    batched = cost_per_million(sns_requests_per_msg=units.batch_requests([600] * 10) / 10, **common)
    # THEN SNS costs a tenth, and nothing else changes
    assert batched.sns_requests == pytest.approx(one_by_one.sns_requests / 10)
    assert one_by_one.total - batched.total == pytest.approx(one_by_one.sns_requests * 0.9)
