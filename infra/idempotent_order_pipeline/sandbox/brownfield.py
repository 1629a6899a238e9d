"""A brownfield adoption, as a team with a running system would do it: two stages of one app.

``brownfield-existing`` holds what the team already runs: a customer managed key, an orders queue
redriving to its dead-letter queue, and the two tables (the keys and TTL the design needs),
encrypted with that key. ``brownfield`` imports them by ARN and name (the values the first stage
outputs, passed as context, as a separate repository would), puts the function in a VPC of its own
with the service endpoints, and overrides the topic's and function's props. The same
:class:`BrownfieldPipelineStack` is synthesized for the snapshot and cdk-nag/cfn-lint tests
(``tests/infra``) and deployed by the end-to-end test (``tests/sandbox/test_brownfield_e2e.py``).

Deploy order: ``cdk deploy 'brownfield-existing/*'``, then ``cdk deploy 'brownfield/*' -c
existing_queue_arn=... -c ...`` (the keys of :data:`EXISTING_CONTEXT_KEYS`).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import aws_cdk as cdk
from aws_cdk import Annotations, aws_dynamodb, aws_ec2, aws_kms, aws_lambda, aws_logs, aws_sqs
from constructs import Construct

from idempotent_order_pipeline import IdempotentOrderPipeline, nag, permissions, reconciliation
from idempotent_order_pipeline._lambda_asset.order_consumer.contract import names
from idempotent_order_pipeline.core.props import WARNING_PREFIX
from idempotent_order_pipeline.core.tables import table_defaults

#: The CDK CLI's app directory (``cdk.json`` with the same feature flags as the main app).
APP_DIR = Path(__file__).resolve().parent / "brownfield_app"
EXISTING_STAGE = "brownfield-existing"
PIPELINE_STAGE = "brownfield"
STACK_ID = "OrderPipeline"
#: Output key of the existing stage -> context key of the pipeline stage.
EXISTING_CONTEXT_KEYS: Mapping[str, str] = {
    "KeyArn": "existing_key_arn",
    "QueueArn": "existing_queue_arn",
    "DeadLetterQueueArn": "existing_dead_letter_queue_arn",
    "ProcessedEventsTableName": "existing_processed_events_table_name",
    "OrderRecordsTableName": "existing_order_records_table_name",
}
#: Placeholders for a synth without the first stage (the snapshot): shaped like real values.
PLACEHOLDER_ACCOUNT, PLACEHOLDER_REGION = "111111111111", "us-east-1"
_ARN = f"{PLACEHOLDER_REGION}:{PLACEHOLDER_ACCOUNT}"
PLACEHOLDERS: Mapping[str, str] = {
    "existing_key_arn": f"arn:aws:kms:{_ARN}:key/11111111-2222-3333-4444-555555555555",
    "existing_queue_arn": f"arn:aws:sqs:{_ARN}:orders",
    "existing_dead_letter_queue_arn": f"arn:aws:sqs:{_ARN}:orders-dlq",
    "existing_processed_events_table_name": "processed-events",
    "existing_order_records_table_name": "order-records",
}
#: The warnings of imported resources, acknowledged: the existing stage guarantees each of them.
ACKNOWLEDGED_WARNINGS = (
    "existing-queue-unverified",
    "existing-dead-letter-queue-unverified",
    "existing-processed-events-table-unverified",
    "existing-order-records-table-unverified",
    "existing-processed-events-table-index",
)
EXISTING_VISIBILITY_TIMEOUT = cdk.Duration.minutes(3)  # 6x the function's 30 s timeout


class ExistingResourcesStack(cdk.Stack):
    """What the team already runs, shaped as the pipeline needs it (see ``resources.py``)."""

    def __init__(self, scope: Construct, construct_id: str, **kwargs: Any) -> None:
        super().__init__(scope, construct_id, description="Resources of an existing order system", **kwargs)
        key = aws_kms.Key(self, "Key", enable_key_rotation=True, description="Existing order system data")
        # The pipeline stack encrypts its log groups (the function's, the VPC flow logs) with this key.
        permissions.allow_log_encryption(self, key)
        dead_letter_queue = aws_sqs.Queue(
            self,
            "DeadLetterQueue",
            retention_period=cdk.Duration.days(14),
            encryption_master_key=key,
            enforce_ssl=True,
            removal_policy=cdk.RemovalPolicy.DESTROY,
        )
        queue = aws_sqs.Queue(
            self,
            "Queue",
            visibility_timeout=EXISTING_VISIBILITY_TIMEOUT,
            dead_letter_queue=aws_sqs.DeadLetterQueue(queue=dead_letter_queue, max_receive_count=5),
            encryption_master_key=key,
            enforce_ssl=True,
            removal_policy=cdk.RemovalPolicy.DESTROY,
        )
        tables = {}
        for construct_id_, partition_key, ttl in (
            ("ProcessedEventsTable", "event_id", "ttl"),
            ("OrderRecordsTable", "order_id", None),
        ):
            tables[construct_id_] = aws_dynamodb.Table(
                self,
                construct_id_,
                **table_defaults(
                    partition_key=partition_key,
                    time_to_live_attribute=ttl,
                    removal_policy=cdk.RemovalPolicy.DESTROY,
                    encryption_key=key,
                ),
            )
        # The index the pipeline's reconciler and the CLI's pending command query (the pipeline adds it
        # only to a table it creates).
        reconciliation.add_pending_index(tables["ProcessedEventsTable"])
        cdk_nag_acknowledge(dead_letter_queue)
        for output_key, value in (
            ("KeyArn", key.key_arn),
            ("QueueArn", queue.queue_arn),
            ("DeadLetterQueueArn", dead_letter_queue.queue_arn),
            ("ProcessedEventsTableName", tables["ProcessedEventsTable"].table_name),
            ("OrderRecordsTableName", tables["OrderRecordsTable"].table_name),
        ):
            cdk.CfnOutput(self, output_key, value=value)


def cdk_nag_acknowledge(dead_letter_queue: aws_sqs.Queue) -> None:
    nag.acknowledge(
        dead_letter_queue,
        "Serverless",
        "Serverless-SQSRedrivePolicy",
        "This is the dead-letter queue of the existing orders queue; a dead-letter queue of it would "
        "only move the problem.",
    )


@dataclass(frozen=True)
class ExistingResources:
    """The ARNs and names of the existing stage (its outputs, or the placeholders)."""

    key_arn: str
    queue_arn: str
    dead_letter_queue_arn: str
    processed_events_table_name: str
    order_records_table_name: str

    @classmethod
    def from_context(cls, context: Mapping[str, Any]) -> ExistingResources:
        values = {key: str(context.get(key) or PLACEHOLDERS[key]) for key in EXISTING_CONTEXT_KEYS.values()}
        return cls(
            key_arn=values["existing_key_arn"],
            queue_arn=values["existing_queue_arn"],
            dead_letter_queue_arn=values["existing_dead_letter_queue_arn"],
            processed_events_table_name=values["existing_processed_events_table_name"],
            order_records_table_name=values["existing_order_records_table_name"],
        )


class BrownfieldPipelineStack(cdk.Stack):
    """The pipeline on the existing queue, DLQ, tables and key, in a VPC, with overrides."""

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        existing: ExistingResources,
        powertools_layer_arn: str | None = None,
        **kwargs: Any,
    ) -> None:
        super().__init__(scope, construct_id, description="Idempotent order pipeline on existing resources", **kwargs)
        key = aws_kms.Key.from_key_arn(self, "ExistingKey", existing.key_arn)
        vpc = aws_ec2.Vpc(
            self,
            "Vpc",
            max_azs=2,
            nat_gateways=0,  # no internet: the function reaches DynamoDB, SNS and SQS through the endpoints
            subnet_configuration=[
                aws_ec2.SubnetConfiguration(name="isolated", subnet_type=aws_ec2.SubnetType.PRIVATE_ISOLATED)
            ],
        )
        flow_log_group = aws_logs.LogGroup(
            self,
            "VpcFlowLogs",
            retention=aws_logs.RetentionDays.ONE_MONTH,
            removal_policy=cdk.RemovalPolicy.DESTROY,
            encryption_key=key,
        )
        vpc.add_flow_log("FlowLog", destination=aws_ec2.FlowLogDestination.to_cloud_watch_logs(flow_log_group))
        self.pipeline = IdempotentOrderPipeline(
            self,
            "Pipeline",
            existing_queue=aws_sqs.Queue.from_queue_attributes(
                self, "ExistingQueue", queue_arn=existing.queue_arn, key_arn=existing.key_arn
            ),
            existing_dead_letter_queue=aws_sqs.Queue.from_queue_attributes(
                self, "ExistingDeadLetterQueue", queue_arn=existing.dead_letter_queue_arn, key_arn=existing.key_arn
            ),
            existing_processed_events_table=aws_dynamodb.Table.from_table_attributes(
                self, "ExistingProcessedEvents", table_name=existing.processed_events_table_name, encryption_key=key
            ),
            existing_order_records_table=aws_dynamodb.Table.from_table_attributes(
                self, "ExistingOrderRecords", table_name=existing.order_records_table_name, encryption_key=key
            ),
            encryption_key=key,
            topic_props={"display_name": "Orders recorded"},
            function_props={
                "description": "Order consumer (brownfield)",
                "ephemeral_storage_size": cdk.Size.mebibytes(1024),
            },
            vpc=vpc,
            vpc_subnets=aws_ec2.SubnetSelection(subnet_type=aws_ec2.SubnetType.PRIVATE_ISOLATED),
            create_vpc_endpoints=True,
            reserved_concurrency=5,
            removal_policy=cdk.RemovalPolicy.DESTROY,
            powertools_layer=(
                aws_lambda.LayerVersion.from_layer_version_arn(self, "PowertoolsLayer", powertools_layer_arn)
                if powertools_layer_arn
                else None
            ),
        )
        # The existing stage guarantees what the construct cannot check on imported resources.
        for warning_id in ACKNOWLEDGED_WARNINGS:
            Annotations.of(self.pipeline).acknowledge_warning(f"{WARNING_PREFIX}:{warning_id}")
        pipeline = self.pipeline
        for output_key, value in (
            (names.QUEUE_URL_OUTPUT, pipeline.queue.queue_url),
            (names.DEAD_LETTER_QUEUE_URL_OUTPUT, pipeline.dead_letter_queue.queue_url),
            (names.PROCESSED_EVENTS_TABLE_OUTPUT, pipeline.processed_events_table.table_name),
            (names.ORDER_RECORDS_TABLE_OUTPUT, pipeline.order_records_table.table_name),
            (names.TOPIC_ARN_OUTPUT, pipeline.topic.topic_arn),
            (names.FUNCTION_NAME_OUTPUT, pipeline.function.function_name),
        ):
            cdk.CfnOutput(self, output_key, value=value)


def build_app(context: Mapping[str, Any] | None = None, outdir: str | None = None) -> cdk.App:
    """Both stages; ``brownfield`` reads the existing resources from the context (placeholders without)."""
    defaults = json.loads((APP_DIR / "cdk.json").read_text())["context"]
    app = cdk.App(context={**defaults, **(context or {})}, outdir=outdir)
    ExistingResourcesStack(cdk.Stage(app, EXISTING_STAGE), "Existing")
    selected = app.node.try_get_context("env")
    if selected != EXISTING_STAGE:
        pipeline_stage = cdk.Stage(app, PIPELINE_STAGE)
        raw_context = {key: app.node.try_get_context(key) for key in EXISTING_CONTEXT_KEYS.values()}
        BrownfieldPipelineStack(
            pipeline_stage,
            STACK_ID,
            existing=ExistingResources.from_context(raw_context),
            powertools_layer_arn=app.node.try_get_context("powertools_layer_arn") or None,
        )
    nag.add_checks(app)
    return app
