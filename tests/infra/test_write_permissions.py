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
    KEY_ATTRIBUTES,
    MARK_STATEMENT_ATTRIBUTES,
    RECONCILER_UPDATE_ATTRIBUTES,
)
from idempotent_order_pipeline._lambda_asset.order_consumer.runtime import Clients
from idempotent_order_pipeline._lambda_asset.order_consumer.store import (
    ADOPT_PENDING,
    EXPIRE_SENT,
    MARK_SENT_STATEMENT,
)
from tests.compat.test_rollback_to_0_1_0 import mark_sent_as_0_1_0
from tests.consumer.harness import World, seed, sqs_record
from tests.dynamodb_requests import action_of, condition_allows, named_attributes, updates
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
    """Every UpdateItem of a reconciler run that marks a record it notified and gives a ttl to one an
    earlier version marked sent without one."""
    with mock_aws():
        aws = Clients(dynamodb=boto3.client("dynamodb"), sns=boto3.client("sns"), sqs=boto3.client("sqs"))
        world = ReconcilerWorld(prefix="permissions-", aws=aws)
        try:
            pending, marked_by_0_1_0 = world.pend([order(1), order(2)], created_at=time.time() - 3600)
            mark_sent_as_0_1_0(world, [marked_by_0_1_0])
            report = world.reconciler(reconcile_after_seconds=900).run()
            assert (report.reconciled, report.expired) == (1, 1)
            assert world.notified() == {pending: 1}
            yield recorded_updates(world.board.requests, world.events_table)
        finally:
            reconciler_entry.configure()


#: What a mark statement is, whatever its table: the statement's text up to the table name and after it.
MARK = "the sent mark (PartiQL)"


def kind(request: dict[str, Any]) -> str:
    """Which of the code's updates a request is: a PartiQL mark, or an UpdateItem by its expression."""
    if "Statement" in request:
        assert request["Statement"] == MARK_SENT_STATEMENT.format(table=request["TableName"])
        return MARK
    return str(request["UpdateExpression"])


def update_statements(synthesized: Synthesized, role: Any, action: str) -> list[dict[str, Any]]:
    """The role's statements that allow ``action`` (UpdateItem, PartiQLUpdate), each on processed_events alone."""
    table = {"Fn::GetAtt": [logical_id(synthesized.stack, synthesized.pipeline.processed_events_table), "Arn"]}
    statements = [s for s in role_statements(synthesized, role) if action in as_list(s["Action"])]
    assert statements
    assert all(as_list(s["Resource"]) == [table] for s in statements)
    return statements


def allowed(synthesized: Synthesized, role: Any, request: dict[str, Any]) -> bool:
    statements = update_statements(synthesized, role, action_of(request))
    return any(condition_allows(statement.get("Condition", {}), request) for statement in statements)


def listed_attributes(synthesized: Synthesized, role: Any, action: str) -> list[str]:
    [statement] = update_statements(synthesized, role, action)
    return list(statement["Condition"]["ForAllValues:StringEquals"]["dynamodb:Attributes"])


def test_every_update_the_consumer_makes_is_allowed_by_its_role(
    trust_boundaries: Synthesized, consumer_updates: list[dict[str, Any]]
) -> None:
    # GIVEN the consumer role's UpdateItem and PartiQLUpdate statements as synthesized, and a consumer run's updates
    role = trust_boundaries.pipeline.function.role
    # WHEN each recorded request is held against its action's statement
    # THEN the run made both kinds of update the consumer has (so the check is not vacuous)
    assert {kind(request) for request in consumer_updates} == {MARK, ADOPT_PENDING}
    # AND every one of them is allowed
    refused = [request for request in consumer_updates if not allowed(trust_boundaries, role, request)]
    assert refused == []
    # AND each statement allows no attribute beyond those the code's updates name and the keys
    for action, allowed_names, made in (
        ("dynamodb:UpdateItem", CONSUMER_UPDATE_ATTRIBUTES, ADOPT_PENDING),
        ("dynamodb:PartiQLUpdate", MARK_STATEMENT_ATTRIBUTES, MARK),
    ):
        listed = listed_attributes(trust_boundaries, role, action)
        assert listed == list(allowed_names)
        named = set().union(*(named_attributes(r) for r in consumer_updates if kind(r) == made))
        assert named <= set(listed)
        assert set(listed) - named <= set(KEY_ATTRIBUTES)  # the keys, listed as the IAM guide asks


def test_every_update_the_reconciler_makes_is_allowed_by_its_role(
    trust_boundaries: Synthesized, reconciler_updates: list[dict[str, Any]]
) -> None:
    # GIVEN the reconciler role's UpdateItem and PartiQLUpdate statements as synthesized, and a run's updates
    reconciliation = trust_boundaries.pipeline.reconciliation
    assert reconciliation is not None
    role = reconciliation.function.role
    # WHEN each recorded request is held against its action's statement
    # THEN the run made both kinds of update the reconciler has
    assert {kind(request) for request in reconciler_updates} == {MARK, EXPIRE_SENT}
    # AND every one of them is allowed
    assert [request for request in reconciler_updates if not allowed(trust_boundaries, role, request)] == []
    assert listed_attributes(trust_boundaries, role, "dynamodb:UpdateItem") == list(RECONCILER_UPDATE_ATTRIBUTES)
    assert listed_attributes(trust_boundaries, role, "dynamodb:PartiQLUpdate") == list(MARK_STATEMENT_ATTRIBUTES)


