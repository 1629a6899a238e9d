"""Trust boundaries: what other accounts, producers, subscribers, the functions and the VPC endpoints
may do with the pipeline's key, queues, topic and tables - each as narrow as the calls it serves.

One synthesized app holds every boundary (``trust_boundaries``: a CMK, the function in an isolated
VPC with the construct's endpoints, a same-account producer and subscriber, send and subscribe
grants to another account's root and to one of its roles).
"""

from __future__ import annotations

from typing import Any

import aws_cdk as cdk
import pytest
from aws_cdk import aws_iam, aws_sqs
from aws_cdk.assertions import Match, Template

from idempotent_order_pipeline import IdempotentOrderPipeline
from tests.infra.synth import OTHER_ACCOUNT, OTHER_ACCOUNT_ROLE, Synthesized, logical_id, resources_of_type
from tests.reconciler.test_projection import READS

OTHER_ACCOUNT_ROOT = {"Fn::Join": ["", ["arn:", {"Ref": "AWS::Partition"}, f":iam::{OTHER_ACCOUNT}:root"]]}
SQS_IN_THIS_REGION = {"Fn::Join": ["", ["sqs.", {"Ref": "AWS::Region"}, ".", {"Ref": "AWS::URLSuffix"}]]}
THIS_ACCOUNTS_QUEUES = {
    "Fn::Join": [
        "",
        ["arn:", {"Ref": "AWS::Partition"}, ":sqs:", {"Ref": "AWS::Region"}, ":", {"Ref": "AWS::AccountId"}, ":*"],
    ]
}
THIS_ACCOUNT = {"aws:PrincipalAccount": {"Ref": "AWS::AccountId"}}


def as_list(value: Any) -> list[Any]:
    return value if isinstance(value, list) else [value]


def arn_of(synthesized: Synthesized, construct: Any) -> dict[str, Any]:
    return {"Fn::GetAtt": [logical_id(synthesized.stack, construct), "Arn"]}


def key_of(synthesized: Synthesized) -> Any:
    return synthesized.stack.node.find_child("PipelineKey")


def key_policy(synthesized: Synthesized) -> list[dict[str, Any]]:
    key = synthesized.template_json["Resources"][logical_id(synthesized.stack, key_of(synthesized))]
    statements: list[dict[str, Any]] = key["Properties"]["KeyPolicy"]["Statement"]
    return statements


def role_statements(synthesized: Synthesized, role: Any) -> list[dict[str, Any]]:
    """Every statement of every policy attached to ``role``."""
    role_ref = {"Ref": logical_id(synthesized.stack, role)}
    return [
        statement
        for policy in resources_of_type(synthesized.template_json, "AWS::IAM::Policy").values()
        if role_ref in policy["Properties"]["Roles"]
        for statement in policy["Properties"]["PolicyDocument"]["Statement"]
    ]


def resource_policy(synthesized: Synthesized, resource_type: str, target_key: str, target: Any) -> list[dict[str, Any]]:
    """The statements of the ``resource_type`` policies attached to ``target`` (a Ref or GetAtt)."""
    return [
        statement
        for policy in resources_of_type(synthesized.template_json, resource_type).values()
        if target in policy["Properties"][target_key]
        for statement in policy["Properties"]["PolicyDocument"]["Statement"]
    ]


def function_roles(synthesized: Synthesized) -> list[Any]:
    pipeline = synthesized.pipeline
    roles = [pipeline.function.role]
    if pipeline.reconciliation is not None:
        roles.append(pipeline.reconciliation.function.role)
    return roles


# ---- the key ----------------------------------------------------------------------------------------


