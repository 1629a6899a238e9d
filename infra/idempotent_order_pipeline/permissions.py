"""Least privilege, written out: exactly the calls the handler makes, on exactly its resources.

The handler calls (contract with ``lambdas/order_consumer``):

- ``dynamodb:TransactWriteItems`` with two conditional ``Put``s (processed_events, order_records)
  and ``ReturnValuesOnConditionCheckFailure=ALL_OLD``. IAM has no TransactWriteItems action: each
  ``Put`` inside a transaction is authorized as ``dynamodb:PutItem`` on its table (DynamoDB
  developer guide, "Using IAM with DynamoDB transactions"); returning the old item on a failed
  condition needs no read permission. The statement only allows PutItem *inside* a transaction
  (``dynamodb:EnclosingOperation``), so the role cannot overwrite a row outside one.
- ``dynamodb:PartiQLUpdate`` on processed_events: the ``sent`` marks, one conditional PartiQL
  ``UPDATE`` per record, up to 25 in one ``BatchExecuteStatement`` (1 write unit each; inside a
  transaction a mark would cost 2), and ``dynamodb:UpdateItem`` for the adoption of a pending record
  an earlier version wrote. Neither needs a read permission
  (``ReturnValuesOnConditionCheckFailure=ALL_OLD`` comes with the failed write). Outside a
  transaction IAM has no ``EnclosingOperation`` to require; instead each statement allows only the
  attributes its updates name (``dynamodb:Attributes``: their key, update and condition
  attributes, with the table's and the pending index's keys, as the DynamoDB guide asks), listed
  once in ``contract/names.py`` where the store's expressions take them from, and no
  ``ReturnValues`` but the default and ``ALL_OLD`` (:func:`update_only`).
- ``sns:Publish`` on the topic.
- ``sqs:SendMessage`` on the dead-letter queue (permanent failures are parked there directly).

The event source mapping's own SQS permissions (receive, delete, change visibility, attributes)
come from ``SqsEventSource``, which grants them on the source queue only; X-Ray and CloudWatch Logs
are granted by the construct next to the log group and tracing config.

A customer managed key is never granted without conditions: every statement on it names the
service that may use it on the caller's behalf (``kms:ViaService``), and the SQS ones the queues
whose messages it protects (``kms:EncryptionContext:aws:sqs:arn``, the context SQS sends with every
KMS call). A producer, in this account or another, can therefore use the key only to send to the
orders queue: not to read the DLQ, the tables, the topic or the log groups the same key encrypts.
The event source mapping polls with the function's role (SQS decrypts on its behalf, through
``sqs.<region>``), so the consumer's context-scoped statement is all its polling needs.

The grants to others (producers, subscribers) follow aws-cdk-lib's own ``Queue.grant*`` and
``Topic.grant*``: ``iam.Grant.add_to_principal_or_resource`` adds an identity policy when the
grantee is in the resource's account, and a resource policy (queue policy, topic policy) naming
the grantee otherwise; a customer managed key adds its own, conditioned statement the same way (a
key policy statement for a grantee of another account). The returned ``iam.Grant`` is aws-cdk-lib's. An
imported queue, topic or key has no policy this stack may change: a cross-account grant on one
writes nothing (aws-cdk-lib still reports ``success``), and its owner must add the statement.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import jsii
from aws_cdk import ArnFormat, Stack, Token, aws_dynamodb, aws_iam, aws_kms, aws_sns, aws_sqs
from constructs import Construct, IConstruct

from idempotent_order_pipeline import nag
from idempotent_order_pipeline._lambda_asset.order_consumer.contract.names import (
    CONSUMER_UPDATE_ATTRIBUTES,
    MARK_STATEMENT_ATTRIBUTES,
)

#: What a producer needs on the queue: ``OrderPublisher`` calls SendMessage and SendMessageBatch
#: (authorized as SendMessage) on the URL it is given, nothing else. No GetQueueAttributes: across
#: accounts the attributes would name the key, the DLQ and the queue policy's other grantees.
SEND_ORDERS_ACTIONS = ("sqs:SendMessage",)
#: What sending to an SQS queue encrypted with a customer managed key needs of the key (the SQS
#: developer guide's producer permissions): a data key, and Decrypt while SQS reuses a cached one.
SQS_SEND_KEY_ACTIONS = ("kms:GenerateDataKey", "kms:Decrypt")
#: What receiving from such a queue needs of the key (the event source mapping's ReceiveMessage).
SQS_RECEIVE_KEY_ACTIONS = ("kms:Decrypt",)
#: The encryption context key SQS sends with each KMS call: the queue's ARN.
SQS_ENCRYPTION_CONTEXT_KEY = "kms:EncryptionContext:aws:sqs:arn"
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
#: The protocols a grantee may subscribe with (``sns:Protocol``): endpoints that receive the
#: notification inside AWS or over TLS. Not ``http`` (plain text on the wire), not ``email`` /
#: ``email-json`` / ``sms`` (order data in a mailbox or a phone), not ``application`` / ``firehose``
#: (no consumer of order events). An SNS FIFO topic delivers to SQS queues only.
SUBSCRIBE_PROTOCOLS = ("sqs", "lambda", "https")
FIFO_SUBSCRIBE_PROTOCOLS = ("sqs",)

# Explicit key operations for SNS Publish and DynamoDB reads/writes on a customer managed key; no
# GenerateDataKey*/ReEncrypt* wildcards.
KMS_ACTIONS = ("kms:Decrypt", "kms:Encrypt", "kms:GenerateDataKey")

#: The actions of AWSLambdaVPCAccessExecutionRole, written out (the function's role takes no
#: managed policy), in two parts:
#: the Describe calls support no resource-level permissions (the Lambda developer guide:
#: DescribeNetworkInterfaces "only works if it's allowed on all resources");
VPC_DESCRIBE_ACTIONS = ("ec2:DescribeNetworkInterfaces", "ec2:DescribeSubnets")
#: these act on network interfaces (and, to create one, a subnet and security groups) and are
#: limited to this account and region (the guide's form for DeleteNetworkInterface: all resource
#: ids, ``arn:aws:ec2:<region>:<account>:*/*``).
VPC_NETWORK_INTERFACE_ACTIONS = (
    "ec2:CreateNetworkInterface",
    "ec2:DeleteNetworkInterface",
    "ec2:AssignPrivateIpAddresses",
    "ec2:UnassignPrivateIpAddresses",
)


#: cdk-nag's finding on the network-interface statement, and why it stands (both functions' roles).
VPC_NETWORK_INTERFACE_RESOURCE = "Resource::arn:<AWS::Partition>:ec2:<AWS::Region>:<AWS::AccountId>:*/*"
VPC_NETWORK_INTERFACE_REASON = (
    "Lambda creates and deletes the function's network interfaces with its role, on interfaces whose ids "
    "exist only after creation: the Lambda developer guide asks for all resource ids of the account and "
    "region (arn:aws:ec2:<region>:<account>:*/*) for these actions."
)


def acknowledge_vpc_network_interfaces(default_policy: IConstruct) -> None:
    """cdk-nag's IAM5 finding on :func:`vpc_network_interface_statement`, answered with its reason (both functions)."""
    nag.acknowledge(
        default_policy,
        "AwsSolutions",
        "AwsSolutions-IAM5",
        VPC_NETWORK_INTERFACE_REASON,
        applies_to=VPC_NETWORK_INTERFACE_RESOURCE,
    )


