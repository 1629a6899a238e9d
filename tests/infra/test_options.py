"""The deployment options: VPC and endpoints, concurrency, FIFO at scale, tracing, removal policy,
service names, metrics and FIFO subscriptions. Every prop in the template, every check with its message."""

from __future__ import annotations

from typing import Any

import aws_cdk as cdk
import pytest
from aws_cdk import aws_cloudwatch, aws_ec2, aws_lambda, aws_sns_subscriptions, aws_sqs
from aws_cdk.assertions import Match, Template

from idempotent_order_pipeline import IdempotentOrderPipeline
from idempotent_order_pipeline.permissions import VPC_DESCRIBE_ACTIONS, VPC_NETWORK_INTERFACE_ACTIONS
from tests.infra.synth import Synthesized, logical_id, resources_of_type


def isolated_vpc(stack: cdk.Stack) -> aws_ec2.Vpc:
    return aws_ec2.Vpc(
        stack,
        "Vpc",
        max_azs=2,
        nat_gateways=0,
        subnet_configuration=[aws_ec2.SubnetConfiguration(name="app", subnet_type=aws_ec2.SubnetType.PRIVATE_ISOLATED)],
    )


# ---- VPC ----------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def vpc_stack() -> tuple[cdk.Stack, IdempotentOrderPipeline, aws_ec2.Vpc, aws_ec2.SecurityGroup]:
    stack = cdk.Stack(cdk.App(), "TestStack")
    vpc = isolated_vpc(stack)
    group = aws_ec2.SecurityGroup(stack, "FunctionGroup", vpc=vpc)
    pipeline = IdempotentOrderPipeline(
        stack,
        "Pipeline",
        vpc=vpc,
        vpc_subnets=aws_ec2.SubnetSelection(subnet_type=aws_ec2.SubnetType.PRIVATE_ISOLATED),
        security_groups=[group],
        create_vpc_endpoints=True,
        reserved_concurrency=7,
    )
    return stack, pipeline, vpc, group


def test_function_runs_in_the_vpc_subnets_with_the_given_security_groups(
    vpc_stack: tuple[cdk.Stack, IdempotentOrderPipeline, aws_ec2.Vpc, aws_ec2.SecurityGroup],
) -> None:
    # GIVEN vpc, vpc_subnets (isolated), security_groups and reserved_concurrency=7
    stack, _, vpc, group = vpc_stack
    subnets = [{"Ref": logical_id(stack, subnet)} for subnet in vpc.isolated_subnets]
    # WHEN the function is read
    # THEN it is attached to those subnets and groups, with its reserved concurrency
    Template.from_stack(stack).has_resource_properties(
        "AWS::Lambda::Function",
        {
            "VpcConfig": {
                "SubnetIds": subnets,
                "SecurityGroupIds": [{"Fn::GetAtt": [logical_id(stack, group), "GroupId"]}],
            },
            "ReservedConcurrentExecutions": 7,
        },
    )


def test_vpc_function_role_manages_network_interfaces_without_a_managed_policy(
    vpc_stack: tuple[cdk.Stack, IdempotentOrderPipeline, aws_ec2.Vpc, aws_ec2.SecurityGroup],
) -> None:
    # GIVEN a function in a VPC
    stack, _, _, _ = vpc_stack
    template = Template.from_stack(stack)
    # WHEN its role is read
    # THEN it may manage its network interfaces (inline, as AWSLambdaVPCAccessExecutionRole would) and
    # carries no managed policy
    template.has_resource_properties(
        "AWS::IAM::Policy",
        {
            "PolicyDocument": {
                "Statement": Match.array_with(
                    [
                        {
                            "Sid": "DescribeVpcNetworkInterfaces",
                            "Effect": "Allow",
                            "Action": list(VPC_DESCRIBE_ACTIONS),
                            "Resource": "*",
                        },
                        {
                            "Sid": "ManageVpcNetworkInterfaces",
                            "Effect": "Allow",
                            "Action": list(VPC_NETWORK_INTERFACE_ACTIONS),
                            "Resource": Match.object_like({"Fn::Join": Match.any_value()}),
                        },
                    ]
                )
            }
        },
    )
    roles = resources_of_type(template.to_json(), "AWS::IAM::Role")
    assert roles
    assert [logical for logical, role in roles.items() if "ManagedPolicyArns" in role["Properties"]] == []


