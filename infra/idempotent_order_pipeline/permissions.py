"""Least privilege, written out: exactly the calls the handler makes, on exactly its resources.

The handler calls (contract with ``lambdas/order_consumer``):

- ``dynamodb:TransactWriteItems`` with two conditional ``Put``s (processed_events, order_records)
  and ``ReturnValuesOnConditionCheckFailure=ALL_OLD``. IAM has no TransactWriteItems action: each
  ``Put`` inside a transaction is authorized as ``dynamodb:PutItem`` on its table (DynamoDB
  developer guide, "Using IAM with DynamoDB transactions"); returning the old item on a failed
  condition needs no read permission. The statement only allows PutItem *inside* a transaction
  (``dynamodb:EnclosingOperation``), so the role cannot overwrite a row outside one.
- ``dynamodb:TransactWriteItems`` again for the ``sent`` marks: conditional ``Update``s of
  processed_events records, each authorized as ``dynamodb:UpdateItem`` on that table (the handler
  never calls UpdateItem itself).
- ``sns:PublishBatch`` on the topic, authorized as ``sns:Publish``.
- ``sqs:SendMessage`` and ``sqs:SendMessageBatch`` on the dead-letter queue (permanent failures are
  parked there directly), both authorized as ``sqs:SendMessage``.

The event source mapping's own SQS permissions (receive, delete, change visibility, attributes)
come from ``SqsEventSource``, which grants them on the source queue only; X-Ray and CloudWatch Logs
are granted by the construct next to the log group and tracing config.

The grants to others (producers, subscribers) follow aws-cdk-lib's own ``Queue.grant*`` and
``Topic.grant*``: ``iam.Grant.add_to_principal_or_resource`` adds an identity policy when the
grantee is in the resource's account, and a resource policy (queue policy, topic policy) naming
the grantee otherwise; a customer managed key adds its own grant (``Key.grant``: a key policy
statement for a grantee of another account). The returned ``iam.Grant`` is aws-cdk-lib's. An
imported queue, topic or key has no policy this stack may change: a cross-account grant on one
writes nothing (aws-cdk-lib still reports ``success``), and its owner must add the statement.
"""

from __future__ import annotations

from aws_cdk import ArnFormat, Stack, aws_dynamodb, aws_iam, aws_kms, aws_sns, aws_sqs
from constructs import Construct

#: What a producer needs on the queue (``OrderPublisher`` resolves the URL and reads the attributes).
SEND_ORDERS_ACTIONS = ("sqs:SendMessage", "sqs:GetQueueAttributes", "sqs:GetQueueUrl")
#: What a producer needs on the queue's customer managed key (SQS encrypts with a data key).
SEND_ORDERS_KEY_ACTIONS = ("kms:GenerateDataKey", "kms:Decrypt")
#: What CloudWatch Logs needs on a key that encrypts a log group (the CloudWatch Logs user guide's
#: key policy, "Encrypt log data in CloudWatch Logs using AWS KMS", its wildcards written out).
LOGS_KEY_ACTIONS = (
    "kms:Encrypt",
    "kms:Decrypt",
    "kms:ReEncryptFrom",
    "kms:ReEncryptTo",
    "kms:GenerateDataKey",
    "kms:GenerateDataKeyWithoutPlaintext",
    "kms:DescribeKey",
)
#: What a subscriber needs on the topic.
SUBSCRIBE_ACTIONS = ("sns:Subscribe",)

# Explicit key operations for SQS SendMessage, SNS Publish and DynamoDB reads/writes on a customer
# managed key; no GenerateDataKey*/ReEncrypt* wildcards.
KMS_ACTIONS = ("kms:Decrypt", "kms:Encrypt", "kms:GenerateDataKey")

#: The actions of AWSLambdaVPCAccessExecutionRole, written out (the function's role takes no
#: managed policy). EC2 supports no resource-level permissions for them.
VPC_NETWORK_INTERFACE_ACTIONS = (
    "ec2:CreateNetworkInterface",
    "ec2:DescribeNetworkInterfaces",
    "ec2:DescribeSubnets",
    "ec2:DeleteNetworkInterface",
    "ec2:AssignPrivateIpAddresses",
    "ec2:UnassignPrivateIpAddresses",
)