@pytest.mark.parametrize("principal", [OTHER_ACCOUNT_ROOT, OTHER_ACCOUNT_ROLE], ids=["account", "role"])
def test_another_account_may_use_the_key_only_through_sqs_for_this_accounts_queues(
    trust_boundaries: Synthesized, principal: Any
) -> None:
    # GIVEN another account's root and one of its roles granted send on a CMK pipeline
    # WHEN the key policy statements naming that principal are read
    statements = [s for s in key_policy(trust_boundaries) if s.get("Principal") == {"AWS": principal}]
    # THEN there is one: a data key and Decrypt, only through SQS of this region, only for a queue of
    # this account (the key policy cannot name the queue: the queue's ARN depends on the key)
    assert statements == [
        {
            "Effect": "Allow",
            "Action": ["kms:GenerateDataKey", "kms:Decrypt"],
            "Principal": {"AWS": principal},
            "Resource": "*",
            "Condition": {
                "StringEquals": {"kms:ViaService": SQS_IN_THIS_REGION},
                "ArnLike": {"kms:EncryptionContext:aws:sqs:arn": THIS_ACCOUNTS_QUEUES},
            },
        }
    ]


def test_key_policy_allows_no_other_account_anything_unconditioned(trust_boundaries: Synthesized) -> None:
    # GIVEN the key policy of the app with cross-account grants
    statements = key_policy(trust_boundaries)
    # WHEN the statements naming an AWS principal other than this account's root are collected
    this_root = {"Fn::Join": ["", ["arn:", {"Ref": "AWS::Partition"}, ":iam::", {"Ref": "AWS::AccountId"}, ":root"]]}
    others = [s for s in statements if "AWS" in s.get("Principal", {}) and s["Principal"]["AWS"] != this_root]
    # THEN each carries a condition (the account root's statement is the key's administration)
    assert len(others) == 2
    assert all(s.get("Condition") for s in others)


def test_same_account_producer_may_use_the_key_only_to_send_to_the_orders_queue(trust_boundaries: Synthesized) -> None:
    # GIVEN a producer role of the pipeline's account granted send
    producer = trust_boundaries.stack.node.find_child("Producer")
    # WHEN its policy is read
    statements = role_statements(trust_boundaries, producer)
    # THEN it may SendMessage on the orders queue, and use the key only through SQS for that queue
    queue = arn_of(trust_boundaries, trust_boundaries.pipeline.queue)
    assert statements == [
        {"Effect": "Allow", "Action": "sqs:SendMessage", "Resource": queue},
        {
            "Effect": "Allow",
            "Action": ["kms:GenerateDataKey", "kms:Decrypt"],
            "Resource": arn_of(trust_boundaries, key_of(trust_boundaries)),
            "Condition": {
                "StringEquals": {
                    "kms:ViaService": SQS_IN_THIS_REGION,
                    "kms:EncryptionContext:aws:sqs:arn": [queue],
                }
            },
        },
    ]


@pytest.mark.parametrize("configuration", ["cmk", "brownfield", "trust"])
def test_no_function_role_has_an_unconditioned_kms_action(
    all_configurations: dict[str, Synthesized], trust_boundaries: Synthesized, configuration: str
) -> None:
    # GIVEN a configuration with a customer managed key (created, or imported with the queues)
    synthesized = trust_boundaries if configuration == "trust" else all_configurations[configuration]
    # WHEN the KMS statements of the consumer's and the reconciler's roles are collected
    kms = [
        statement
        for role in function_roles(synthesized)
        for statement in role_statements(synthesized, role)
        if any(action.startswith("kms:") for action in as_list(statement["Action"]))
    ]
    # THEN there are some, and each names the service the key may be used through
    assert kms
    assert [s for s in kms if "kms:ViaService" not in s.get("Condition", {}).get("StringEquals", {})] == []


def test_consumer_may_use_the_key_through_sqs_for_its_queue_and_dlq_only(trust_boundaries: Synthesized) -> None:
    # GIVEN the consumer of a CMK pipeline (its event source mapping polls with the function's role)
    pipeline = trust_boundaries.pipeline
    # WHEN its SQS key statement is read
    statements = [
        s for s in role_statements(trust_boundaries, pipeline.function.role) if s.get("Sid", "").endswith("Queues")
    ]
    # THEN receiving (Decrypt) and parking (GenerateDataKey) are allowed for the orders queue and the DLQ only
    assert statements == [
        {
            "Sid": "UseTheCustomerManagedKeyForThePipelineQueues",
            "Effect": "Allow",
            "Action": ["kms:Decrypt", "kms:GenerateDataKey"],
            "Resource": arn_of(trust_boundaries, key_of(trust_boundaries)),
            "Condition": {
                "StringEquals": {
                    "kms:ViaService": SQS_IN_THIS_REGION,
                    "kms:EncryptionContext:aws:sqs:arn": [
                        arn_of(trust_boundaries, pipeline.queue),
                        arn_of(trust_boundaries, pipeline.dead_letter_queue),
                    ],
                }
            },
        }
    ]