def test_vpc_endpoints_reach_dynamodb_sns_and_sqs_from_the_function_only(
    vpc_stack: tuple[cdk.Stack, IdempotentOrderPipeline, aws_ec2.Vpc, aws_ec2.SecurityGroup],
) -> None:
    # GIVEN create_vpc_endpoints=True
    stack, pipeline, vpc, group = vpc_stack
    template = Template.from_stack(stack)
    # WHEN the endpoints are read
    # THEN DynamoDB is a gateway endpoint on the function's route tables, SNS and SQS interface
    # endpoints in the function's subnets, private DNS off (the VPC's other workloads keep their own)
    assert set(pipeline.vpc_endpoints) == {"dynamodb", "sns", "sqs"}
    template.has_resource_properties(
        "AWS::EC2::VPCEndpoint",
        {
            "VpcEndpointType": "Gateway",
            "ServiceName": {"Fn::Join": ["", ["com.amazonaws.", {"Ref": "AWS::Region"}, ".dynamodb"]]},
            "RouteTableIds": [
                {"Ref": logical_id(stack, subnet.node.find_child("RouteTable"))} for subnet in vpc.isolated_subnets
            ],
        },
    )
    for service in ("sns", "sqs"):
        template.has_resource_properties(
            "AWS::EC2::VPCEndpoint",
            {
                "VpcEndpointType": "Interface",
                "ServiceName": {"Fn::Join": ["", ["com.amazonaws.", {"Ref": "AWS::Region"}, f".{service}"]]},
                "PrivateDnsEnabled": False,
                "SubnetIds": [{"Ref": logical_id(stack, subnet)} for subnet in vpc.isolated_subnets],
            },
        )
    # AND each interface endpoint admits HTTPS from the function's security group, nothing else
    ingress = resources_of_type(template.to_json(), "AWS::EC2::SecurityGroupIngress")
    rules = [rule["Properties"] for rule in ingress.values()]
    assert len(rules) == 2
    for rule in rules:
        assert rule["FromPort"] == rule["ToPort"] == 443
        assert rule["SourceSecurityGroupId"] == {"Fn::GetAtt": [logical_id(stack, group), "GroupId"]}
    for endpoint_group in resources_of_type(template.to_json(), "AWS::EC2::SecurityGroup").values():
        assert "SecurityGroupIngress" not in endpoint_group["Properties"]


def endpoint_url(stack: cdk.Stack, endpoint: aws_ec2.IVpcEndpoint) -> dict[str, Any]:
    """``https://`` and the endpoint's regional DNS name, as the template computes it from ``DnsEntries``."""
    entries = {"Fn::GetAtt": [logical_id(stack, endpoint), "DnsEntries"]}
    name = {"Fn::Select": [1, {"Fn::Split": [":", {"Fn::Select": [0, entries]}]}]}
    return {"Fn::Join": ["", ["https://", name]]}


def function_variables(stack: cdk.Stack, function: aws_lambda.IFunction) -> dict[str, Any]:
    resource = Template.from_stack(stack).to_json()["Resources"][logical_id(stack, function)]
    variables: dict[str, Any] = resource["Properties"]["Environment"]["Variables"]
    return variables


