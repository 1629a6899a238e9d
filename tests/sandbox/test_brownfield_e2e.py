"""End to end, brownfield: the existing resources deployed by one stage, the pipeline on them by another.

Both with the real CDK CLI onto the local endpoint (``idempotent_order_pipeline.sandbox.brownfield``): the
pipeline stage imports the first stage's queue, dead-letter queue, tables and key by the ARNs and
names it output (passed as context, as a separate repository would), runs in a VPC with the
service endpoints, and overrides the topic's and function's props. Orders then go through it with
crashes, and the invariants are read from the endpoint: the rows are in the *existing* tables.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from idempotent_order_pipeline.sandbox import brownfield
from idempotent_order_pipeline.sandbox.demo import ChaosOptions, Sandbox, SandboxOptions, run_chaos

pytestmark = pytest.mark.e2e


def test_brownfield_pipeline_on_existing_resources_keeps_every_invariant(tmp_path: Path) -> None:
    # GIVEN the existing resources deployed first, then the pipeline importing them, both by `cdk deploy`
    options = SandboxOptions(
        stage=brownfield.PIPELINE_STAGE,
        app_dir=brownfield.APP_DIR,
        work_dir=tmp_path,
        concurrency=2,
        crash_rate=0.3,
        crash_seed=11,
        visibility_timeout=2,
        prerequisite_stage=brownfield.EXISTING_STAGE,
        prerequisite_outputs=brownfield.EXISTING_CONTEXT_KEYS,
    )
    with Sandbox(options) as sandbox:
        assert sandbox.prerequisite is not None
        existing, outputs = sandbox.prerequisite.outputs, sandbox.deployment.outputs
        endpoint = sandbox.endpoint
        # THEN the pipeline stack created no queue and no table: it uses the existing ones
        created = {resource["Type"] for resource in sandbox.deployment.template["Resources"].values()}
        assert "AWS::SQS::Queue" not in created
        assert "AWS::DynamoDB::Table" not in created
        assert {"AWS::EC2::VPCEndpoint", "AWS::Lambda::Function", "AWS::SNS::Topic"} <= created
        sqs = endpoint.client("sqs")
        queue_arn = sqs.get_queue_attributes(QueueUrl=outputs["QueueUrl"], AttributeNames=["QueueArn"])
        assert queue_arn["Attributes"]["QueueArn"] == existing["QueueArn"]
        assert outputs["ProcessedEventsTableName"] == existing["ProcessedEventsTableName"]
        assert outputs["OrderRecordsTableName"] == existing["OrderRecordsTableName"]
        # AND the deployed function carries the overrides and reads the existing tables and DLQ
        function = endpoint.client("lambda").get_function(FunctionName=outputs["FunctionName"])["Configuration"]
        assert function["Description"] == "Order consumer (brownfield)"
        variables = function["Environment"]["Variables"]
        assert variables["PROCESSED_EVENTS_TABLE"] == existing["ProcessedEventsTableName"]
        assert variables["ORDER_RECORDS_TABLE"] == existing["OrderRecordsTableName"]
        dlq_arn = sqs.get_queue_attributes(QueueUrl=variables["DEAD_LETTER_QUEUE_URL"], AttributeNames=["QueueArn"])
        assert dlq_arn["Attributes"]["QueueArn"] == existing["DeadLetterQueueArn"]
        # AND it reaches the interface endpoints by their own DNS names (private DNS off), which the stand-in
        # leaves aside for its one endpoint
        endpoints = endpoint.client("ec2").describe_vpc_endpoints()["VpcEndpoints"]
        names = {
            e["ServiceName"].rsplit(".", 1)[1]: e["DnsEntries"][0]["DnsName"] for e in endpoints if e["DnsEntries"]
        }
        assert {variables["AWS_ENDPOINT_URL_SQS"], variables["AWS_ENDPOINT_URL_SNS"]} == {
            f"https://{names['sqs']}",
            f"https://{names['sns']}",
        }
        assert all(e["PrivateDnsEnabled"] is False for e in endpoints if e["VpcEndpointType"] == "Interface")

        # WHEN orders, re-sends, conflicts and invalid messages go through it with crashes
        run = run_chaos(sandbox, ChaosOptions(orders=30, seed=11))

        # THEN the queue drained and every invariant held (one row per event in the existing tables,
        # every event sent and announced, exactly the invalid and conflicting messages parked)
        assert run.drained
        assert run.stats.unexpected_errors == []
        assert run.stats.crashes_injected >= 1
        assert run.result.violations == []
        assert run.result.figures
        orders = endpoint.client("dynamodb").scan(TableName=existing["OrderRecordsTableName"], Select="COUNT")
        assert orders["Count"] == len({m.event_id for m in run.plan.messages if m.kind != "invalid"})
