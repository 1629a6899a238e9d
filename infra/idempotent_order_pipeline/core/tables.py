"""The library's DynamoDB tables: one key, on demand, point-in-time recovery, encrypted, no physical name.

The pipeline's two tables (through their ``table_props`` merge, :mod:`idempotent_order_pipeline.resources`),
the subscriber's deduplication table and the stand-in's brownfield tables start from :func:`table_defaults`;
:func:`build_table` makes one and turns its deletion protection on while the stack keeps it.
"""

from __future__ import annotations

from typing import Any

from aws_cdk import RemovalPolicy, aws_dynamodb, aws_kms
from constructs import Construct

from idempotent_order_pipeline import removal


def table_defaults(
    *,
    partition_key: str,
    time_to_live_attribute: str | None,
    removal_policy: RemovalPolicy,
    encryption: aws_dynamodb.TableEncryption | None = None,
    encryption_key: aws_kms.IKey | None = None,
) -> dict[str, Any]:
    """A table keyed by the string ``partition_key`` alone, with the library's secure defaults.

    ``encryption`` None: DynamoDB's AWS owned key (tables are always encrypted; the template then has no
    ``SSESpecification``); with ``encryption_key``, a customer managed key.
    """
    return {
        "partition_key": aws_dynamodb.Attribute(name=partition_key, type=aws_dynamodb.AttributeType.STRING),
        "billing_mode": aws_dynamodb.BillingMode.PAY_PER_REQUEST,
        "point_in_time_recovery_specification": aws_dynamodb.PointInTimeRecoverySpecification(
            point_in_time_recovery_enabled=True
        ),
        "time_to_live_attribute": time_to_live_attribute,
        "encryption": aws_dynamodb.TableEncryption.CUSTOMER_MANAGED if encryption_key is not None else encryption,
        "encryption_key": encryption_key,
        "removal_policy": removal_policy,
    }


def build_table(scope: Construct, construct_id: str, **kwargs: Any) -> aws_dynamodb.Table:
    """The table, its deletion protection on unless the stack's final removal policy deletes it."""
    table = aws_dynamodb.Table(scope, construct_id, **kwargs)
    cfn_table = table.node.default_child
    assert isinstance(cfn_table, aws_dynamodb.CfnTable)
    removal.protect_while_kept(cfn_table)
    return table
