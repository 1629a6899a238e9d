"""The sandbox's TransactWriteItems fix: all or nothing, at the cost of the touched items only."""

from __future__ import annotations

import copy
import datetime
import time
from collections.abc import Iterator
from typing import Any

import boto3
import pytest
from botocore.exceptions import ClientError
from moto import mock_aws
from moto.dynamodb.models import DynamoDBBackend, dynamodb_backends
from moto.dynamodb.models.table import Table

from order_pipeline_sandbox import moto_patches

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
