"""Configuration errors, metrics and log lines of the handler."""

from __future__ import annotations

import io
import json
from typing import Any

import pytest

from idempotent_order_pipeline._lambda_asset.order_consumer import handler as handler_module
from idempotent_order_pipeline._lambda_asset.order_consumer.config import REQUIRED_VARIABLES, Settings
from idempotent_order_pipeline._lambda_asset.order_consumer.contract.errors import ConfigurationError
from idempotent_order_pipeline._lambda_asset.order_consumer.pipeline import Outcome, RecordResult, outcome_counts
from tests.consumer.harness import (
    ArmedFault,
    FakeContext,
    World,
    cancelled_for,
    seed,
    sqs_record,
    written_event_ids,
)


def test_missing_environment_fails_at_first_use_naming_every_variable(monkeypatch: pytest.MonkeyPatch) -> None:
    # GIVEN no resource variables in the environment and no injected clients
    for name in REQUIRED_VARIABLES:
        monkeypatch.delenv(name, raising=False)
    handler_module.configure()
    # WHEN the handler is invoked
    # THEN it fails naming all four missing variables (the batch is retried, nothing is acknowledged)
    with pytest.raises(ConfigurationError, match="PROCESSED_EVENTS_TABLE, ORDER_RECORDS_TABLE, TOPIC_ARN, DEAD_LETTER"):
        handler_module.handler({"Records": [sqs_record({"order_id": "o"})]}, FakeContext())


@pytest.mark.parametrize("ttl", ["0", "-5", "1.5", "soon"])
def test_invalid_ttl_is_rejected_with_its_value(ttl: str) -> None:
    env = {
        name: "x" for name in ("PROCESSED_EVENTS_TABLE", "ORDER_RECORDS_TABLE", "TOPIC_ARN", "DEAD_LETTER_QUEUE_URL")
    }
    with pytest.raises(ConfigurationError, match=f"RECORD_TTL_SECONDS={ttl!r}"):
        Settings.from_env({**env, "RECORD_TTL_SECONDS": ttl})


def test_defaults_apply_when_optional_variables_are_absent() -> None:
    env = {
        name: "x" for name in ("PROCESSED_EVENTS_TABLE", "ORDER_RECORDS_TABLE", "TOPIC_ARN", "DEAD_LETTER_QUEUE_URL")
    }
    settings = Settings.from_env(env)
    assert settings.record_ttl_seconds == 2592000
    assert settings.identity_fields == ("order_id",)


def json_lines(text: str) -> list[dict[str, Any]]:
    return [json.loads(line) for line in text.splitlines() if line.startswith("{")]


