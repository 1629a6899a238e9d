"""Configuration errors, metrics and log lines of the handler."""

from __future__ import annotations

import io
import json
import logging
from collections.abc import Iterator
from typing import Any

import pytest

from idempotent_order_pipeline._lambda_asset.order_consumer import handler as handler_module
from idempotent_order_pipeline._lambda_asset.order_consumer.config import REQUIRED_VARIABLES, Settings
from idempotent_order_pipeline._lambda_asset.order_consumer.contract.errors import ConfigurationError
from idempotent_order_pipeline._lambda_asset.order_consumer.observability import logger
from tests.consumer.harness import FakeContext, World, seed, sqs_record


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


@pytest.fixture
def log_stream() -> Iterator[io.StringIO]:
    """What the Powertools logger writes (its handler holds the real stdout, out of capsys' reach)."""
    stream = io.StringIO()
    registered = logger.registered_handler
    assert isinstance(registered, logging.StreamHandler)
    previous = registered.setStream(stream)
    yield stream
    registered.setStream(previous)


def test_metrics_and_one_log_line_per_record(
    world: World, capsys: pytest.CaptureFixture[str], log_stream: io.StringIO
) -> None:
    # GIVEN a batch with a new order, a duplicate, a pending one, an invalid one
    seed(world, {"order_id": "o-sent"}, status="sent", event_id="evt-sent")
    seed(world, {"order_id": "o-pend"}, status="pending", event_id="evt-pend")
    records = [
        sqs_record({"order_id": "o-new", "card": "4242-SECRET"}),
        sqs_record({"order_id": "o-sent", "event_id": "evt-sent"}),
        sqs_record({"order_id": "o-pend", "event_id": "evt-pend"}, receive_count=3),
        sqs_record("nope"),
    ]
    capsys.readouterr()
    # WHEN processed
    world.invoke(records)
    [emf] = [line for line in json_lines(capsys.readouterr().out) if "_aws" in line]
    logs = [line for line in json_lines(log_stream.getvalue()) if "outcome" in line]
    # THEN the EMF document counts each outcome in the configured namespace
    assert emf["_aws"]["CloudWatchMetrics"][0]["Namespace"] == "IdempotentOrderPipelineTests"
    counts = {name: emf[name] for name in ("OrdersRecorded", "DuplicatesSkipped", "NotificationsPublished")}
    assert counts == {"OrdersRecorded": [1.0], "DuplicatesSkipped": [1.0], "NotificationsPublished": [1.0]}
    assert emf["NotificationsRepublished"] == [1.0]
    assert emf["InvalidMessages"] == [1.0]
    assert emf["Conflicts"] == [0.0]
    assert emf["TransientFailures"] == [0.0]
    # AND one log line per record with its identifiers, never the body
    assert sorted(line["outcome"] for line in logs) == ["duplicate", "invalid", "recorded", "republished"]
    by_message = {line["message_id"]: line for line in logs}
    assert by_message[records[2]["messageId"]]["receive_count"] == 3
    assert by_message[records[2]["messageId"]]["event_id"] == "evt-pend"
    assert by_message[records[2]["messageId"]]["order_id"] == "o-pend"
    assert all("4242-SECRET" not in json.dumps(line) for line in logs)
