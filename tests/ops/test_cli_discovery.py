"""The CLI finds its pipeline in any stack: a stack of two pipelines, no ``app.py`` outputs.

The stack is created by moto's CloudFormation from a template whose resources carry the metadata
the construct writes (:func:`idempotent_order_pipeline.discovery.mark`; that the construct writes
exactly these marks is tested in ``tests/infra/test_discovery_marks.py``, and the real CDK deploy in
``tests/sandbox/test_discovery_e2e.py``). Every command runs with ``--stack Shop-Prod --pipeline
Returns`` and must touch the Returns pipeline's queues and tables only, never the Orders pipeline's.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import boto3
import pytest
from click.testing import CliRunner, Result
from moto import mock_aws

from idempotent_order_pipeline._lambda_asset.order_consumer.contract.pending_index import (
    PENDING_INDEX_NAME,
    PENDING_SHARD_ATTRIBUTE,
    PENDING_SINCE_ATTRIBUTE,
    pending_shard,
)
from idempotent_order_pipeline.cli import cli
from idempotent_order_pipeline.cli.aws import AwsClients
from idempotent_order_pipeline.discovery import METADATA_KEY, DiscoveredPipeline
from idempotent_order_pipeline.keys import derive_event_id, payload_sha256

STACK = "Shop-Prod"
PIPELINES = {"Orders": "Shop/Orders", "Returns": "Shop/Returns"}
#: The Returns pipeline's function derives keys from two fields (the Orders one: order_id).
RETURNS_IDENTITY_FIELDS = "order_id,customer_id"
ROLE_ARN = "arn:aws:iam::123456789012:role/consumer"


def _marked(path: str, role: str, resource_type: str, properties: dict[str, Any]) -> dict[str, Any]:
    return {
        "Type": resource_type,
        "Properties": properties,
        "Metadata": {METADATA_KEY: {"pipeline": path, "role": role}},
    }


def _table(path: str, role: str, key: str) -> dict[str, Any]:
    properties: dict[str, Any] = {
        "KeySchema": [{"AttributeName": key, "KeyType": "HASH"}],
        "AttributeDefinitions": [{"AttributeName": key, "AttributeType": "S"}],
        "BillingMode": "PAY_PER_REQUEST",
    }
    if role == "processed_events_table":  # the pending index the construct defines (CLI `pending` queries it)
        properties["AttributeDefinitions"] += [
            {"AttributeName": PENDING_SHARD_ATTRIBUTE, "AttributeType": "S"},
            {"AttributeName": PENDING_SINCE_ATTRIBUTE, "AttributeType": "N"},
        ]
        properties["GlobalSecondaryIndexes"] = [
            {
                "IndexName": PENDING_INDEX_NAME,
                "KeySchema": [
                    {"AttributeName": PENDING_SHARD_ATTRIBUTE, "KeyType": "HASH"},
                    {"AttributeName": PENDING_SINCE_ATTRIBUTE, "KeyType": "RANGE"},
                ],
                "Projection": {"ProjectionType": "KEYS_ONLY"},
            }
        ]
    return _marked(path, role, "AWS::DynamoDB::Table", properties)


def pipeline_resources(name: str, path: str, identity: str = "order_id") -> dict[str, Any]:
    """One pipeline's six marked resources, their logical ids prefixed with ``name``."""
    return {
        f"{name}Dlq": _marked(path, "dead_letter_queue", "AWS::SQS::Queue", {}),
        f"{name}Queue": _marked(
            path,
            "queue",
            "AWS::SQS::Queue",
            {"RedrivePolicy": {"deadLetterTargetArn": {"Fn::GetAtt": [f"{name}Dlq", "Arn"]}, "maxReceiveCount": 3}},
        ),
        f"{name}Events": _table(path, "processed_events_table", "event_id"),
        f"{name}Rows": _table(path, "order_records_table", "order_id"),
        f"{name}Topic": _marked(path, "topic", "AWS::SNS::Topic", {}),
        f"{name}Function": _marked(
            path,
            "function",
            "AWS::Lambda::Function",
            {
                "Runtime": "python3.12",
                "Handler": "index.handler",
                "Role": ROLE_ARN,
                "Code": {"ZipFile": "def handler(event, context):\n    return {}\n"},
                "Environment": {"Variables": {"IDENTITY_FIELDS": identity}},
            },
        ),
    }


