#!/usr/bin/env python3
"""An app as a team writes it, for the stand-in's CloudFormation test (``tests/sandbox/test_moto_patches.py``).

Three stacks: ``Orders`` (a standard pipeline, its topic exported to ``Subscriber``), ``Payments``
(a FIFO pipeline: generated ``.fifo`` names) and ``Subscriber`` (a queue subscribed to the orders
topic through a cross-stack reference, ``Fn::ImportValue``). With ``-c unsupported_type=<type>`` the
subscriber stack also holds a resource of that type (one the stand-in cannot run), so that its deploy
fails and rolls back.
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[3] / "infra"))

import aws_cdk as cdk  # after the path above
from aws_cdk import aws_sns_subscriptions, aws_sqs

from idempotent_order_pipeline import IdempotentOrderPipeline


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
