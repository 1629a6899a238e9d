"""A reusable AWS CDK construct: SQS -> Lambda -> DynamoDB (exactly once) -> SNS (at least once)."""

from idempotent_order_pipeline.construct import OUTCOME_METRICS, IdempotentOrderPipeline

__all__ = ["OUTCOME_METRICS", "IdempotentOrderPipeline"]