def two_pipeline_template() -> dict[str, Any]:
    """Two pipelines' marked resources in one stack, and one output named the app's own way."""
    resources: dict[str, Any] = {}
    for name, path in PIPELINES.items():
        resources |= pipeline_resources(name, path, RETURNS_IDENTITY_FIELDS if name == "Returns" else "order_id")
    return {"Resources": resources, "Outputs": {"ShopOrdersInbox": {"Value": {"Ref": "OrdersQueue"}}}}


@dataclass
class Shop:
    """The deployed two-pipeline stack: each pipeline's physical ids by role, and the clients."""

    resources: dict[str, dict[str, str]]
    sqs: Any
    dynamodb: Any

    def run(self, *args: str, input: str | None = None) -> Result:
        return CliRunner().invoke(cli, ["--stack", STACK, *args], input=input, obj=AwsClients())

    def messages(self, queue_url: str) -> list[dict[str, Any]]:
        """Every message of the queue, left in it."""
        found: dict[str, dict[str, Any]] = {}
        while batch := self.sqs.receive_message(
            QueueUrl=queue_url, MaxNumberOfMessages=10, MessageAttributeNames=["All"], VisibilityTimeout=30
        ).get("Messages", []):
            found.update((message["MessageId"], message) for message in batch)
        for message in found.values():
            self.sqs.change_message_visibility(
                QueueUrl=queue_url, ReceiptHandle=message["ReceiptHandle"], VisibilityTimeout=0
            )
        return list(found.values())

    def record(self, pipeline: str, order: dict[str, Any], *, status: str, age_seconds: int = 0) -> str:
        """A state record and an order row in ``pipeline``'s tables, as the consumer writes them."""
        event_id = derive_event_id(order)
        created = int(time.time()) - age_seconds
        tables = self.resources[pipeline]
        self.dynamodb.put_item(
            TableName=tables["processed_events_table"],
            Item={
                "event_id": {"S": event_id},
                "status": {"S": status},
                "order_id": {"S": order["order_id"]},
                "payload_sha256": {"S": payload_sha256(order)},
                "created_at": {"N": str(created)},
                # a pending record in the index (a sent one here as 0.2.0 left it: out of the index)
                **({PENDING_SHARD_ATTRIBUTE: {"S": pending_shard(event_id)}} if status == "pending" else {}),
            },
        )
        self.dynamodb.put_item(
            TableName=tables["order_records_table"],
            Item={
                "order_id": {"S": order["order_id"]},
                "event_id": {"S": event_id},
                "payload_sha256": {"S": payload_sha256(order)},
                **{name: {"S": str(value)} for name, value in order.items() if name != "order_id"},
            },
        )
        return event_id


@pytest.fixture
def shop() -> Iterator[Shop]:
    with mock_aws():
        boto3.client("iam").create_role(
            RoleName="consumer", AssumeRolePolicyDocument=json.dumps({"Version": "2012-10-17", "Statement": []})
        )
        cloudformation = boto3.client("cloudformation")
        cloudformation.create_stack(StackName=STACK, TemplateBody=json.dumps(two_pipeline_template()))
        template = cloudformation.get_template(StackName=STACK)["TemplateBody"]
        summaries = cloudformation.list_stack_resources(StackName=STACK)["StackResourceSummaries"]
        resources: dict[str, dict[str, str]] = {name: {} for name in PIPELINES}
        for summary in summaries:
            mark = template["Resources"][summary["LogicalResourceId"]]["Metadata"][METADATA_KEY]
            name = next(n for n, path in PIPELINES.items() if path == mark["pipeline"])
            resources[name][mark["role"]] = summary["PhysicalResourceId"]
        assert all(len(roles) == 6 for roles in resources.values()), resources
        yield Shop(resources=resources, sqs=boto3.client("sqs"), dynamodb=boto3.client("dynamodb"))


def test_moto_cloudformation_keeps_resource_metadata(shop: Shop) -> None:
    # GIVEN the stack created from the marked template
    # WHEN its template is read back
    template = boto3.client("cloudformation").get_template(StackName=STACK)["TemplateBody"]
    # THEN every resource still carries its mark (what discovery reads in a real stack too)
    marks = [resource["Metadata"][METADATA_KEY] for resource in template["Resources"].values()]
    assert sorted({mark["pipeline"] for mark in marks}) == ["Shop/Orders", "Shop/Returns"]
    assert len(marks) == 12