def vpc_network_interface_statement() -> aws_iam.PolicyStatement:
    """What a function in a VPC needs for its network interfaces, instead of AWSLambdaVPCAccessExecutionRole
    (which ``aws_lambda.Function`` adds only to a role it creates itself)."""
    return aws_iam.PolicyStatement(
        sid="ManageVpcNetworkInterfaces", actions=list(VPC_NETWORK_INTERFACE_ACTIONS), resources=["*"]
    )


def handler_statements(
    scope: Construct,
    *,
    processed_events: aws_dynamodb.ITable,
    order_records: aws_dynamodb.ITable,
    topic: aws_sns.ITopic,
    dead_letter_queue: aws_sqs.IQueue,
    encryption_key: aws_kms.IKey | None,
) -> list[aws_iam.PolicyStatement]:
    """The policy statements of the consumer function's role (besides the event source's)."""
    statements = [
        aws_iam.PolicyStatement(
            sid="RecordEachOrderOnceInATransaction",
            actions=["dynamodb:PutItem"],
            resources=[processed_events.table_arn, order_records.table_arn],
            conditions={"ForAnyValue:StringEquals": {"dynamodb:EnclosingOperation": ["TransactWriteItems"]}},
        ),
        aws_iam.PolicyStatement(
            sid="MarkEventsSent",
            actions=["dynamodb:UpdateItem"],
            resources=[processed_events.table_arn],
        ),
        aws_iam.PolicyStatement(
            sid="PublishNotifications",
            actions=["sns:Publish"],
            resources=[topic.topic_arn],
        ),
        aws_iam.PolicyStatement(
            sid="ParkPermanentFailures",
            actions=["sqs:SendMessage"],
            resources=[dead_letter_queue.queue_arn],
        ),
    ]
    if encryption_key is not None:
        stack = Stack.of(scope)
        services = [f"{service}.{stack.region}.{stack.url_suffix}" for service in ("dynamodb", "sns", "sqs")]
        statements.append(
            aws_iam.PolicyStatement(
                sid="UseTheCustomerManagedKeyThroughThePipelineServices",
                actions=list(KMS_ACTIONS),
                resources=[encryption_key.key_arn],
                conditions={"StringEquals": {"kms:ViaService": services}},
            )
        )
    return statements


def grant_send_orders(
    grantee: aws_iam.IGrantable, *, queue: aws_sqs.IQueue, encryption_key: aws_kms.IKey | None
) -> aws_iam.Grant:
    """Let ``grantee`` send to ``queue`` (and use its key): identity policy or queue policy, plus the key's grant."""
    grant = aws_iam.Grant.add_to_principal_or_resource(
        grantee=grantee, actions=list(SEND_ORDERS_ACTIONS), resource_arns=[queue.queue_arn], resource=queue
    )
    if encryption_key is not None:
        grant = grant.combine(encryption_key.grant(grantee, *SEND_ORDERS_KEY_ACTIONS))
    return grant


def grant_subscribe(grantee: aws_iam.IGrantable, *, topic: aws_sns.ITopic) -> aws_iam.Grant:
    """Let ``grantee`` subscribe endpoints to ``topic``: identity policy or topic policy."""
    return aws_iam.Grant.add_to_principal_or_resource(
        grantee=grantee, actions=list(SUBSCRIBE_ACTIONS), resource_arns=[topic.topic_arn], resource=topic
    )


def allow_log_encryption(scope: Construct, encryption_key: aws_kms.IKey) -> bool:
    """Let CloudWatch Logs of this region use ``encryption_key`` for this account's log groups.

    The statement is limited by the encryption context CloudWatch Logs sends (the log group's ARN)
    to log groups of this account and region: naming the function's log group itself would make the
    key depend on the log group that depends on the key. Returns False when the key is imported
    (its policy cannot be changed here: its owner must add the statement).
    """
    stack = Stack.of(scope)
    log_groups = stack.format_arn(
        service="logs", resource="log-group", resource_name="*", arn_format=ArnFormat.COLON_RESOURCE_NAME
    )
    result = encryption_key.add_to_resource_policy(
        aws_iam.PolicyStatement(
            sid="LetCloudWatchLogsEncryptThePipelineLogGroup",
            principals=[aws_iam.ServicePrincipal(f"logs.{stack.region}.{stack.url_suffix}")],
            actions=list(LOGS_KEY_ACTIONS),
            resources=["*"],
            conditions={"ArnLike": {"kms:EncryptionContext:aws:logs:arn": log_groups}},
        )
    )
    return bool(result.statement_added)
