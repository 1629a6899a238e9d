"""cdk-nag findings the design answers, acknowledged so that cdk-nag 2.x and 3.x both accept them.

cdk-nag 3.x runs as a validation plugin (``Validations.of(app).add_plugins(...)``) and reads the
acknowledgements aws-cdk-lib records with ``Validations.of(construct).acknowledge`` (aws-cdk-lib
2.252.0 and later). cdk-nag 2.x runs as an Aspect (``Aspects.of(app).add(...)``) and reads the
``cdk_nag`` metadata of each CloudFormation resource, in the format its ``NagSuppressions`` writes.
:func:`acknowledge` records both, so a team on either line sees no finding the construct answers,
and this construct imports nothing from cdk-nag. Every reason is listed in ``docs/compliance.md``.
"""

from __future__ import annotations

import importlib.metadata
from typing import Any

import aws_cdk
from aws_cdk import CfnResource
from constructs import IConstruct

#: The metadata key and entry list cdk-nag 2.x's ``NagSuppressions`` write and its packs read.
NAG_METADATA_KEY = "cdk_nag"
NAG_RULES_KEY = "rules_to_suppress"


def acknowledge(construct: IConstruct, pack: str, rule: str, reason: str, *, applies_to: str | None = None) -> None:
    """Acknowledge cdk-nag finding ``rule`` of ``pack`` on ``construct`` and the resources under it, with ``reason``.

    ``applies_to`` narrows a granular finding (``Resource::*`` for ``AwsSolutions-IAM5``).
    """
    validations = getattr(aws_cdk, "Validations", None)
    if validations is not None and hasattr(validations, "acknowledge"):
        suffix = f"[{applies_to}]" if applies_to else ""
        try:
            validations.of(construct).acknowledge(aws_cdk.Acknowledgment(id=f"{pack}::{rule}{suffix}", reason=reason))
        except RuntimeError as exc:
            # Some aws-cdk-lib releases (2.262.0) refuse '::' inside a rule id ("Resource::*"): the rule
            # as a whole, on this construct only.
            if not suffix or "InvalidValidationId" not in str(exc):
                raise
            validations.of(construct).acknowledge(aws_cdk.Acknowledgment(id=f"{pack}::{rule}", reason=reason))
    entry: dict[str, Any] = {"id": rule, "reason": reason}
    if applies_to:
        entry["applies_to"] = [applies_to]
    # As Validations does, and NagSuppressions with apply_to_children: every resource under the construct.
    resources = [child for child in construct.node.find_all() if isinstance(child, CfnResource)]
    if not resources:
        raise ValueError(f"{construct.node.path}: no CloudFormation resource to acknowledge {rule} on")
    for resource in resources:
        existing = resource.get_metadata(NAG_METADATA_KEY) or {}
        resource.add_metadata(NAG_METADATA_KEY, {**existing, NAG_RULES_KEY: [*existing.get(NAG_RULES_KEY, []), entry]})


def cdk_nag_major() -> int:
    """The installed cdk-nag's major version (2 or 3)."""
    return int(importlib.metadata.version("cdk-nag").split(".", 1)[0])


def add_checks(app: aws_cdk.App) -> None:
    """cdk-nag's AwsSolutions and Serverless packs on every stack of ``app``, as the installed line runs them.

    cdk-nag 3.x is a validation plugin (a finding fails the synth with a report); 2.x is an Aspect
    (a finding is an error annotation, which fails ``cdk synth``). cdk-nag is a dependency of the
    app that calls this, not of the construct.
    """
    from cdk_nag import AwsSolutionsChecks, ServerlessChecks  # imported here: the app's dependency, not ours

    if cdk_nag_major() >= 3:
        aws_cdk.Validations.of(app).add_plugins(AwsSolutionsChecks(app), ServerlessChecks(app))
    else:
        # Typed against the installed 3.x, whose packs are plugins; 2.x's are Aspects.
        aws_cdk.Aspects.of(app).add(AwsSolutionsChecks())  # type: ignore[arg-type]
        aws_cdk.Aspects.of(app).add(ServerlessChecks())  # type: ignore[arg-type]
