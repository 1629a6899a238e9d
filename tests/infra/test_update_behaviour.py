"""upgrade-check's table of replacing properties: current with CloudFormation's schemas, covering every type used."""

from __future__ import annotations

import json
import sys
from pathlib import Path

from idempotent_order_pipeline.upgrade_check import update_behaviour

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "tools"))
import update_behaviour as tool  # noqa: E402


def test_the_table_is_what_the_script_writes_from_the_installed_schemas() -> None:
    # GIVEN the committed table and the installed cfn-lint's resource schemas
    # WHEN the script builds the table again
    # THEN it is the committed one (a cfn-lint upgrade that changes a type's behaviour shows here)
    assert tool.render(tool.build()) == tool.TABLE.read_text()


def test_the_table_covers_every_type_of_every_snapshot_and_release_template() -> None:
    # GIVEN every committed snapshot and release template
    paths = [*REPO.glob("tests/infra/__snapshots__/*/*.json"), *REPO.glob("tests/compat/templates/*/*.json")]
    used = {resource["Type"] for path in paths for resource in json.loads(path.read_text())["Resources"].values()}
    # THEN each type they use has its update behaviour in the shipped table
    assert paths
    assert used - set(update_behaviour()["types"]) == set()


def test_the_documented_replacements_are_in_the_table() -> None:
    # GIVEN the shipped table / THEN it has the replacements docs/data-loss-gate.md names
    types = update_behaviour()["types"]
    assert {"KeySchema", "LocalSecondaryIndexes", "TableName"} <= set(types["AWS::DynamoDB::Table"]["replace"])
    assert {"FifoQueue", "QueueName"} <= set(types["AWS::SQS::Queue"]["replace"])
    assert {"FifoTopic", "TopicName"} <= set(types["AWS::SNS::Topic"]["replace"])
    assert "EventSourceArn" in types["AWS::Lambda::EventSourceMapping"]["replace"]
    assert "BatchSize" not in types["AWS::Lambda::EventSourceMapping"]["replace"]
    assert len(types) == len(tool.TYPES) == 35
