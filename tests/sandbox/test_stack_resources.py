"""CloudFormation's read APIs on the stand-in, in AWS's shape (moto_stack_resources, fix 10 of moto_cloudformation).

In-process, on moto with the stand-in's fixes: a stack deployed by change set, as ``cdk deploy``
does, then updated. Every answer of DescribeStackResources, DescribeStackResource,
ListStackResources, DescribeStacks, GetTemplate and DescribeStackEvents is checked against
botocore's service model (tests/sandbox/cfn_shapes.py), and the statuses, physical ids and times
against what the deploy did. The same checks run on a real ``cdk deploy`` in
tests/sandbox/test_moto_patches.py (e2e).
"""

from __future__ import annotations

import datetime
import json
from collections import Counter
from collections.abc import Iterator
from typing import Any

import boto3
import pytest
from botocore.exceptions import ClientError
from moto import mock_aws

from idempotent_order_pipeline.sandbox import moto_patches
from idempotent_order_pipeline.sandbox.moto_stack_resources import DESCRIBE_LIMIT, is_skipped_physical_id
from tests.sandbox.cfn_shapes import DEPLOYED_RESOURCE_STATUSES, shape_problems

REGION = "eu-west-1"
TABLE = {
    "Type": "AWS::DynamoDB::Table",
    "Properties": {
        "KeySchema": [{"AttributeName": "pk", "KeyType": "HASH"}],
        "AttributeDefinitions": [{"AttributeName": "pk", "AttributeType": "S"}],
        "BillingMode": "PAY_PER_REQUEST",
    },
}
#: A queue, a table, a topic, an alarm the stand-in skips, and a resource whose condition is false.
TEMPLATE: dict[str, Any] = {
    "Description": "read APIs",
    "Conditions": {"Never": {"Fn::Equals": ["a", "b"]}},
    "Resources": {
        "Queue": {"Type": "AWS::SQS::Queue", "Metadata": {"aws:cdk:path": "App/Queue/Resource"}},
        "Table": TABLE,
        "Topic": {"Type": "AWS::SNS::Topic"},
        "Alarm": {
            "Type": "AWS::CloudWatch::Alarm",
            "Properties": {
                "MetricName": "NumberOfMessagesSent",
                "Namespace": "AWS/SQS",
                "Statistic": "Sum",
                "Period": 60,
                "EvaluationPeriods": 1,
                "Threshold": 1,
                "ComparisonOperator": "GreaterThanThreshold",
            },
        },
        "Unwanted": {"Type": "AWS::SNS::Topic", "Condition": "Never"},
    },
    "Outputs": {"QueueUrl": {"Value": {"Ref": "Queue"}, "Description": "Send here"}},
}
DECLARED = {"Queue", "Table", "Topic", "Alarm"}


@pytest.fixture
def cfn() -> Iterator[Any]:
    moto_patches.apply()
    try:
        with mock_aws():
            yield boto3.client("cloudformation", region_name=REGION)
    finally:
        moto_patches.revert()


def _deploy(cloudformation: Any, stack: str, template: dict[str, Any]) -> str:
    """What ``cdk deploy`` does: a change set (CREATE for a new stack, else UPDATE), executed; the stack's status."""
    existing = {s["StackName"]: s["StackStatus"] for s in cloudformation.describe_stacks()["Stacks"]}
    kind = "UPDATE" if existing.get(stack, "REVIEW_IN_PROGRESS") != "REVIEW_IN_PROGRESS" else "CREATE"
    created = cloudformation.create_change_set(
        StackName=stack, ChangeSetName="cdk-deploy-change-set", ChangeSetType=kind, TemplateBody=json.dumps(template)
    )
    cloudformation.execute_change_set(ChangeSetName=created["Id"], StackName=stack)
    return str(cloudformation.describe_stacks(StackName=stack)["Stacks"][0]["StackStatus"])


