"""Fine-grained assertions: every resource decision of the construct, one test per decision."""

from __future__ import annotations

import json
import shutil
from pathlib import Path, PurePosixPath
from typing import Any

import aws_cdk as cdk
import pytest
from aws_cdk import aws_lambda
from aws_cdk.assertions import Match, Template

from idempotent_order_pipeline import IdempotentOrderPipeline, bytecode
from idempotent_order_pipeline.asset import HANDLER, RUNTIME_BYTECODE_TAG, code_from, copy_ignore, lambda_asset_path
from idempotent_order_pipeline.core.sqs_function import ARCHITECTURE, RUNTIME
from tests.infra.synth import Synthesized, resources_of_type
from tests.infra.synth import logical_id as stack_logical_id


def logical_id(synthesized: Synthesized, construct: Any) -> str:
    return stack_logical_id(synthesized.stack, construct)


def key_id(synthesized: Synthesized) -> str:
    return stack_logical_id(synthesized.stack, synthesized.stack.node.find_child("PipelineKey"))


def queue_ids(synthesized: Synthesized) -> tuple[str, str]:
    return logical_id(synthesized, synthesized.pipeline.queue), logical_id(
        synthesized, synthesized.pipeline.dead_letter_queue
    )


def resource(synthesized: Synthesized, construct: Any) -> dict[str, Any]:
    found: dict[str, Any] = synthesized.template_json["Resources"][logical_id(synthesized, construct)]
    return found


# ---- queues -------------------------------------------------------------------------------------


def test_queue_redrives_to_the_dead_letter_queue_after_five_receives(default_pipeline: Synthesized) -> None:
    # GIVEN the default pipeline
    queue_id, dlq_id = queue_ids(default_pipeline)
    # WHEN its queue is inspected
    queue = default_pipeline.template_json["Resources"][queue_id]["Properties"]
    # THEN it redrives to the DLQ after max_receive_count (5) receives
    assert queue["RedrivePolicy"] == {"deadLetterTargetArn": {"Fn::GetAtt": [dlq_id, "Arn"]}, "maxReceiveCount": 5}


def test_visibility_timeout_is_six_times_the_function_timeout(default_pipeline: Synthesized) -> None:
    # GIVEN the default 30-second function timeout and no batching window
    queue = resource(default_pipeline, default_pipeline.pipeline.queue)["Properties"]
    function = resource(default_pipeline, default_pipeline.pipeline.function)["Properties"]
    # WHEN the derived visibility timeout is read
    # THEN it is 6x the function timeout
    assert function["Timeout"] == 30
    assert queue["VisibilityTimeout"] == 180


def test_visibility_timeout_adds_the_batching_window(cmk_pipeline: Synthesized) -> None:
    # GIVEN a 5-second batching window
    queue = resource(cmk_pipeline, cmk_pipeline.pipeline.queue)["Properties"]
    # WHEN the derived visibility timeout is read
    # THEN the window is added to 6x the timeout (AWS's advice for SQS event sources)
    assert queue["VisibilityTimeout"] == 6 * 30 + 5


def test_explicit_visibility_timeout_is_used_as_given(fresh_stack: cdk.Stack) -> None:
    # GIVEN an explicit visibility timeout above 6x the function timeout
    from aws_cdk.assertions import Template

    from idempotent_order_pipeline import IdempotentOrderPipeline

    IdempotentOrderPipeline(
        fresh_stack,
        "Pipeline",
        function_timeout=cdk.Duration.seconds(10),
        visibility_timeout=cdk.Duration.minutes(5),
        memory_size=1024,
    )
    # WHEN the stack is synthesized
    template = Template.from_stack(fresh_stack)
    # THEN the queue and function carry exactly those values
    template.has_resource_properties("AWS::SQS::Queue", {"VisibilityTimeout": 300, "RedrivePolicy": Match.any_value()})
    template.has_resource_properties("AWS::Lambda::Function", {"Timeout": 10, "MemorySize": 1024})


