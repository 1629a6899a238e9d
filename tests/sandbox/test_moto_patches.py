"""The sandbox's moto fixes (``moto_patches``, ``moto_cloudformation``), each beside moto's own behaviour."""

from __future__ import annotations

import base64
import copy
import datetime
import hashlib
import io
import json
import re
import time
import zipfile
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import boto3
import pytest
from botocore.exceptions import ClientError
from moto import mock_aws
from moto.dynamodb.models import DynamoDBBackend, dynamodb_backends
from moto.dynamodb.models.table import Table
from moto.sqs.models import sqs_backends

from idempotent_order_pipeline.sandbox import moto_cloudformation, moto_patches
from idempotent_order_pipeline.sandbox.deploy import (
    CDK_TIMEOUT_SECONDS,
    DeployError,
    bootstrap,
    publish_powertools_layer,
    publish_powertools_parameter,
    run_cdk,
)
from idempotent_order_pipeline.sandbox.moto_stack_resources import is_skipped_physical_id
from idempotent_order_pipeline.sandbox.server import SandboxServerProcess
from tests.sandbox.cfn_shapes import DEPLOYED_RESOURCE_STATUSES, shape_problems

ACCOUNT = "123456789012"
REGION = "eu-west-1"


@pytest.fixture
def ddb() -> Iterator[Any]:
    moto_patches.apply()
    try:
        with mock_aws():
            client = boto3.client("dynamodb", region_name=REGION)
            client.create_table(
                TableName="events",
                KeySchema=[{"AttributeName": "pk", "KeyType": "HASH"}],
                AttributeDefinitions=[{"AttributeName": "pk", "AttributeType": "S"}],
                BillingMode="PAY_PER_REQUEST",
            )
            client.create_table(
                TableName="lines",
                KeySchema=[{"AttributeName": "pk", "KeyType": "HASH"}, {"AttributeName": "sk", "KeyType": "RANGE"}],
                AttributeDefinitions=[
                    {"AttributeName": "pk", "AttributeType": "S"},
                    {"AttributeName": "sk", "AttributeType": "S"},
                ],
                BillingMode="PAY_PER_REQUEST",
            )
            yield client
    finally:
        moto_patches.revert()


def _backend() -> DynamoDBBackend:
    return dynamodb_backends[ACCOUNT][REGION]


def _everything(client: Any) -> dict[str, list[dict[str, Any]]]:
    return {
        name: sorted(client.scan(TableName=name)["Items"], key=lambda item: str(sorted(item.items())))
        for name in ("events", "lines")
    }


def _seed(client: Any) -> None:
    client.put_item(TableName="events", Item={"pk": {"S": "a"}, "n": {"N": "1"}, "tags": {"SS": ["x"]}})
    client.put_item(TableName="events", Item={"pk": {"S": "b"}, "n": {"N": "2"}})
    client.put_item(TableName="lines", Item={"pk": {"S": "o1"}, "sk": {"S": "1"}, "qty": {"N": "3"}})


def _mixed_transaction(last_condition: str) -> list[dict[str, Any]]:
    """Update, Put (new), Delete, Put into a range-key table (new hash and new range), then a check."""
    return [
        {
            "Update": {
                "TableName": "events",
                "Key": {"pk": {"S": "a"}},
                "UpdateExpression": "SET n = n + :one ADD tags :more",
                "ExpressionAttributeValues": {":one": {"N": "1"}, ":more": {"SS": ["y"]}},
            }
        },
        {"Put": {"TableName": "events", "Item": {"pk": {"S": "c"}, "n": {"N": "9"}}}},
        {"Delete": {"TableName": "events", "Key": {"pk": {"S": "b"}}}},
        {"Put": {"TableName": "lines", "Item": {"pk": {"S": "o1"}, "sk": {"S": "2"}, "qty": {"N": "1"}}}},
        {"Put": {"TableName": "lines", "Item": {"pk": {"S": "o2"}, "sk": {"S": "1"}, "qty": {"N": "1"}}}},
        {
            "ConditionCheck": {
                "TableName": "lines",
                "Key": {"pk": {"S": "o1"}, "sk": {"S": "1"}},
                "ConditionExpression": last_condition,
            }
        },
    ]


def test_cancelled_transaction_leaves_every_touched_item_as_it_was(ddb: Any) -> None:
    # GIVEN items that the transaction will update, delete, and place new items beside
    _seed(ddb)
    before = _everything(ddb)
    tables_before = dict(_backend().tables)
    # WHEN every write is applied inside moto and then the last item's condition fails
    with pytest.raises(ClientError) as raised:
        ddb.transact_write_items(TransactItems=_mixed_transaction("attribute_not_exists(pk)"))
    # THEN it is cancelled with moto's usual reasons, and every item is exactly as before
    assert raised.value.response["Error"]["Code"] == "TransactionCanceledException"
    codes = [reason["Code"] for reason in raised.value.response["CancellationReasons"]]
    assert codes == ["None"] * 5 + ["ConditionalCheckFailed"]
    assert _everything(ddb) == before
    # AND the live table objects were kept (not swapped for copies)
    assert all(_backend().tables[name] is table for name, table in tables_before.items())
    # AND the range-key table has no leftover empty partition for the new hash key "o2"
    assert [key.value for key in _backend().tables["lines"].items] == ["o1"]


def test_cancellation_in_the_middle_still_undoes_the_writes_before_and_after_it(ddb: Any) -> None:
    # GIVEN the seeded items
    _seed(ddb)
    before = _everything(ddb)
    items = _mixed_transaction("attribute_exists(pk)")
    # AND a failing condition on the second item (moto evaluates and applies the later ones anyway)
    items[1]["Put"]["ConditionExpression"] = "attribute_exists(pk)"
    # WHEN the transaction runs
    with pytest.raises(ClientError) as raised:
        ddb.transact_write_items(TransactItems=items)
    # THEN only that item is reported, and nothing was written
    codes = [reason["Code"] for reason in raised.value.response["CancellationReasons"]]
    assert codes == ["None", "ConditionalCheckFailed", "None", "None", "None", "None"]
    assert _everything(ddb) == before


def test_validation_error_rolls_back_the_items_already_written(ddb: Any) -> None:
    # GIVEN the seeded items
    _seed(ddb)
    before = _everything(ddb)
    # WHEN the second item is invalid (a number where the key is a string), after the first applied
    with pytest.raises(ClientError) as raised:
        ddb.transact_write_items(
            TransactItems=[
                {"Put": {"TableName": "events", "Item": {"pk": {"S": "c"}}}},
                {"Put": {"TableName": "events", "Item": {"pk": {"N": "1"}}}},
            ]
        )
    # THEN DynamoDB's validation error surfaces and the first write is undone
    assert raised.value.response["Error"]["Code"] == "ValidationException"
    assert _everything(ddb) == before


def test_successful_transaction_applies_every_item(ddb: Any) -> None:
    # GIVEN the seeded items
    _seed(ddb)
    # WHEN every condition holds
    ddb.transact_write_items(TransactItems=_mixed_transaction("attribute_exists(pk)"))
    # THEN every write is visible
    events = {item["pk"]["S"]: item for item in ddb.scan(TableName="events")["Items"]}
    assert set(events) == {"a", "c"}
    assert events["a"]["n"] == {"N": "2"}
    assert sorted(events["a"]["tags"]["SS"]) == ["x", "y"]
    lines = {(item["pk"]["S"], item["sk"]["S"]) for item in ddb.scan(TableName="lines")["Items"]}
    assert lines == {("o1", "1"), ("o1", "2"), ("o2", "1")}


def test_cancellation_reasons_carry_the_existing_item_with_all_old(ddb: Any) -> None:
    # GIVEN an existing item (the consumer's duplicate path reads it from the cancellation)
    _seed(ddb)
    # WHEN a conditional put collides with it and asks for ALL_OLD
    with pytest.raises(ClientError) as raised:
        ddb.transact_write_items(
            TransactItems=[
                {"Put": {"TableName": "events", "Item": {"pk": {"S": "new"}}}},
                {
                    "Put": {
                        "TableName": "events",
                        "Item": {"pk": {"S": "b"}, "n": {"N": "5"}},
                        "ConditionExpression": "attribute_not_exists(pk)",
                        "ReturnValuesOnConditionCheckFailure": "ALL_OLD",
                    }
                },
            ]
        )
    # THEN the reason for that item holds the item as stored, and the first put was undone
    reasons = raised.value.response["CancellationReasons"]
    assert reasons[0] == {"Code": "None"}
    assert reasons[1]["Code"] == "ConditionalCheckFailed"
    assert reasons[1]["Item"] == {"pk": {"S": "b"}, "n": {"N": "2"}}
    assert "Item" not in ddb.get_item(TableName="events", Key={"pk": {"S": "new"}})


