"""The demo's checks of the worked app: schema violations parked, the producer's refusal, fulfilment once per order."""

from __future__ import annotations

import json
from typing import Any

import boto3
import pytest
from moto import mock_aws

import app as cdk_app
from idempotent_order_pipeline.sandbox import checks, traffic, worked_app
from idempotent_order_pipeline.sandbox.checks import EndpointState, ParkedMessage
from idempotent_order_pipeline.sandbox.worked_app import FulfilmentState, ProducerRefusal


def _plan() -> traffic.TrafficPlan:
    plan = traffic.plan_traffic(
        20, seed=5, resend_share=0, conflict_share=0, invalid_share=0, schema_violation_share=0.25
    )
    for index, message in enumerate(plan.messages):
        message.message_id = f"m-{index}"
    return plan


def _row(message: traffic.PlannedMessage) -> dict[str, Any]:
    body = json.loads(message.body)
    return {**body, "event_id": message.event_id, "payload_sha256": message.payload_sha256}


def _healthy_state(plan: traffic.TrafficPlan, *, violation_code: str = checks.SCHEMA_VIOLATION) -> EndpointState:
    orders = [message for message in plan.messages if message.kind == "order"]
    violations = traffic.schema_violations(plan)
    return EndpointState(
        order_rows=[_row(message) for message in orders],
        processed_events={str(m.event_id): {"status": "sent", "payload_sha256": m.payload_sha256} for m in orders},
        notifications=[{"event_id": m.event_id, "payload_sha256": m.payload_sha256} for m in orders],
        dead_letters=[
            ParkedMessage(
                message_id=f"dlq-{m.message_id}",
                source_message_id=str(m.message_id),
                error_code=violation_code,
                error_message="the message",
            )
            for m in violations
        ],
        queue_visible=0,
        queue_in_flight=0,
    )


def test_schema_violations_parked_as_schema_violation_hold() -> None:
    # GIVEN a run whose schema violations are all parked with SCHEMA_VIOLATION and not recorded
    plan = _plan()
    assert len(traffic.schema_violations(plan)) == 5
    # WHEN the run is checked
    result = checks.check(plan, _healthy_state(plan))
    # THEN every invariant holds and the figures count them as expected in the DLQ
    assert result.violations == []
    assert result.figures["schema violations"] == 5
    assert result.figures["expected in the DLQ"] == 5


def test_a_schema_violation_parked_with_another_code_or_recorded_is_a_violation() -> None:
    # GIVEN schema violations parked as INVALID_MESSAGE, and one of them recorded as an order
    plan = _plan()
    state = _healthy_state(plan, violation_code=checks.INVALID_MESSAGE)
    state.order_rows.append(_row(traffic.schema_violations(plan)[0]))
    # WHEN the run is checked
    result = checks.check(plan, state)
    # THEN both are reported
    assert any(v.startswith("schema violations not parked as SCHEMA_VIOLATION: 5") for v in result.violations)
    assert any(v.startswith("schema violations recorded as orders: 1") for v in result.violations)


def test_every_schema_violation_breaks_the_apps_schema_at_the_producer() -> None:
    # GIVEN the app's schema in the producer client (on moto: nothing must be sent)
    plan = _plan()
    with mock_aws():
        sqs = boto3.client("sqs", region_name="eu-west-1")
        queue_url = sqs.create_queue(QueueName="orders")["QueueUrl"]

        class Endpoint:
            def client(self, name: str) -> Any:
                return sqs

        # WHEN the producer is handed each planned violation
        refusals = [
            worked_app.refuse_at_producer(Endpoint(), queue_url, cdk_app.ORDER_SCHEMA, m)  # type: ignore[arg-type]
            for m in traffic.schema_violations(plan)
        ]
        # THEN it refuses every one, with a message naming the JSON path, and sends nothing
        assert [refusal.refused for refusal in refusals] == [True] * 5
        assert all(refusal.message.startswith("$") or "$." in refusal.message for refusal in refusals), refusals
        assert "Messages" not in sqs.receive_message(QueueUrl=queue_url)