def test_dead_letter_queue_keeps_messages_14_days_longer_than_the_source(default_pipeline: Synthesized) -> None:
    # GIVEN the default pipeline
    queue_id, dlq_id = queue_ids(default_pipeline)
    resources = default_pipeline.template_json["Resources"]
    # WHEN the retention periods are compared
    queue_retention = resources[queue_id]["Properties"]["MessageRetentionPeriod"]
    dlq_retention = resources[dlq_id]["Properties"]["MessageRetentionPeriod"]
    # THEN the DLQ keeps 14 days (the SQS maximum), longer than the source queue's 4 days
    assert dlq_retention == 14 * 86_400
    assert queue_retention == 4 * 86_400
    assert "RedrivePolicy" not in resources[dlq_id]["Properties"]


def test_queue_accepts_what_the_consumer_handles_and_the_dlq_takes_it_back_with_its_reason(
    default_pipeline: Synthesized,
) -> None:
    # GIVEN the default pipeline
    queue_id, dlq_id = queue_ids(default_pipeline)
    resources = default_pipeline.template_json["Resources"]
    # WHEN the queues' maximum message sizes are read
    # THEN the queue takes 256 KiB (SQS's default would be 1 MiB, more than the consumer is built for)
    # and the DLQ 1 MiB, so a parked message (the original plus its reason, attributes counted) fits
    assert resources[queue_id]["Properties"]["MaximumMessageSize"] == 256 * 1024
    assert resources[dlq_id]["Properties"]["MaximumMessageSize"] == 1024 * 1024


def test_max_message_size_sets_the_queues_and_is_not_a_queue_prop(fresh_stack: cdk.Stack) -> None:
    # GIVEN a pipeline with max_message_size=64 KiB
    pipeline = IdempotentOrderPipeline(fresh_stack, "Pipeline", max_message_size=64 * 1024)
    # WHEN synthesized / THEN the queue takes 64 KiB
    Template.from_stack(fresh_stack).has_resource_properties(
        "AWS::SQS::Queue", {"MaximumMessageSize": 64 * 1024, "RedrivePolicy": Match.any_value()}
    )
    assert pipeline.queue is not None
    # AND setting it through queue_props or dead_letter_queue_props names the prop to use instead
    with pytest.raises(ValueError, match=r"queue_props\['max_message_size_bytes'\].*use max_message_size="):
        IdempotentOrderPipeline(fresh_stack, "Other", queue_props={"max_message_size_bytes": 1024})
    with pytest.raises(ValueError, match=r"dead_letter_queue_props\['max_message_size_bytes'\].*1 MiB"):
        IdempotentOrderPipeline(fresh_stack, "Third", dead_letter_queue_props={"max_message_size_bytes": 1024})


@pytest.mark.parametrize("queue_attribute", ["queue", "dead_letter_queue"])
def test_queues_use_sqs_managed_encryption_by_default(default_pipeline: Synthesized, queue_attribute: str) -> None:
    # GIVEN the default pipeline (no customer managed key)
    queue = resource(default_pipeline, getattr(default_pipeline.pipeline, queue_attribute))["Properties"]
    # WHEN its encryption is inspected
    # THEN SQS-managed SSE is on and no KMS key is referenced
    assert queue["SqsManagedSseEnabled"] is True
    assert "KmsMasterKeyId" not in queue


@pytest.mark.parametrize("queue_attribute", ["queue", "dead_letter_queue"])
def test_queues_use_the_customer_managed_key_when_given(cmk_pipeline: Synthesized, queue_attribute: str) -> None:
    # GIVEN a pipeline with a customer managed key
    queue = resource(cmk_pipeline, getattr(cmk_pipeline.pipeline, queue_attribute))["Properties"]
    # WHEN its encryption is inspected
    # THEN the queue is encrypted with that key
    assert queue["KmsMasterKeyId"] == {"Fn::GetAtt": [key_id(cmk_pipeline), "Arn"]}