def test_pipelines_lists_both_with_their_resources(shop: Shop) -> None:
    # WHEN the stack's pipelines are listed
    result = shop.run("pipelines", "--json")
    # THEN both are there, each with the physical ids of its six resources
    assert result.exit_code == 0, result.output
    listed = [json.loads(line) for line in result.stdout.splitlines()]
    assert [entry.pop("pipeline") for entry in listed] == ["Shop/Orders", "Shop/Returns"]
    assert [entry.pop("id") for entry in listed] == ["Orders", "Returns"]
    assert listed == [shop.resources["Orders"], shop.resources["Returns"]]
    # AND the text form names each path and queue URL
    text = shop.run("pipelines").stdout
    assert "Shop/Returns\n" in text
    assert shop.resources["Returns"]["queue"] in text


def test_a_stack_with_two_pipelines_needs_pipeline(shop: Shop) -> None:
    # WHEN a command runs without --pipeline
    result = shop.run("dlq", "list", "--wait-seconds", "0")
    # THEN it fails, naming both pipelines and the option
    assert result.exit_code == 1
    assert "holds 2 pipelines: Shop/Orders, Shop/Returns; pick one with --pipeline" in result.output


def test_an_unknown_pipeline_is_an_error_listing_the_pipelines(shop: Shop) -> None:
    result = shop.run("--pipeline", "Refunds", "dlq", "list", "--wait-seconds", "0")
    assert result.exit_code == 1
    assert "has no pipeline 'Refunds'; its pipelines: Shop/Orders, Shop/Returns" in result.output


@pytest.mark.parametrize("selector", ["Returns", "Shop/Returns", "prod/Shop/Returns"])
def test_send_goes_to_the_selected_pipeline_with_its_identity_fields(shop: Shop, selector: str) -> None:
    # GIVEN an order without event_id
    order = {"order_id": "r-1", "customer_id": "c-1", "amount": 5}
    # WHEN it is sent to the Returns pipeline (by id, by path in the stack, by full path)
    result = shop.run("--pipeline", selector, "send", "-", "--json", input=json.dumps(order) + "\n")
    # THEN it is in the Returns queue only, keyed by the Returns function's IDENTITY_FIELDS
    assert result.exit_code == 0, result.output
    [message] = shop.messages(shop.resources["Returns"]["queue"])
    assert json.loads(message["Body"])["event_id"] == derive_event_id(order, ("order_id", "customer_id"))
    assert shop.messages(shop.resources["Orders"]["queue"]) == []
    assert f"from function {shop.resources['Returns']['function']}" in result.stderr


def test_inspect_reads_the_selected_pipelines_tables(shop: Shop) -> None:
    # GIVEN one order recorded by each pipeline under the same order id
    returned = {"order_id": "o-7", "customer_id": "c-1", "kind": "return"}
    shop.record("Orders", {"order_id": "o-7", "customer_id": "c-1", "kind": "order"}, status="sent")
    event_id = shop.record("Returns", returned, status="sent")
    # WHEN it is inspected in the Returns pipeline
    result = shop.run("--pipeline", "Returns", "inspect", "--order", "o-7", "--json")
    # THEN the Returns tables answered
    assert result.exit_code == 0, result.output
    report = json.loads(result.stdout)
    assert (report["event_id"], report["notified"], report["order_row"]["kind"]) == (event_id, True, "return")


def _park(shop: Shop, pipeline: str, order_id: str) -> None:
    shop.sqs.send_message(
        QueueUrl=shop.resources[pipeline]["dead_letter_queue"],
        MessageBody=json.dumps({"order_id": order_id, "event_id": f"e-{order_id}"}),
        MessageAttributes={"error_code": {"DataType": "String", "StringValue": "INVALID_MESSAGE"}},
    )