def _now() -> datetime.datetime:
    return datetime.datetime.now(datetime.UTC)


def _read_all(cloudformation: Any, stack: str) -> dict[str, dict[str, Any]]:
    """Each read API's answer for the stack (DescribeStackResource for every resource listed)."""
    answers = {
        "DescribeStackResources": cloudformation.describe_stack_resources(StackName=stack),
        "ListStackResources": cloudformation.list_stack_resources(StackName=stack),
        "DescribeStacks": cloudformation.describe_stacks(StackName=stack),
        "GetTemplate": cloudformation.get_template(StackName=stack),
        "DescribeStackEvents": cloudformation.describe_stack_events(StackName=stack),
    }
    for summary in answers["ListStackResources"]["StackResourceSummaries"]:
        logical_id = summary["LogicalResourceId"]
        answers[f"DescribeStackResource {logical_id}"] = cloudformation.describe_stack_resource(
            StackName=stack, LogicalResourceId=logical_id
        )
    return answers


def _problems(answers: dict[str, dict[str, Any]]) -> list[str]:
    return [problem for name, answer in answers.items() for problem in shape_problems(name.split()[0], answer)]


def test_moto_alone_lists_skipped_resources_without_ids_with_a_2010_timestamp() -> None:
    # GIVEN moto without the fixes (if this fails, moto fixed it: re-check the patch)
    with mock_aws():
        cloudformation = boto3.client("cloudformation", region_name=REGION)
        cloudformation.create_stack(StackName="App", TemplateBody=json.dumps(TEMPLATE))
        # WHEN its resources are described
        described = cloudformation.describe_stack_resources(StackName="App")["StackResources"]
        # THEN the alarm moto skipped is an entry without its ids or type, and every time is 2010's
        assert [r for r in described if "LogicalResourceId" not in r]
        assert {r["Timestamp"].year for r in described} == {2010}
        assert shape_problems("DescribeStackResources", {"StackResources": described})
        # AND DescribeStackResource of a resource after the skipped one fails on it, not with
        # CloudFormation's ValidationError (in-process; the server answers a 500 page)
        with pytest.raises(AttributeError, match="logical_resource_id"):
            cloudformation.describe_stack_resource(StackName="App", LogicalResourceId="Unwanted")