@pytest.mark.parametrize("queue_attribute", ["queue", "dead_letter_queue"])
def test_queues_refuse_requests_without_tls(default_pipeline: Synthesized, queue_attribute: str) -> None:
    # GIVEN the default pipeline
    queue_id = logical_id(default_pipeline, getattr(default_pipeline.pipeline, queue_attribute))
    # WHEN its queue policy is inspected
    # THEN every request without TLS is denied
    default_pipeline.template.has_resource_properties(
        "AWS::SQS::QueuePolicy",
        {
            "Queues": [{"Ref": queue_id}],
            "PolicyDocument": {
                "Statement": Match.array_with(
                    [
                        Match.object_like(
                            {
                                "Effect": "Deny",
                                "Principal": {"AWS": "*"},
                                "Action": "sqs:*",
                                "Condition": {"Bool": {"aws:SecureTransport": "false"}},
                            }
                        )
                    ]
                )
            },
        },
    )


def test_fifo_gives_fifo_queues_without_content_based_deduplication(fifo_pipeline: Synthesized) -> None:
    # GIVEN fifo=True
    queue_id, dlq_id = queue_ids(fifo_pipeline)
    resources = fifo_pipeline.template_json["Resources"]
    # WHEN the queues are inspected
    # THEN both are FIFO and deduplicate on the ids the handler sends, not on content
    for logical in (queue_id, dlq_id):
        assert resources[logical]["Properties"]["FifoQueue"] is True
        assert resources[logical]["Properties"]["ContentBasedDeduplication"] is False


def test_fifo_gives_a_fifo_topic_without_content_based_deduplication(fifo_pipeline: Synthesized) -> None:
    # GIVEN fifo=True
    topic = resource(fifo_pipeline, fifo_pipeline.pipeline.topic)["Properties"]
    # WHEN the topic is inspected
    # THEN it is FIFO with content-based deduplication off
    assert topic["FifoTopic"] is True
    assert topic["ContentBasedDeduplication"] is False


#: Every FIFO-only property of AWS::SQS::Queue and AWS::SNS::Topic.
FIFO_SETTINGS = {
    "FifoQueue",
    "ContentBasedDeduplication",
    "DeduplicationScope",
    "FifoThroughputLimit",
    "FifoTopic",
    "FifoThroughputScope",
}


def test_standard_pipeline_has_no_fifo_settings(default_pipeline: Synthesized) -> None:
    # GIVEN the default pipeline
    queues = resources_of_type(default_pipeline.template_json, "AWS::SQS::Queue")
    topics = resources_of_type(default_pipeline.template_json, "AWS::SNS::Topic")
    # WHEN every queue and topic is inspected (the pipeline's two queues and its topic, nothing else)
    assert set(queues) == set(queue_ids(default_pipeline))
    assert set(topics) == {logical_id(default_pipeline, default_pipeline.pipeline.topic)}
    # THEN none carries a FIFO setting
    fifo_settings = {
        logical: sorted(FIFO_SETTINGS & set(found.get("Properties", {})))
        for logical, found in {**queues, **topics}.items()
    }
    assert fifo_settings == {logical: [] for logical in fifo_settings}


# ---- tables -------------------------------------------------------------------------------------

TABLES = [
    ("processed_events_table", "event_id", "ttl"),
    ("order_records_table", "order_id", None),
]


@pytest.mark.parametrize(("table_attribute", "partition_key", "ttl_attribute"), TABLES)
def test_tables_have_their_key_on_demand_billing_and_point_in_time_recovery(
    default_pipeline: Synthesized, table_attribute: str, partition_key: str, ttl_attribute: str | None
) -> None:
    # GIVEN the default pipeline
    table = resource(default_pipeline, getattr(default_pipeline.pipeline, table_attribute))
    properties = table["Properties"]
    # WHEN the table is inspected
    # THEN it has its string partition key only, on-demand billing, PITR, and TTL where records expire
    assert properties["KeySchema"] == [{"AttributeName": partition_key, "KeyType": "HASH"}]
    # (plus the pending index's attributes on processed_events: tests/infra/test_reconciliation.py)
    assert properties["AttributeDefinitions"][0] == {"AttributeName": partition_key, "AttributeType": "S"}
    assert properties["BillingMode"] == "PAY_PER_REQUEST"
    assert properties["PointInTimeRecoverySpecification"] == {"PointInTimeRecoveryEnabled": True}
    if ttl_attribute is None:
        assert "TimeToLiveSpecification" not in properties
    else:
        assert properties["TimeToLiveSpecification"] == {"AttributeName": ttl_attribute, "Enabled": True}