# ---- grants equal to the calls ------------------------------------------------------------------------


def test_another_account_may_only_send_to_the_orders_queue(trust_boundaries: Synthesized) -> None:
    # GIVEN another account and one of its roles granted send
    queue = arn_of(trust_boundaries, trust_boundaries.pipeline.queue)
    # WHEN the queue policy's Allow statements are read
    allows = [
        s
        for s in resource_policy(trust_boundaries, "AWS::SQS::QueuePolicy", "Queues", {"Ref": queue["Fn::GetAtt"][0]})
        if s["Effect"] == "Allow"
    ]
    # THEN each may SendMessage, nothing else (OrderPublisher never reads the queue's attributes or URL)
    assert allows == [
        {"Effect": "Allow", "Action": "sqs:SendMessage", "Principal": {"AWS": principal}, "Resource": queue}
        for principal in (OTHER_ACCOUNT_ROOT, OTHER_ACCOUNT_ROLE)
    ]


def test_subscribers_may_subscribe_only_sqs_lambda_and_https_endpoints(trust_boundaries: Synthesized) -> None:
    # GIVEN another account and a same-account role granted subscribe on a standard topic
    topic = {"Ref": logical_id(trust_boundaries.stack, trust_boundaries.pipeline.topic)}
    subscriber = trust_boundaries.stack.node.find_child("Subscriber")
    # WHEN the topic policy's Allow statements and the subscriber's policy are read
    allows = [
        s for s in resource_policy(trust_boundaries, "AWS::SNS::TopicPolicy", "Topics", topic) if s["Effect"] == "Allow"
    ]
    identity = role_statements(trust_boundaries, subscriber)
    # THEN both limit Subscribe to the sqs, lambda and https protocols (no email, sms or plain http)
    protocols = {"StringEquals": {"sns:Protocol": ["sqs", "lambda", "https"]}}
    assert [(s["Action"], s["Principal"], s["Condition"]) for s in allows] == [
        ("sns:Subscribe", {"AWS": OTHER_ACCOUNT_ROOT}, protocols)
    ]
    assert identity == [{"Effect": "Allow", "Action": "sns:Subscribe", "Resource": topic, "Condition": protocols}]


def test_fifo_topic_subscribers_may_subscribe_sqs_queues_only(fresh_stack: cdk.Stack) -> None:
    # GIVEN a FIFO pipeline granting subscribe to another account
    pipeline = IdempotentOrderPipeline(fresh_stack, "Pipeline", fifo=True)
    pipeline.grant_subscribe(aws_iam.AccountPrincipal(OTHER_ACCOUNT))
    # WHEN the topic policy is read
    # THEN the only protocol is sqs: an SNS FIFO topic delivers to nothing else
    Template.from_stack(fresh_stack).has_resource_properties(
        "AWS::SNS::TopicPolicy",
        {
            "PolicyDocument": {
                "Statement": Match.array_with(
                    [
                        Match.object_like(
                            {"Action": "sns:Subscribe", "Condition": {"StringEquals": {"sns:Protocol": ["sqs"]}}}
                        )
                    ]
                )
            }
        },
    )


@pytest.mark.parametrize("configuration", ["default", "cmk", "app-dev", "app-prod"])
def test_standard_topic_signs_with_sha256(all_configurations: dict[str, Synthesized], configuration: str) -> None:
    # GIVEN a standard (not FIFO) pipeline
    synthesized = all_configurations[configuration]
    # WHEN its topic is read
    topic = synthesized.template_json["Resources"][logical_id(synthesized.stack, synthesized.pipeline.topic)]
    # THEN its deliveries are signed with SHA256 (SignatureVersion 2), not SHA1
    assert topic["Properties"]["SignatureVersion"] == "2"