def test_the_functions_reach_the_interface_endpoints_by_their_own_dns_names(
    vpc_stack: tuple[cdk.Stack, IdempotentOrderPipeline, aws_ec2.Vpc, aws_ec2.SecurityGroup],
) -> None:
    # GIVEN create_vpc_endpoints=True, private DNS at its default (off)
    stack, pipeline, _, _ = vpc_stack
    assert pipeline.reconciliation is not None
    expected = {
        "AWS_ENDPOINT_URL_SNS": endpoint_url(stack, pipeline.vpc_endpoints["sns"]),
        "AWS_ENDPOINT_URL_SQS": endpoint_url(stack, pipeline.vpc_endpoints["sqs"]),
    }
    # WHEN the consumer's and the reconciler's variables are read
    for function in (pipeline.function, pipeline.reconciliation.function):
        variables = function_variables(stack, function)
        # THEN the SDK's service-specific endpoint variables name each endpoint's regional DNS name over HTTPS
        assert {name: variables.get(name) for name in expected} == expected


def test_private_dns_on_the_endpoints_is_opt_in_and_then_no_endpoint_variable_is_set(fresh_stack: cdk.Stack) -> None:
    # GIVEN a VPC of the pipeline's own, endpoints with private DNS asked for
    pipeline = IdempotentOrderPipeline(
        fresh_stack,
        "Pipeline",
        vpc=isolated_vpc(fresh_stack),
        create_vpc_endpoints=True,
        vpc_endpoints_private_dns=True,
    )
    # WHEN the interface endpoints and the functions' variables are read
    endpoints = resources_of_type(Template.from_stack(fresh_stack).to_json(), "AWS::EC2::VPCEndpoint")
    interface = [e["Properties"] for e in endpoints.values() if e["Properties"]["VpcEndpointType"] == "Interface"]
    # THEN both have private DNS on, and the functions use the services' own names (which lead there)
    assert [e["PrivateDnsEnabled"] for e in interface] == [True, True]
    assert pipeline.reconciliation is not None
    for function in (pipeline.function, pipeline.reconciliation.function):
        variables = function_variables(fresh_stack, function)
        assert variables  # the handler's own variables are there
        assert [name for name in variables if name.startswith("AWS_ENDPOINT_URL")] == []


def test_vpc_endpoints_default_to_the_functions_default_subnets(fresh_stack: cdk.Stack) -> None:
    # GIVEN a VPC with isolated subnets only, endpoints asked for, no vpc_subnets
    vpc = isolated_vpc(fresh_stack)
    IdempotentOrderPipeline(fresh_stack, "Pipeline", vpc=vpc, create_vpc_endpoints=True)
    template = Template.from_stack(fresh_stack)
    subnets = [{"Ref": logical_id(fresh_stack, subnet)} for subnet in vpc.isolated_subnets]
    # WHEN the function and the interface endpoints are read
    # THEN both use the VPC's default (private) subnets, here the isolated ones
    template.has_resource_properties("AWS::Lambda::Function", {"VpcConfig": Match.object_like({"SubnetIds": subnets})})
    template.has_resource_properties("AWS::EC2::VPCEndpoint", {"VpcEndpointType": "Interface", "SubnetIds": subnets})


def test_without_create_vpc_endpoints_no_endpoint_is_created(fresh_stack: cdk.Stack) -> None:
    # GIVEN a VPC but no create_vpc_endpoints (reaching the services is the caller's job)
    pipeline = IdempotentOrderPipeline(fresh_stack, "Pipeline", vpc=isolated_vpc(fresh_stack))
    # WHEN the template is read
    # THEN there is no endpoint, and the function still runs in the VPC
    template = Template.from_stack(fresh_stack)
    template.resource_count_is("AWS::EC2::VPCEndpoint", 0)
    template.has_resource_properties("AWS::Lambda::Function", {"VpcConfig": Match.any_value()})
    assert dict(pipeline.vpc_endpoints) == {}