def test_metrics_one_log_line_per_batch_and_one_per_parked_or_failed_record(
    world: World, capsys: pytest.CaptureFixture[str], log_stream: io.StringIO
) -> None:
    # GIVEN a batch with a new order, a duplicate, a pending one, an invalid one, and one DynamoDB throttles
    seed(world, {"order_id": "o-sent"}, status="sent", event_id="evt-sent")
    seed(world, {"order_id": "o-pend"}, status="pending", event_id="evt-pend")
    records = [
        sqs_record({"order_id": "o-new", "card": "4242-SECRET"}),
        sqs_record({"order_id": "o-sent", "event_id": "evt-sent"}),
        sqs_record({"order_id": "o-pend", "event_id": "evt-pend"}, receive_count=3),
        sqs_record("nope"),
        sqs_record({"order_id": "o-slow", "event_id": "evt-slow", "card": "4242-SECRET"}, receive_count=2),
    ]
    # (its item throttled inside the transaction: DynamoDB cancels it with that item's ThrottlingError)
    throttled = cancelled_for(lambda event_id: event_id == "evt-slow", "ThrottlingError", "None")
    world.board.arm(ArmedFault(throttled, "transact_write_items", when=lambda r: "evt-slow" in written_event_ids(r)))
    capsys.readouterr()
    # WHEN processed
    world.invoke(records)
    [emf] = [line for line in json_lines(capsys.readouterr().out) if "_aws" in line]
    logs = json_lines(log_stream.getvalue())
    # THEN the EMF document counts each outcome in the configured namespace
    assert emf["_aws"]["CloudWatchMetrics"][0]["Namespace"] == "IdempotentOrderPipelineTests"
    counts = {name: emf[name] for name in ("OrdersRecorded", "DuplicatesSkipped", "NotificationsPublished")}
    assert counts == {"OrdersRecorded": [1.0], "DuplicatesSkipped": [1.0], "NotificationsPublished": [1.0]}
    assert emf["NotificationsRepublished"] == [1.0]
    assert emf["InvalidMessages"] == [1.0]
    assert emf["Conflicts"] == [0.0]
    assert emf["TransientFailures"] == [1.0]
    # AND three log lines: the parked record and the failed one, with their identifiers and reason, then the batch
    assert [line["message"] for line in logs] == [
        "order message parked",
        "order message not processed",
        "order batch processed",
    ]
    parked, failed, summary = logs
    assert parked["message_id"] == records[3]["messageId"]
    assert parked["outcome"] == "invalid"
    assert parked["error"].startswith("INVALID_MESSAGE")
    assert failed["message_id"] == records[4]["messageId"]
    assert (failed["event_id"], failed["order_id"], failed["receive_count"]) == ("evt-slow", "o-slow", 2)
    assert failed["outcome"] == "retry"
    assert "ThrottlingError" in failed["error"]
    # AND the batch line counts every outcome
    assert summary["records"] == 5
    assert summary["not_started"] == 0
    assert summary["outcomes"] == {"duplicate": 1, "invalid": 1, "recorded": 1, "republished": 1, "retry": 1}
    # AND no line carries the body
    assert all("4242-SECRET" not in json.dumps(line) for line in logs)


def test_a_batch_of_ten_new_orders_writes_one_log_line(world: World, log_stream: io.StringIO) -> None:
    # GIVEN ten new orders
    records = [sqs_record({"order_id": f"o-{i}", "event_id": f"evt-{i}"}) for i in range(10)]
    # WHEN processed
    assert world.invoke(records) == {"batchItemFailures": []}
    # THEN the logger wrote one line for the batch, and nothing per record
    [line] = json_lines(log_stream.getvalue())
    assert line["message"] == "order batch processed"
    assert line["outcomes"] == {"recorded": 10}
    assert "message_id" not in line
    # AND under 50 bytes per order (one line of the Lambda context and counts, about 420 bytes)
    assert len(log_stream.getvalue().encode()) / len(records) < 50


def test_outcome_counts_add_up_every_record_of_a_batch() -> None:
    # GIVEN a batch's results of every outcome, two of most, mixed in order
    def result(outcome: Outcome, *, written: bool = False, published: bool = False) -> RecordResult:
        return RecordResult(message_id="m", outcome=outcome, order_written=written, published=published)

    results = [
        result(Outcome.CONFLICT),
        result(Outcome.RECORDED, written=True, published=True),
        result(Outcome.SCHEMA_VIOLATION),
        result(Outcome.DUPLICATE),
        result(Outcome.CONFLICT),
        result(Outcome.INVALID),
        result(Outcome.REPUBLISHED, published=True),
        result(Outcome.SCHEMA_VIOLATION),
        result(Outcome.RETRY),
        result(Outcome.DUPLICATE),
        result(Outcome.RECORDED, written=True, published=False),
    ]
    # WHEN they are counted for a pipeline with an order schema
    counts = outcome_counts(results, schema=True)
    # THEN each metric counts its records (a record written but not yet published counts as recorded only)
    assert counts == {
        "OrdersRecorded": 2,
        "DuplicatesSkipped": 2,
        "NotificationsPublished": 1,
        "NotificationsRepublished": 1,
        "Conflicts": 2,
        "InvalidMessages": 1,
        "SchemaViolations": 2,
        "TransientFailures": 1,
    }
    # AND counting never fails a batch: a violation is counted even where SchemaViolations was not asked for
    assert outcome_counts(results[2:3])["SchemaViolations"] == 1
