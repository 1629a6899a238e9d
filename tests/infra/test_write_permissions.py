"""The functions' UpdateItem permissions cannot drift from the code: every UpdateItem the consumer and
the reconciler make on moto, in every case that makes one, is allowed by its role's statement as
synthesized (``dynamodb:Attributes`` and ``dynamodb:ReturnValues`` conditions evaluated by
``tests/dynamodb_requests.py``).

moto does not enforce IAM, so the requests are recorded at the clients the functions are given and
held against the template; parliament lints the same statements (``tools/policy_lint.py``).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from typing import Any

import boto3
import pytest
from moto import mock_aws

from idempotent_order_pipeline._lambda_asset.order_consumer import handler as handler_module
from idempotent_order_pipeline._lambda_asset.order_consumer import reconciler as reconciler_entry
from idempotent_order_pipeline._lambda_asset.order_consumer.contract.keys import derive_event_id
from idempotent_order_pipeline._lambda_asset.order_consumer.contract.names import (
    CONSUMER_UPDATE_ATTRIBUTES,
    RECONCILER_UPDATE_ATTRIBUTES,
)
from idempotent_order_pipeline._lambda_asset.order_consumer.runtime import Clients
from idempotent_order_pipeline._lambda_asset.order_consumer.store import ADOPT_PENDING, MARK_SENT, RELEASE_SENT
from tests.compat.test_rollback_to_0_1_0 import mark_sent_as_0_1_0
from tests.consumer.harness import World, seed, sqs_record
from tests.dynamodb_requests import condition_allows, named_attributes, updates
from tests.infra.synth import Synthesized, logical_id
from tests.infra.test_trust_boundaries import as_list, role_statements
from tests.reconciler.harness import ReconcilerWorld, order


def recorded_updates(board_requests: dict[str, list[dict[str, Any]]], table: str) -> list[dict[str, Any]]:
    """The UpdateItem-authorized requests among a board's recorded calls (all on ``table``)."""
    found = [
        update for operation, requests in board_requests.items() for r in requests for update in updates(operation, r)
    ]
    assert {update["TableName"] for update in found} == {table}
    return found


@pytest.fixture(scope="module")
def consumer_updates() -> Iterator[list[dict[str, Any]]]:
    """Every UpdateItem of a consumer run that marks a first delivery, republishes and marks a record
    left pending, and adopts (then marks) a pending record an earlier version keyed otherwise."""
    with mock_aws():
        world = World()
        try:
            left_pending = order(2)
            seed(world, left_pending, status="pending")
            keyed_otherwise = order(3)
            seed(world, keyed_otherwise, status="pending", event_id="key-of-an-earlier-version")
            response = world.invoke([sqs_record(order(1)), sqs_record(left_pending), sqs_record(keyed_otherwise)])
            assert response["batchItemFailures"] == []
            assert world.notified_events() == {
                derive_event_id(order(1)): 1,
                derive_event_id(left_pending): 1,
                "key-of-an-earlier-version": 1,
            }
            yield recorded_updates(world.board.requests, world.events_table)
        finally:
            handler_module.configure()


@pytest.fixture(scope="module")
def reconciler_updates() -> Iterator[list[dict[str, Any]]]:
    """Every UpdateItem of a reconciler run that marks a record it notified and releases one an earlier
    version marked sent but left in the pending index."""
    with mock_aws():
        aws = Clients(dynamodb=boto3.client("dynamodb"), sns=boto3.client("sns"), sqs=boto3.client("sqs"))
        world = ReconcilerWorld(prefix="permissions-", aws=aws)
        try:
            pending, marked_by_0_1_0 = world.pend([order(1), order(2)], created_at=time.time() - 3600)
            mark_sent_as_0_1_0(world, [marked_by_0_1_0])
            report = world.reconciler(reconcile_after_seconds=900).run()
            assert (report.reconciled, report.released) == (1, 1)
            assert world.notified() == {pending: 1}
            yield recorded_updates(world.board.requests, world.events_table)
        finally:
            reconciler_entry.configure()