INVALID: list[tuple[dict[str, Any], str]] = [
    (
        {"vpc_subnets": aws_ec2.SubnetSelection(subnet_type=aws_ec2.SubnetType.PRIVATE_ISOLATED)},
        r"vpc_subnets=.*: allowed only with vpc=",
    ),
    ({"create_vpc_endpoints": True}, r"create_vpc_endpoints=True: allowed only with vpc="),
    (
        {"vpc_endpoints_private_dns": True},
        r"vpc_endpoints_private_dns=True: allowed only with create_vpc_endpoints=True",
    ),
    ({"reserved_concurrency": 0}, r"reserved_concurrency=0: allowed None or at least 1 \(0 would stop the consumer\)"),
    ({"fifo_high_throughput": True}, r"fifo_high_throughput=True: allowed only with fifo=True"),
    (
        {"provisioned_pollers": aws_lambda.ProvisionedPollerConfig(minimum_pollers=1, maximum_pollers=10)},
        r"provisioned_pollers.minimum_pollers=1: allowed 2\.\.200",
    ),
    (
        {"provisioned_pollers": aws_lambda.ProvisionedPollerConfig(minimum_pollers=2, maximum_pollers=2001)},
        r"provisioned_pollers.maximum_pollers=2001: allowed 2\.\.2000",
    ),
    (
        {"provisioned_pollers": aws_lambda.ProvisionedPollerConfig(minimum_pollers=50, maximum_pollers=10)},
        r"provisioned_pollers: minimum_pollers=50 above maximum_pollers=10",
    ),
    (
        {"provisioned_pollers": aws_lambda.ProvisionedPollerConfig(minimum_pollers=2), "max_concurrency": 5},
        r"provisioned_pollers with max_concurrency=5: give one or the other",
    ),
    (
        {"removal_policy": cdk.RemovalPolicy.SNAPSHOT},
        r"removal_policy=RemovalPolicy.SNAPSHOT: none of the pipeline's resources .* can be snapshotted by "
        r"CloudFormation; allowed DESTROY, RETAIN or RETAIN_ON_UPDATE_OR_DELETE",
    ),
]


@pytest.mark.parametrize(("props", "message"), INVALID, ids=[message for _, message in INVALID])
def test_invalid_option_raises_naming_prop_value_and_allowed(
    fresh_stack: cdk.Stack, props: dict[str, Any], message: str
) -> None:
    # GIVEN an option outside what is allowed
    # WHEN the construct is created
    # THEN it raises ValueError naming the prop, the value and what is allowed
    with pytest.raises(ValueError, match=message):
        IdempotentOrderPipeline(fresh_stack, "Pipeline", **props)


def test_security_groups_without_vpc_are_refused(fresh_stack: cdk.Stack) -> None:
    # GIVEN security groups but no vpc
    group = aws_ec2.SecurityGroup(fresh_stack, "G", vpc=isolated_vpc(fresh_stack))
    # WHEN the construct is created
    # THEN the error names the prop
    with pytest.raises(ValueError, match=r"security_groups=.*: allowed only with vpc="):
        IdempotentOrderPipeline(fresh_stack, "Pipeline", security_groups=[group])


# ---- FIFO at scale, provisioned pollers, tracing ----------------------------------------------------


@pytest.fixture(scope="module")
def high_throughput() -> Template:
    stack = cdk.Stack(cdk.App(), "TestStack")
    IdempotentOrderPipeline(
        stack,
        "Pipeline",
        fifo=True,
        fifo_high_throughput=True,
        provisioned_pollers=aws_lambda.ProvisionedPollerConfig(minimum_pollers=3, maximum_pollers=50),
        tracing=True,
    )
    return Template.from_stack(stack)


def test_fifo_high_throughput_sets_both_queues_per_message_group(high_throughput: Template) -> None:
    # GIVEN fifo_high_throughput=True
    # WHEN the queues are read
    # THEN both deduplicate and throttle per message group
    queues = resources_of_type(high_throughput.to_json(), "AWS::SQS::Queue")
    assert len(queues) == 2
    for resource in queues.values():
        assert resource["Properties"]["FifoQueue"] is True
        assert resource["Properties"]["DeduplicationScope"] == "messageGroup"
        assert resource["Properties"]["FifoThroughputLimit"] == "perMessageGroupId"