def vpc_network_interface_statements(scope: Construct) -> list[aws_iam.PolicyStatement]:
    """What a function in a VPC needs for its network interfaces, instead of AWSLambdaVPCAccessExecutionRole
    (which ``aws_lambda.Function`` adds only to a role it creates itself)."""
    stack = Stack.of(scope)
    this_account_and_region = stack.format_arn(
        service="ec2", resource="*", resource_name="*", arn_format=ArnFormat.SLASH_RESOURCE_NAME
    )
    return [
        aws_iam.PolicyStatement(
            sid="DescribeVpcNetworkInterfaces", actions=list(VPC_DESCRIBE_ACTIONS), resources=["*"]
        ),
        aws_iam.PolicyStatement(
            sid="ManageVpcNetworkInterfaces",
            actions=list(VPC_NETWORK_INTERFACE_ACTIONS),
            resources=[this_account_and_region],
        ),
    ]


# ---- VPC endpoint policies: what the pipeline's functions call through the endpoints ----------------
# The interface endpoints accept HTTPS from the functions' security groups only, so their policies
# name the pipeline's own resources; the DynamoDB gateway endpoint serves every workload routed
# through the subnets' route tables, so its policy stops at this account's tables in this region
# (a VPC has one DynamoDB gateway endpoint per route table: a pipeline-only policy would cut the
# other workloads off). Either way no principal of another account, and no resource of another
# account, is reachable through them.