def test_fifo_topic_has_no_signature_version(fifo_pipeline: Synthesized) -> None:
    # GIVEN a FIFO pipeline (its topic delivers to SQS queues only, which SNS does not sign for)
    topic = fifo_pipeline.template_json["Resources"][logical_id(fifo_pipeline.stack, fifo_pipeline.pipeline.topic)]
    # WHEN its topic is read
    # THEN it sets no signature version
    assert topic["Properties"]["FifoTopic"] is True
    assert "SignatureVersion" not in topic["Properties"]


def test_reconciler_reads_only_the_attributes_it_projects(trust_boundaries: Synthesized) -> None:
    # GIVEN the reconciler's role
    reconciliation = trust_boundaries.pipeline.reconciliation
    assert reconciliation is not None
    statements = {s["Sid"]: s for s in role_statements(trust_boundaries, reconciliation.function.role) if "Sid" in s}
    # WHEN its reads are read
    # THEN each allows exactly the attributes the reconciler's code projects (tests/reconciler/test_projection.py),
    # with Select SPECIFIC_ATTRIBUTES
    for sid, attributes in READS.items():
        if sid == "ReadCheckpoints":  # its one key too (tests/infra/test_reconciliation.py)
            assert statements[sid]["Condition"] == {
                "ForAllValues:StringEquals": {
                    "dynamodb:LeadingKeys": ["order-pipeline:reconciler-checkpoint"],
                    "dynamodb:Attributes": attributes,
                },
                "StringEqualsIfExists": {"dynamodb:Select": "SPECIFIC_ATTRIBUTES"},
            }, sid
            continue
        assert statements[sid]["Condition"] == {
            "ForAllValues:StringEquals": {"dynamodb:Attributes": attributes},
            "StringEqualsIfExists": {"dynamodb:Select": "SPECIFIC_ATTRIBUTES"},
        }, sid
    # AND the order rows' statement names the order table alone (the order body is never readable)
    assert statements["ReadOrderRowIdentities"]["Resource"] == arn_of(
        trust_boundaries, trust_boundaries.pipeline.order_records_table
    )


# ---- the VPC endpoints and the network interfaces ---------------------------------------------------


def endpoint_policy(synthesized: Synthesized, key: str) -> dict[str, Any]:
    endpoint = synthesized.pipeline.vpc_endpoints[key]
    resource = synthesized.template_json["Resources"][logical_id(synthesized.stack, endpoint)]
    document: dict[str, Any] = resource["Properties"]["PolicyDocument"]
    return document


def test_interface_endpoints_reach_only_the_pipelines_topic_and_dlq(trust_boundaries: Synthesized) -> None:
    # GIVEN the SNS and SQS interface endpoints (reachable from the functions' security groups only)
    pipeline = trust_boundaries.pipeline
    # WHEN their policies are read
    # THEN SNS allows publishing to the pipeline's topic, SQS parking in its DLQ, by this account's principals
    assert endpoint_policy(trust_boundaries, "sns")["Statement"] == [
        {
            "Sid": "PublishToThePipelineTopicOnly",
            "Effect": "Allow",
            "Principal": {"AWS": "*"},
            "Action": "sns:Publish",
            "Resource": {"Ref": logical_id(trust_boundaries.stack, pipeline.topic)},
            "Condition": {"StringEquals": THIS_ACCOUNT},
        }
    ]
    assert endpoint_policy(trust_boundaries, "sqs")["Statement"] == [
        {
            "Sid": "ParkInThePipelineDeadLetterQueueOnly",
            "Effect": "Allow",
            "Principal": {"AWS": "*"},
            "Action": "sqs:SendMessage",
            "Resource": arn_of(trust_boundaries, pipeline.dead_letter_queue),
            "Condition": {"StringEquals": THIS_ACCOUNT},
        }
    ]