def test_fifo_high_throughput_sets_the_topic_scope_to_message_group(high_throughput: Template) -> None:
    # GIVEN fifo_high_throughput=True
    # WHEN the topic is read
    # THEN its throughput scope is the message group
    high_throughput.has_resource_properties(
        "AWS::SNS::Topic", {"FifoTopic": True, "FifoThroughputScope": "MessageGroup"}
    )


def test_standard_fifo_pipeline_keeps_the_default_throughput(fifo_pipeline: Synthesized) -> None:
    # GIVEN fifo=True without high throughput
    # WHEN queues and topic are read
    # THEN none sets a throughput mode
    for resource_type in ("AWS::SQS::Queue", "AWS::SNS::Topic"):
        for resource in resources_of_type(fifo_pipeline.template_json, resource_type).values():
            for key in ("DeduplicationScope", "FifoThroughputLimit", "FifoThroughputScope"):
                assert key not in resource["Properties"]


def test_provisioned_pollers_reach_the_event_source_mapping(high_throughput: Template) -> None:
    # GIVEN provisioned_pollers(3, 50)
    # WHEN the event source mapping is read
    # THEN it is in provisioned mode, still reporting batch item failures
    high_throughput.has_resource_properties(
        "AWS::Lambda::EventSourceMapping",
        {
            "ProvisionedPollerConfig": {"MinimumPollers": 3, "MaximumPollers": 50},
            "FunctionResponseTypes": ["ReportBatchItemFailures"],
            "ScalingConfig": Match.absent(),
        },
    )


def test_tracing_true_turns_active_tracing_and_its_permissions_on(high_throughput: Template) -> None:
    # GIVEN tracing=True
    # WHEN the function and its policy are read
    # THEN X-Ray is active and the role may send segments
    high_throughput.has_resource_properties("AWS::Lambda::Function", {"TracingConfig": {"Mode": "Active"}})
    high_throughput.has_resource_properties(
        "AWS::IAM::Policy",
        {
            "PolicyDocument": {
                "Statement": Match.array_with(
                    [Match.object_like({"Action": ["xray:PutTraceSegments", "xray:PutTelemetryRecords"]})]
                )
            }
        },
    )


def test_tracing_is_off_by_default_without_xray_permissions(default_pipeline: Synthesized) -> None:
    # GIVEN the default pipeline
    template = default_pipeline.template_json
    functions = resources_of_type(template, "AWS::Lambda::Function")
    policies = resources_of_type(template, "AWS::IAM::Policy")
    # WHEN its functions and their policies are read (both exist: the consumer and the reconciler)
    assert len(functions) == len(policies) == 2
    # THEN no function traces and no statement mentions X-Ray
    assert [found["Properties"].get("TracingConfig") for found in functions.values()] == [None, None]
    assert "xray:" not in str(policies)


# ---- removal policy: deletion protection follows the final policy -------------------------------------


def tables_and_topic(stack: cdk.Stack) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    template = Template.from_stack(stack).to_json()
    tables = list(resources_of_type(template, "AWS::DynamoDB::Table").values())
    topics = list(resources_of_type(template, "AWS::SNS::Topic").values())
    return tables, topics


def test_removal_policies_destroy_after_the_construct_turns_protection_off(fresh_stack: cdk.Stack) -> None:
    # GIVEN a RETAIN pipeline, then RemovalPolicies.of(stack).destroy() applied after it
    IdempotentOrderPipeline(fresh_stack, "Pipeline")
    cdk.RemovalPolicies.of(fresh_stack).destroy()
    # WHEN the template is written
    tables, topics = tables_and_topic(fresh_stack)
    # THEN the tables are deleted with the stack and unprotected, so cdk destroy succeeds
    assert [(t["DeletionPolicy"], t["Properties"]["DeletionProtectionEnabled"]) for t in tables] == [
        ("Delete", False)
    ] * 2
    assert [topic["DeletionPolicy"] for topic in topics] == ["Delete"]


