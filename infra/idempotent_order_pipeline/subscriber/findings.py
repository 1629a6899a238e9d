"""cdk-nag and checkov findings ``IdempotentSubscriber``'s design answers, each with its reason.

The same mechanism as the pipeline's (``nag.acknowledge``, ``compliance.add_skips``); the reasons
are the subscriber's own, since its function is the team's code. docs/subscriber.md lists them
(a test keeps the page and this module equal).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from idempotent_order_pipeline.compliance import CheckovSuppression

if TYPE_CHECKING:
    from constructs import IConstruct

    from idempotent_order_pipeline.subscriber.construct import IdempotentSubscriber

_DLQ_REASON = (
    "A function DLQ only catches asynchronous invocations; the SQS event source invokes the subscriber's function "
    "synchronously, and failed records return to the queue, whose redrive policy moves them to the dead-letter queue."
)
NAG_REASONS = {
    "Serverless-LambdaDLQ": _DLQ_REASON,
    "Serverless-LambdaEventSourceMappingDestination": (
        "On-failure destinations exist for stream and Kafka event sources, not SQS: for an SQS source the queue's "
        "redrive policy (max_receive_count) is the failure destination."
    ),
    "Serverless-LambdaTracing": (
        "Active tracing is off: the helper does not instrument its DynamoDB calls, so a trace would show the "
        "invocation only. A team tracing its effect sets TracingConfig on function.node.default_child and grants "
        "the X-Ray actions on function.role (the construct has no tracing prop)."
    ),
    "Serverless-SQSRedrivePolicy": (
        "This is the subscriber's dead-letter queue: notifications stay 14 days for an operator to inspect and "
        "redrive; a dead-letter queue of a dead-letter queue would only move the problem."
    ),
}

CHECKOV_SUPPRESSIONS = (
    CheckovSuppression(
        "CKV_AWS_27",
        "queues",
        "The subscriber's queues use SQS-managed server-side encryption (SqsManagedSseEnabled), which checkov does "
        "not recognise; every notification is encrypted at rest.",
    ),
    CheckovSuppression(
        "CKV_AWS_119",
        "tables",
        "DynamoDB encrypts the deduplication table at rest with the AWS managed key; it holds event ids, claim "
        "tokens and times, no order data.",
    ),
    CheckovSuppression(
        "CKV_AWS_158",
        "log_group",
        "CloudWatch Logs encrypts log data at rest with service-managed keys; the helper logs event ids and "
        "outcomes. A team logging sensitive data encrypts its log group with its own key.",
    ),
    CheckovSuppression("CKV_AWS_116", "function", _DLQ_REASON),
    CheckovSuppression(
        "CKV_AWS_117",
        "function",
        "The helper calls only DynamoDB over TLS, authorised by IAM; IdempotentSubscriber does not place the "
        "function in a VPC (an effect that needs private network access is beyond what it ships).",
    ),
    CheckovSuppression(
        "CKV_AWS_115",
        "function",
        "Reserving concurrency takes it from the account's unreserved pool; max_concurrency caps the subscriber's "
        "event source without that.",
    ),
    CheckovSuppression(
        "CKV_AWS_173",
        "function",
        "The construct's variables hold only the table name, the lease, the TTL and the service name; Lambda "
        "encrypts variables at rest with its AWS managed key. The team's environment= holds no secret (use Secrets "
        "Manager).",
    ),
)


def nag_acknowledgements(subscriber: IdempotentSubscriber) -> list[tuple[IConstruct, str, str, str]]:
    """(construct, pack, rule, reason) for every cdk-nag finding the design answers."""
    function = subscriber.function
    return [
        (function, "Serverless", rule, NAG_REASONS[rule])
        for rule in (
            "Serverless-LambdaDLQ",
            "Serverless-LambdaEventSourceMappingDestination",
            "Serverless-LambdaTracing",
        )
    ] + [
        (
            subscriber.dead_letter_queue,
            "Serverless",
            "Serverless-SQSRedrivePolicy",
            NAG_REASONS["Serverless-SQSRedrivePolicy"],
        )
    ]
