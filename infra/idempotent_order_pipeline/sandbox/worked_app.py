"""The worked app's path in ``make demo``: a refusal at the producer, a fulfilment subscriber acting once.

This repository's app (``app.py``) gives its pipeline an ``order_schema`` and a fulfilment
``IdempotentSubscriber`` whose subscription's filter policy lets one country through, counting one
shipment per order in the app's own table. Besides :mod:`.checks` (which also holds every schema
violation sent raw to the queue to its ``SCHEMA_VIOLATION`` parking), a run checks:

* **the producer refuses** an order that breaks the schema: ``OrderPublisher`` with the schema it
  finds in the deployed stack (as ``order-pipeline send`` does) raises ``SchemaViolationError``, and
  its message is the one the consumer parks the same order with once it is sent past the producer;
* **fulfilment acts once per order of its country**: every recorded order the filter policy matches
  has exactly one shipment, no other order has any, nothing is parked in the subscriber's DLQ and
  its queue is empty.

The outputs below are the app's own (``app.py`` imports them from here, the reader).
"""

from __future__ import annotations

import json
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from idempotent_order_pipeline._lambda_asset.order_consumer.contract import names
from idempotent_order_pipeline._lambda_asset.order_consumer.contract.errors import SchemaViolationError
from idempotent_order_pipeline.producer import OrderPublisher, deployed_order_schema
from idempotent_order_pipeline.sandbox.checks import SCHEMA_VIOLATION, EndpointState, peek_queue, queue_depth
from idempotent_order_pipeline.sandbox.traffic import PlannedMessage

if TYPE_CHECKING:
    # Annotations only: the app imports this module for its output names at every synth, and the
    # server module brings moto's CloudFormation and every backend it loads (2.7 s of a 15-s synth).
    from idempotent_order_pipeline.sandbox.server import Endpoint

SHIPMENT_COUNTERS_TABLE_OUTPUT = "ShipmentCountersTableName"
FULFILMENT_QUEUE_URL_OUTPUT = "FulfilmentQueueUrl"
FULFILMENT_DEAD_LETTER_QUEUE_URL_OUTPUT = "FulfilmentDeadLetterQueueUrl"
#: The counter the fulfilment handler (examples/subscriber/subscriber_lambda/shipping.py) increments.
SHIPMENTS_ATTRIBUTE = "shipments"


def has_fulfilment(outputs: Mapping[str, str]) -> bool:
    """Whether the deployed stack is the worked app (its fulfilment outputs are there)."""
    return SHIPMENT_COUNTERS_TABLE_OUTPUT in outputs


def order_schema(endpoint: Endpoint, stack_name: str) -> Mapping[str, Any] | None:
    """The deployed pipeline's ``order_schema``, found as the producer and the CLI find it."""
    return deployed_order_schema(stack_name, cloudformation=endpoint.client("cloudformation"))


@dataclass(frozen=True)
class ProducerRefusal:
    """What the producer said to an order that breaks the schema (``refused`` False: it accepted it)."""

    order_id: str
    refused: bool
    message: str


def refuse_at_producer(
    endpoint: Endpoint, queue_url: str, schema: Mapping[str, Any], violation: PlannedMessage
) -> ProducerRefusal:
    """Hand ``violation``'s order to the producer client, as an application would; nothing is sent."""
    publisher = OrderPublisher(queue_url, client=endpoint.client("sqs"), order_schema=schema)
    try:
        publisher.prepare(json.loads(violation.body))
    except SchemaViolationError as exc:
        return ProducerRefusal(order_id=str(violation.order_id), refused=True, message=str(exc))
    return ProducerRefusal(order_id=str(violation.order_id), refused=False, message="")


def check_refusal(refusal: ProducerRefusal, violation: PlannedMessage, state: EndpointState) -> list[str]:
    """The producer refused the order, with the message the consumer parked it with once sent raw."""
    if not refusal.refused:
        return [f"the producer accepted order {refusal.order_id}, which breaks the order_schema"]
    parked = [letter for letter in state.dead_letters if letter.source_message_id == violation.message_id]
    if not parked or any(letter.error_code != SCHEMA_VIOLATION for letter in parked):
        return [f"order {refusal.order_id}, sent past the producer, is not parked as {SCHEMA_VIOLATION}"]
    if any(letter.error_message != refusal.message for letter in parked):
        return [
            f"order {refusal.order_id}: the producer said {refusal.message!r}, "
            f"the consumer parked it with {parked[0].error_message!r}"
        ]
    return []


@dataclass
class FulfilmentState:
    """What the fulfilment subscriber did: shipments per order, its filter policy, its queues."""

    shipments: dict[str, int]
    filter_policy: dict[str, Any]
    dead_letters: int
    queue_visible: int
    queue_in_flight: int
    figures: dict[str, int] = field(default_factory=dict)


def wait_until_empty(endpoint: Endpoint, queue_url: str, *, timeout: float, settle_seconds: float = 2.0) -> bool:
    """Wait until ``queue_url`` holds no message, visible or in flight, for ``settle_seconds``; False on timeout."""
    sqs = endpoint.client("sqs")
    deadline = time.monotonic() + timeout
    empty_since: float | None = None
    while time.monotonic() < deadline:
        if queue_depth(sqs, queue_url) == (0, 0):
            empty_since = empty_since or time.monotonic()
            if time.monotonic() - empty_since >= settle_seconds:
                return True
        else:
            empty_since = None
        time.sleep(0.25)
    return False