def test_removal_policies_retain_after_a_destroy_pipeline_turns_protection_on(fresh_stack: cdk.Stack) -> None:
    # GIVEN a DESTROY pipeline, then RemovalPolicies.of(stack).retain()
    IdempotentOrderPipeline(fresh_stack, "Pipeline", removal_policy=cdk.RemovalPolicy.DESTROY)
    cdk.RemovalPolicies.of(fresh_stack).retain()
    # WHEN the template is written
    tables, _ = tables_and_topic(fresh_stack)
    # THEN both tables are kept and protected
    assert [(t["DeletionPolicy"], t["Properties"]["DeletionProtectionEnabled"]) for t in tables] == [
        ("Retain", True)
    ] * 2


def test_apply_removal_policy_on_one_table_changes_only_its_protection(fresh_stack: cdk.Stack) -> None:
    # GIVEN a RETAIN pipeline whose order table is switched to DESTROY afterwards
    pipeline = IdempotentOrderPipeline(fresh_stack, "Pipeline")
    pipeline.order_records_table.apply_removal_policy(cdk.RemovalPolicy.DESTROY)
    template = Template.from_stack(fresh_stack).to_json()["Resources"]
    # WHEN the tables are read
    orders = template[logical_id(fresh_stack, pipeline.order_records_table)]
    events = template[logical_id(fresh_stack, pipeline.processed_events_table)]
    # THEN each table's protection follows its own final policy
    assert (orders["DeletionPolicy"], orders["Properties"]["DeletionProtectionEnabled"]) == ("Delete", False)
    assert (events["DeletionPolicy"], events["Properties"]["DeletionProtectionEnabled"]) == ("Retain", True)


def test_retain_on_update_or_delete_keeps_protection_on(fresh_stack: cdk.Stack) -> None:
    # GIVEN removal_policy=RETAIN_ON_UPDATE_OR_DELETE
    IdempotentOrderPipeline(fresh_stack, "Pipeline", removal_policy=cdk.RemovalPolicy.RETAIN_ON_UPDATE_OR_DELETE)
    # WHEN the template is written
    tables, topics = tables_and_topic(fresh_stack)
    # THEN the tables are kept except on a failed create, and protected
    assert [
        (t["DeletionPolicy"], t["UpdateReplacePolicy"], t["Properties"]["DeletionProtectionEnabled"]) for t in tables
    ] == [("RetainExceptOnCreate", "Retain", True)] * 2
    assert [topic["DeletionPolicy"] for topic in topics] == ["RetainExceptOnCreate"]


def test_topic_follows_the_removal_policy(default_pipeline: Synthesized, cmk_pipeline: Synthesized) -> None:
    # GIVEN a RETAIN and a DESTROY pipeline
    # WHEN their topics are read
    # THEN each follows its policy (subscribers hold the topic's ARN)
    for synthesized, policy in ((default_pipeline, "Retain"), (cmk_pipeline, "Delete")):
        topics = resources_of_type(synthesized.template_json, "AWS::SNS::Topic")
        pipeline_topic = topics[logical_id(synthesized.stack, synthesized.pipeline.topic)]
        assert pipeline_topic["DeletionPolicy"] == policy


def test_snapshot_applied_after_the_construct_fails_the_synth(fresh_stack: cdk.Stack) -> None:
    # GIVEN RemovalPolicies.of(stack).snapshot() after the construct
    IdempotentOrderPipeline(fresh_stack, "Pipeline")
    cdk.RemovalPolicies.of(fresh_stack).snapshot()
    # WHEN the stack is synthesized
    # THEN the synth fails naming a resource that cannot be snapshotted
    with pytest.raises(
        RuntimeError, match=r"TestStack/Pipeline/\w+/Resource \(AWS::\w+::\w+\) has DeletionPolicy Snapshot"
    ):
        Template.from_stack(fresh_stack)


