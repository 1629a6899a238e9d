"""Snapshots of ``IdempotentSubscriber``'s template (``snapshot_template``), one per meaningful configuration.

Apart from ``test_subscriber.py`` so that ``make test-min`` (another aws-cdk-lib) can leave them out,
as it leaves out the pipeline's. Refresh after a deliberate change with ``make snapshot-update``.
"""

from __future__ import annotations

import aws_cdk as cdk
import pytest
from aws_cdk import aws_cloudwatch_actions, aws_sns
from syrupy.assertion import SnapshotAssertion
from syrupy.extensions.json import JSONSnapshotExtension

from idempotent_order_pipeline import IdempotentSubscriber
from idempotent_order_pipeline.testing import snapshot_template
from tests.infra.test_subscriber import CODE, TOPIC_ARN, on_topic


@pytest.fixture
def snapshot_json(snapshot: SnapshotAssertion) -> SnapshotAssertion:
    return snapshot.use_extension(JSONSnapshotExtension)


def test_snapshot_subscriber_default(snapshot_json: SnapshotAssertion) -> None:
    # GIVEN a subscriber of an imported topic, every optional prop at its default
    stack, _ = on_topic()
    # WHEN snapshot_template makes it a snapshot / THEN it matches the reviewed snapshot
    assert snapshot_template(stack) == snapshot_json


def test_snapshot_subscriber_fifo_body_filter_and_alarm_action(snapshot_json: SnapshotAssertion) -> None:
    # GIVEN a FIFO topic, a body filter, an alarm action and non-default times
    stack = cdk.Stack(cdk.App(), "Subscribers", env=cdk.Environment(account="123456789012", region="eu-west-1"))
    topic = aws_sns.Topic.from_topic_arn(stack, "Orders", TOPIC_ARN + ".fifo")
    alarms = aws_sns.Topic.from_topic_arn(stack, "Alarms", "arn:aws:sns:eu-west-1:123456789012:on-call")
    IdempotentSubscriber(
        stack,
        "Fraud",
        topic=topic,
        code=CODE,
        handler="fraud.handler",
        filter_policy_with_message_body={
            "total": aws_sns.FilterOrPolicy.filter(aws_sns.SubscriptionFilter.numeric_filter(greater_than=1000))
        },
        raw_message_delivery=False,
        function_timeout=cdk.Duration.seconds(60),
        lease=cdk.Duration.seconds(90),
        alarm_actions=[aws_cloudwatch_actions.SnsAction(alarms)],
        runbook_url="https://runbooks.example.com/fraud",
        removal_policy=cdk.RemovalPolicy.DESTROY,
    )
    # WHEN snapshot_template makes it a snapshot / THEN it matches the reviewed snapshot
    assert snapshot_template(stack) == snapshot_json
