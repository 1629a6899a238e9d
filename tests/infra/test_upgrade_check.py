"""``order-pipeline upgrade-check``: every replacement and removal listed, exit 1 only where data can be lost.

Each case checks a real synthesized template against another (the default configuration's, as a
team's "before"), through the command as a team runs it (click's runner), so the output lines and
exit codes, a contract, are what is asserted.
"""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import aws_cdk as cdk
import boto3
import pytest
from click.testing import CliRunner, Result
from moto import mock_aws

from idempotent_order_pipeline import IdempotentOrderPipeline, upgrade_check
from idempotent_order_pipeline.cli import cli
from idempotent_order_pipeline.cli.aws import AwsClients
from idempotent_order_pipeline.cli.upgrade_check import EXIT_CANNOT_CHECK, EXIT_DATA_LOSS, EXIT_SAFE
from idempotent_order_pipeline.testing import snapshot_template
from tests.infra.synth import Synthesized, logical_id


def check(tmp_path: Path, before: dict[str, Any], after: dict[str, Any], *args: str, obj: Any = None) -> Result:
    """``order-pipeline upgrade-check --before B --after A ARGS`` on two templates written to files."""
    (tmp_path / "before.json").write_text(json.dumps(before))
    (tmp_path / "after.json").write_text(json.dumps(after))
    argv = ["upgrade-check", "--after", str(tmp_path / "after.json"), *args]
    if "--before-stack" not in args:
        argv += ["--before", str(tmp_path / "before.json")]
    return CliRunner().invoke(cli, argv, obj=obj or AwsClients())


def synth(**props: Any) -> dict[str, Any]:
    app = cdk.App()
    stack = cdk.Stack(app, "TestStack")
    IdempotentOrderPipeline(stack, "Pipeline", **props)
    template: dict[str, Any] = json.loads(json.dumps(app.synth().get_stack_by_name("TestStack").template))
    return template


@pytest.fixture(scope="module")
def resized() -> dict[str, Any]:
    """The default pipeline with batch_size=5 and memory_size=1024."""
    return synth(batch_size=5, memory_size=1024)


@pytest.fixture(scope="module")
def renamed() -> dict[str, Any]:
    """The construct id "Orders" instead of "Pipeline": every logical id changes."""
    app = cdk.App()
    IdempotentOrderPipeline(cdk.Stack(app, "TestStack"), "Orders")
    template: dict[str, Any] = json.loads(json.dumps(app.synth().get_stack_by_name("TestStack").template))
    return template


def test_rekeying_the_order_table_can_lose_data(default_pipeline: Synthesized, tmp_path: Path) -> None:
    # GIVEN the default template, and the same with order_records re-keyed by "id"
    before = default_pipeline.template_json
    table = logical_id(default_pipeline.stack, default_pipeline.pipeline.order_records_table)
    after = copy.deepcopy(before)
    after["Resources"][table]["Properties"]["KeySchema"] = [{"AttributeName": "id", "KeyType": "HASH"}]
    # WHEN the upgrade check compares them
    result = check(tmp_path, before, after)
    # THEN it exits 1, naming the table, the replacing property and what is lost
    assert result.exit_code == EXIT_DATA_LOSS, result.output
    [line, summary] = result.output.splitlines()
    assert line.startswith(f"DATA-LOSS replaced: {table} (AWS::DynamoDB::Table")
    assert "KeySchema changed" in line
    assert "the stack goes on with a new, empty one" in line
    assert "(the old one is kept in the account, outside the stack, by its Retain policy)" in line
    assert summary == "upgrade-check: after: 1 replaced, 0 removed; 1 can lose data; library 0.3.0.dev0 -> 0.3.0.dev0"


def test_a_batch_size_and_memory_change_is_safe(
    default_pipeline: Synthesized, resized: dict[str, Any], tmp_path: Path
) -> None:
    # GIVEN the default template and one with another batch size and memory size (updated in place)
    # WHEN the upgrade check compares them
    result = check(tmp_path, default_pipeline.template_json, resized, "--name", "prod/Shop")
    # THEN nothing is replaced or removed, and it exits 0
    assert result.exit_code == EXIT_SAFE, result.output
    assert result.output.splitlines() == [
        "upgrade-check: prod/Shop: 0 replaced, 0 removed; no data can be lost; library 0.3.0.dev0 -> 0.3.0.dev0"
    ]


def test_renaming_the_construct_id_removes_every_stateful_resource(
    default_pipeline: Synthesized, renamed: dict[str, Any], tmp_path: Path
) -> None:
    # GIVEN the construct id "Orders" instead of "Pipeline" (every logical id changes)
    # WHEN the upgrade check compares them (as JSON lines)
    result = check(tmp_path, default_pipeline.template_json, renamed, "--json")
    changes = [json.loads(line) for line in result.output.splitlines()]
    summary = changes.pop()
    # THEN every resource of the old template is listed as removed
    assert {change["logical_id"] for change in changes} == set(default_pipeline.template_json["Resources"]) - set(
        renamed["Resources"]
    )
    assert {change["action"] for change in changes} == {"removed"}
    # AND the tables, queues, topic and log groups can lose data (kept outside the stack, retained),
    # everything else (functions, roles, the mapping, alarms) is safe
    losing = {change["type"] for change in changes if change["loses_data"]}
    assert losing == {"AWS::DynamoDB::Table", "AWS::SQS::Queue", "AWS::SNS::Topic", "AWS::Logs::LogGroup"}
    assert all(change["retained"] for change in changes if change["loses_data"])
    assert summary["data_loss"] == len([change for change in changes if change["loses_data"]]) == 7
    assert result.exit_code == EXIT_DATA_LOSS