# ---- small ones ----------------------------------------------------------------------------------------


def test_identity_fields_string_is_reported_with_the_other_errors(fresh_stack: cdk.Stack) -> None:
    # GIVEN identity_fields as a string and another bad prop
    # WHEN the construct is created
    with pytest.raises(ValueError, match="invalid props") as raised:
        IdempotentOrderPipeline(fresh_stack, "Pipeline", identity_fields="order_id", memory_size=1)
    # THEN both are in the one error
    assert "identity_fields='order_id' (str): allowed a sequence of field names" in str(raised.value)
    assert "memory_size=1" in str(raised.value)


def test_duplicate_service_name_in_one_app_and_environment_is_an_error() -> None:
    # GIVEN two stacks of one app (same environment) and a pipeline named "orders" in the first
    app = cdk.App()
    IdempotentOrderPipeline(cdk.Stack(app, "First"), "Pipeline", service_name="orders")
    # WHEN a second pipeline takes the same name
    # THEN it fails naming the name and the pipeline that has it
    with pytest.raises(ValueError, match=r"service_name='orders': already used by First/Pipeline"):
        IdempotentOrderPipeline(cdk.Stack(app, "Second"), "Pipeline", service_name="orders")


def test_same_service_name_in_other_environments_or_apps_is_allowed() -> None:
    # GIVEN one app with a stage per region, and another app
    app = cdk.App()
    for region in ("eu-west-1", "us-east-1"):
        stack = cdk.Stack(app, f"Stack-{region}", env=cdk.Environment(account="111111111111", region=region))
        # WHEN each gets a pipeline named "orders"
        pipeline = IdempotentOrderPipeline(stack, "Pipeline", service_name="orders")
        # THEN each is accepted (their metrics are in different regions)
        assert pipeline.metric_conflicts().dimensions == {"service": "orders"}
    IdempotentOrderPipeline(cdk.Stack(cdk.App(), "Stack"), "Pipeline", service_name="orders")


def test_metric_methods_take_the_metric_options(default_pipeline: Synthesized) -> None:
    # GIVEN the default pipeline
    pipeline = default_pipeline.pipeline
    # WHEN a metric is asked for with MetricOptions keywords
    metric = pipeline.metric_orders_recorded(
        period=cdk.Duration.minutes(5), statistic="p99", label="Recorded", color="#00ff00", region="eu-west-1"
    )
    # THEN it carries them, on the handler's metric and dimension
    assert (metric.metric_name, metric.namespace) == ("OrdersRecorded", "IdempotentOrderPipeline")
    assert metric.period.to_seconds() == 300
    assert (metric.statistic, metric.label, metric.color, metric.region) == ("p99", "Recorded", "#00ff00", "eu-west-1")
    assert metric.dimensions == {"service": "TestStack-Pipeline"}
    # AND the defaults are Sum over one minute
    default = pipeline.metric_conflicts()
    assert (default.statistic, default.period.to_seconds(), default.unit) == ("Sum", 60, aws_cloudwatch.Unit.COUNT)


@pytest.mark.parametrize(
    "statistic", ["Sum", "Average", "Minimum", "Maximum", "SampleCount", "p99", "p99.9", "tm90", "TM(10%:90%)", "IQM"]
)
def test_metric_methods_accept_every_cloudwatch_statistic(default_pipeline: Synthesized, statistic: str) -> None:
    # GIVEN a statistic CloudWatch knows
    # WHEN a metric is asked for with it
    metric = default_pipeline.pipeline.metric_transient_failures(statistic=statistic)
    # THEN it is used as given
    assert metric.statistic == statistic