@pytest.mark.parametrize(("table_attribute", "partition_key", "ttl_attribute"), TABLES)
def test_tables_are_retained_and_deletion_protected_by_default(
    default_pipeline: Synthesized, table_attribute: str, partition_key: str, ttl_attribute: str | None
) -> None:
    # GIVEN the default removal policy (RETAIN)
    table = resource(default_pipeline, getattr(default_pipeline.pipeline, table_attribute))
    # WHEN the table is inspected
    # THEN CloudFormation keeps it and DynamoDB refuses to delete it
    assert table["DeletionPolicy"] == "Retain"
    assert table["UpdateReplacePolicy"] == "Retain"
    assert table["Properties"]["DeletionProtectionEnabled"] is True


@pytest.mark.parametrize(("table_attribute", "partition_key", "ttl_attribute"), TABLES)
def test_destroy_removal_policy_deletes_tables_without_protection(
    cmk_pipeline: Synthesized, table_attribute: str, partition_key: str, ttl_attribute: str | None
) -> None:
    # GIVEN removal_policy=DESTROY
    table = resource(cmk_pipeline, getattr(cmk_pipeline.pipeline, table_attribute))
    # WHEN the table is inspected
    # THEN it is deleted with the stack, and deletion protection is off so that can happen
    assert table["DeletionPolicy"] == "Delete"
    assert table["Properties"]["DeletionProtectionEnabled"] is False


def test_removal_policy_also_applies_to_queues_and_log_group(
    default_pipeline: Synthesized, cmk_pipeline: Synthesized
) -> None:
    # GIVEN a RETAIN pipeline and a DESTROY pipeline
    # WHEN their queues and log groups are inspected
    # THEN each follows its removal policy (the DLQ holds parked orders: it is data too)
    for synthesized, policy in ((default_pipeline, "Retain"), (cmk_pipeline, "Delete")):
        for resource_type in ("AWS::SQS::Queue", "AWS::Logs::LogGroup"):
            found = resources_of_type(synthesized.template_json, resource_type)
            assert found
            assert {resource["DeletionPolicy"] for resource in found.values()} == {policy}


@pytest.mark.parametrize("table_attribute", ["processed_events_table", "order_records_table"])
def test_tables_use_aws_owned_keys_by_default_and_the_cmk_when_given(
    default_pipeline: Synthesized, cmk_pipeline: Synthesized, table_attribute: str
) -> None:
    # GIVEN the default pipeline and one with a customer managed key
    default_table = resource(default_pipeline, getattr(default_pipeline.pipeline, table_attribute))["Properties"]
    cmk_table = resource(cmk_pipeline, getattr(cmk_pipeline.pipeline, table_attribute))["Properties"]
    # WHEN their encryption is inspected
    # THEN the default uses DynamoDB's AWS owned key, the other the CMK
    assert "SSESpecification" not in default_table
    assert cmk_table["SSESpecification"] == {
        "KMSMasterKeyId": {"Fn::GetAtt": [key_id(cmk_pipeline), "Arn"]},
        "SSEEnabled": True,
        "SSEType": "KMS",
    }


# ---- topic --------------------------------------------------------------------------------------


def test_topic_is_encrypted_with_the_aws_managed_sns_key_by_default(default_pipeline: Synthesized) -> None:
    # GIVEN the default pipeline
    topic = resource(default_pipeline, default_pipeline.pipeline.topic)["Properties"]
    # WHEN the topic is inspected
    # THEN SSE uses the AWS managed key for SNS
    assert topic["KmsMasterKeyId"] == "alias/aws/sns"