#: Requests one step beyond the code's adoption (an UpdateItem): each changes one field of a real one.
BEYOND_THE_CODE = {
    "sets-another-attribute": lambda adopt: {"UpdateExpression": adopt["UpdateExpression"] + ", order_id = :shard"},
    "reads-another-in-its-condition": lambda adopt: {
        "ConditionExpression": adopt["ConditionExpression"] + " AND amount > :sha"
    },
    "another-key": lambda adopt: {"Key": {"order_id": {"S": "o-1"}}},
    "returns-the-new-item": lambda adopt: {"ReturnValues": "ALL_NEW"},
}


@pytest.mark.parametrize("change", BEYOND_THE_CODE.values(), ids=BEYOND_THE_CODE.keys())
def test_an_update_beyond_the_code_is_refused(
    trust_boundaries: Synthesized,
    consumer_updates: list[dict[str, Any]],
    change: Callable[[dict[str, Any]], dict[str, Any]],
) -> None:
    # GIVEN the consumer's UpdateItem statement and one of its real adoptions
    role = trust_boundaries.pipeline.function.role
    [adopt, *_] = [request for request in consumer_updates if kind(request) == ADOPT_PENDING]
    assert allowed(trust_boundaries, role, adopt)
    # WHEN the update names one attribute more, or asks for the whole new item back
    # THEN the statement refuses it
    assert not allowed(trust_boundaries, role, {**adopt, **change(adopt)})


#: Statements one step beyond the code's mark: each changes one part of a real one.
MARK_BEYOND_THE_CODE = {
    "sets-another-attribute": lambda mark: {
        "Statement": mark["Statement"].replace(" WHERE ", ", order_id = ? WHERE "),
        "Parameters": [*mark["Parameters"][:3], {"S": "o-1"}, *mark["Parameters"][3:]],
    },
    "reads-another-in-its-condition": lambda mark: {
        "Statement": mark["Statement"] + " AND amount = ?",
        "Parameters": [*mark["Parameters"], {"N": "1"}],
    },
    "another-key": lambda mark: {"Statement": mark["Statement"].replace("WHERE event_id", "WHERE order_id")},
    "removes-another-attribute": lambda mark: {
        "Statement": mark["Statement"].replace(" WHERE ", " REMOVE order_id WHERE ")
    },
}


@pytest.mark.parametrize("change", MARK_BEYOND_THE_CODE.values(), ids=MARK_BEYOND_THE_CODE.keys())
def test_a_mark_statement_beyond_the_code_is_refused(
    trust_boundaries: Synthesized,
    consumer_updates: list[dict[str, Any]],
    change: Callable[[dict[str, Any]], dict[str, Any]],
) -> None:
    # GIVEN the consumer's PartiQLUpdate statement and one of its real mark statements
    role = trust_boundaries.pipeline.function.role
    [mark, *_] = [request for request in consumer_updates if kind(request) == MARK]
    assert allowed(trust_boundaries, role, mark)
    # WHEN the statement names one attribute more in its SET, REMOVE or WHERE, or another key
    # THEN the PartiQLUpdate statement refuses it
    assert not allowed(trust_boundaries, role, {**mark, **change(mark)})


@pytest.fixture(scope="module")
def checkpoint_requests() -> Iterator[list[dict[str, Any]]]:
    """The reconciler's reads and writes of its checkpoint item in two runs (GetItem, PutItem), with their action."""
    with mock_aws():
        aws = Clients(dynamodb=boto3.client("dynamodb"), sns=boto3.client("sns"), sqs=boto3.client("sqs"))
        world = ReconcilerWorld(prefix="checkpoints-", aws=aws)
        try:
            world.pend([order(1)], created_at=time.time() - 3600)
            for _ in range(2):
                world.reconciler(reconcile_after_seconds=900).run()
            found = [
                {"Action": f"dynamodb:{operation.title().replace('_', '')}", **request}
                for operation in ("get_item", "put_item")
                for request in world.board.requests.get(operation, [])
            ]
            assert {request["Action"] for request in found} == {"dynamodb:GetItem", "dynamodb:PutItem"}
            yield found
        finally:
            reconciler_entry.configure()


def checkpoint_statement(synthesized: Synthesized, action: str) -> dict[str, Any]:
    reconciliation = synthesized.pipeline.reconciliation
    assert reconciliation is not None
    [statement] = [
        s for s in role_statements(synthesized, reconciliation.function.role) if action in as_list(s["Action"])
    ]
    return statement


def test_the_reconciler_reads_and_writes_only_its_checkpoint_item(
    trust_boundaries: Synthesized, checkpoint_requests: list[dict[str, Any]]
) -> None:
    # GIVEN the reconciler role's one statement for GetItem and one for PutItem, and two runs' requests of them
    statements = {
        action: checkpoint_statement(trust_boundaries, action) for action in ("dynamodb:GetItem", "dynamodb:PutItem")
    }
    assert all(as_list(s["Action"]) == [action] for action, s in statements.items())
    # WHEN each request is held against its action's statement
    # THEN every one is allowed
    assert [r for r in checkpoint_requests if not condition_allows(statements[r["Action"]]["Condition"], r)] == []
    # AND a read or write of another key, or of one attribute more, is refused
    put = next(r for r in checkpoint_requests if r["Action"] == "dynamodb:PutItem")
    get = next(r for r in checkpoint_requests if r["Action"] == "dynamodb:GetItem")
    beyond = [
        {**put, "Item": {**put["Item"], "event_id": {"S": "evt-1"}}},
        {**put, "Item": {**put["Item"], "status": {"S": "sent"}}},
        {**get, "Key": {"event_id": {"S": "evt-1"}}},
        {**get, "ProjectionExpression": "order_id", "ExpressionAttributeNames": {}},
        {**put, "ReturnValues": "ALL_OLD"},
    ]
    allowed = [condition_allows(statements[r["Action"]]["Condition"], r) for r in beyond]
    assert allowed == [False] * len(beyond)