def test_dlq_list_drop_and_redrive_touch_the_selected_pipeline_only(shop: Shop) -> None:
    # GIVEN a parked message in each pipeline's DLQ, two in Returns'
    _park(shop, "Orders", "o-1")
    _park(shop, "Returns", "r-1")
    _park(shop, "Returns", "r-2")
    returns = ["--pipeline", "Returns"]
    # WHEN the Returns DLQ is listed
    listed = shop.run(*returns, "dlq", "list", "--json", "--wait-seconds", "0")
    # THEN it shows the Returns messages only
    assert listed.exit_code == 0, listed.output
    assert sorted(json.loads(line)["order_id"] for line in listed.stdout.splitlines()) == ["r-1", "r-2"]
    # WHEN one is dropped and the rest redriven
    dropped = shop.run(*returns, "dlq", "drop", "--order-id", "r-1", "--yes", "--wait-seconds", "0")
    redriven = shop.run(*returns, "redrive", "--yes", "--method", "loop", "--wait-seconds", "0")
    # THEN r-2 is back in the Returns queue, the Returns DLQ is empty
    assert (dropped.exit_code, redriven.exit_code) == (0, 0), dropped.output + redriven.output
    assert [json.loads(m["Body"])["order_id"] for m in shop.messages(shop.resources["Returns"]["queue"])] == ["r-2"]
    assert shop.messages(shop.resources["Returns"]["dead_letter_queue"]) == []
    # AND the Orders pipeline was not touched
    assert [
        json.loads(m["Body"])["order_id"] for m in shop.messages(shop.resources["Orders"]["dead_letter_queue"])
    ] == ["o-1"]
    assert shop.messages(shop.resources["Orders"]["queue"]) == []


def test_pending_finds_and_resends_in_the_selected_pipeline(shop: Shop) -> None:
    # GIVEN an old pending record in each pipeline
    shop.record("Orders", {"order_id": "o-1", "amount": "1"}, status="pending", age_seconds=3600)
    event_id = shop.record("Returns", {"order_id": "r-1", "amount": "2"}, status="pending", age_seconds=3600)
    # WHEN the Returns pipeline's pending records are listed and resent
    result = shop.run("--pipeline", "Returns", "pending", "--older-than", "10m", "--resend", "--yes", "--json")
    # THEN only the Returns record is found, and its order is back in the Returns queue
    assert result.exit_code == 0, result.output
    [found] = [json.loads(line) for line in result.stdout.splitlines()]
    assert (found["event_id"], found["resent"]) == (event_id, True)
    [message] = shop.messages(shop.resources["Returns"]["queue"])
    assert json.loads(message["Body"])["event_id"] == event_id
    assert shop.messages(shop.resources["Orders"]["queue"]) == []


def test_explicit_options_override_discovery(shop: Shop) -> None:
    # GIVEN the Returns pipeline selected, but the Orders queue given explicitly
    order = {"order_id": "x-1", "event_id": "e-x-1"}
    # WHEN an order is sent
    result = shop.run(
        "--pipeline", "Returns", "--queue-url", shop.resources["Orders"]["queue"], "send", "-", input=json.dumps(order)
    )
    # THEN it went to the explicit queue
    assert result.exit_code == 0, result.output
    assert [json.loads(m["Body"])["order_id"] for m in shop.messages(shop.resources["Orders"]["queue"])] == ["x-1"]
    assert shop.messages(shop.resources["Returns"]["queue"]) == []


def test_explicit_options_need_no_stack(shop: Shop) -> None:
    # GIVEN tables given explicitly and a stack name that does not exist
    event_id = shop.record("Returns", {"order_id": "r-9"}, status="sent")
    tables = shop.resources["Returns"]
    # WHEN inspect runs with them
    result = CliRunner().invoke(
        cli,
        [
            "--stack",
            "No-Such-Stack",
            "--processed-events-table",
            tables["processed_events_table"],
            "--order-records-table",
            tables["order_records_table"],
            "inspect",
            event_id,
            "--json",
        ],
        obj=AwsClients(),
    )
    # THEN it answers from those tables without asking CloudFormation
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)["order_id"] == "r-9"


def test_a_stack_without_pipelines_says_so(shop: Shop) -> None:
    # GIVEN a stack with no marked resource and no app.py outputs
    boto3.client("cloudformation").create_stack(
        StackName="Plain", TemplateBody=json.dumps({"Resources": {"Q": {"Type": "AWS::SQS::Queue"}}})
    )
    # WHEN its pipelines are listed, or a command needs one
    listed = CliRunner().invoke(cli, ["--stack", "Plain", "pipelines"], obj=AwsClients())
    listing = CliRunner().invoke(cli, ["--stack", "Plain", "dlq", "list"], obj=AwsClients())
    # THEN both fail saying the stack holds no pipeline (not that it was deployed before 0.2.0), and what to do
    no_pipeline = (
        "Error: stack 'Plain' holds no IdempotentOrderPipeline: none of its resources carries the construct's "
        "'idempotent_order_pipeline' metadata and it has none of the outputs a pipeline stack of 0.1.0 had; pass the "
        "stack that holds the pipeline as --stack NAME\n"
    )
    assert (listed.exit_code, listed.output) == (1, no_pipeline)
    assert (listing.exit_code, listing.output) == (1, no_pipeline)


