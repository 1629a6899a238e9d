"""The worked examples as a CDK app: a pipeline and two ``IdempotentSubscriber``s of the shipped construct.

``npx cdk synth --app "python examples/subscriber/app.py"``. The subscribers' code is
``subscriber_lambda/`` (the team's own); the helper it imports comes from the construct's layer.
"""

from __future__ import annotations

from pathlib import Path

from aws_cdk import RemovalPolicy, Stack, aws_dynamodb, aws_lambda
from constructs import Construct

from idempotent_order_pipeline import IdempotentOrderPipeline, IdempotentSubscriber

CODE = Path(__file__).parent / "subscriber_lambda"


class SubscriberStack(Stack):
    """A pipeline, a shipping subscriber (a counter, exactly once) and a payments one (an external call)."""

    def __init__(self, scope: Construct, construct_id: str) -> None:
        super().__init__(scope, construct_id)
        self.pipeline = IdempotentOrderPipeline(self, "Pipeline")
        code = aws_lambda.Code.from_asset(str(CODE), exclude=["__pycache__", "*.pyc"])
        self.counters = aws_dynamodb.Table(
            self,
            "ShipmentCounters",
            partition_key=aws_dynamodb.Attribute(name="order_id", type=aws_dynamodb.AttributeType.STRING),
            billing_mode=aws_dynamodb.BillingMode.PAY_PER_REQUEST,
            point_in_time_recovery_specification=aws_dynamodb.PointInTimeRecoverySpecification(
                point_in_time_recovery_enabled=True
            ),
            removal_policy=RemovalPolicy.RETAIN,
        )
        self.shipping = IdempotentSubscriber(
            self,
            "Shipping",
            pipeline=self.pipeline,
            code=code,
            handler="shipping.handler",
            environment={"COUNTERS_TABLE": self.counters.table_name},
        )
        self.shipping.grant_effect_writes(self.counters)
        self.payments = IdempotentSubscriber(
            self,
            "Payments",
            pipeline=self.pipeline,
            code=code,
            handler="payments.handler",
            environment={"PAYMENTS_URL": "https://payments.example.com/charges"},
        )
