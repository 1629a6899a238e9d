"""The demo's traffic against the worked app: its orders are orders as app.py's ``order_schema`` says."""

from __future__ import annotations

import pytest

import app as cdk_app
from idempotent_order_pipeline._lambda_asset.order_consumer.contract.errors import SchemaViolationError
from idempotent_order_pipeline.order_schema import compile_order_schema
from idempotent_order_pipeline.sandbox import traffic


def test_every_accepted_message_of_the_demo_satisfies_the_apps_order_schema() -> None:
    # GIVEN the app's schema, compiled as the consumer and the producer compile it
    schema = compile_order_schema(cdk_app.ORDER_SCHEMA)
    # WHEN the demo plans its orders, re-sends and conflicts
    plan = traffic.plan_traffic(200, seed=11)
    accepted = [message for message in plan.messages if message.kind in ("order", "resend", "conflict")]
    assert len(accepted) >= 200
    # THEN every one passes the schema (a violation would be parked, not recorded)
    for message in accepted:
        schema.check(message.body)
    # AND the fulfilment subscriber's country and the others are all there to route on
    countries = {message.body.split('"country":"', 1)[1][:2] for message in accepted}
    assert cdk_app.FULFILMENT_COUNTRY in countries
    assert countries - {cdk_app.FULFILMENT_COUNTRY}


def test_the_schema_refuses_an_order_without_a_number_amount() -> None:
    # GIVEN the app's schema and a demo order whose amount is a string
    schema = compile_order_schema(cdk_app.ORDER_SCHEMA)
    body = traffic.plan_traffic(1, seed=3, resend_share=0, conflict_share=0, invalid_share=0).messages[0].body
    broken = body.replace('"amount":', '"amount":"12.50","was":', 1)
    # WHEN it is checked
    # THEN it is a schema violation naming the field
    with pytest.raises(SchemaViolationError, match="amount"):
        schema.check(broken)
