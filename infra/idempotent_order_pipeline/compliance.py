"""checkov findings this construct's design answers, shipped as resource metadata with their reasons.

checkov reads ``Metadata: {checkov: {skip: [{id, comment}]}}`` on a CloudFormation resource and
reports the check as skipped with that comment; cdk-nag's acknowledgements are the same idea
(see ``IdempotentOrderPipeline._acknowledge_findings``). Each suppression below applies only
where its reason holds: e.g. ``CKV_AWS_27`` (SQS encryption) only without ``encryption_key``, and
``CKV_AWS_117`` (VPC) only when the function is not in one. ``docs/compliance.md``
lists the same ids (a test keeps them equal).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from aws_cdk import CfnResource
    from constructs import IConstruct


@dataclass(frozen=True)
class CheckovSuppression:
    """One checkov check skipped on one kind of resource, and why."""

    check_id: str
    #: Which of the construct's resources (a key of the ``resources`` passed to :func:`suppress`).
    role: str
    reason: str


#: Whether a suppression applies to a pipeline: it gets the pipeline's resolved facts.
Condition = Callable[["PipelineFacts"], bool]


@dataclass(frozen=True)
class PipelineFacts:
    """What the conditions look at."""

    customer_managed_key: bool
    function_in_vpc: bool
    reserved_concurrency: bool


_WITHOUT_KEY = "Without encryption_key: "
_DLQ_REASON = (
    "A function DLQ only catches asynchronous invocations. The SQS event source invokes the consumer "
    "synchronously (failed records return to the queue, whose redrive policy moves them to the dead-letter "
    "queue); the reconciler's scheduled runs have retries off and nothing to keep (the next run finds every "
    "record still pending in the index)."
)
_CONCURRENCY_REASON = (
    "Reserving concurrency takes it from the account's unreserved pool; the event source's max_concurrency "
    "caps the consumer without that, and the reconciler runs once per schedule. Pass reserved_concurrency to "
    "reserve some for the consumer."
)

#: Every checkov suppression the construct may ship, with the condition under which it does.
CHECKOV_SUPPRESSIONS: tuple[tuple[CheckovSuppression, Condition], ...] = (
    (
        CheckovSuppression(
            "CKV_AWS_27",
            "queues",
            _WITHOUT_KEY + "the queues use SQS-managed server-side encryption (SqsManagedSseEnabled), which "
            "checkov does not recognise; every message is encrypted at rest. Pass encryption_key for a customer "
            "managed key.",
        ),
        lambda facts: not facts.customer_managed_key,
    ),
    (
        CheckovSuppression(
            "CKV_AWS_119",
            "tables",
            _WITHOUT_KEY + "DynamoDB encrypts every table at rest with an AWS owned key; a customer managed key "
            "adds cost and key administration. Pass encryption_key for one.",
        ),
        lambda facts: not facts.customer_managed_key,
    ),
    (
        CheckovSuppression(
            "CKV_AWS_158",
            "log_group",
            _WITHOUT_KEY + "CloudWatch Logs encrypts log data at rest with service-managed keys; the functions log "
            "ids, outcomes and error messages, not order bodies. Pass encryption_key to encrypt the log group with it.",
        ),
        lambda facts: not facts.customer_managed_key,
    ),
    (
        CheckovSuppression(
            "CKV_AWS_116",
            "function",
            _DLQ_REASON,
        ),
        lambda facts: True,
    ),
    (
        CheckovSuppression("CKV_AWS_116", "reconciler_function", _DLQ_REASON),
        lambda facts: True,
    ),
    (
        CheckovSuppression(
            "CKV_AWS_117",
            "function",
            "The function calls only AWS APIs (SQS, DynamoDB, SNS), over TLS and authorised by IAM; a VPC adds "
            "endpoints or NAT at a cost and protects nothing more here. Pass vpc to run it in yours.",
        ),
        lambda facts: not facts.function_in_vpc,
    ),
    (
        CheckovSuppression("CKV_AWS_115", "function", _CONCURRENCY_REASON),
        lambda facts: not facts.reserved_concurrency,
    ),
    (
        CheckovSuppression("CKV_AWS_115", "reconciler_function", _CONCURRENCY_REASON),
        lambda facts: True,
    ),
    (
        CheckovSuppression(
            "CKV_AWS_111",
            "function_policy",
            "In a VPC: Lambda needs ec2:CreateNetworkInterface, DescribeNetworkInterfaces, DescribeSubnets, "
            "DeleteNetworkInterface, AssignPrivateIpAddresses and UnassignPrivateIpAddresses to attach the function "
            "to its subnets (the actions of AWS's AWSLambdaVPCAccessExecutionRole policy): the Describe calls on every "
            "resource (they support no other), the others on this account's resources of the region; they give no "
            "access to data.",
        ),
        lambda facts: facts.function_in_vpc,
    ),
    (
        CheckovSuppression(
            "CKV_AWS_173",
            "function",
            "The environment variables hold only resource names and settings, no secret; Lambda encrypts them "
            "at rest with its AWS managed key.",
        ),
        lambda facts: True,
    ),
)


def applicable(facts: PipelineFacts) -> list[CheckovSuppression]:
    """The suppressions that hold for a pipeline with these facts."""
    return [suppression for suppression, condition in CHECKOV_SUPPRESSIONS if condition(facts)]


def suppress(facts: PipelineFacts, resources: Mapping[str, list[IConstruct]]) -> None:
    """Write the applicable suppressions into the metadata of the resources of each role."""
    add_skips(applicable(facts), resources)


def add_skips(suppressions: Iterable[CheckovSuppression], resources: Mapping[str, list[IConstruct]]) -> None:
    """Write ``suppressions`` into the ``checkov`` metadata of the resources of each role (the one writer)."""
    skips: dict[str, tuple[CfnResource, list[dict[str, str]]]] = {}
    for suppression in suppressions:
        for construct in resources[suppression.role]:
            resource = _cfn_resource(construct)
            if resource is None:  # imported: not in this template, nothing to answer for
                continue
            entry = skips.setdefault(resource.node.path, (resource, []))
            entry[1].append({"id": suppression.check_id, "comment": suppression.reason})
    for resource, skip in skips.values():
        resource.add_metadata("checkov", {"skip": skip})


def _cfn_resource(construct: IConstruct) -> CfnResource | None:
    from aws_cdk import CfnResource

    element = construct if isinstance(construct, CfnResource) else construct.node.default_child
    return element if isinstance(element, CfnResource) else None