def _this_account_principals(scope: Construct) -> dict[str, dict[str, Any]]:
    return {"StringEquals": {"aws:PrincipalAccount": Stack.of(scope).account}}


def dynamodb_endpoint_statements(scope: Construct) -> list[aws_iam.PolicyStatement]:
    """The DynamoDB gateway endpoint's policy: this account's principals, this account's tables (and indexes)."""
    stack = Stack.of(scope)
    tables = stack.format_arn(service="dynamodb", resource="table", resource_name="*")
    return [
        aws_iam.PolicyStatement(
            sid="ThisAccountsTablesOnly",
            principals=[aws_iam.AnyPrincipal()],
            actions=["dynamodb:*"],
            resources=[tables],
            conditions=_this_account_principals(scope),
        )
    ]


def sns_endpoint_statement(scope: Construct, topic: aws_sns.ITopic) -> aws_iam.PolicyStatement:
    """The SNS interface endpoint's policy: publishing to the pipeline's topic (consumer and reconciler)."""
    return aws_iam.PolicyStatement(
        sid="PublishToThePipelineTopicOnly",
        principals=[aws_iam.AnyPrincipal()],
        actions=["sns:Publish"],
        resources=[topic.topic_arn],
        conditions=_this_account_principals(scope),
    )


def sqs_endpoint_statement(scope: Construct, dead_letter_queue: aws_sqs.IQueue) -> aws_iam.PolicyStatement:
    """The SQS interface endpoint's policy: parking in the pipeline's DLQ (the event source mapping
    polls from Lambda's own network, not through the VPC)."""
    return aws_iam.PolicyStatement(
        sid="ParkInThePipelineDeadLetterQueueOnly",
        principals=[aws_iam.AnyPrincipal()],
        actions=["sqs:SendMessage"],
        resources=[dead_letter_queue.queue_arn],
        conditions=_this_account_principals(scope),
    )


#: The ``ReturnValues`` an UpdateItem of the functions may carry: the default (the code never sets it)
#: and ``ALL_OLD``, because the sent mark asks for ``ReturnValuesOnConditionCheckFailure=ALL_OLD`` and
#: the IAM documentation does not say whether ``dynamodb:ReturnValues`` carries that parameter; what
#: ``ALL_OLD`` returns is the state record, whose every attribute the function writes itself.
UPDATE_RETURN_VALUES = ("NONE", "ALL_OLD")


def update_only(attributes: Sequence[str]) -> dict[str, dict[str, Any]]:
    """The conditions of an UpdateItem statement that may name ``attributes`` and no other (the
    DynamoDB developer guide's fine-grained access control: ``ForAllValues:StringEquals`` on
    ``dynamodb:Attributes``, ``dynamodb:ReturnValues`` restricted so no other attribute comes back)."""
    return {
        "ForAllValues:StringEquals": {"dynamodb:Attributes": list(attributes)},
        "StringEqualsIfExists": {"dynamodb:ReturnValues": list(UPDATE_RETURN_VALUES)},
    }