def _deepcopies_per_cancelled_transaction(ddb: Any, monkeypatch: pytest.MonkeyPatch, rows: int) -> list[type]:
    for index in range(rows):
        ddb.put_item(TableName="events", Item={"pk": {"S": f"row-{rows}-{index}"}})
    copied: list[type] = []
    real_deepcopy = copy.deepcopy

    def spy(value: Any, *args: Any, **kwargs: Any) -> Any:
        copied.append(type(value))
        return real_deepcopy(value, *args, **kwargs)

    monkeypatch.setattr(copy, "deepcopy", spy)
    with pytest.raises(ClientError):
        ddb.transact_write_items(TransactItems=_mixed_transaction("attribute_not_exists(pk)"))
    monkeypatch.setattr(copy, "deepcopy", real_deepcopy)
    return copied


def test_cost_does_not_depend_on_table_size(ddb: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    # GIVEN the same cancelled transaction against a small and then a 50x larger table
    _seed(ddb)
    small = _deepcopies_per_cancelled_transaction(ddb, monkeypatch, rows=4)
    large = _deepcopies_per_cancelled_transaction(ddb, monkeypatch, rows=200)
    # THEN no table is ever deep-copied, and the copies made do not grow with the table
    assert Table not in small + large
    assert len(small) == len(large)


def test_moto_alone_copies_whole_tables(ddb: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    # GIVEN moto's own method (the reason this module exists; if this fails, moto changed: re-check)
    moto_patches.revert()
    _seed(ddb)
    # WHEN the same cancelled transaction runs
    copied = _deepcopies_per_cancelled_transaction(ddb, monkeypatch, rows=4)
    # THEN moto deep-copies the whole table once per transaction item (6 items here)
    assert copied.count(Table) == 6


def test_apply_is_idempotent_and_revert_restores_moto() -> None:
    # GIVEN the fix applied twice
    moto_patches.apply()
    moto_patches.apply()
    assert moto_patches.is_applied()
    # WHEN reverted once
    moto_patches.revert()
    # THEN moto's own method is back
    assert not moto_patches.is_applied()
    # AND every CloudFormation function the fixes replaced is moto's again
    replaced = moto_cloudformation._PATCHES
    assert replaced
    # (an attribute moto lacks, such as LayerVersion's physical_resource_id, is gone again)
    assert [name for owner, name, fix in replaced if getattr(owner, name, None) is fix] == []


def test_sqs_clock_reads_the_same_time_as_moto() -> None:
    # GIVEN the fix applied
    moto_patches.apply()
    try:
        from moto.sqs import models as sqs_models

        # WHEN SQS asks for "now" and for a given datetime
        fast_now = sqs_models.unix_time_millis()
        slow_now = moto_patches._ORIGINAL_SQS_UNIX_TIME_MILLIS()
        moment = datetime.datetime(2026, 11, 30, 12, 0, 0)
        # THEN it is the same clock (within the time between the two reads) and the same conversion
        assert abs(fast_now - slow_now) < 1000
        assert sqs_models.unix_time(moment) == moto_patches._ORIGINAL_SQS_UNIX_TIME(moment)
    finally:
        moto_patches.revert()


def test_messages_become_visible_again_after_their_visibility_timeout(ddb: Any) -> None:
    # GIVEN a message received with a 1-second visibility timeout, under the patched clock
    sqs = boto3.client("sqs", region_name=REGION)
    url = sqs.create_queue(QueueName="clock")["QueueUrl"]
    sqs.send_message(QueueUrl=url, MessageBody="x")
    assert len(sqs.receive_message(QueueUrl=url, VisibilityTimeout=1).get("Messages", [])) == 1
    # WHEN it is received again at once, then after the timeout
    hidden = sqs.receive_message(QueueUrl=url).get("Messages", [])
    time.sleep(1.1)
    visible = sqs.receive_message(QueueUrl=url).get("Messages", [])
    # THEN it was hidden, then visible
    assert hidden == []
    assert len(visible) == 1


POWERTOOLS_PARAMETER = "/aws/service/powertools/python/arm64/python3.14/3.37.0"
SANDBOX_LAYER = f"arn:aws:lambda:{REGION}:{ACCOUNT}:layer:sandbox-aws-lambda-powertools:1"


@pytest.fixture
def ssm() -> Iterator[Any]:
    moto_patches.apply()
    try:
        with mock_aws():
            yield boto3.client("ssm", region_name=REGION)
    finally:
        moto_patches.revert()


def test_moto_alone_refuses_the_public_powertools_parameter() -> None:
    # GIVEN moto without the fixes
    with mock_aws():
        client = boto3.client("ssm", region_name=REGION)
        # WHEN the sandbox writes Powertools' public parameter
        # THEN moto refuses the reserved /aws path (the reason for the fix)
        with pytest.raises(ClientError, match="reserved parameter name"):
            client.put_parameter(Name=POWERTOOLS_PARAMETER, Value=SANDBOX_LAYER, Type="String")


def test_the_powertools_parameter_can_be_seeded_and_overwritten(ssm: Any) -> None:
    # GIVEN the fixes applied
    # WHEN the parameter is written, then overwritten
    first = ssm.put_parameter(Name=POWERTOOLS_PARAMETER, Value=SANDBOX_LAYER, Type="String")
    second = ssm.put_parameter(Name=POWERTOOLS_PARAMETER, Value=SANDBOX_LAYER[:-1] + "2", Overwrite=True)
    # THEN it reads back under its own name, versioned as moto versions any parameter
    parameter = ssm.get_parameter(Name=POWERTOOLS_PARAMETER)["Parameter"]
    assert (first["Version"], second["Version"]) == (1, 2)
    assert (parameter["Name"], parameter["Value"], parameter["Version"]) == (
        POWERTOOLS_PARAMETER,
        SANDBOX_LAYER[:-1] + "2",
        2,
    )
    # AND nothing is left under the stand-in name
    assert [p["Name"] for p in ssm.describe_parameters()["Parameters"]] == [POWERTOOLS_PARAMETER]


def test_other_reserved_names_are_still_refused(ssm: Any) -> None:
    # GIVEN the fixes applied
    # WHEN another /aws parameter is written
    # THEN moto still refuses it: only Powertools' path is opened
    with pytest.raises(ClientError, match="reserved parameter name"):
        ssm.put_parameter(Name="/aws/service/other/thing", Value="x", Type="String")


def test_cloudformation_resolves_an_ssm_parameter_type_from_the_seeded_parameter(ssm: Any) -> None:
    # GIVEN the seeded parameter and a template whose parameter is of SSM type with that default
    import json

    ssm.put_parameter(Name=POWERTOOLS_PARAMETER, Value=SANDBOX_LAYER, Type="String")
    template = {
        "Parameters": {
            "PowertoolsLayerArn": {"Type": "AWS::SSM::Parameter::Value<String>", "Default": POWERTOOLS_PARAMETER}
        },
        "Resources": {"Queue": {"Type": "AWS::SQS::Queue"}},
        "Outputs": {"Layer": {"Value": {"Ref": "PowertoolsLayerArn"}}},
    }
    cloudformation = boto3.client("cloudformation", region_name=REGION)
    # WHEN a stack is created from it
    cloudformation.create_stack(StackName="layer", TemplateBody=json.dumps(template))
    stack = cloudformation.describe_stacks(StackName="layer")["Stacks"][0]
    # THEN the parameter resolves to the seeded ARN (moto reports it as the ParameterValue)
    assert stack["Outputs"] == [{"OutputKey": "Layer", "OutputValue": SANDBOX_LAYER}]
    assert stack["Parameters"] == [{"ParameterKey": "PowertoolsLayerArn", "ParameterValue": SANDBOX_LAYER}]


# --- CloudFormation for real apps (idempotent_order_pipeline.sandbox.moto_cloudformation) ------------------------


@pytest.fixture
def cfn() -> Iterator[Any]:
    moto_patches.apply()
    try:
        with mock_aws():
            yield boto3.client("cloudformation", region_name=REGION)
    finally:
        moto_patches.revert()


def _deploy(
    cloudformation: Any, stack: str, template: dict[str, Any], change_set: str = "cdk-deploy-change-set"
) -> str:
    """What ``cdk deploy`` does: a change set (CREATE for a new stack, else UPDATE), executed; the stack's status."""
    existing = {s["StackName"]: s["StackStatus"] for s in cloudformation.describe_stacks()["Stacks"]}
    kind = "UPDATE" if existing.get(stack, "REVIEW_IN_PROGRESS") != "REVIEW_IN_PROGRESS" else "CREATE"
    created = cloudformation.create_change_set(
        StackName=stack, ChangeSetName=change_set, ChangeSetType=kind, TemplateBody=json.dumps(template)
    )
    cloudformation.execute_change_set(ChangeSetName=created["Id"], StackName=stack)
    return str(cloudformation.describe_stacks(StackName=stack)["Stacks"][0]["StackStatus"])


def _failed_events(cloudformation: Any, stack: str) -> list[tuple[str, str, str]]:
    events = cloudformation.describe_stack_events(StackName=stack)["StackEvents"]
    return [
        (event["LogicalResourceId"], event["ResourceType"], event.get("ResourceStatusReason", ""))
        for event in events
        if event["ResourceStatus"].endswith("_FAILED")
    ]


LONG_STACK = "PaymentsPipelineStackWithAVeryLongNameIndeed"
FIFO_TEMPLATE = {
    "Resources": {
        "PipelineDeadLetterQueueWithAnEvenLongerLogicalId0123456789": {
            "Type": "AWS::SQS::Queue",
            "Properties": {"FifoQueue": True},
        },
        "PipelineTopic": {"Type": "AWS::SNS::Topic", "Properties": {"FifoTopic": "true"}},
        "Standard": {"Type": "AWS::SQS::Queue"},
    }
}


def test_fifo_queues_and_topics_get_generated_names_with_the_fifo_suffix_within_the_limit(cfn: Any) -> None:
    # GIVEN a FIFO queue and a FIFO topic without names, in a stack whose generated names would be long
    # WHEN the stack is deployed by a change set, as cdk deploy does
    status = _deploy(cfn, LONG_STACK, FIFO_TEMPLATE)
    # THEN it is created, the FIFO names end in .fifo within SQS's 80 and SNS's 256 characters
    assert status == "CREATE_COMPLETE"
    resources = {
        r["LogicalResourceId"]: r for r in cfn.list_stack_resources(StackName=LONG_STACK)["StackResourceSummaries"]
    }
    fifo_queue = resources["PipelineDeadLetterQueueWithAnEvenLongerLogicalId0123456789"]["PhysicalResourceId"]
    queue_name = fifo_queue.rsplit("/", 1)[1]
    assert queue_name.endswith(".fifo")
    assert len(queue_name) <= moto_cloudformation.MAX_QUEUE_NAME
    assert f"{LONG_STACK}-PipelineDeadLetterQueueWithAnEvenLongerLogicalId".startswith(queue_name.rsplit("-", 1)[0])
    topic_name = resources["PipelineTopic"]["PhysicalResourceId"].rsplit(":", 1)[1]
    assert topic_name.startswith(f"{LONG_STACK}-PipelineTopic-")
    assert topic_name.endswith(".fifo")
    sqs = boto3.client("sqs", region_name=REGION)
    assert sqs.get_queue_attributes(QueueUrl=fifo_queue, AttributeNames=["FifoQueue"])["Attributes"] == {
        "FifoQueue": "true"
    }
    # AND a standard queue keeps moto's name, without the suffix
    assert not resources["Standard"]["PhysicalResourceId"].endswith(".fifo")


def test_moto_alone_cannot_create_a_fifo_queue_without_a_name() -> None:
    # GIVEN moto without the fixes (if this fails, moto fixed it: re-check the patch)
    with mock_aws():
        cloudformation = boto3.client("cloudformation", region_name=REGION)
        # WHEN the FIFO template is deployed  THEN SQS refuses moto's generated name
        with pytest.raises(ClientError, match=r"must end in \.fifo"):
            _deploy(cloudformation, LONG_STACK, FIFO_TEMPLATE)


EXPORTING = {
    "Resources": {"Topic": {"Type": "AWS::SNS::Topic"}},
    "Outputs": {"TopicArn": {"Value": {"Ref": "Topic"}, "Export": {"Name": "Orders:TopicArn"}}},
}
IMPORTING = {
    "Resources": {
        "Inbox": {"Type": "AWS::SQS::Queue"},
        "InboxPolicy": {"Type": "AWS::SQS::QueuePolicy", "Properties": {"Queues": [{"Ref": "Inbox"}]}},
        "Subscription": {
            "Type": "AWS::SNS::Subscription",
            "DependsOn": ["InboxPolicy"],
            "Properties": {
                "Protocol": "sqs",
                "Endpoint": {"Fn::GetAtt": ["Inbox", "Arn"]},
                "TopicArn": {"Fn::ImportValue": "Orders:TopicArn"},
                "RawMessageDelivery": True,
                "FilterPolicy": {"kind": ["order"]},
            },
        },
    }
}


def test_a_second_stack_subscribes_to_the_first_ones_topic_through_an_export(cfn: Any) -> None:
    # GIVEN a stack exporting its topic's ARN, deployed by a change set
    assert _deploy(cfn, "Orders", EXPORTING) == "CREATE_COMPLETE"
    topic_arn = cfn.describe_stacks(StackName="Orders")["Stacks"][0]["Outputs"][0]["OutputValue"]
    # THEN the export is listed
    exports = cfn.list_exports()["Exports"]
    assert [(e["Name"], e["Value"]) for e in exports] == [("Orders:TopicArn", topic_arn)]
    # WHEN a second stack subscribes a queue to it through Fn::ImportValue
    assert _deploy(cfn, "Subscriber", IMPORTING) == "CREATE_COMPLETE"
    # THEN the subscription exists, on that topic, with its attributes
    sns = boto3.client("sns", region_name=REGION)
    subscriptions = sns.list_subscriptions_by_topic(TopicArn=topic_arn)["Subscriptions"]
    assert [s["Protocol"] for s in subscriptions] == ["sqs"]
    attributes = sns.get_subscription_attributes(SubscriptionArn=subscriptions[0]["SubscriptionArn"])["Attributes"]
    assert attributes["RawMessageDelivery"] == "true"
    assert json.loads(attributes["FilterPolicy"]) == {"kind": ["order"]}
    # AND a message published to the topic reaches the subscriber's queue
    sqs = boto3.client("sqs", region_name=REGION)
    inbox = next(url for url in sqs.list_queues()["QueueUrls"] if "Subscriber-Inbox" in url)
    sns.publish(
        TopicArn=topic_arn, Message="hello", MessageAttributes={"kind": {"DataType": "String", "StringValue": "order"}}
    )
    assert [m["Body"] for m in sqs.receive_message(QueueUrl=inbox)["Messages"]] == ["hello"]


def test_an_imported_export_keeps_its_stack_and_deletion_in_order_cleans_up(cfn: Any) -> None:
    # GIVEN an exporting stack and a stack importing from it
    _deploy(cfn, "Orders", EXPORTING)
    _deploy(cfn, "Subscriber", IMPORTING)
    # WHEN the exporting stack is deleted first
    # THEN CloudFormation's rule refuses it, naming the export and the importer
    with pytest.raises(ClientError, match="Export Orders:TopicArn cannot be deleted as it is in use by Subscriber"):
        cfn.delete_stack(StackName="Orders")
    # WHEN the importer, then the exporter are deleted
    cfn.delete_stack(StackName="Subscriber")
    cfn.delete_stack(StackName="Orders")
    # THEN both are gone, with their export and the subscription
    assert cfn.describe_stacks()["Stacks"] == []
    assert cfn.list_exports()["Exports"] == []
    assert boto3.client("sns", region_name=REGION).list_subscriptions()["Subscriptions"] == []


def test_an_export_name_claimed_by_two_stacks_fails_the_second_deploy(cfn: Any) -> None:
    # GIVEN a stack exporting Orders:TopicArn
    _deploy(cfn, "Orders", EXPORTING)
    # WHEN another stack exports the same name  THEN its deploy fails and rolls back
    assert _deploy(cfn, "Copy", EXPORTING) == "ROLLBACK_COMPLETE"
    assert any(
        "Orders:TopicArn is already exported by stack Orders" in reason for _, _, reason in _failed_events(cfn, "Copy")
    )
    assert [e["ExportingStackId"].split("/")[1] for e in cfn.list_exports()["Exports"]] == ["Orders"]


def test_moto_alone_lists_no_export_of_a_stack_created_by_a_change_set() -> None:
    # GIVEN moto without the fixes (if this fails, moto fixed it: re-check the patch)
    with mock_aws():
        cloudformation = boto3.client("cloudformation", region_name=REGION)
        # WHEN the exporting stack is deployed by a change set
        _deploy(cloudformation, "Orders", EXPORTING)
        # THEN no export is registered
        assert cloudformation.list_exports()["Exports"] == []


BROKEN = {
    "Resources": {
        "First": {"Type": "AWS::SQS::Queue"},
        "Broken": {
            "Type": "AWS::SQS::Queue",
            "DependsOn": ["First"],
            "Properties": {"Tags": [{"Key": "source", "Value": {"Fn::ImportValue": "Nowhere"}}]},
        },
    }
}
CORRECTED = {"Resources": {"First": {"Type": "AWS::SQS::Queue"}}}


def test_a_failed_create_rolls_back_and_the_corrected_deploy_works(cfn: Any, caplog: pytest.LogCaptureFixture) -> None:
    # GIVEN a template whose second resource cannot be created (its import does not exist)
    # WHEN it is deployed
    with caplog.at_level("WARNING", logger=moto_cloudformation.LOGGER.name):
        status = _deploy(cfn, "App", BROKEN)
    # THEN the execution itself succeeded and the stack rolled back, as in CloudFormation
    assert status == "ROLLBACK_COMPLETE"
    # AND the failing resource's event names it, its type and the reason
    assert _failed_events(cfn, "App") == [
        ("Broken", "AWS::SQS::Queue", "ValidationError: No export named Nowhere found.")
    ]
    # AND the queue created before it was deleted, and stays deleted when the stack's resources are listed
    assert [r["LogicalResourceId"] for r in cfn.list_stack_resources(StackName="App")["StackResourceSummaries"]] == []
    assert boto3.client("sqs", region_name=REGION).list_queues().get("QueueUrls", []) == []
    # AND the server log says what happened
    assert "stack App: create failed at Broken (AWS::SQS::Queue)" in caplog.text
    # WHEN the CLI's next deploy deletes the rolled-back stack and deploys the corrected template
    cfn.delete_stack(StackName="App")
    # THEN it is created
    assert _deploy(cfn, "App", CORRECTED) == "CREATE_COMPLETE"


def test_a_failed_update_rolls_back_to_the_previous_template(cfn: Any) -> None:
    # GIVEN a deployed stack
    assert _deploy(cfn, "App", CORRECTED) == "CREATE_COMPLETE"
    # WHEN an update adds a resource that fails
    status = _deploy(cfn, "App", BROKEN)
    # THEN the stack is back on its previous template, and the next update works
    assert status == "UPDATE_ROLLBACK_COMPLETE"
    assert cfn.get_template(StackName="App")["TemplateBody"] == CORRECTED
    assert [e[0] for e in _failed_events(cfn, "App")] == ["Broken"]
    with_topic = {"Resources": {**CORRECTED["Resources"], "Topic": {"Type": "AWS::SNS::Topic"}}}
    assert _deploy(cfn, "App", with_topic) == "UPDATE_COMPLETE"


def test_moto_alone_leaves_a_failed_create_in_review_in_progress() -> None:
    # GIVEN moto without the fixes (if this fails, moto fixed it: re-check the patch)
    with mock_aws():
        cloudformation = boto3.client("cloudformation", region_name=REGION)
        # WHEN the broken template is deployed, the error escapes ExecuteChangeSet
        with pytest.raises(ClientError, match="No export named Nowhere"):
            _deploy(cloudformation, "App", BROKEN)
        # THEN the stack stays in REVIEW_IN_PROGRESS with the first queue created
        assert cloudformation.describe_stacks(StackName="App")["Stacks"][0]["StackStatus"] == "REVIEW_IN_PROGRESS"
        assert len(boto3.client("sqs", region_name=REGION).list_queues()["QueueUrls"]) == 1


def test_change_sets_are_looked_up_within_their_stack(cfn: Any) -> None:
    # GIVEN two stacks, each deployed with a change set of the same name (as cdk deploy names them)
    _deploy(cfn, "One", CORRECTED)
    _deploy(cfn, "Two", CORRECTED)
    # WHEN the second stack's change set is deleted
    cfn.delete_change_set(StackName="Two", ChangeSetName="cdk-deploy-change-set")
    # THEN it is not found any more, with CloudFormation's error (the CLI waits for exactly that)
    with pytest.raises(cfn.exceptions.ChangeSetNotFoundException):
        cfn.describe_change_set(StackName="Two", ChangeSetName="cdk-deploy-change-set")
    # AND deleting it again is no error (the CLI deletes its change set name "if it exists")
    cfn.delete_change_set(StackName="Two", ChangeSetName="cdk-deploy-change-set")
    # AND the first stack's change set is still there
    assert cfn.describe_change_set(StackName="One", ChangeSetName="cdk-deploy-change-set")["StackName"] == "One"


def test_moto_alone_finds_another_stacks_change_set_after_a_delete() -> None:
    # GIVEN moto without the fixes (if this fails, moto fixed it: re-check the patch)
    with mock_aws():
        cloudformation = boto3.client("cloudformation", region_name=REGION)
        _deploy(cloudformation, "One", CORRECTED)
        _deploy(cloudformation, "Two", CORRECTED)
        # WHEN the second stack's change set is deleted
        cloudformation.delete_change_set(StackName="Two", ChangeSetName="cdk-deploy-change-set")
        # THEN moto deleted the first stack's instead and still describes it (the CLI waits forever)
        described = cloudformation.describe_change_set(StackName="Two", ChangeSetName="cdk-deploy-change-set")
        assert described["StackName"] == "Two"


def test_an_unsupported_resource_type_fails_the_deploy_naming_it(cfn: Any) -> None:
    # GIVEN a template with a type moto does not implement and that matters (a pipe would move messages)
    template = {
        "Resources": {
            "Queue": {"Type": "AWS::SQS::Queue"},
            "Pipe": {"Type": "AWS::Pipes::Pipe", "Properties": {"Source": {"Fn::GetAtt": ["Queue", "Arn"]}}},
        }
    }
    # WHEN it is deployed
    status = _deploy(cfn, "Piped", template)
    # THEN the deploy fails as CloudFormation fails a resource: the logical id, the type, why
    assert status == "ROLLBACK_COMPLETE"
    [(logical_id, resource_type, reason)] = _failed_events(cfn, "Piped")
    assert (logical_id, resource_type) == ("Pipe", "AWS::Pipes::Pipe")
    assert "Resource type AWS::Pipes::Pipe is not supported by the local stand-in" in reason


def test_monitoring_and_policy_types_are_skipped_and_the_stack_deploys(cfn: Any) -> None:
    # GIVEN a template with every skippable type beside a queue
    template: dict[str, Any] = {"Resources": {"Queue": {"Type": "AWS::SQS::Queue"}}}
    for index, resource_type in enumerate(sorted(moto_cloudformation.SKIPPABLE_TYPES)):
        template["Resources"][f"Skipped{index}"] = {"Type": resource_type, "Properties": {}}
    # WHEN it is deployed  THEN it is created
    assert _deploy(cfn, "Monitored", template) == "CREATE_COMPLETE"
    summaries = cfn.list_stack_resources(StackName="Monitored")["StackResourceSummaries"]
    listed = {r["LogicalResourceId"]: r for r in summaries}
    # AND every resource is listed, as CloudFormation lists them; the skipped ones under the
    # stand-in's placeholder physical id, with a reason saying that nothing was created
    assert set(listed) == set(template["Resources"])
    assert not is_skipped_physical_id(listed["Queue"]["PhysicalResourceId"])
    skipped = [r for name, r in listed.items() if name.startswith("Skipped")]
    assert len(skipped) == len(moto_cloudformation.SKIPPABLE_TYPES)
    assert all(is_skipped_physical_id(r["PhysicalResourceId"]) for r in skipped)
    assert all(r["ResourceStatusReason"].startswith("Skipped by the local stand-in") for r in skipped)
    # AND nothing of them exists: no alarm was made
    assert boto3.client("cloudwatch", region_name=REGION).describe_alarms()["MetricAlarms"] == []


MAPPED = {
    "Resources": {
        "Role": {
            "Type": "AWS::IAM::Role",
            "Properties": {
                "AssumeRolePolicyDocument": {
                    "Statement": [
                        {
                            "Effect": "Allow",
                            "Principal": {"Service": "lambda.amazonaws.com"},
                            "Action": "sts:AssumeRole",
                        }
                    ]
                }
            },
        },
        "Function": {
            "Type": "AWS::Lambda::Function",
            "Properties": {
                "Runtime": "python3.12",
                "Handler": "index.handler",
                "Role": {"Fn::GetAtt": ["Role", "Arn"]},
                "Code": {"ZipFile": "def handler(event, context):\n    return None\n"},
            },
        },
        # Retained, as the pipeline's queues are by default: it outlives the stack.
        "Queue": {"Type": "AWS::SQS::Queue", "DeletionPolicy": "Retain", "UpdateReplacePolicy": "Retain"},
        "Mapping": {
            "Type": "AWS::Lambda::EventSourceMapping",
            "Properties": {"EventSourceArn": {"Fn::GetAtt": ["Queue", "Arn"]}, "FunctionName": {"Ref": "Function"}},
        },
    }
}


def _delete_mapped_stack(cloudformation: Any) -> tuple[Any, str]:
    _deploy(cloudformation, "Mapped", MAPPED)
    sqs = boto3.client("sqs", region_name=REGION)
    [queue_url] = sqs.list_queues()["QueueUrls"]
    assert len(boto3.client("lambda", region_name=REGION).list_event_source_mappings()["EventSourceMappings"]) == 1
    cloudformation.delete_stack(StackName="Mapped")
    return sqs, queue_url


def test_deleting_a_stack_removes_its_event_source_mappings_from_the_queue(cfn: Any) -> None:
    # GIVEN a stack whose function is mapped to a retained queue, then deleted
    sqs, queue_url = _delete_mapped_stack(cfn)
    # THEN the queue is kept, the mapping is gone from Lambda and from the queue
    assert boto3.client("lambda", region_name=REGION).list_event_source_mappings()["EventSourceMappings"] == []
    assert sqs_backends[ACCOUNT][REGION].queues[queue_url.rsplit("/", 1)[1]].lambda_event_source_mappings == {}
    # AND a message sent to the queue stays there for whoever deploys next (no deleted function invoked)
    sqs.send_message(QueueUrl=queue_url, MessageBody="order")
    assert [m["Body"] for m in sqs.receive_message(QueueUrl=queue_url)["Messages"]] == ["order"]


def test_moto_alone_keeps_a_deleted_mapping_on_its_queue() -> None:
    # GIVEN moto without the fixes (if this fails, moto fixed it: re-check the patch)
    with mock_aws():
        _, queue_url = _delete_mapped_stack(boto3.client("cloudformation", region_name=REGION))
        # THEN the queue still holds the mapping of the deleted function (which a send would invoke)
        assert len(sqs_backends[ACCOUNT][REGION].queues[queue_url.rsplit("/", 1)[1]].lambda_event_source_mappings) == 1


def test_an_update_keeps_an_ssm_typed_parameter_given_as_use_previous_value(cfn: Any) -> None:
    # GIVEN a stack whose parameter is resolved from SSM at deploy (as PowertoolsLayerArn and BootstrapVersion are)
    boto3.client("ssm", region_name=REGION).put_parameter(Name="/app/layer", Value=SANDBOX_LAYER, Type="String")
    template = {
        "Parameters": {"Layer": {"Type": "AWS::SSM::Parameter::Value<String>", "Default": "/app/layer"}},
        "Resources": {"Queue": {"Type": "AWS::SQS::Queue"}},
        "Outputs": {"Layer": {"Value": {"Ref": "Layer"}}},
    }
    _deploy(cfn, "Layered", template)
    # WHEN an update passes the parameter with UsePreviousValue, as cdk deploy does
    template["Resources"]["Topic"] = {"Type": "AWS::SNS::Topic"}
    created = cfn.create_change_set(
        StackName="Layered",
        ChangeSetName="update",
        ChangeSetType="UPDATE",
        TemplateBody=json.dumps(template),
        Parameters=[{"ParameterKey": "Layer", "UsePreviousValue": True}],
    )
    cfn.execute_change_set(ChangeSetName=created["Id"], StackName="Layered")
    # THEN the update completes and the parameter still resolves to the SSM value
    stack = cfn.describe_stacks(StackName="Layered")["Stacks"][0]
    assert stack["StackStatus"] == "UPDATE_COMPLETE"
    assert stack["Outputs"] == [{"OutputKey": "Layer", "OutputValue": SANDBOX_LAYER}]


CFN_APP = Path(__file__).resolve().parent / "cfn_app"
#: A type moto does not implement and the stand-in cannot skip (a pipe would move messages).
UNSUPPORTED_TYPE = "AWS::Pipes::Pipe"


def _cdk_deploy(endpoint: Any, work_dir: Path, stacks: list[str], *context: str, assembly: str = "cdk.out") -> str:
    """``cdk deploy`` of ``stacks``: the app synthesized into ``work_dir / assembly``, or that assembly when
    it is there already (the CLI then deploys it as synthesized, without running the app again)."""
    args = ["deploy", *stacks, "--exclusively", "--require-approval", "never", "--ci", "--no-notices"]
    synthesized = work_dir / assembly
    source = ["--app", str(synthesized)] if (synthesized / "manifest.json").exists() else ["--output", str(synthesized)]
    args += ["--progress", "events", *source]
    for item in context:
        args += ["-c", item]
    return run_cdk(endpoint, args, app_dir=CFN_APP, log_path=work_dir / "cdk.log")


def _read_api_problems(
    endpoint: Any, stack: str, template: dict[str, Any], since: datetime.datetime, until: datetime.datetime
) -> list[str]:
    """What CloudFormation's read APIs say of a freshly created stack that AWS would not.

    Each answer against botocore's model (tests/sandbox/cfn_shapes.py); every template resource
    listed once by each API, CREATE_COMPLETE between ``since`` and ``until``, with one event; the
    physical ids of queues, tables and functions naming what exists; the template as deployed.
    """
    cloudformation = endpoint.client("cloudformation")
    answers = {
        "DescribeStackResources": cloudformation.describe_stack_resources(StackName=stack),
        "ListStackResources": cloudformation.list_stack_resources(StackName=stack),
        "DescribeStacks": cloudformation.describe_stacks(StackName=stack),
        "GetTemplate": cloudformation.get_template(StackName=stack),
        "DescribeStackEvents": cloudformation.describe_stack_events(StackName=stack),
    }
    declared = {logical_id for logical_id, resource in template["Resources"].items() if "Condition" not in resource}
    for logical_id in sorted(declared):
        answers[f"DescribeStackResource {logical_id}"] = cloudformation.describe_stack_resource(
            StackName=stack, LogicalResourceId=logical_id
        )
    problems = [f"{stack}: {p}" for name, answer in answers.items() for p in shape_problems(name.split()[0], answer)]
    resources = answers["DescribeStackResources"]["StackResources"]
    summaries = answers["ListStackResources"]["StackResourceSummaries"]
    events = [
        event
        for event in answers["DescribeStackEvents"]["StackEvents"]
        if event["ResourceType"] != "AWS::CloudFormation::Stack"
    ]
    for name, listed in (("DescribeStackResources", resources), ("ListStackResources", summaries), ("events", events)):
        found = Counter(str(entry.get("LogicalResourceId")) for entry in listed)
        if not declared <= set(found) or any(count != 1 for count in found.values()):
            problems.append(f"{stack}: {name} lists {dict(found)}, the template declares {sorted(declared)}")
    for resource in [*resources, *summaries, *events]:
        status = resource.get("ResourceStatus")
        stamp = resource.get("Timestamp") or resource.get("LastUpdatedTimestamp")
        if status not in DEPLOYED_RESOURCE_STATUSES or not (stamp and since <= stamp <= until):
            problems.append(f"{stack}: {resource.get('LogicalResourceId')} is {status} at {stamp}")
    [described] = answers["DescribeStacks"]["Stacks"]
    if described["StackStatus"] != "CREATE_COMPLETE" or not since <= described["CreationTime"] <= until:
        problems.append(f"{stack}: the stack is {described['StackStatus']}, created {described['CreationTime']}")
    if {output["OutputKey"] for output in described.get("Outputs", [])} != set(template.get("Outputs", {})):
        problems.append(f"{stack}: outputs {described.get('Outputs')} for {sorted(template.get('Outputs', {}))}")
    if answers["GetTemplate"]["TemplateBody"] != template:
        problems.append(f"{stack}: GetTemplate is not the template deployed")
    # A queue's physical id is its URL as AWS names it (sqs.<region>.amazonaws.com); the endpoint lists its own host.
    queues = {url.rsplit("/", 1)[1] for url in endpoint.client("sqs").list_queues().get("QueueUrls", [])}
    tables = set(endpoint.client("dynamodb").list_tables()["TableNames"])
    functions = {f["FunctionName"] for f in endpoint.client("lambda").list_functions()["Functions"]}
    existing = {"AWS::SQS::Queue": queues, "AWS::DynamoDB::Table": tables, "AWS::Lambda::Function": functions}
    for resource in resources:
        physical = str(resource["PhysicalResourceId"])
        named = physical.rsplit("/", 1)[1] if resource["ResourceType"] == "AWS::SQS::Queue" else physical
        if resource["ResourceType"] in existing and named not in existing[resource["ResourceType"]]:
            problems.append(
                f"{stack}: {resource['LogicalResourceId']}'s {resource['PhysicalResourceId']} does not exist"
            )
    return problems


@pytest.mark.e2e
@pytest.mark.slow
def test_cdk_deploy_of_fifo_cross_stack_and_a_failed_then_corrected_deploy(tmp_path: Path) -> None:
    # GIVEN the stand-in, bootstrapped, with the Powertools layer published, and its server log
    server_log = tmp_path / "moto-server.log"
    with SandboxServerProcess(log_path=server_log) as endpoint:
        bootstrap(endpoint, work_dir=tmp_path)
        publish_powertools_parameter(endpoint, publish_powertools_layer(endpoint, work_dir=tmp_path))
        cloudformation = endpoint.client("cloudformation")

        # WHEN a standard and a FIFO pipeline are deployed with plain cdk deploy
        deployed_since = datetime.datetime.now(datetime.UTC)
        _cdk_deploy(endpoint, tmp_path, ["Orders", "Payments"])
        # THEN both are created, the FIFO queues with generated .fifo names
        sqs = endpoint.client("sqs")
        payments = [url for url in sqs.list_queues()["QueueUrls"] if "/Payments-" in url]
        assert len(payments) == 2
        assert all(url.endswith(".fifo") for url in payments)

        # WHEN the subscriber stack is deployed with a resource type the stand-in cannot run
        with pytest.raises(DeployError) as failed:
            _cdk_deploy(
                endpoint,
                tmp_path,
                ["Subscriber"],
                f"unsupported_type={UNSUPPORTED_TYPE}",
                assembly="cdk.out-unsupported",
            )
        # THEN the CLI shows CloudFormation's error naming the resource and its type, not an HTML page
        assert f"Resource type {UNSUPPORTED_TYPE} is not supported by the local stand-in" in str(failed.value)
        assert "<html" not in str(failed.value)
        subscriber = cloudformation.describe_stacks(StackName="Subscriber")["Stacks"][0]
        assert subscriber["StackStatus"] == "ROLLBACK_COMPLETE"
        # AND the server log says what happened
        assert f"stack Subscriber: create failed at Unsupported ({UNSUPPORTED_TYPE})" in server_log.read_text()

        # WHEN the corrected subscriber stack is deployed, on the same stand-in (the first deploy's synth of
        # the app, which has all three stacks)
        started = time.monotonic()
        _cdk_deploy(endpoint, tmp_path, ["Subscriber"])
        # THEN it is created (the CLI replaced the rolled-back stack), promptly, not after a 10-minute wait
        assert time.monotonic() - started < CDK_TIMEOUT_SECONDS / 2
        assert cloudformation.describe_stacks(StackName="Subscriber")["Stacks"][0]["StackStatus"] == "CREATE_COMPLETE"
        # AND CloudFormation's read APIs describe all three stacks in AWS's shape, with this deploy's times
        deployed_by = datetime.datetime.now(datetime.UTC)
        for stack in ("Orders", "Payments", "Subscriber"):
            template = json.loads((tmp_path / "cdk.out" / f"{stack}.template.json").read_text())
            assert _read_api_problems(endpoint, stack, template, deployed_since, deployed_by) == []
        # AND it subscribed to the orders topic through the export: a message published reaches it
        [export] = [e for e in cloudformation.list_exports()["Exports"] if e["Name"].startswith("Orders:")]
        endpoint.client("sns").publish(TopicArn=export["Value"], Message="order 1")
        [inbox] = [url for url in sqs.list_queues()["QueueUrls"] if "/Subscriber-Inbox" in url]
        assert [m["Body"] for m in sqs.receive_message(QueueUrl=inbox, WaitTimeSeconds=1)["Messages"]] == ["order 1"]

        # WHEN every stack is deleted (the importer first): the orders pipeline keeps its queues and
        # tables (RETAIN, the construct's default), the payments pipeline keeps nothing (DESTROY)
        orders_function = next(
            r["PhysicalResourceId"]
            for r in cloudformation.list_stack_resources(StackName="Orders")["StackResourceSummaries"]
            if r["ResourceType"] == "AWS::Lambda::Function" and "Reconcil" not in r["LogicalResourceId"]
        )
        lambda_client = endpoint.client("lambda")
        assert lambda_client.list_event_source_mappings(FunctionName=orders_function)["EventSourceMappings"]
        run_cdk(
            endpoint,
            ["destroy", "--all", "--force", "--ci", "--app", str(tmp_path / "cdk.out")],
            app_dir=CFN_APP,
        )
        # THEN no mapping of the deleted function is left, and a send to the retained queue works
        assert lambda_client.list_event_source_mappings()["EventSourceMappings"] == []
        [orders_queue] = [u for u in sqs.list_queues()["QueueUrls"] if "/Orders-PipelineQueue" in u]
        sqs.send_message(QueueUrl=orders_queue, MessageBody="{}")
        # AND the orders stack's export went with it
        assert export["Name"] not in {e["Name"] for e in cloudformation.list_exports()["Exports"]}
        # AND nothing of the payments pipeline is left: queues, tables, topic, functions, schedule, logs, roles
        left = [
            *sqs.list_queues()["QueueUrls"],
            *endpoint.client("dynamodb").list_tables()["TableNames"],
            *(t["TopicArn"] for t in endpoint.client("sns").list_topics()["Topics"]),
            *(f["FunctionName"] for f in lambda_client.list_functions()["Functions"]),
            *(r["Name"] for r in endpoint.client("events").list_rules()["Rules"]),
            *(g["logGroupName"] for g in endpoint.client("logs").describe_log_groups()["logGroups"]),
            *(r["RoleName"] for r in endpoint.client("iam").list_roles()["Roles"]),
        ]
        assert any("Orders-" in name for name in left)  # the search finds what is there
        assert [name for name in left if "Payments-" in name] == []


def test_an_unsupported_template_function_fails_the_deploy_naming_it(cfn: Any) -> None:
    # GIVEN a resource whose property uses a function moto does not evaluate
    template = {
        "Resources": {
            "Queue": {
                "Type": "AWS::SQS::Queue",
                "Properties": {
                    "Tags": [{"Key": "cidr", "Value": {"Fn::Select": [0, {"Fn::Cidr": ["10.0.0.0/16", 4, 8]}]}}]
                },
            }
        }
    }
    # WHEN it is deployed
    status = _deploy(cfn, "Cidr", template)
    # THEN the deploy fails naming the resource, its type and the function, and nothing is left
    assert status == "ROLLBACK_COMPLETE"
    [(logical_id, resource_type, reason)] = _failed_events(cfn, "Cidr")
    assert (logical_id, resource_type) == ("Queue", "AWS::SQS::Queue")
    assert reason.startswith("Template function(s) Fn::Cidr not supported by the local stand-in")
    assert boto3.client("sqs", region_name=REGION).list_queues().get("QueueUrls", []) == []


def test_moto_alone_passes_an_unevaluated_function_on_as_a_value() -> None:
    # GIVEN moto without the fixes (if this fails, moto fixed it: re-check the patch)
    with mock_aws():
        cloudformation = boto3.client("cloudformation", region_name=REGION)
        template = {
            "Resources": {
                "Queue": {
                    "Type": "AWS::SQS::Queue",
                    "Properties": {"Tags": [{"Key": "n", "Value": {"Fn::Cidr": ["10.0.0.0/16", 4, 8]}}]},
                }
            }
        }
        # WHEN it is deployed  THEN the stack is "complete" with the function as the tag's value
        assert _deploy(cloudformation, "Cidr", template) == "CREATE_COMPLETE"
        sqs = boto3.client("sqs", region_name=REGION)
        [url] = sqs.list_queues()["QueueUrls"]
        assert "Fn::Cidr" in str(sqs.list_queue_tags(QueueUrl=url)["Tags"]["n"])


def test_docs_name_every_skipped_type_and_every_evaluated_function() -> None:
    # GIVEN docs/sandbox.md's section on the stand-in's CloudFormation
    page = (Path(__file__).resolve().parents[2] / "docs" / "sandbox.md").read_text()
    section = page.split("## What the stand-in's CloudFormation does beyond moto", 1)[1]
    # WHEN the types and functions it names are collected
    named = set(re.findall(r"`((?:AWS::|Fn::)[A-Za-z0-9:]+)`", section))
    # THEN every skipped type is named, and the functions named are the evaluated ones (plus the
    # table's example of one that is not), so the page never drifts from the code
    assert named >= moto_cloudformation.SKIPPABLE_TYPES
    functions = {name for name in named if name.startswith("Fn::")}
    assert functions == moto_cloudformation.SUPPORTED_INTRINSICS | {"Fn::Cidr"}


def test_an_update_that_drops_or_changes_an_imported_export_rolls_back(cfn: Any) -> None:
    # GIVEN an exporting stack and a stack importing its export
    _deploy(cfn, "Orders", EXPORTING)
    _deploy(cfn, "Subscriber", IMPORTING)
    before = cfn.list_exports()["Exports"]
    # WHEN an update of the exporter drops the export, then another one changes its value
    dropped = {"Resources": EXPORTING["Resources"]}
    changed = {**EXPORTING, "Outputs": {"TopicArn": {"Value": "another", "Export": {"Name": "Orders:TopicArn"}}}}
    # THEN each is refused as CloudFormation refuses it, and rolled back: the export is unchanged
    assert _deploy(cfn, "Orders", dropped) == "UPDATE_ROLLBACK_COMPLETE"
    assert _deploy(cfn, "Orders", changed) == "UPDATE_ROLLBACK_COMPLETE"
    reasons = [reason for _, _, reason in _failed_events(cfn, "Orders")]
    assert "Cannot delete export Orders:TopicArn as it is in use by Subscriber" in reasons[-1]
    assert "Cannot update export Orders:TopicArn as it is in use by Subscriber" in reasons[0]
    assert cfn.list_exports()["Exports"] == before
    # AND once the importer is gone, the same update goes through
    cfn.delete_stack(StackName="Subscriber")
    assert _deploy(cfn, "Orders", dropped) == "UPDATE_COMPLETE"
    assert cfn.list_exports()["Exports"] == []


# --- a stack's own layer versions (moto_cloudformation, fix 9) ---------------------------------------


def _layer_zip() -> bytes:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive:
        archive.writestr("python/runtime_helper.py", "HELPER = 'from the layer'\n")
    return buffer.getvalue()


#: A CDK asset layer (zip in the bootstrap bucket) and a parameter whose value is a Ref to it.
LAYER_STACK = {
    "Resources": {
        "RuntimeLayer": {
            "Type": "AWS::Lambda::LayerVersion",
            "Properties": {"Content": {"S3Bucket": "assets", "S3Key": "layer.zip"}},
        },
        "LayerArnParameter": {
            "Type": "AWS::SSM::Parameter",
            "Properties": {"Name": "layer-arn", "Type": "String", "Value": {"Ref": "RuntimeLayer"}},
        },
    },
    "Outputs": {"LayerArn": {"Value": {"Ref": "RuntimeLayer"}}},
}
LAYER_ARN = re.compile(rf"arn:aws:lambda:{REGION}:{ACCOUNT}:layer:Subscriber-RuntimeLayer-\w+:1")


def _deploy_layer_stack(cloudformation: Any) -> tuple[dict[str, str], str, dict[str, Any]]:
    """Put the layer zip in S3, deploy LAYER_STACK: (physical ids, the Ref output, GetLayerVersion)."""
    s3 = boto3.client("s3", region_name=REGION)
    s3.create_bucket(Bucket="assets", CreateBucketConfiguration={"LocationConstraint": REGION})
    s3.put_object(Bucket="assets", Key="layer.zip", Body=_layer_zip())
    cloudformation.create_stack(StackName="Subscriber", TemplateBody=json.dumps(LAYER_STACK))
    resources = cloudformation.list_stack_resources(StackName="Subscriber")["StackResourceSummaries"]
    physical = {r["LogicalResourceId"]: r.get("PhysicalResourceId", "") for r in resources}
    [output] = cloudformation.describe_stacks(StackName="Subscriber")["Stacks"][0]["Outputs"]
    lam = boto3.client("lambda", region_name=REGION)
    [layer] = lam.list_layers()["Layers"]
    version = lam.get_layer_version(LayerName=layer["LayerName"], VersionNumber=1)
    return physical, str(output["OutputValue"]), version


def test_moto_alone_gives_a_stack_layer_version_no_physical_id_and_no_location() -> None:
    # GIVEN moto without the fixes (if this fails, moto fixed it: re-check the patch)
    with mock_aws():
        # WHEN a stack with its own layer version is deployed
        physical, output, version = _deploy_layer_stack(boto3.client("cloudformation", region_name=REGION))
    # THEN the layer has no physical id, a Ref to it is the model's repr, and its content no location
    assert physical["RuntimeLayer"] == ""
    assert "LayerVersion object" in output
    assert version["Content"]["Location"] == "s3://"


def test_a_stack_layer_version_is_its_arn_and_names_its_s3_content(cfn: Any) -> None:
    # GIVEN the fixes
    # WHEN a stack with its own layer version (a CDK asset) is deployed
    physical, output, version = _deploy_layer_stack(cfn)
    # THEN its physical id and every Ref to it are the layer version's ARN, as in CloudFormation
    assert LAYER_ARN.fullmatch(physical["RuntimeLayer"])
    assert output == physical["RuntimeLayer"] == version["LayerVersionArn"]
    assert boto3.client("ssm", region_name=REGION).get_parameter(Name="layer-arn")["Parameter"]["Value"] == output
    # AND its content names the S3 object it came from, which is the zip the endpoint checksummed
    location = version["Content"]["Location"]
    assert location == f"https://assets.s3.{REGION}.amazonaws.com/layer.zip"
    body = boto3.client("s3", region_name=REGION).get_object(Bucket="assets", Key="layer.zip")["Body"].read()
    assert version["Content"]["CodeSha256"] == base64.b64encode(hashlib.sha256(body).digest()).decode()


# --- 7. PartiQL UPDATE statements in BatchExecuteStatement --------------------------------------------

MARK = 'UPDATE "events" SET "status" = ?, sent_at = ? REMOVE shard WHERE pk = ? AND "status" = ? AND sha = ?'


def _mark(pk: str, sha: str = "x") -> dict[str, Any]:
    return {
        "Statement": MARK,
        "Parameters": [{"S": "sent"}, {"N": "5"}, {"S": pk}, {"S": "pending"}, {"S": sha}],
        "ReturnValuesOnConditionCheckFailure": "ALL_OLD",
    }


@pytest.fixture
def plain_moto() -> Iterator[Any]:
    """moto 5.2.5 alone: every fix reverted (the suite runs with fix 7 in place; see tests/conftest.py)."""
    moto_patches.revert()
    try:
        with mock_aws():
            client = boto3.client("dynamodb", region_name=REGION)
            client.create_table(
                TableName="events",
                KeySchema=[{"AttributeName": "pk", "KeyType": "HASH"}],
                AttributeDefinitions=[{"AttributeName": "pk", "AttributeType": "S"}],
                BillingMode="PAY_PER_REQUEST",
            )
            yield client
    finally:
        moto_patches.apply_partiql_fix()


def _pending(client: Any, pk: str, sha: str = "x") -> None:
    client.put_item(
        TableName="events",
        Item={"pk": {"S": pk}, "status": {"S": "pending"}, "sha": {"S": sha}, "shard": {"S": "3"}},
    )


def test_moto_alone_answers_a_failed_update_condition_as_a_success_and_cannot_remove(plain_moto: Any) -> None:
    # GIVEN a record already sent (its condition "pending" cannot hold), on moto without the fix
    plain_moto.put_item(TableName="events", Item={"pk": {"S": "a"}, "status": {"S": "sent"}, "sha": {"S": "x"}})
    statement = {**_mark("a"), "Statement": MARK.replace(" REMOVE shard", "")}
    # WHEN a SET-only mark of it runs in BatchExecuteStatement
    [answer] = plain_moto.batch_execute_statement(Statements=[statement])["Responses"]
    # THEN moto answers as if it had applied (DynamoDB: the statement's error ConditionalCheckFailed, with
    # the item under ALL_OLD), and changed nothing
    assert "Error" not in answer
    assert "sent_at" not in plain_moto.get_item(TableName="events", Key={"pk": {"S": "a"}})["Item"]
    # AND a statement with REMOVE fails the whole call inside moto's parser (in-process its AssertionError
    # escapes; through the server it is a 500)
    _pending(plain_moto, "b")
    with pytest.raises((AssertionError, ClientError)):
        plain_moto.batch_execute_statement(Statements=[_mark("b")])
    assert plain_moto.get_item(TableName="events", Key={"pk": {"S": "b"}})["Item"]["status"] == {"S": "pending"}


def test_partiql_updates_apply_their_conditions_per_statement(ddb: Any) -> None:
    # GIVEN (with the fix) a pending record, a sent one, one of another content, and no record at all
    _pending(ddb, "a")
    ddb.put_item(TableName="events", Item={"pk": {"S": "s"}, "status": {"S": "sent"}, "sha": {"S": "x"}})
    _pending(ddb, "c", sha="other")
    # WHEN one BatchExecuteStatement marks all four
    answers = ddb.batch_execute_statement(Statements=[_mark("a"), _mark("s"), _mark("c"), _mark("gone")])["Responses"]
    # THEN the pending one is marked (SET applied, REMOVE applied) and the call answers it like DynamoDB
    assert answers[0] == {"TableName": "events"}
    assert ddb.get_item(TableName="events", Key={"pk": {"S": "a"}})["Item"] == {
        "pk": {"S": "a"},
        "status": {"S": "sent"},
        "sha": {"S": "x"},
        "sent_at": {"N": "5"},
    }
    # AND each failed condition is that statement's ConditionalCheckFailed, with the item under ALL_OLD
    codes = [answer.get("Error", {}).get("Code") for answer in answers[1:]]
    assert codes == ["ConditionalCheckFailed"] * 3
    assert answers[1]["Error"]["Item"]["status"] == {"S": "sent"}
    assert answers[2]["Error"]["Item"]["sha"] == {"S": "other"}
    assert "Item" not in answers[3]["Error"]
    # AND nothing else changed: an UPDATE never creates an item
    assert ddb.get_item(TableName="events", Key={"pk": {"S": "c"}})["Item"]["status"] == {"S": "pending"}
    assert "Item" not in ddb.get_item(TableName="events", Key={"pk": {"S": "gone"}})


def test_partiql_updates_touch_only_their_item(ddb: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    # GIVEN a table of 200 items
    for i in range(200):
        _pending(ddb, f"p-{i}")
    # WHEN a mark runs, with moto's whole-table path made to fail if it were taken
    monkeypatch.setattr(DynamoDBBackend, "execute_statement", lambda *_: pytest.fail("copied every table"))
    [answer] = ddb.batch_execute_statement(Statements=[_mark("p-7")])["Responses"]
    # THEN it applied through the one item
    assert answer == {"TableName": "events"}
    assert ddb.get_item(TableName="events", Key={"pk": {"S": "p-7"}})["Item"]["status"] == {"S": "sent"}


@pytest.mark.parametrize(
    "statement",
    [
        'UPDATE "events" SET n = ? WHERE pk = ? OR n = ?',  # OR
        'UPDATE "events" SET n = ? WHERE pk = ? RETURNING ALL OLD *',  # RETURNING
        'UPDATE "events" SET n = n + ? WHERE pk = ?',  # an expression
        'SELECT * FROM "events" WHERE pk = ?',
    ],
)
def test_statements_outside_the_subset_go_to_moto(ddb: Any, statement: str) -> None:
    # GIVEN a statement the fix does not read
    # WHEN it is parsed, THEN it is refused as outside the subset (so moto's own code runs it)
    with pytest.raises(moto_patches.NotTheSubset):
        moto_patches.parse_partiql_update(statement, [{"N": "1"}, {"S": "a"}, {"N": "2"}][: statement.count("?")])


def test_an_update_without_the_whole_key_is_a_validation_error(ddb: Any) -> None:
    # GIVEN an UPDATE whose WHERE does not name the key
    statement = {"Statement": 'UPDATE "events" SET n = ? WHERE sha = ?', "Parameters": [{"N": "1"}, {"S": "x"}]}
    # WHEN it runs, THEN that statement answers ValidationError (DynamoDB requires the key)
    [answer] = ddb.batch_execute_statement(Statements=[statement])["Responses"]
    assert answer["Error"]["Code"] == "ValidationError"


def test_the_partiql_fix_is_installed_and_removed_alone() -> None:
    # GIVEN the suite's state (fix 7 in place)
    assert DynamoDBBackend.batch_execute_statement is moto_patches.batch_execute_statement
    # WHEN it is removed alone, THEN moto's method is back; re-applied, the fix again
    moto_patches.revert_partiql_fix()
    try:
        assert DynamoDBBackend.batch_execute_statement is moto_patches._ORIGINAL_BATCH_EXECUTE
    finally:
        moto_patches.apply_partiql_fix()
    assert DynamoDBBackend.batch_execute_statement is moto_patches.batch_execute_statement


VPC_ENDPOINT_TEMPLATE = {
    "Resources": {
        "Vpc": {"Type": "AWS::EC2::VPC", "Properties": {"CidrBlock": "10.0.0.0/16"}},
        "Subnet": {
            "Type": "AWS::EC2::Subnet",
            "Properties": {"VpcId": {"Ref": "Vpc"}, "CidrBlock": "10.0.0.0/24"},
        },
        "SqsEndpoint": {
            "Type": "AWS::EC2::VPCEndpoint",
            "Properties": {
                "VpcId": {"Ref": "Vpc"},
                "ServiceName": f"com.amazonaws.{REGION}.sqs",
                "VpcEndpointType": "Interface",
                "SubnetIds": [{"Ref": "Subnet"}],
                "PrivateDnsEnabled": False,
            },
        },
        # What the construct computes for AWS_ENDPOINT_URL_SQS, kept where a test can read it.
        "EndpointUrl": {
            "Type": "AWS::SSM::Parameter",
            "Properties": {
                "Name": "/test/endpoint-url",
                "Type": "String",
                "Value": {
                    "Fn::Join": [
                        "",
                        [
                            "https://",
                            {
                                "Fn::Select": [
                                    1,
                                    {
                                        "Fn::Split": [
                                            ":",
                                            {"Fn::Select": [0, {"Fn::GetAtt": ["SqsEndpoint", "DnsEntries"]}]},
                                        ]
                                    },
                                ]
                            },
                        ],
                    ]
                },
            },
        },
    }
}


def test_a_vpc_endpoints_dns_entries_resolve_as_in_cloudformation(cfn: Any) -> None:
    # GIVEN an interface endpoint and a resource that reads its first DNS entry's name (as the construct's
    # AWS_ENDPOINT_URL_SQS does)
    # WHEN the stack is deployed by a change set
    status = _deploy(cfn, "Endpoints", VPC_ENDPOINT_TEMPLATE)
    # THEN it is created, and the value is https:// and the endpoint's DNS name, as EC2 describes it
    assert status == "CREATE_COMPLETE", _failed_events(cfn, "Endpoints")
    ec2 = boto3.client("ec2", region_name=REGION)
    [endpoint] = ec2.describe_vpc_endpoints()["VpcEndpoints"]
    value = boto3.client("ssm", region_name=REGION).get_parameter(Name="/test/endpoint-url")["Parameter"]["Value"]
    assert value == f"https://{endpoint['DnsEntries'][0]['DnsName']}"