@pytest.mark.parametrize("statistic", ["Bogus", "p101", "sum2", ""])
def test_metric_methods_reject_unknown_statistics(default_pipeline: Synthesized, statistic: str) -> None:
    # GIVEN a statistic CloudWatch does not know
    # WHEN a metric is asked for with it
    # THEN ValueError names it and what is allowed
    with pytest.raises(ValueError, match=rf"statistic={statistic!r}: allowed SampleCount, Average, Sum"):
        default_pipeline.pipeline.metric_invalid_messages(statistic=statistic)


def test_metric_methods_reject_unknown_options(default_pipeline: Synthesized) -> None:
    # GIVEN an option MetricOptions does not have
    # WHEN a metric is asked for with it
    # THEN TypeError names it
    with pytest.raises(TypeError, match=r"unexpected metric option\(s\) \['colour'\]"):
        default_pipeline.pipeline.metric_conflicts(colour="red")  # type: ignore[call-arg]


def test_fifo_pipeline_accepts_queue_subscriptions(fresh_stack: cdk.Stack) -> None:
    # GIVEN a FIFO pipeline and a FIFO queue
    pipeline = IdempotentOrderPipeline(fresh_stack, "Pipeline", fifo=True)
    subscriber = aws_sqs.Queue(fresh_stack, "Subscriber", fifo=True, enforce_ssl=True)
    # WHEN the queue is subscribed
    pipeline.add_subscription(aws_sns_subscriptions.SqsSubscription(subscriber, raw_message_delivery=True))
    # THEN the subscription is in the template
    Template.from_stack(fresh_stack).has_resource_properties("AWS::SNS::Subscription", {"Protocol": "sqs"})


def _function(stack: cdk.Stack) -> aws_lambda.Function:
    return aws_lambda.Function(
        stack,
        "Subscriber",
        runtime=aws_lambda.Runtime.PYTHON_3_14,
        handler="index.handler",
        code=aws_lambda.Code.from_inline("def handler(event, context): pass"),
    )


def test_fifo_pipeline_rejects_a_lambda_subscription(fresh_stack: cdk.Stack) -> None:
    # GIVEN a FIFO pipeline
    pipeline = IdempotentOrderPipeline(fresh_stack, "Pipeline", fifo=True)
    # WHEN a Lambda function is subscribed
    # THEN it is refused: SNS FIFO topics deliver only to SQS queues
    with pytest.raises(ValueError, match=r"protocol 'lambda' on a FIFO pipeline; an SNS FIFO topic delivers only"):
        pipeline.add_subscription(aws_sns_subscriptions.LambdaSubscription(_function(fresh_stack)))


def test_fifo_topic_subscribed_directly_fails_the_synth(fresh_stack: cdk.Stack) -> None:
    # GIVEN a FIFO pipeline whose topic gets a Lambda subscription directly (not through add_subscription)
    pipeline = IdempotentOrderPipeline(fresh_stack, "Pipeline", fifo=True)
    pipeline.topic.add_subscription(aws_sns_subscriptions.LambdaSubscription(_function(fresh_stack)))
    # WHEN the stack is synthesized
    # THEN the synth fails naming the subscription's protocol
    with pytest.raises(RuntimeError, match=r"protocol 'lambda' on the FIFO topic; an SNS FIFO topic delivers only"):
        Template.from_stack(fresh_stack)


def test_standard_pipeline_accepts_a_lambda_subscription(fresh_stack: cdk.Stack) -> None:
    # GIVEN a standard pipeline
    pipeline = IdempotentOrderPipeline(fresh_stack, "Pipeline")
    # WHEN a Lambda function is subscribed
    pipeline.add_subscription(aws_sns_subscriptions.LambdaSubscription(_function(fresh_stack)))
    # THEN it is in the template
    Template.from_stack(fresh_stack).has_resource_properties("AWS::SNS::Subscription", {"Protocol": "lambda"})
