#!/usr/bin/env python3
"""An app as a team writes it, for the stand-in's CloudFormation test (``tests/sandbox/test_moto_patches.py``).

Three stacks: ``Orders`` (a standard pipeline, its topic exported to ``Subscriber``), ``Payments``
(a FIFO pipeline: generated ``.fifo`` names) and ``Subscriber`` (a queue subscribed to the orders
topic through a cross-stack reference, ``Fn::ImportValue``, and an ``IdempotentSubscriber`` of the orders
pipeline, the worked example's shipping handler). With ``-c unsupported_type=<type>`` the
subscriber stack also holds a resource of that type (one the stand-in cannot run), so that its deploy
fails and rolls back.
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[3] / "infra"))

import aws_cdk as cdk  # after the path above
from aws_cdk import aws_dynamodb, aws_lambda, aws_sns_subscriptions, aws_sqs

from idempotent_order_pipeline import IdempotentOrderPipeline, IdempotentSubscriber

#: The worked example's shipping subscriber (examples/subscriber).
SUBSCRIBER_CODE = Path(__file__).resolve().parents[3] / "examples" / "subscriber" / "subscriber_lambda"


def build_app() -> cdk.App:
    app = cdk.App()
    env = cdk.Environment(account="123456789012", region="eu-west-1")
    orders = cdk.Stack(app, "Orders", env=env)
    pipeline = IdempotentOrderPipeline(orders, "Pipeline")
    payments = cdk.Stack(app, "Payments", env=env)
    IdempotentOrderPipeline(payments, "Pipeline", fifo=True, removal_policy=cdk.RemovalPolicy.DESTROY)
    subscriber = cdk.Stack(app, "Subscriber", env=env)
    inbox = aws_sqs.Queue(subscriber, "Inbox", enforce_ssl=True)
    pipeline.topic.add_subscription(aws_sns_subscriptions.SqsSubscription(inbox, raw_message_delivery=True))
    # The team's own subscriber of the orders pipeline, in its own stack (its runtime helper a layer there).
    counters = aws_dynamodb.Table(
        subscriber,
        "ShipmentCounters",
        partition_key=aws_dynamodb.Attribute(name="order_id", type=aws_dynamodb.AttributeType.STRING),
        billing_mode=aws_dynamodb.BillingMode.PAY_PER_REQUEST,
        removal_policy=cdk.RemovalPolicy.DESTROY,
    )
    shipping = IdempotentSubscriber(
        subscriber,
        "Shipping",
        pipeline=pipeline,
        code=aws_lambda.Code.from_asset(str(SUBSCRIBER_CODE), exclude=["__pycache__", "*.pyc"]),
        handler="shipping.handler",
        environment={"COUNTERS_TABLE": counters.table_name},
        removal_policy=cdk.RemovalPolicy.DESTROY,
    )
    shipping.grant_effect_writes(counters)
    unsupported_type = app.node.try_get_context("unsupported_type")
    if unsupported_type:
        cdk.CfnResource(
            subscriber,
            "Unsupported",
            type=unsupported_type,
            properties={
                "RoleArn": "arn:aws:iam::123456789012:role/pipe",
                "Source": inbox.queue_arn,
                "Target": inbox.queue_arn,
            },
        )
    return app


if __name__ == "__main__":
    build_app().synth()
