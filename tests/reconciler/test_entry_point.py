"""``order_consumer.reconciler.handler``: its environment, its metrics on every run, its answer."""

from __future__ import annotations

import json
import time
from typing import Any

import pytest

from idempotent_order_pipeline._lambda_asset.order_consumer import reconciler as reconciler_entry
from idempotent_order_pipeline._lambda_asset.order_consumer.contract.errors import (
    ConfigurationError,
    ReconciliationFailedError,
)
from idempotent_order_pipeline._lambda_asset.order_consumer.contract.metric_names import (
    OLDEST_PENDING_AGE_SECONDS,
    PENDING_RECONCILED,
)
from idempotent_order_pipeline._lambda_asset.order_consumer.contract.names import RECONCILE_AFTER_VARIABLE
from idempotent_order_pipeline._lambda_asset.order_consumer.reconciler import ReconcilerClients, reconcile_after_seconds
from tests.consumer.harness import client_error
from tests.reconciler.harness import ArmedFault, FakeContext, ReconcilerWorld, order


def emitted_metrics(output: str) -> list[dict[str, Any]]:
    """The EMF blobs printed by Powertools."""
    blobs = [json.loads(line) for line in output.splitlines() if line.startswith("{") and '"_aws"' in line]
    return [blob for blob in blobs if PENDING_RECONCILED in blob]


@pytest.mark.parametrize("value", ["0", "1", "900", "0.5"])
def test_any_non_negative_threshold_is_accepted(value: str) -> None:
    # GIVEN / WHEN a non-negative RECONCILE_AFTER_SECONDS / THEN it is the threshold in seconds
    assert reconcile_after_seconds({RECONCILE_AFTER_VARIABLE: value}) == float(value)


@pytest.mark.parametrize("value", ["", "-1", "abc", "nan", "inf"])
def test_a_missing_or_negative_threshold_names_the_variable(value: str) -> None:
    # GIVEN / WHEN an unusable RECONCILE_AFTER_SECONDS / THEN the error names it and what is allowed
    with pytest.raises(ConfigurationError, match=r"RECONCILE_AFTER_SECONDS=.*non-negative number of seconds"):
        reconcile_after_seconds({RECONCILE_AFTER_VARIABLE: value})


def test_every_run_emits_both_metrics_zero_included(world: ReconcilerWorld, capsys: pytest.CaptureFixture[str]) -> None:
    # GIVEN an empty table and the handler wired to the world
    reconciler_entry.configure(
        ReconcilerClients(dynamodb=world.dynamodb, sns=world.sns), {**world.env, RECONCILE_AFTER_VARIABLE: "0"}
    )

    # WHEN a run finds nothing
    answer = reconciler_entry.handler({}, FakeContext())

    # THEN it still emits PendingReconciled 0 and OldestPendingAgeSeconds 0
    [blob] = emitted_metrics(capsys.readouterr().out)
    assert blob[PENDING_RECONCILED] == [0.0]
    assert blob[OLDEST_PENDING_AGE_SECONDS] == [0.0]
    units = {m["Name"]: m["Unit"] for m in blob["_aws"]["CloudWatchMetrics"][0]["Metrics"]}
    assert units == {PENDING_RECONCILED: "Count", OLDEST_PENDING_AGE_SECONDS: "Seconds"}
    assert answer["reconciled"] == 0
    assert answer["complete"] is True


def test_a_run_reports_what_it_reconciled(world: ReconcilerWorld, capsys: pytest.CaptureFixture[str]) -> None:
    # GIVEN three records pending for two minutes (past the 30 s threshold and the index margin), SNS refusing one run
    event_ids = world.pend([order(i) for i in range(3)], created_at=time.time() - 120)
    world.board.arm(ArmedFault(client_error("PublishBatch", "InternalError"), operation="publish_batch"))
    reconciler_entry.configure(
        ReconcilerClients(dynamodb=world.guarded_dynamodb, sns=world.guarded_sns),
        {**world.env, RECONCILE_AFTER_VARIABLE: "30"},
    )

    # WHEN a run meets the outage, then the next run does not
    reconciler_entry.handler({}, FakeContext())
    world.board.disarm()
    reconciler_entry.handler({}, FakeContext())

    # THEN the first run's metrics show the age and no reconciliation, the second the three records
    first, second = emitted_metrics(capsys.readouterr().out)
    assert first[PENDING_RECONCILED] == [0.0]
    assert first[OLDEST_PENDING_AGE_SECONDS][0] >= 60
    assert second[PENDING_RECONCILED] == [3.0]
    assert second[OLDEST_PENDING_AGE_SECONDS] == [0.0]
    assert set(world.notified()) == set(event_ids)


def test_a_missing_consumer_variable_fails_the_run_with_its_name(world: ReconcilerWorld) -> None:
    # GIVEN the environment without TOPIC_ARN
    environ = {key: value for key, value in world.env.items() if key != "TOPIC_ARN"}
    reconciler_entry.configure(
        ReconcilerClients(dynamodb=world.dynamodb, sns=world.sns), {**environ, RECONCILE_AFTER_VARIABLE: "0"}
    )

    # WHEN / THEN the run fails naming it
    with pytest.raises(ConfigurationError, match="TOPIC_ARN"):
        reconciler_entry.handler({}, FakeContext())


def test_a_run_ended_by_an_unforeseen_error_emits_its_metrics_then_fails(
    world: ReconcilerWorld, capsys: pytest.CaptureFixture[str]
) -> None:
    # GIVEN three records pending for a minute, and a bug-like error (not a botocore error) on the reads
    world.pend([order(i) for i in range(3)], created_at=time.time() - 120)
    world.board.arm(ArmedFault(RuntimeError("unforeseen"), operation="batch_get_item"))
    reconciler_entry.configure(
        ReconcilerClients(dynamodb=world.guarded_dynamodb, sns=world.guarded_sns),
        {**world.env, RECONCILE_AFTER_VARIABLE: "30"},
    )

    # WHEN a run meets it
    with pytest.raises(ReconciliationFailedError, match="RuntimeError: unforeseen"):
        reconciler_entry.handler({}, FakeContext())

    # THEN the invocation failed (the reconciler_errors alarm counts it), but only after the metrics
    # went out: nothing reconciled, and the three records' age (the index was read)
    [blob] = emitted_metrics(capsys.readouterr().out)
    assert blob[PENDING_RECONCILED] == [0.0]
    [age] = blob[OLDEST_PENDING_AGE_SECONDS]
    assert 120 <= age < 180