def test_switching_to_fifo_replaces_the_queues_topic_and_mapping(
    default_pipeline: Synthesized, fifo_pipeline: Synthesized, tmp_path: Path
) -> None:
    # GIVEN the default template and fifo=True
    # WHEN the upgrade check compares them
    result = check(tmp_path, default_pipeline.template_json, fifo_pipeline.template_json, "--json")
    changes = {change["logical_id"]: change for change in map(json.loads, result.output.splitlines()[:-1])}
    queue = logical_id(default_pipeline.stack, default_pipeline.pipeline.queue)
    topic = logical_id(default_pipeline.stack, default_pipeline.pipeline.topic)
    # THEN the queue and the topic are replaced for FifoQueue / FifoTopic, and can lose data
    assert changes[queue]["causes"] == ["FifoQueue changed"]
    assert "FifoTopic changed" in changes[topic]["causes"]
    assert changes[queue]["loses_data"]
    assert "it may hold messages (not read from a deployed stack: pass --before-stack)" in changes[queue]["reason"]
    # AND the event source mapping, whose EventSourceArn refers to the replaced queue, is replaced too: safe
    [mapping] = [c for c in changes.values() if c["type"] == "AWS::Lambda::EventSourceMapping"]
    assert mapping["causes"] == [f"EventSourceArn refers to {queue}, which is replaced"]
    assert not mapping["loses_data"]
    assert "they wait in the queue" in mapping["reason"]
    assert result.exit_code == EXIT_DATA_LOSS


def test_an_acknowledged_change_passes_and_an_unreasoned_line_cannot_be_checked(
    default_pipeline: Synthesized, tmp_path: Path
) -> None:
    # GIVEN the order table re-keyed, and a reasoned acknowledgement of it for this stack
    before = default_pipeline.template_json
    table = logical_id(default_pipeline.stack, default_pipeline.pipeline.order_records_table)
    after = copy.deepcopy(before)
    after["Resources"][table]["Properties"]["KeySchema"] = [{"AttributeName": "id", "KeyType": "HASH"}]
    acknowledged = tmp_path / "acknowledged"
    acknowledged.write_text(f"# deliberate\nprod/Shop {table} re-keyed by id; rows copied by the migration\n")
    # WHEN the upgrade check runs with it
    result = check(tmp_path, before, after, "--name", "prod/Shop", "--acknowledged", str(acknowledged))
    # THEN it passes, printing the change and the reason
    assert result.exit_code == EXIT_SAFE, result.output
    assert result.output.startswith(f"ACKNOWLEDGED replaced: {table} ")
    assert result.output.splitlines()[0].endswith("; acknowledged: re-keyed by id; rows copied by the migration")
    # AND an acknowledgement for another stack does not count
    assert check(tmp_path, before, after, "--name", "dev/Shop", "--acknowledged", str(acknowledged)).exit_code == 1
    # AND a line without a reason stops the check (exit 2), naming the file and line
    acknowledged.write_text(f"prod/Shop {table}\n")
    refused = check(tmp_path, before, after, "--name", "prod/Shop", "--acknowledged", str(acknowledged))
    assert refused.exit_code == EXIT_CANNOT_CHECK
    assert f"{acknowledged}:1: " in refused.output


def test_a_committed_snapshot_is_a_valid_before(default_pipeline: Synthesized, tmp_path: Path) -> None:
    # GIVEN the default pipeline's snapshot (hashes masked, the dashboard expanded, keys sorted)
    snapshot = snapshot_template(default_pipeline.stack)
    # WHEN it is the "before" of its own template
    result = check(tmp_path, snapshot, default_pipeline.template_json)
    # THEN nothing is replaced: the masks match the hashes, the expanded body the joined one
    assert result.exit_code == EXIT_SAFE
    assert " 0 replaced, 0 removed; " in result.output
    # AND a layer whose code changed, compared unmasked, is listed as replaced (its Content cannot change in place)
    before = {
        "Resources": {"Layer": {"Type": "AWS::Lambda::LayerVersion", "Properties": {"Content": {"S3Key": "a" * 64}}}}
    }
    after = copy.deepcopy(before)
    after["Resources"]["Layer"]["Properties"]["Content"]["S3Key"] = "b" * 64
    [change] = upgrade_check.find_changes(before, after)
    assert (change.logical_id, change.action, change.causes) == ("Layer", "replaced", ("Content changed",))