def test_a_stack_deployed_before_0_2_0_is_named_so(shop: Shop) -> None:
    # GIVEN a stack with app.py's outputs of 0.1.0 and no marked resource
    template = {
        "Resources": {"Q": {"Type": "AWS::SQS::Queue"}},
        "Outputs": {"QueueUrl": {"Value": {"Ref": "Q"}}},
    }
    boto3.client("cloudformation").create_stack(StackName="Old", TemplateBody=json.dumps(template))
    # WHEN its pipelines are listed
    listed = CliRunner().invoke(cli, ["--stack", "Old", "pipelines"], obj=AwsClients())
    # THEN it is named a stack of a version before 0.2.0, read through its outputs
    assert listed.exit_code == 1
    assert "was deployed with a version before 0.2.0" in listed.output
    assert "the other commands read its outputs" in listed.output


def test_resources_handed_in_are_found_through_the_function() -> None:
    with mock_aws():
        # GIVEN a queue, DLQ, tables and topic that exist outside the stack (existing_queue=... and
        # the like), so only the function carries a mark
        sqs, sns, dynamodb = boto3.client("sqs"), boto3.client("sns"), boto3.client("dynamodb")
        dlq_url = sqs.create_queue(QueueName="legacy-dlq")["QueueUrl"]
        queue_url = sqs.create_queue(QueueName="legacy-orders")["QueueUrl"]
        queue_arn = sqs.get_queue_attributes(QueueUrl=queue_url, AttributeNames=["QueueArn"])["Attributes"]["QueueArn"]
        topic_arn = sns.create_topic(Name="legacy-topic")["TopicArn"]
        for name, key in (("legacy-events", "event_id"), ("legacy-rows", "order_id")):
            dynamodb.create_table(
                TableName=name,
                KeySchema=[{"AttributeName": key, "KeyType": "HASH"}],
                AttributeDefinitions=[{"AttributeName": key, "AttributeType": "S"}],
                BillingMode="PAY_PER_REQUEST",
            )
        boto3.client("iam").create_role(
            RoleName="consumer", AssumeRolePolicyDocument=json.dumps({"Version": "2012-10-17", "Statement": []})
        )
        variables = {
            "PROCESSED_EVENTS_TABLE": "legacy-events",
            "ORDER_RECORDS_TABLE": "legacy-rows",
            "TOPIC_ARN": topic_arn,
            "DEAD_LETTER_QUEUE_URL": dlq_url,
        }
        template = {
            "Resources": {
                "Consumer": _marked(
                    "Shop/Orders",
                    "function",
                    "AWS::Lambda::Function",
                    {
                        "Runtime": "python3.12",
                        "Handler": "index.handler",
                        "Role": ROLE_ARN,
                        "Code": {"ZipFile": "def handler(event, context):\n    return {}\n"},
                        "Environment": {"Variables": variables},
                    },
                )
            }
        }
        cloudformation = boto3.client("cloudformation")
        cloudformation.create_stack(StackName=STACK, TemplateBody=json.dumps(template))
        [summary] = cloudformation.list_stack_resources(StackName=STACK)["StackResourceSummaries"]
        boto3.client("lambda").create_event_source_mapping(
            EventSourceArn=queue_arn, FunctionName=summary["PhysicalResourceId"]
        )
        # WHEN the pipeline is listed
        result = CliRunner().invoke(cli, ["--stack", STACK, "pipelines", "--json"], obj=AwsClients())
        # THEN every handed-in resource comes from the function's environment and event source
        assert result.exit_code == 0, result.output
        [listed] = [json.loads(line) for line in result.stdout.splitlines()]
        assert listed["queue"] == queue_url
        assert listed["dead_letter_queue"] == dlq_url
        assert listed["processed_events_table"] == "legacy-events"
        assert listed["order_records_table"] == "legacy-rows"
        assert listed["topic"] == topic_arn


# --- nested construct paths --------------------------------------------------------------------------

NESTED_STACK = "Shop-Nested"
#: Two pipelines with one construct id: one at the stack's top level, one inside a construct.
NESTED = {"Top": "Orders", "Sales": "Sales/Orders"}