def update_statements(synthesized: Synthesized, role: Any) -> list[dict[str, Any]]:
    """The role's statements that allow UpdateItem, each on the processed_events table alone."""
    table = {"Fn::GetAtt": [logical_id(synthesized.stack, synthesized.pipeline.processed_events_table), "Arn"]}
    statements = [s for s in role_statements(synthesized, role) if "dynamodb:UpdateItem" in as_list(s["Action"])]
    assert statements
    assert all(as_list(s["Resource"]) == [table] for s in statements)
    return statements


def allowed(statements: list[dict[str, Any]], request: dict[str, Any]) -> bool:
    return any(condition_allows(statement.get("Condition", {}), request) for statement in statements)


def test_every_update_the_consumer_makes_is_allowed_by_its_role(
    trust_boundaries: Synthesized, consumer_updates: list[dict[str, Any]]
) -> None:
    # GIVEN the consumer role's UpdateItem statement as synthesized, and a consumer run's UpdateItems
    statements = update_statements(trust_boundaries, trust_boundaries.pipeline.function.role)
    # WHEN each recorded request is held against the statement's conditions
    # THEN the run made both kinds of UpdateItem the consumer has (so the check is not vacuous)
    assert {request["UpdateExpression"] for request in consumer_updates} == {MARK_SENT, ADOPT_PENDING}
    # AND every one of them is allowed
    refused = [request for request in consumer_updates if not allowed(statements, request)]
    assert refused == []
    # AND the statement allows no attribute beyond those the code's updates name and the keys
    [statement] = statements
    listed = statement["Condition"]["ForAllValues:StringEquals"]["dynamodb:Attributes"]
    assert listed == list(CONSUMER_UPDATE_ATTRIBUTES)
    assert set().union(*map(named_attributes, consumer_updates)) == set(listed) - {"created_at"}


def test_every_update_the_reconciler_makes_is_allowed_by_its_role(
    trust_boundaries: Synthesized, reconciler_updates: list[dict[str, Any]]
) -> None:
    # GIVEN the reconciler role's UpdateItem statement as synthesized, and a reconciler run's UpdateItems
    reconciliation = trust_boundaries.pipeline.reconciliation
    assert reconciliation is not None
    statements = update_statements(trust_boundaries, reconciliation.function.role)
    # WHEN each recorded request is held against the statement's conditions
    # THEN the run made both kinds of UpdateItem the reconciler has
    assert {request["UpdateExpression"] for request in reconciler_updates} == {MARK_SENT, RELEASE_SENT}
    # AND every one of them is allowed
    assert [request for request in reconciler_updates if not allowed(statements, request)] == []
    [statement] = statements
    listed = statement["Condition"]["ForAllValues:StringEquals"]["dynamodb:Attributes"]
    assert listed == list(RECONCILER_UPDATE_ATTRIBUTES)


#: Requests one step beyond the code's mark: each changes one field of a real mark.
BEYOND_THE_CODE = {
    "sets-another-attribute": lambda mark: {"UpdateExpression": mark["UpdateExpression"] + ", order_id = :sent"},
    "reads-another-in-its-condition": lambda mark: {
        "ConditionExpression": mark["ConditionExpression"] + " AND amount > :now"
    },
    "another-key": lambda mark: {"Key": {"order_id": {"S": "o-1"}}},
    "returns-the-new-item": lambda mark: {"ReturnValues": "ALL_NEW"},
}


@pytest.mark.parametrize("change", BEYOND_THE_CODE.values(), ids=BEYOND_THE_CODE.keys())
def test_an_update_beyond_the_code_is_refused(
    trust_boundaries: Synthesized,
    consumer_updates: list[dict[str, Any]],
    change: Callable[[dict[str, Any]], dict[str, Any]],
) -> None:
    # GIVEN the consumer's statement and one of its real marks
    statements = update_statements(trust_boundaries, trust_boundaries.pipeline.function.role)
    [mark, *_] = [request for request in consumer_updates if request["UpdateExpression"] == MARK_SENT]
    assert allowed(statements, mark)
    # WHEN the mark names one attribute more, or asks for the whole new item back
    # THEN the statement refuses it
    assert not allowed(statements, {**mark, **change(mark)})
