"""A reusable AWS CDK construct: SQS -> Lambda -> DynamoDB (exactly once) -> SNS (at least once)."""

from idempotent_order_pipeline.construct import IdempotentOrderPipeline
from order_events.metric_names import OUTCOME_METRICS

__all__ = ["OUTCOME_METRICS", "IdempotentOrderPipeline"]