def mark_sent_statement(processed_events: aws_dynamodb.ITable) -> aws_iam.PolicyStatement:
    """The sent marks (consumer and reconciler): PartiQL ``UPDATE`` statements in ``BatchExecuteStatement``,
    authorized per statement as ``dynamodb:PartiQLUpdate`` (the Service Authorization Reference's
    operation table: BatchExecuteStatement needs the PartiQL action of each statement, and no action
    of its own), with the same attribute conditions as an UpdateItem: the action supports
    ``dynamodb:Attributes`` and ``dynamodb:ReturnValues`` (docs/security.md)."""
    return aws_iam.PolicyStatement(
        sid="MarkEventsSent",
        actions=["dynamodb:PartiQLUpdate"],
        resources=[processed_events.table_arn],
        conditions=update_only(MARK_STATEMENT_ATTRIBUTES),
    )


def sqs_key_conditions(scope: IConstruct, queues: Sequence[aws_sqs.IQueue]) -> dict[str, dict[str, Any]]:
    """The conditions of a key statement for SQS: through SQS in this region, for these queues only."""
    stack = Stack.of(scope)
    return {
        "StringEquals": {
            "kms:ViaService": f"sqs.{stack.region}.{stack.url_suffix}",
            SQS_ENCRYPTION_CONTEXT_KEY: [queue.queue_arn for queue in queues],
        }
    }