def test_a_deployed_stack_reads_back_in_aws_shape_with_the_deployments_times(cfn: Any) -> None:
    # GIVEN a stack deployed by change set
    started = _now()
    assert _deploy(cfn, "App", TEMPLATE) == "CREATE_COMPLETE"
    finished = _now()
    # WHEN every read API is asked about it
    answers = _read_all(cfn, "App")
    # THEN every answer has what botocore's model says CloudFormation always returns, typed
    assert _problems(answers) == []
    # AND every declared resource whose condition holds is listed once, CREATE_COMPLETE, at the deploy's time
    described = {r["LogicalResourceId"]: r for r in answers["DescribeStackResources"]["StackResources"]}
    assert set(described) == DECLARED
    assert {r["ResourceStatus"] for r in described.values()} == {"CREATE_COMPLETE"}
    assert all(started <= r["Timestamp"] <= finished for r in described.values())
    # AND the physical ids are the resources' own (the queue's URL, the table's name), the alarm's the placeholder
    sqs = boto3.client("sqs", region_name=REGION)
    queue_url = sqs.get_queue_url(QueueName=_name(described["Queue"]))["QueueUrl"]
    assert described["Queue"]["PhysicalResourceId"] == queue_url
    tables = boto3.client("dynamodb", region_name=REGION).list_tables()["TableNames"]
    assert tables == [described["Table"]["PhysicalResourceId"]]
    assert is_skipped_physical_id(described["Alarm"]["PhysicalResourceId"])
    assert described["Alarm"]["ResourceStatusReason"].startswith("Skipped by the local stand-in")
    assert "ResourceStatusReason" not in described["Queue"]
    # AND ListStackResources and DescribeStackResource say the same
    summaries = answers["ListStackResources"]["StackResourceSummaries"]
    assert {(s["LogicalResourceId"], s["PhysicalResourceId"]) for s in summaries} == {
        (r["LogicalResourceId"], r["PhysicalResourceId"]) for r in described.values()
    }
    detail = answers["DescribeStackResource Queue"]["StackResourceDetail"]
    assert detail["LastUpdatedTimestamp"] == described["Queue"]["Timestamp"]
    assert json.loads(detail["Metadata"]) == {"aws:cdk:path": "App/Queue/Resource"}
    # AND one event per resource, with its status and physical id, between the stack's own
    events = answers["DescribeStackEvents"]["StackEvents"]
    resource_events = [e for e in events if e["ResourceType"] != "AWS::CloudFormation::Stack"]
    assert Counter(e["LogicalResourceId"] for e in resource_events) == Counter(DECLARED)
    assert all(
        e["ResourceStatus"] == "CREATE_COMPLETE"
        and e["PhysicalResourceId"] == described[e["LogicalResourceId"]]["PhysicalResourceId"]
        for e in resource_events
    )
    assert events[0]["ResourceType"] == "AWS::CloudFormation::Stack"
    assert events[0]["ResourceStatus"] == "CREATE_COMPLETE"
    # AND the stack has its status, outputs and drift information; the template its stages
    [stack] = answers["DescribeStacks"]["Stacks"]
    assert stack["StackStatus"] == "CREATE_COMPLETE"
    assert stack["Outputs"] == [
        {"OutputKey": "QueueUrl", "OutputValue": described["Queue"]["PhysicalResourceId"], "Description": "Send here"}
    ]
    assert stack["DriftInformation"] == {"StackDriftStatus": "NOT_CHECKED"}
    assert answers["GetTemplate"]["StagesAvailable"] == ["Original", "Processed"]
    assert answers["GetTemplate"]["TemplateBody"] == TEMPLATE


def _name(resource: dict[str, Any]) -> str:
    return str(resource["PhysicalResourceId"]).rsplit("/", 1)[1]


def test_an_update_marks_what_changed_keeps_what_did_not_and_drops_what_was_removed(cfn: Any) -> None:
    # GIVEN a deployed stack
    _deploy(cfn, "App", TEMPLATE)
    before = {r["LogicalResourceId"]: r for r in cfn.describe_stack_resources(StackName="App")["StackResources"]}
    # WHEN an update changes the table (a type moto cannot update in place), adds a queue and removes the topic
    updated = json.loads(json.dumps(TEMPLATE))
    updated["Resources"]["Table"]["Properties"]["Tags"] = [{"Key": "team", "Value": "orders"}]
    updated["Resources"]["Second"] = {"Type": "AWS::SQS::Queue"}
    del updated["Resources"]["Topic"]
    started = _now()
    assert _deploy(cfn, "App", updated) == "UPDATE_COMPLETE"
    finished = _now()
    answers = _read_all(cfn, "App")
    # THEN every answer is still in the model's shape
    assert _problems(answers) == []
    after = {r["LogicalResourceId"]: r for r in answers["DescribeStackResources"]["StackResources"]}
    # AND the table is still the stack's (moto alone drops it from the stack), UPDATE_COMPLETE now
    assert set(after) == DECLARED - {"Topic"} | {"Second"}
    assert after["Table"]["PhysicalResourceId"] == before["Table"]["PhysicalResourceId"]
    assert after["Table"]["ResourceStatus"] == "UPDATE_COMPLETE"
    assert started <= after["Table"]["Timestamp"] <= finished
    # AND the added queue is CREATE_COMPLETE now; the queue nobody changed kept its status and time
    assert after["Second"]["ResourceStatus"] == "CREATE_COMPLETE"
    assert started <= after["Second"]["Timestamp"] <= finished
    assert after["Queue"]["ResourceStatus"] == "CREATE_COMPLETE"
    assert after["Queue"]["Timestamp"] == before["Queue"]["Timestamp"]
    assert all(r["ResourceStatus"] in DEPLOYED_RESOURCE_STATUSES for r in after.values())
    # AND the update's events: one per resource it touched, the removed topic DELETE_COMPLETE
    events = answers["DescribeStackEvents"]["StackEvents"]
    touched = [(e["LogicalResourceId"], e["ResourceStatus"]) for e in events if e["Timestamp"] >= started]
    assert ("Table", "UPDATE_COMPLETE") in touched
    assert ("Second", "CREATE_COMPLETE") in touched
    assert ("Topic", "DELETE_COMPLETE") in touched
    assert ("Queue", "CREATE_COMPLETE") not in touched
    # AND the stack says when it was updated
    [stack] = answers["DescribeStacks"]["Stacks"]
    assert started <= stack["LastUpdatedTime"] <= finished