def test_unusable_input_cannot_be_checked(default_pipeline: Synthesized, tmp_path: Path) -> None:
    # GIVEN a file that is not a template
    (tmp_path / "not.json").write_text("[]")
    template = tmp_path / "t.json"
    template.write_text(json.dumps(default_pipeline.template_json))
    for argv in (
        ["upgrade-check", "--before", str(tmp_path / "not.json"), "--after", str(template)],
        ["upgrade-check", "--after", str(template)],  # neither --before nor --before-stack
    ):
        # WHEN the check runs on it / THEN it exits 2 with one line saying why
        result = CliRunner().invoke(cli, argv, obj=AwsClients())
        assert result.exit_code == EXIT_CANNOT_CHECK, result.output
        assert result.output.startswith("Error: ")


QUEUE_TEMPLATE = {"Resources": {"Orders": {"Type": "AWS::SQS::Queue", "Properties": {"QueueName": "orders"}}}}


@pytest.mark.parametrize(("messages", "exit_code"), [(0, EXIT_SAFE), (2, EXIT_DATA_LOSS)])
def test_a_replaced_deployed_queue_loses_data_only_when_it_holds_messages(
    tmp_path: Path, messages: int, exit_code: int
) -> None:
    with mock_aws():
        # GIVEN a deployed stack with a queue holding some messages
        cloudformation = boto3.client("cloudformation", region_name="eu-west-1")
        sqs = boto3.client("sqs", region_name="eu-west-1")
        cloudformation.create_stack(StackName="Shop", TemplateBody=json.dumps(QUEUE_TEMPLATE))
        url = sqs.get_queue_url(QueueName="orders")["QueueUrl"]
        for number in range(messages):
            sqs.send_message(QueueUrl=url, MessageBody=f"order {number}")
        # AND a template that renames the queue (QueueName cannot change in place)
        after = copy.deepcopy(QUEUE_TEMPLATE)
        after["Resources"]["Orders"]["Properties"]["QueueName"] = "orders-v2"
        # WHEN the upgrade check reads "before" from the stack
        clients = AwsClients(overrides={"cloudformation": cloudformation, "sqs": sqs})
        result = check(tmp_path, {}, after, "--before-stack", "Shop", obj=clients)
    # THEN the queue's replacement is safe when it is empty, data loss when it holds messages
    assert result.exit_code == exit_code, result.output
    line = result.output.splitlines()[0]
    if messages:
        assert line.startswith("DATA-LOSS replaced: Orders (AWS::SQS::Queue): QueueName changed: it holds 2 message(s)")
    else:
        assert line.startswith(
            "SAFE replaced: Orders (AWS::SQS::Queue): QueueName changed: the deployed queue was empty"
        )
    assert result.output.splitlines()[-1].startswith("upgrade-check: Shop: 1 replaced, 0 removed; ")


def test_a_stack_that_cannot_be_read_cannot_be_checked(tmp_path: Path) -> None:
    with mock_aws():
        # GIVEN no stack "Shop"
        clients = AwsClients(overrides={"cloudformation": boto3.client("cloudformation", region_name="eu-west-1")})
        # WHEN the check reads "before" from it / THEN it exits 2, naming the stack
        result = check(tmp_path, {}, QUEUE_TEMPLATE, "--before-stack", "Shop", obj=clients)
    assert result.exit_code == EXIT_CANNOT_CHECK
    assert "stack 'Shop' could not be read" in result.output


def test_a_mapping_moved_to_a_new_logical_id_is_safe_but_fails_the_deploy() -> None:
    # GIVEN a mapping removed and one added for the same queue and function (a new logical id)
    mapping = {"EventSourceArn": {"Fn::GetAtt": ["Queue", "Arn"]}, "FunctionName": {"Ref": "Function"}}
    before = {"Resources": {"MappingA": {"Type": "AWS::Lambda::EventSourceMapping", "Properties": mapping}}}
    after = {"Resources": {"MappingB": {"Type": "AWS::Lambda::EventSourceMapping", "Properties": mapping}}}
    # WHEN the changes are judged
    [verdict] = upgrade_check.judge(upgrade_check.find_changes(before, after))
    # THEN the removal loses no data, and the report says the deploy fails on Lambda's conflict
    assert not verdict.loses_data
    assert verdict.change.causes == ("its logical id is now MappingB",)
    assert "Lambda refuses a second mapping of one queue and one function" in verdict.reason


def test_the_cdks_version_report_is_not_a_change() -> None:
    # GIVEN a template whose CDKMetadata changed (another CDK version) and was removed in a third
    before = {"Resources": {"CDKMetadata": {"Type": "AWS::CDK::Metadata", "Properties": {"Analytics": "v2:a"}}}}
    after = {"Resources": {"CDKMetadata": {"Type": "AWS::CDK::Metadata", "Properties": {"Analytics": "v2:b"}}}}
    # WHEN the changes are found / THEN neither is one: it holds nothing and updates in place
    assert upgrade_check.find_changes(before, after) == []
    assert upgrade_check.find_changes(before, {"Resources": {}}) == []