def test_check_refusal_needs_the_consumers_message_for_the_same_order() -> None:
    # GIVEN the first violation parked with "the message"
    plan = _plan()
    state = _healthy_state(plan)
    violation = traffic.schema_violations(plan)[0]
    same = ProducerRefusal(order_id=str(violation.order_id), refused=True, message="the message")
    other = ProducerRefusal(order_id=str(violation.order_id), refused=True, message="another message")
    accepted = ProducerRefusal(order_id=str(violation.order_id), refused=False, message="")
    # WHEN the refusals are checked
    # THEN only the refusal with the consumer's own message holds
    assert worked_app.check_refusal(same, violation, state) == []
    assert "the consumer parked it with 'the message'" in worked_app.check_refusal(other, violation, state)[0]
    assert "the producer accepted" in worked_app.check_refusal(accepted, violation, state)[0]


def _fulfilment(shipments: dict[str, int], **overrides: Any) -> FulfilmentState:
    return FulfilmentState(
        shipments=shipments,
        filter_policy=overrides.pop("filter_policy", {"country": ["DE"]}),
        dead_letters=overrides.pop("dead_letters", 0),
        queue_visible=0,
        queue_in_flight=0,
    )


ROWS = [
    {"order_id": "o-1", "country": "DE"},
    {"order_id": "o-2", "country": "FR"},
    {"order_id": "o-3", "country": "DE"},
]


def test_fulfilment_once_per_german_order_holds() -> None:
    # GIVEN each German order shipped once and the French one not at all
    fulfilment = _fulfilment({"o-1": 1, "o-3": 1})
    # WHEN fulfilment is checked
    # THEN it holds, with the figures
    assert worked_app.check_fulfilment(fulfilment, ROWS) == []
    assert fulfilment.figures["orders for fulfilment (filter matches)"] == 2
    assert fulfilment.figures["orders filtered out"] == 1


@pytest.mark.parametrize(
    ("shipments", "dead_letters", "expected"),
    [
        ({"o-1": 1}, 0, "orders for fulfilment never acted on: 1 (o-3)"),
        ({"o-1": 2, "o-3": 1}, 0, "orders acted on other than once: 1 (o-1)"),
        ({"o-1": 1, "o-2": 1, "o-3": 1}, 0, "orders outside the filter acted on: 1 (o-2)"),
        ({"o-1": 1, "o-3": 1}, 2, "messages parked in the fulfilment DLQ: 2"),
    ],
)
def test_fulfilment_missing_twice_stray_or_parked_is_a_violation(
    shipments: dict[str, int], dead_letters: int, expected: str
) -> None:
    # GIVEN fulfilment that missed, repeated, strayed or parked
    fulfilment = _fulfilment(shipments, dead_letters=dead_letters)
    # WHEN it is checked
    # THEN exactly that is reported
    assert worked_app.check_fulfilment(fulfilment, ROWS) == [expected]


def test_fulfilment_with_no_matching_order_proves_nothing() -> None:
    # GIVEN no recorded order of the filter's country
    fulfilment = _fulfilment({})
    # WHEN fulfilment is checked
    # THEN the run says it proves nothing
    assert worked_app.check_fulfilment(fulfilment, [{"order_id": "o-2", "country": "FR"}]) == [
        "no recorded order matches the fulfilment filter: the run proves nothing about it"
    ]


def test_filter_policies_other_than_string_allowlists_are_refused() -> None:
    # GIVEN a numeric filter policy the demo's check cannot evaluate
    # WHEN an order is matched against it
    # THEN it is an error naming the policy, not a silent pass
    with pytest.raises(ValueError, match="string allowlists only"):
        worked_app.matches({"amount": [{"numeric": [">", 100]}]}, {"amount": 120})
    assert worked_app.matches({"customer.tier": ["gold"]}, {"customer": {"tier": "gold"}})