def test_dynamodb_gateway_endpoint_reaches_only_this_accounts_tables(trust_boundaries: Synthesized) -> None:
    # GIVEN the DynamoDB gateway endpoint (every workload of the subnets' route tables uses it)
    # WHEN its policy is read
    # THEN only this account's principals reach only this account's tables in this region
    tables = {
        "Fn::Join": [
            "",
            [
                "arn:",
                {"Ref": "AWS::Partition"},
                ":dynamodb:",
                {"Ref": "AWS::Region"},
                ":",
                {"Ref": "AWS::AccountId"},
                ":table/*",
            ],
        ]
    }
    assert endpoint_policy(trust_boundaries, "dynamodb")["Statement"] == [
        {
            "Sid": "ThisAccountsTablesOnly",
            "Effect": "Allow",
            "Principal": {"AWS": "*"},
            "Action": "dynamodb:*",
            "Resource": tables,
            "Condition": {"StringEquals": THIS_ACCOUNT},
        }
    ]


#: What the Lambda developer guide ("Giving Lambda functions access to a VPC") asks of the execution
#: role, and on which resources: DescribeNetworkInterfaces only works on "*"; DeleteNetworkInterface
#: needs every resource id of the account and region (arn:aws:ec2:<region>:<account>:*/*).
THIS_ACCOUNT_EC2 = {
    "Fn::Join": [
        "",
        ["arn:", {"Ref": "AWS::Partition"}, ":ec2:", {"Ref": "AWS::Region"}, ":", {"Ref": "AWS::AccountId"}, ":*/*"],
    ]
}
LAMBDA_VPC_NEEDS = {
    "ec2:CreateNetworkInterface": THIS_ACCOUNT_EC2,
    "ec2:DescribeNetworkInterfaces": "*",
    "ec2:DescribeSubnets": "*",
    "ec2:DeleteNetworkInterface": THIS_ACCOUNT_EC2,
    "ec2:AssignPrivateIpAddresses": THIS_ACCOUNT_EC2,
    "ec2:UnassignPrivateIpAddresses": THIS_ACCOUNT_EC2,
}


def test_network_interface_actions_meet_lambdas_documented_needs_in_this_account_only(
    trust_boundaries: Synthesized,
) -> None:
    # GIVEN both functions in a VPC
    for role in function_roles(trust_boundaries):
        # WHEN the EC2 statements of the role are read
        ec2 = [s for s in role_statements(trust_boundaries, role) if as_list(s["Action"])[0].startswith("ec2:")]
        granted = {action: s["Resource"] for s in ec2 for action in as_list(s["Action"])}
        # THEN every action of AWSLambdaVPCAccessExecutionRole is allowed on what the guide asks, and
        # only the Describe calls (no resource-level permissions) on "*"
        assert granted == LAMBDA_VPC_NEEDS
        assert {s["Sid"] for s in ec2} == {"DescribeVpcNetworkInterfaces", "ManageVpcNetworkInterfaces"}


def test_a_redrive_allow_policy_naming_the_orders_queue_is_a_dependency_cycle(fresh_stack: cdk.Stack) -> None:
    # GIVEN a pipeline whose DLQ would allow only the orders queue as its source (byQueue)
    pipeline = IdempotentOrderPipeline(fresh_stack, "Pipeline")
    cfn_dead_letter_queue = pipeline.dead_letter_queue.node.default_child
    assert isinstance(cfn_dead_letter_queue, aws_sqs.CfnQueue)
    cfn_dead_letter_queue.redrive_allow_policy = {
        "redrivePermission": "byQueue",
        "sourceQueueArns": [pipeline.queue.queue_arn],
    }
    # WHEN it is synthesized
    # THEN CloudFormation could not deploy it: the orders queue's RedrivePolicy names the DLQ, the DLQ
    # would name the orders queue (why the construct leaves the DLQ at allowAll; docs/security.md)
    with pytest.raises(RuntimeError, match="dependency cycle"):
        Template.from_stack(fresh_stack)
