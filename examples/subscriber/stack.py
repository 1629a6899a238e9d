"""The subscriber's own CDK stack: a queue subscribed with ``add_subscription``, the function, its tables.

``SubscriberStack`` holds an ``IdempotentOrderPipeline`` and an :class:`OrderSubscriber` attached to
it; in your app, build the ``OrderSubscriber`` next to your own pipeline instead. Run
``npx cdk synth --app "python examples/subscriber/app.py"``.
"""

from __future__ import annotations

from pathlib import Path

from aws_cdk import (
    Duration,
    RemovalPolicy,
    Stack,
    aws_dynamodb,
    aws_lambda,
    aws_lambda_event_sources,
    aws_sns_subscriptions,
    aws_sqs,
)
from constructs import Construct

from idempotent_order_pipeline import IdempotentOrderPipeline

ASSET = Path(__file__).parent / "subscriber_lambda"
FUNCTION_TIMEOUT = Duration.seconds(30)
#: The claim outlasts one invocation; the visibility timeout outlasts the claim (see dedup.py).
LEASE = FUNCTION_TIMEOUT
VISIBILITY_TIMEOUT = Duration.seconds(6 * 30)


class OrderSubscriber(Construct):
    """A queue subscribed to the pipeline's topic, and a Lambda that acts once per ``event_id``."""

    def __init__(self, scope: Construct, construct_id: str, *, pipeline: IdempotentOrderPipeline) -> None:
        super().__init__(scope, construct_id)
        self.dead_letter_queue = aws_sqs.Queue(
            self,
            "DeadLetterQueue",
            retention_period=Duration.days(14),
            enforce_ssl=True,
            encryption=aws_sqs.QueueEncryption.SQS_MANAGED,
        )
        self.queue = aws_sqs.Queue(
            self,
            "Queue",
            visibility_timeout=VISIBILITY_TIMEOUT,
            dead_letter_queue=aws_sqs.DeadLetterQueue(queue=self.dead_letter_queue, max_receive_count=5),
            enforce_ssl=True,
            encryption=aws_sqs.QueueEncryption.SQS_MANAGED,
        )
        # The SNS envelope keeps the event_id message attribute in the body (raw delivery works too).
        self.subscription = pipeline.add_subscription(aws_sns_subscriptions.SqsSubscription(self.queue))
        self.dedup_table = self._table("DedupTable", "event_id")
        self.shipments_table = self._table("ShipmentsTable", "order_id")
        self.function = aws_lambda.Function(
            self,
            "Function",
            runtime=aws_lambda.Runtime.PYTHON_3_14,
            architecture=aws_lambda.Architecture.ARM_64,
            handler="order_subscriber.handler.handler",
            code=aws_lambda.Code.from_asset(str(ASSET), exclude=["__pycache__", "*.pyc"]),
            timeout=FUNCTION_TIMEOUT,
            environment={
                "DEDUP_TABLE": self.dedup_table.table_name,
                "SHIPMENTS_TABLE": self.shipments_table.table_name,
                "LEASE_SECONDS": str(int(LEASE.to_seconds())),
            },
        )
        self.dedup_table.grant(self.function, "dynamodb:PutItem", "dynamodb:UpdateItem", "dynamodb:ConditionCheckItem")
        self.shipments_table.grant(self.function, "dynamodb:PutItem")
        self.function.add_event_source(
            aws_lambda_event_sources.SqsEventSource(self.queue, batch_size=10, report_batch_item_failures=True)
        )

    def _table(self, construct_id: str, key: str) -> aws_dynamodb.Table:
        return aws_dynamodb.Table(
            self,
            construct_id,
            partition_key=aws_dynamodb.Attribute(name=key, type=aws_dynamodb.AttributeType.STRING),
            billing_mode=aws_dynamodb.BillingMode.PAY_PER_REQUEST,
            point_in_time_recovery_specification=aws_dynamodb.PointInTimeRecoverySpecification(
                point_in_time_recovery_enabled=True
            ),
            removal_policy=RemovalPolicy.RETAIN,
        )


class SubscriberStack(Stack):
    """A pipeline and one subscriber that acts once per order."""

    def __init__(self, scope: Construct, construct_id: str) -> None:
        super().__init__(scope, construct_id)
        self.pipeline = IdempotentOrderPipeline(self, "Pipeline")
        self.subscriber = OrderSubscriber(self, "Subscriber", pipeline=self.pipeline)