@pytest.fixture
def nested() -> Iterator[dict[str, dict[str, str]]]:
    """The stack of NESTED's pipelines, deployed: each pipeline's physical ids by role."""
    with mock_aws():
        boto3.client("iam").create_role(
            RoleName="consumer", AssumeRolePolicyDocument=json.dumps({"Version": "2012-10-17", "Statement": []})
        )
        resources: dict[str, Any] = {}
        for name, path in NESTED.items():
            resources |= pipeline_resources(name, path)
        cloudformation = boto3.client("cloudformation")
        cloudformation.create_stack(StackName=NESTED_STACK, TemplateBody=json.dumps({"Resources": resources}))
        ids: dict[str, dict[str, str]] = {path: {} for path in NESTED.values()}
        for summary in cloudformation.list_stack_resources(StackName=NESTED_STACK)["StackResourceSummaries"]:
            mark = resources[summary["LogicalResourceId"]]["Metadata"][METADATA_KEY]
            ids[mark["pipeline"]][mark["role"]] = summary["PhysicalResourceId"]
        yield ids


def _run_nested(*args: str) -> Result:
    return CliRunner().invoke(cli, ["--stack", NESTED_STACK, *args], obj=AwsClients())


def test_pipelines_lists_nested_pipelines_with_their_resources(nested: dict[str, dict[str, str]]) -> None:
    # WHEN the stack's pipelines are listed (with the global --json)
    result = _run_nested("--json", "pipelines")
    # THEN both are there, each with all six of its own resources
    assert result.exit_code == 0, result.output
    listed = {entry.pop("pipeline"): entry for entry in map(json.loads, result.stdout.splitlines())}
    assert listed == {path: {"id": "Orders", **ids} for path, ids in nested.items()}


@pytest.mark.parametrize(
    ("selector", "chosen"),
    [
        ("Orders", "Orders"),
        ("Sales/Orders", "Sales/Orders"),
        ("prod/Shop/Sales/Orders", "Sales/Orders"),
        ("prod/Shop/Orders", "Orders"),
    ],
)
def test_each_nested_pipeline_is_selected_by_its_own_path(
    nested: dict[str, dict[str, str]], selector: str, chosen: str
) -> None:
    # GIVEN a dead letter in each pipeline's DLQ, named after its pipeline
    sqs = boto3.client("sqs")
    for path, ids in nested.items():
        sqs.send_message(QueueUrl=ids["dead_letter_queue"], MessageBody=json.dumps({"order_id": path}))
    # WHEN one pipeline's DLQ is listed
    result = _run_nested("--pipeline", selector, "dlq", "list", "--json", "--wait-seconds", "0")
    # THEN it is the selected pipeline's, and only its
    assert result.exit_code == 0, result.output
    assert [json.loads(line)["order_id"] for line in result.stdout.splitlines()] == [chosen]


def test_a_construct_id_two_nested_pipelines_share_is_ambiguous() -> None:
    from idempotent_order_pipeline.discovery import select

    # GIVEN two nested pipelines with one construct id, none at the top level
    pipelines = [DiscoveredPipeline(path="Returns/Orders"), DiscoveredPipeline(path="Sales/Orders")]
    # WHEN selected by path, THEN each is found; by the shared construct id, both are (ambiguous)
    assert select(pipelines, "Sales/Orders") == [pipelines[1]]
    assert select(pipelines, "eu/Shop/Returns/Orders") == [pipelines[0]]
    assert select(pipelines, "Orders") == pipelines
    assert select(pipelines, "Refunds") == []


def test_an_ambiguous_selector_is_an_error_naming_the_paths(nested: dict[str, dict[str, str]]) -> None:
    # GIVEN a third pipeline with the construct id Orders, nested elsewhere
    cloudformation = boto3.client("cloudformation")
    resources = {**pipeline_resources("Returns", "Returns/Orders"), **pipeline_resources("Sales", "Sales/Orders")}
    cloudformation.create_stack(StackName="Shop-Twins", TemplateBody=json.dumps({"Resources": resources}))
    # WHEN a command selects by the construct id the two share
    result = CliRunner().invoke(cli, ["--stack", "Shop-Twins", "--pipeline", "Orders", "dlq", "list"], obj=AwsClients())
    # THEN it fails naming both paths and how to pick one
    assert result.exit_code == 1
    assert "holds 2 pipelines matching 'Orders': Returns/Orders, Sales/Orders; pick one with --pipeline PATH" in (
        result.stderr
    )
