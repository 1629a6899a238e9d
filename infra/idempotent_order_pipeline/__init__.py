"""A reusable AWS CDK construct: SQS -> Lambda -> DynamoDB (exactly once) -> SNS (at least once).

The construct is imported on first use, so that the operator CLI (``idempotent_order_pipeline.cli``)
does not load aws-cdk-lib and start jsii's Node process for every command.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from idempotent_order_pipeline._lambda_asset.order_consumer.contract.metric_names import OUTCOME_METRICS

if TYPE_CHECKING:
    from idempotent_order_pipeline.construct import IdempotentOrderPipeline
    from idempotent_order_pipeline.monitoring import AlarmThreshold
    from idempotent_order_pipeline.subscriber import IdempotentSubscriber

#: The distribution's version, defined here only (pyproject.toml reads it; CHANGELOG.md describes it). PEP 440: a
#: ``.devN`` version on main until the release commit drops the suffix (CHANGELOG.md records each release's commit).
__version__ = "0.3.0.dev0"

__all__ = ["OUTCOME_METRICS", "AlarmThreshold", "IdempotentOrderPipeline", "IdempotentSubscriber", "__version__"]


def __getattr__(name: str) -> Any:
    if name == "IdempotentOrderPipeline":
        from idempotent_order_pipeline.construct import IdempotentOrderPipeline

        return IdempotentOrderPipeline
    if name == "AlarmThreshold":
        from idempotent_order_pipeline.monitoring import AlarmThreshold

        return AlarmThreshold
    if name == "IdempotentSubscriber":
        from idempotent_order_pipeline.subscriber import IdempotentSubscriber

        return IdempotentSubscriber
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