def test_topic_is_encrypted_with_the_cmk_when_given(cmk_pipeline: Synthesized) -> None:
    # GIVEN a customer managed key
    topic = resource(cmk_pipeline, cmk_pipeline.pipeline.topic)["Properties"]
    # WHEN the topic is inspected
    # THEN it is encrypted with that key
    assert topic["KmsMasterKeyId"] == {"Fn::GetAtt": [key_id(cmk_pipeline), "Arn"]}


def test_topic_refuses_publishing_without_tls(default_pipeline: Synthesized) -> None:
    # GIVEN the default pipeline
    topic_id = logical_id(default_pipeline, default_pipeline.pipeline.topic)
    # WHEN its topic policy is inspected
    # THEN every request without TLS is denied
    default_pipeline.template.has_resource_properties(
        "AWS::SNS::TopicPolicy",
        {
            "Topics": [{"Ref": topic_id}],
            "PolicyDocument": {
                "Statement": Match.array_with(
                    [
                        Match.object_like(
                            {
                                "Effect": "Deny",
                                "Action": "sns:Publish",
                                "Condition": {"Bool": {"aws:SecureTransport": "false"}},
                            }
                        )
                    ]
                )
            },
        },
    )


# ---- function -----------------------------------------------------------------------------------


def test_function_runs_python_3_14_on_arm64_with_explicit_memory_timeout_and_no_tracing(
    default_pipeline: Synthesized,
) -> None:
    # GIVEN the default pipeline
    # WHEN the function is inspected
    # THEN runtime, architecture, handler, memory and timeout are set explicitly, X-Ray is off
    default_pipeline.template.has_resource_properties(
        "AWS::Lambda::Function",
        {
            "Runtime": "python3.14",
            "Architectures": ["arm64"],
            "Handler": "order_consumer.handler.handler",
            "MemorySize": 1769,
            "Timeout": 30,
            "TracingConfig": Match.absent(),
            "ReservedConcurrentExecutions": Match.absent(),
            "VpcConfig": Match.absent(),
        },
    )


def test_function_environment_is_exactly_the_consumer_contract(default_pipeline: Synthesized) -> None:
    # GIVEN the default pipeline
    pipeline = default_pipeline.pipeline
    function = resource(default_pipeline, pipeline.function)["Properties"]
    # WHEN its environment is read
    variables = function["Environment"]["Variables"]
    # THEN it holds exactly the variables the handler reads, pointing at this pipeline's resources
    assert variables == {
        "PROCESSED_EVENTS_TABLE": {"Ref": logical_id(default_pipeline, pipeline.processed_events_table)},
        "ORDER_RECORDS_TABLE": {"Ref": logical_id(default_pipeline, pipeline.order_records_table)},
        "TOPIC_ARN": {"Ref": logical_id(default_pipeline, pipeline.topic)},
        "DEAD_LETTER_QUEUE_URL": {"Ref": logical_id(default_pipeline, pipeline.dead_letter_queue)},
        "RECORD_TTL_SECONDS": "2592000",
        "IDENTITY_FIELDS": "order_id",
        "POWERTOOLS_SERVICE_NAME": "TestStack-Pipeline",
        "POWERTOOLS_METRICS_NAMESPACE": "IdempotentOrderPipeline",
    }


def test_function_environment_follows_the_props(cmk_pipeline: Synthesized) -> None:
    # GIVEN identity fields, a service name and a namespace
    variables = resource(cmk_pipeline, cmk_pipeline.pipeline.function)["Properties"]["Environment"]["Variables"]
    # WHEN the environment is read
    # THEN the handler gets them as the contract spells them
    assert variables["IDENTITY_FIELDS"] == "customer_id,order_id"
    assert variables["POWERTOOLS_SERVICE_NAME"] == "orders"
    assert variables["POWERTOOLS_METRICS_NAMESPACE"] == "Shop/Orders"


