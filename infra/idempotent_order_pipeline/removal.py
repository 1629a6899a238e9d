"""Removal policy done right: deletion protection follows the policy the stack *ends up* with.

``removal_policy=`` sets each resource's ``DeletionPolicy``, but a caller can change it after the
construct: ``RemovalPolicies.of(stack).destroy()`` (an Aspect) or ``table.apply_removal_policy(...)``.
A table's ``DeletionProtectionEnabled`` is therefore a :class:`Lazy` value, read from the table's
final ``cfn_options.deletion_policy`` when the template is written (after every Aspect ran):

====================================  =========================  ==========================
Removal policy                        ``DeletionPolicy``          Deletion protection
====================================  =========================  ==========================
``RETAIN``                            ``Retain``                  on
``RETAIN_ON_UPDATE_OR_DELETE``        ``RetainExceptOnCreate``    on
``DESTROY``                           ``Delete``                  off (so ``cdk destroy`` works)
``SNAPSHOT``                          ``Snapshot``                synth error (nothing here snapshots)
====================================  =========================  ==========================
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import jsii
from aws_cdk import CfnDeletionPolicy, CfnResource, IAnyProducer, IResolveContext, Lazy, aws_dynamodb
from constructs import IValidation

#: Deletion policies that keep the resource: protection on, so nobody deletes it by hand either.
KEEPING_POLICIES = (CfnDeletionPolicy.RETAIN, CfnDeletionPolicy.RETAIN_EXCEPT_ON_CREATE)


@jsii.implements(IAnyProducer)
class _DeletionProtection:
    """``True`` when the table's final deletion policy keeps it."""

    def __init__(self, table: aws_dynamodb.CfnTable) -> None:
        self._table = table

    def produce(self, context: IResolveContext) -> Any:
        return self._table.cfn_options.deletion_policy in KEEPING_POLICIES


def protect_while_kept(table: aws_dynamodb.CfnTable) -> None:
    """Make the table's deletion protection follow its final deletion policy."""
    table.deletion_protection_enabled = Lazy.uncached_any(_DeletionProtection(table))


@jsii.implements(IValidation)
class NoSnapshotPolicy:
    """A synth error when a resource that cannot be snapshotted ends up with ``DeletionPolicy: Snapshot``."""

    def __init__(self, resources: Sequence[CfnResource]) -> None:
        self._resources = list(resources)

    def validate(self) -> list[str]:
        return [
            f"{resource.node.path} ({resource.cfn_resource_type}) has DeletionPolicy Snapshot (RemovalPolicy.SNAPSHOT, "
            "e.g. from RemovalPolicies.of(...).snapshot()): this resource type cannot be snapshotted; allowed "
            "DESTROY, RETAIN or RETAIN_ON_UPDATE_OR_DELETE"
            for resource in self._resources
            if resource.cfn_options.deletion_policy == CfnDeletionPolicy.SNAPSHOT
        ]