def test_resources_are_found_by_physical_id_and_listed_in_pages(cfn: Any) -> None:
    # GIVEN a stack of more than DescribeStackResources' 100 resources (wait condition handles: no-ops)
    handle = {"Type": "AWS::CloudFormation::WaitConditionHandle"}
    template = {"Resources": {f"Handle{index:03}": dict(handle) for index in range(105)}}
    template["Resources"]["Queue"] = {"Type": "AWS::SQS::Queue"}
    _deploy(cfn, "Big", template)
    # WHEN it is listed page by page, and described
    pages = list(cfn.get_paginator("list_stack_resources").paginate(StackName="Big"))
    described = cfn.describe_stack_resources(StackName="Big")["StackResources"]
    # THEN ListStackResources pages through all 106, DescribeStackResources stops at 100, as in AWS
    assert len(pages) == 2
    assert sum(len(page["StackResourceSummaries"]) for page in pages) == 106
    assert len(described) == DESCRIBE_LIMIT
    # WHEN the queue's resources are asked for by its physical id
    [queue] = [s for page in pages for s in page["StackResourceSummaries"] if s["LogicalResourceId"] == "Queue"]
    by_physical = cfn.describe_stack_resources(
        PhysicalResourceId=queue["PhysicalResourceId"], LogicalResourceId="Queue"
    )
    # THEN its stack's resource is found
    assert [(r["StackName"], r["LogicalResourceId"]) for r in by_physical["StackResources"]] == [("Big", "Queue")]


def test_a_resource_the_stack_does_not_have_is_a_validation_error(cfn: Any) -> None:
    # GIVEN a deployed stack
    _deploy(cfn, "App", TEMPLATE)
    # WHEN a resource it does not hold (its condition is false) is described
    with pytest.raises(ClientError) as error:
        cfn.describe_stack_resource(StackName="App", LogicalResourceId="Unwanted")
    # THEN CloudFormation's error says so
    assert error.value.response["Error"]["Code"] == "ValidationError"
    assert "Resource Unwanted does not exist for stack App" in error.value.response["Error"]["Message"]


def test_a_deleted_stack_ends_every_resource_with_an_event(cfn: Any) -> None:
    # GIVEN a deployed stack
    _deploy(cfn, "App", TEMPLATE)
    stack_id = cfn.describe_stacks(StackName="App")["Stacks"][0]["StackId"]
    # WHEN it is deleted
    cfn.delete_stack(StackName="App")
    # THEN each of its resources has a DELETE_COMPLETE event, and its resources read back by its id as deleted
    events = cfn.describe_stack_events(StackName=stack_id)["StackEvents"]
    deleted = {e["LogicalResourceId"] for e in events if e["ResourceStatus"] == "DELETE_COMPLETE"}
    assert deleted >= DECLARED
    summaries = cfn.list_stack_resources(StackName=stack_id)["StackResourceSummaries"]
    assert {s["ResourceStatus"] for s in summaries} == {"DELETE_COMPLETE"}