def test_record_ttl_default_matches_the_handlers_fallback(default_pipeline: Synthesized) -> None:
    # GIVEN the handler's own fallback for RECORD_TTL_SECONDS
    from idempotent_order_pipeline._lambda_asset.order_consumer.config import DEFAULT_RECORD_TTL_SECONDS

    variables = resource(default_pipeline, default_pipeline.pipeline.function)["Properties"]["Environment"]["Variables"]
    # WHEN the construct's default is compared with it
    # THEN both say 30 days, so the defaults cannot drift apart silently
    assert variables["RECORD_TTL_SECONDS"] == str(DEFAULT_RECORD_TTL_SECONDS)


def test_function_logs_to_its_own_log_group_with_retention(default_pipeline: Synthesized) -> None:
    # GIVEN the default pipeline
    function = resource(default_pipeline, default_pipeline.pipeline.function)["Properties"]
    log_groups = resources_of_type(default_pipeline.template_json, "AWS::Logs::LogGroup")
    # WHEN the log configuration is read (the reconciler has its own: tests/infra/test_reconciliation.py)
    (log_group_id, log_group), *others = [(k, v) for k, v in log_groups.items() if "Reconciliation" not in k]
    # THEN the function writes to the one explicit log group, kept one month
    assert not others
    assert function["LoggingConfig"] == {"LogGroup": {"Ref": log_group_id}}
    assert log_group["Properties"]["RetentionInDays"] == 30


def test_function_code_is_the_lambdas_asset_with_the_runtimes_bytecode_only(default_pipeline: Synthesized) -> None:
    # GIVEN the synthesized assets
    assets_file = default_pipeline.template_path.with_name(f"{default_pipeline.stack.artifact_id}.assets.json")
    assets = json.loads(assets_file.read_text())["files"]
    function = resource(default_pipeline, default_pipeline.pipeline.function)["Properties"]
    asset_hash = function["Code"]["S3Key"].removesuffix(".zip")
    # WHEN the function's asset directory is listed
    directory = default_pipeline.template_path.parent / assets[asset_hash]["source"]["path"]
    files = {path.relative_to(directory).as_posix() for path in directory.rglob("*") if path.is_file()}
    sources = {name for name in files if name.endswith(".py")}
    # THEN it holds the handler and the shared package, each module with its python3.14 bytecode, and no
    # other bytecode or build metadata
    assert {"order_consumer/handler.py", "order_consumer/contract/keys.py"} <= sources
    expected_bytecode = {
        f"{PurePosixPath(name).parent}/__pycache__/{PurePosixPath(name).stem}.{RUNTIME_BYTECODE_TAG}.pyc"
        for name in sources
    }
    assert {name for name in files - sources if not name.endswith("py.typed")} == expected_bytecode
    assert RUNTIME_BYTECODE_TAG == "cpython-314"
    assert all(bytecode.usable(directory / name) for name in expected_bytecode)


def test_asset_leaves_out_foreign_and_timestamp_bytecode(tmp_path: Path) -> None:
    # GIVEN a copy of the asset root with bytecode of another Python beside a module, and one module's
    # python3.14 bytecode rewritten in timestamp mode (as `pip install` on python3.14 writes it)
    root = tmp_path / "asset"
    shutil.copytree(lambda_asset_path(), root, ignore=copy_ignore)
    cache = root / "order_consumer" / "__pycache__"
    (cache / "handler.cpython-311.pyc").write_bytes(b"foreign")
    rewritten = cache / f"budget.{RUNTIME_BYTECODE_TAG}.pyc"
    data = bytearray(rewritten.read_bytes())
    data[4:8] = (0).to_bytes(4, "little")  # PEP 552 flags: 0 is timestamp-based
    rewritten.write_bytes(bytes(data))
    # WHEN a function's code is made from it and synthesized
    app = cdk.App(outdir=str(tmp_path / "out"))
    stack = cdk.Stack(app, "Stack")
    aws_lambda.Function(
        stack, "Function", code=code_from(root), handler=HANDLER, runtime=RUNTIME, architecture=ARCHITECTURE
    )
    assembly = app.synth()
    (staged,) = [p for p in Path(assembly.directory).iterdir() if p.name.startswith("asset.")]
    files = {p.relative_to(staged).as_posix() for p in staged.rglob("*") if p.is_file()}
    # THEN neither is shipped, the other modules' bytecode is, and a copy keeps the same files
    assert "order_consumer/__pycache__/handler.cpython-311.pyc" not in files
    assert f"order_consumer/__pycache__/budget.{RUNTIME_BYTECODE_TAG}.pyc" not in files
    assert f"order_consumer/__pycache__/handler.{RUNTIME_BYTECODE_TAG}.pyc" in files
    copy = tmp_path / "copy"
    shutil.copytree(root, copy, ignore=copy_ignore)
    assert {p.relative_to(copy).as_posix() for p in copy.rglob("*") if p.is_file()} == files