def handler_statements(
    scope: Construct,
    *,
    processed_events: aws_dynamodb.ITable,
    order_records: aws_dynamodb.ITable,
    topic: aws_sns.ITopic,
    queue: aws_sqs.IQueue,
    dead_letter_queue: aws_sqs.IQueue,
    encryption_key: aws_kms.IKey | None,
) -> list[aws_iam.PolicyStatement]:
    """The policy statements of the consumer function's role (besides the event source's SQS actions)."""
    statements = [
        aws_iam.PolicyStatement(
            sid="RecordEachOrderOnceInATransaction",
            actions=["dynamodb:PutItem"],
            resources=[processed_events.table_arn, order_records.table_arn],
            conditions={"ForAnyValue:StringEquals": {"dynamodb:EnclosingOperation": ["TransactWriteItems"]}},
        ),
        mark_sent_statement(processed_events),
        aws_iam.PolicyStatement(
            sid="AdoptEarlierPendingRecords",
            actions=["dynamodb:UpdateItem"],
            resources=[processed_events.table_arn],
            conditions=update_only(CONSUMER_UPDATE_ATTRIBUTES),
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
        services = [f"{service}.{stack.region}.{stack.url_suffix}" for service in ("dynamodb", "sns")]
        statements += [
            aws_iam.PolicyStatement(
                sid="UseTheCustomerManagedKeyThroughDynamoDBAndSNS",
                actions=list(KMS_ACTIONS),
                resources=[encryption_key.key_arn],
                conditions={"StringEquals": {"kms:ViaService": services}},
            ),
            # Receiving (the event source mapping polls with this role) and parking: these two queues only.
            aws_iam.PolicyStatement(
                sid="UseTheCustomerManagedKeyForThePipelineQueues",
                actions=sorted({*SQS_RECEIVE_KEY_ACTIONS, *SQS_SEND_KEY_ACTIONS}),
                resources=[encryption_key.key_arn],
                conditions=sqs_key_conditions(scope, [queue, dead_letter_queue]),
            ),
        ]
    return statements


def grant_send_orders(
    grantee: aws_iam.IGrantable, *, queue: aws_sqs.IQueue, encryption_key: aws_kms.IKey | None
) -> aws_iam.Grant:
    """Let ``grantee`` send to ``queue`` (and use its key for that alone): identity policy, or queue
    and key policy statements for another account."""
    grant = aws_iam.Grant.add_to_principal_or_resource(
        grantee=grantee, actions=list(SEND_ORDERS_ACTIONS), resource_arns=[queue.queue_arn], resource=queue
    )
    if encryption_key is not None:
        grant = grant.combine(_grant_key_for_sending(grantee, queue=queue, encryption_key=encryption_key))
    return grant


def _grant_key_for_sending(
    grantee: aws_iam.IGrantable, *, queue: aws_sqs.IQueue, encryption_key: aws_kms.IKey
) -> aws_iam.Grant:
    """Not ``Key.grant``: its statement has no condition, so the grantee could decrypt whatever else the
    key protects (the DLQ's orders, the tables) through any service.

    Same account: an identity statement for this queue only. Otherwise a key policy statement, which
    cannot name the queue (the queue's ARN depends on the key: a dependency cycle), so it names this
    account's queues in this region; the grantee can send to the orders queue alone (the queue policy),
    and without a receive permission SQS never decrypts for it.
    """
    actions = list(SQS_SEND_KEY_ACTIONS)
    if _same_account(grantee, encryption_key):
        identity_grant = aws_iam.Grant.add_to_principal(
            grantee=grantee,
            conditions=sqs_key_conditions(queue, [queue]),
            actions=actions,
            resource_arns=[encryption_key.key_arn],
        )
        if identity_grant.success:
            return identity_grant
    stack = Stack.of(queue)
    this_accounts_queues = stack.format_arn(service="sqs", resource="*", arn_format=ArnFormat.NO_RESOURCE_NAME)
    key_policy_conditions = {
        "StringEquals": {"kms:ViaService": f"sqs.{stack.region}.{stack.url_suffix}"},
        "ArnLike": {SQS_ENCRYPTION_CONTEXT_KEY: this_accounts_queues},
    }
    return aws_iam.Grant.add_to_principal_or_resource(
        grantee=_Conditioned(grantee, key_policy_conditions),
        conditions=key_policy_conditions,
        actions=actions,
        resource_arns=[encryption_key.key_arn],
        resource_self_arns=["*"],
        resource=encryption_key,
    )


def _same_account(grantee: aws_iam.IGrantable, resource: aws_kms.IKey) -> bool:
    """aws-cdk-lib's own test in ``Grant.add_to_principal_or_resource`` (unresolved on both sides: the same)."""
    account = grantee.grant_principal.principal_account
    if account is None:
        return False
    own = resource.env.account
    return (Token.is_unresolved(own) and Token.is_unresolved(account)) or own == account


def grant_subscribe(grantee: aws_iam.IGrantable, *, topic: aws_sns.ITopic) -> aws_iam.Grant:
    """Let ``grantee`` subscribe endpoints of :data:`SUBSCRIBE_PROTOCOLS` (a FIFO topic: SQS only) to
    ``topic``: identity policy or topic policy."""
    protocols = FIFO_SUBSCRIBE_PROTOCOLS if topic.fifo else SUBSCRIBE_PROTOCOLS
    conditions = {"StringEquals": {"sns:Protocol": list(protocols)}}
    return aws_iam.Grant.add_to_principal_or_resource(
        grantee=_Conditioned(grantee, conditions),
        conditions=conditions,
        actions=list(SUBSCRIBE_ACTIONS),
        resource_arns=[topic.topic_arn],
        resource=topic,
    )


@jsii.implements(aws_iam.IGrantable)
class _Conditioned:
    """A grantee whose resource-policy statements carry ``conditions``: aws-cdk-lib's
    ``Grant.add_to_principal_or_resource(conditions=...)`` puts them in the identity statement only."""

    def __init__(self, grantee: aws_iam.IGrantable, conditions: Mapping[str, Mapping[str, Any]]) -> None:
        self._principal = aws_iam.PrincipalWithConditions(grantee.grant_principal, conditions)

    @property
    def grant_principal(self) -> aws_iam.IPrincipal:
        return self._principal


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