def read_fulfilment(endpoint: Endpoint, outputs: Mapping[str, str]) -> FulfilmentState:
    """Read the counter table, the subscription's filter policy and the subscriber's queues."""
    sqs, sns = endpoint.client("sqs"), endpoint.client("sns")
    queue_url = outputs[FULFILMENT_QUEUE_URL_OUTPUT]
    queue_arn = sqs.get_queue_attributes(QueueUrl=queue_url, AttributeNames=["QueueArn"])["Attributes"]["QueueArn"]
    [subscription] = [
        subscription
        for page in sns.get_paginator("list_subscriptions_by_topic").paginate(TopicArn=outputs[names.TOPIC_ARN_OUTPUT])
        for subscription in page["Subscriptions"]
        if subscription["Endpoint"] == queue_arn
    ]
    attributes = sns.get_subscription_attributes(SubscriptionArn=subscription["SubscriptionArn"])["Attributes"]
    rows = endpoint.client("dynamodb").scan(TableName=outputs[SHIPMENT_COUNTERS_TABLE_OUTPUT], ConsistentRead=True)
    visible, in_flight = queue_depth(sqs, queue_url)
    return FulfilmentState(
        shipments={item["order_id"]["S"]: int(item[SHIPMENTS_ATTRIBUTE]["N"]) for item in rows["Items"]},
        filter_policy=json.loads(attributes.get("FilterPolicy") or "{}"),
        dead_letters=len(peek_queue(sqs, outputs[FULFILMENT_DEAD_LETTER_QUEUE_URL_OUTPUT])),
        queue_visible=visible,
        queue_in_flight=in_flight,
    )


def _field(order: Mapping[str, Any], path: str) -> Any:
    value: Any = order
    for part in path.split("."):
        value = value.get(part) if isinstance(value, Mapping) else None
    return value


def matches(filter_policy: Mapping[str, Any], order: Mapping[str, Any]) -> bool:
    """Whether an order's notification passes ``filter_policy`` (string allowlists on order fields only)."""
    for path, allowed in filter_policy.items():
        if not isinstance(allowed, Sequence) or not all(isinstance(value, str) for value in allowed):
            raise ValueError(f"filter policy {path}={allowed!r}: the demo checks string allowlists only")
        if _field(order, path) not in allowed:
            return False
    return True


def check_fulfilment(fulfilment: FulfilmentState, order_rows: Sequence[Mapping[str, Any]]) -> list[str]:
    """Every recorded order the filter matches shipped exactly once; no other order shipped at all."""
    problems: list[str] = []
    if not fulfilment.filter_policy:
        problems.append("the fulfilment subscription has no filter policy")
    expected = {str(row["order_id"]) for row in order_rows if matches(fulfilment.filter_policy, row)}
    others = {str(row["order_id"]) for row in order_rows} - expected
    missing = sorted(expected - set(fulfilment.shipments))
    twice = sorted(order_id for order_id, count in fulfilment.shipments.items() if count != 1)
    strays = sorted(set(fulfilment.shipments) - expected)
    if not expected:
        problems.append("no recorded order matches the fulfilment filter: the run proves nothing about it")
    if missing:
        problems.append(f"orders for fulfilment never acted on: {len(missing)} ({', '.join(missing[:5])})")
    if twice:
        problems.append(f"orders acted on other than once: {len(twice)} ({', '.join(twice[:5])})")
    if strays:
        problems.append(f"orders outside the filter acted on: {len(strays)} ({', '.join(strays[:5])})")
    if fulfilment.dead_letters:
        problems.append(f"messages parked in the fulfilment DLQ: {fulfilment.dead_letters}")
    if fulfilment.queue_visible or fulfilment.queue_in_flight:
        problems.append(
            f"messages left in the fulfilment queue: {fulfilment.queue_visible} visible, "
            f"{fulfilment.queue_in_flight} in flight"
        )
    fulfilment.figures = {
        "orders for fulfilment (filter matches)": len(expected),
        "orders filtered out": len(others),
        "orders shipped once": sum(count == 1 for count in fulfilment.shipments.values()),
        "fulfilment dead letters": fulfilment.dead_letters,
    }
    return problems


@dataclass
class WorkedAppRun:
    """The worked app's part of a run: the producer's refusal, what fulfilment did, what went wrong."""

    refusal: ProducerRefusal | None = None
    fulfilment: FulfilmentState | None = None
    violations: list[str] = field(default_factory=list)


def check_run(
    endpoint: Endpoint,
    outputs: Mapping[str, str],
    violations: Sequence[PlannedMessage],
    refusal: ProducerRefusal | None,
    state: EndpointState,
    *,
    timeout: float,
    fulfilment: bool,
) -> WorkedAppRun:
    """After the source queue drained: hold the refusal; with ``fulfilment``, wait for its queue and hold it.

    ``fulfilment`` is for a sandbox that runs the subscriber's function (the stand-in does: its
    runtime-helper layer is a layer version of the stack, read back from its asset).
    """
    run = WorkedAppRun(refusal=refusal)
    if refusal is not None:
        [refused] = [message for message in violations if message.order_id == refusal.order_id]
        run.violations += check_refusal(refusal, refused, state)
    if fulfilment and has_fulfilment(outputs):
        if not wait_until_empty(endpoint, outputs[FULFILMENT_QUEUE_URL_OUTPUT], timeout=timeout):
            run.violations.append(f"the fulfilment queue did not drain within {timeout:.0f} s")
        run.fulfilment = read_fulfilment(endpoint, outputs)
        run.violations += check_fulfilment(run.fulfilment, state.order_rows)
    return run