def test_function_role_has_no_managed_policies(default_pipeline: Synthesized) -> None:
    # GIVEN the default pipeline
    roles = resources_of_type(default_pipeline.template_json, "AWS::IAM::Role")
    # WHEN the roles are inspected (the consumer's and the reconciler's)
    # THEN each only trusts Lambda and carries no (broad) managed policy
    assert len(roles) == 2
    for role in roles.values():
        assert "ManagedPolicyArns" not in role["Properties"]
        assert role["Properties"]["AssumeRolePolicyDocument"]["Statement"] == [
            {"Action": "sts:AssumeRole", "Effect": "Allow", "Principal": {"Service": "lambda.amazonaws.com"}}
        ]


# ---- event source -------------------------------------------------------------------------------


def test_event_source_reports_batch_item_failures(default_pipeline: Synthesized) -> None:
    # GIVEN the default pipeline
    queue_id, _ = queue_ids(default_pipeline)
    function_id = logical_id(default_pipeline, default_pipeline.pipeline.function)
    # WHEN the event source mapping is inspected
    # THEN it reads the queue in batches of 10 and lets the handler report partial failures
    default_pipeline.template.has_resource_properties(
        "AWS::Lambda::EventSourceMapping",
        {
            "EventSourceArn": {"Fn::GetAtt": [queue_id, "Arn"]},
            "FunctionName": {"Ref": function_id},
            "BatchSize": 10,
            "FunctionResponseTypes": ["ReportBatchItemFailures"],
            "MaximumBatchingWindowInSeconds": Match.absent(),
            "ScalingConfig": Match.absent(),
        },
    )


def test_event_source_batching_and_concurrency_follow_the_props(cmk_pipeline: Synthesized) -> None:
    # GIVEN batch_size=100, max_batching_window=5s, max_concurrency=20
    # WHEN the event source mapping is inspected
    # THEN it carries them, still with ReportBatchItemFailures
    cmk_pipeline.template.has_resource_properties(
        "AWS::Lambda::EventSourceMapping",
        {
            "BatchSize": 100,
            "MaximumBatchingWindowInSeconds": 5,
            "ScalingConfig": {"MaximumConcurrency": 20},
            "FunctionResponseTypes": ["ReportBatchItemFailures"],
        },
    )


def test_the_event_source_mapping_keeps_its_logical_id_with_a_customer_managed_key(
    default_pipeline: Synthesized, cmk_pipeline: Synthesized
) -> None:
    # GIVEN a pipeline without and one with a customer-managed key (the same construct path)
    def mapping(synthesized: Synthesized) -> str:
        [logical] = resources_of_type(synthesized.template_json, "AWS::Lambda::EventSourceMapping")
        return logical

    # WHEN their mappings' logical ids are read
    # THEN they are the same, named after the queue as 0.2.0 named them (not after the keyless view
    # of the queue the grant goes through, which gave an upgrade a new mapping on the same queue)
    assert mapping(cmk_pipeline) == mapping(default_pipeline)
    assert mapping(cmk_pipeline).startswith("PipelineFunctionSqsEventSourceTestStackPipelineQueue")
