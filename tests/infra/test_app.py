"""``app.py``: one Stage per cdk.json environment, the stack outputs, context handling, pinned ids."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import aws_cdk as cdk
import pytest

import app as cdk_app
from idempotent_order_pipeline._lambda_asset.order_consumer.contract import names
from idempotent_order_pipeline.discovery import pipelines_in
from tests.infra.synth import REPO, Synthesized, SynthesizedApp, logical_id, resources_of_type, synth_app

# Logical ids of the stateful resources. A refactor that changes one makes CloudFormation replace
# the resource: an empty table, lost messages. Change them only with a migration plan.
PIPELINE_LOGICAL_IDS = {
    "AWS::SQS::Queue": {"PipelineQueueC13966F5", "PipelineDeadLetterQueueF08023D6"},
    "AWS::DynamoDB::Table": {"PipelineProcessedEventsTableA60DFACB", "PipelineOrderRecordsTable1509BD64"},
}
# The app's fulfilment subscriber: its queues, its deduplication table and the team's counter table.
FULFILMENT_LOGICAL_IDS = {
    "AWS::SQS::Queue": {"FulfilmentQueue26A1FA60", "FulfilmentDeadLetterQueue1A3B608F"},
    "AWS::DynamoDB::Table": {"FulfilmentDedupTableC91EE358", "ShipmentCounters08AA0359"},
}
PINNED_LOGICAL_IDS = {
    resource_type: PIPELINE_LOGICAL_IDS[resource_type] | FULFILMENT_LOGICAL_IDS[resource_type]
    for resource_type in PIPELINE_LOGICAL_IDS
}
# The output names are a contract (the sandbox, the CLI and operators' scripts read them): spelled out
# here, so that renaming one in ``contract/names.py`` fails this test instead of passing with it.
OUTPUT_KEYS = {
    "QueueUrl",
    "DeadLetterQueueUrl",
    "ProcessedEventsTableName",
    "OrderRecordsTableName",
    "TopicArn",
    "FunctionName",
}
# The app's own outputs, beside the contract's: where the demo reads what fulfilment did.
APP_OUTPUT_KEYS = {"ShipmentCountersTableName", "FulfilmentQueueUrl", "FulfilmentDeadLetterQueueUrl"}


def test_every_cdk_json_environment_is_a_stage_with_the_order_pipeline_stack(synthesized_app: SynthesizedApp) -> None:
    # GIVEN the app as `cdk synth` builds it
    # WHEN its stages are listed
    # THEN dev and prod exist, each with the OrderPipeline stack (so `cdk deploy 'dev/*'` works)
    assert set(synthesized_app.stages) == {"dev", "prod"}
    for name, synthesized in synthesized_app.stages.items():
        assert synthesized.stack.node.path == f"{name}/OrderPipeline"
        assert synthesized.stack.stack_name == f"{name}-OrderPipeline"


@pytest.mark.parametrize("stage", ["dev", "prod"])
def test_stages_are_environment_agnostic_without_account_or_region(synthesized_app: SynthesizedApp, stage: str) -> None:
    # GIVEN cdk.json without account or region
    stack = synthesized_app.stages[stage].stack
    # WHEN the stack's environment is read
    # THEN account and region are deploy-time pseudo parameters
    assert cdk.Token.is_unresolved(stack.account)
    assert cdk.Token.is_unresolved(stack.region)


@pytest.mark.parametrize("stage", ["dev", "prod"])
def test_stateful_logical_ids_are_pinned(synthesized_app: SynthesizedApp, stage: str) -> None:
    # GIVEN a stage's template
    template_json = synthesized_app.stages[stage].template_json
    # WHEN the tables and queues are listed
    # THEN their logical ids are exactly the pinned ones
    for resource_type, logical_ids in PINNED_LOGICAL_IDS.items():
        assert set(resources_of_type(template_json, resource_type)) == logical_ids


def test_construct_logical_ids_do_not_depend_on_the_app(default_pipeline: Synthesized) -> None:
    # GIVEN the construct in another stack, under the same id
    # WHEN its tables and queues are listed
    # THEN they have the same logical ids: they derive from construct ids only
    for resource_type, logical_ids in PIPELINE_LOGICAL_IDS.items():
        assert set(resources_of_type(default_pipeline.template_json, resource_type)) == logical_ids


@pytest.mark.parametrize("stage", ["dev", "prod"])
def test_stack_outputs_are_the_contract_keys_without_exports(synthesized_app: SynthesizedApp, stage: str) -> None:
    # GIVEN a stage's stack
    synthesized = synthesized_app.stages[stage]
    pipeline = synthesized.pipeline
    stack = synthesized.stack
    assert isinstance(stack, cdk_app.OrderPipelineStack)
    outputs = synthesized.template_json["Outputs"]

    def logical(construct: Any) -> str:
        return logical_id(synthesized.stack, construct)

    # WHEN its outputs are read
    # THEN the sandbox's and CLI's keys are there, pointing at the pipeline's resources, not exported
    assert set(names.STACK_OUTPUTS) == OUTPUT_KEYS
    assert set(outputs) == OUTPUT_KEYS | APP_OUTPUT_KEYS
    assert outputs["QueueUrl"]["Value"] == {"Ref": logical(pipeline.queue)}
    assert outputs["DeadLetterQueueUrl"]["Value"] == {"Ref": logical(pipeline.dead_letter_queue)}
    assert outputs["ProcessedEventsTableName"]["Value"] == {"Ref": logical(pipeline.processed_events_table)}
    assert outputs["OrderRecordsTableName"]["Value"] == {"Ref": logical(pipeline.order_records_table)}
    assert outputs["TopicArn"]["Value"] == {"Ref": logical(pipeline.topic)}
    assert outputs["FunctionName"]["Value"] == {"Ref": logical(pipeline.function)}
    assert outputs["ShipmentCountersTableName"]["Value"] == {"Ref": logical(stack.shipment_counters)}
    assert outputs["FulfilmentQueueUrl"]["Value"] == {"Ref": logical(stack.fulfilment.queue)}
    assert outputs["FulfilmentDeadLetterQueueUrl"]["Value"] == {"Ref": logical(stack.fulfilment.dead_letter_queue)}
    assert not [key for key, output in outputs.items() if "Export" in output]


@pytest.mark.parametrize(
    ("stage", "deletion_policy", "protected"), [("dev", "Delete", False), ("prod", "Retain", True)]
)
def test_stage_removal_policy_comes_from_cdk_json(
    synthesized_app: SynthesizedApp, stage: str, deletion_policy: str, protected: bool
) -> None:
    # GIVEN dev (destroy) and prod (retain) in cdk.json
    template_json = synthesized_app.stages[stage].template_json
    # WHEN the tables are inspected
    tables = resources_of_type(template_json, "AWS::DynamoDB::Table").values()
    # THEN dev's go with the stack, prod's stay and are deletion protected
    assert {table["DeletionPolicy"] for table in tables} == {deletion_policy}
    assert {table["Properties"]["DeletionProtectionEnabled"] for table in tables} == {protected}


@pytest.mark.parametrize("stage", ["dev", "prod"])
def test_service_name_is_unique_per_stage(synthesized_app: SynthesizedApp, stage: str) -> None:
    # GIVEN two stages that may share an account and region
    synthesized = synthesized_app.stages[stage]
    function = synthesized.template_json["Resources"][logical_id(synthesized.stack, synthesized.pipeline.function)]
    # WHEN the service name is read
    # THEN it includes the stack name, so one stage's outcome alarms never see the other's metrics
    assert (
        function["Properties"]["Environment"]["Variables"]["POWERTOOLS_SERVICE_NAME"]
        == f"{stage}-OrderPipeline-Pipeline"
    )


def test_powertools_layer_context_replaces_the_public_layer_in_the_selected_stage(tmp_path: Path) -> None:
    # GIVEN `-c env=dev -c powertools_layer_arn=...` (the sandbox's locally published layer)
    arn = "arn:aws:lambda:us-east-1:123456789012:layer:powertools-local:3"
    # WHEN the app is synthesized
    synthesized = synth_app(tmp_path, {"env": "dev", "powertools_layer_arn": arn})
    # THEN only dev is built, and its function uses exactly that layer
    assert set(synthesized.stages) == {"dev"}
    synthesized.stages["dev"].template.has_resource_properties("AWS::Lambda::Function", {"Layers": [arn]})


def test_account_and_region_from_context_pin_the_stage() -> None:
    # GIVEN an environment with account and region in context
    environments = cdk_app.default_context()["environments"]
    prod = {**environments["prod"], "account": "111111111111", "region": "eu-west-1"}
    # WHEN the app is built
    app = cdk_app.build_app({"environments": {"prod": prod}})
    stack = app.node.find_child("prod").node.find_child(cdk_app.STACK_ID)
    # THEN the stage is deployed to exactly that environment
    assert isinstance(stack, cdk.Stack)
    assert (stack.account, stack.region) == ("111111111111", "eu-west-1")


@pytest.mark.parametrize(
    ("context", "message"),
    [
        ({"env": "staging"}, r"-c env='staging': allowed \['dev', 'prod'\]"),
        (
            {"environments": {"dev": {"removal_policy": "keep"}}},
            r"environments\.dev\.removal_policy='keep': allowed \['destroy', 'retain'\]",
        ),
        (
            {"environments": {"dev": {"removal_policy": "destroy", "regoin": "eu-west-1"}}},
            r"environments\.dev: unknown key\(s\) \['regoin'\]",
        ),
        (
            {"environments": {"dev": {"removal_policy": "destroy", "alarm_evaluation_periods": 1}}},
            r"environments\.dev: oldest_message_age_threshold_seconds and alarm_evaluation_periods must be whole",
        ),
        ({"environments": {}}, r"context 'environments' must map stage names to settings"),
    ],
)
def test_bad_context_fails_the_synth_with_its_key(context: dict[str, Any], message: str) -> None:
    # GIVEN context with a mistake
    # WHEN the app is built
    # THEN it fails naming the key, the value and what is allowed
    with pytest.raises(ValueError, match=message):
        cdk_app.build_app(context)


def test_readme_example_synthesizes(tmp_path: Path) -> None:
    # GIVEN the Python example of the README's "Using the construct" section
    readme = (REPO / "README.md").read_text()
    section = readme.split("## Using the construct", 1)[1]
    example = section.split("```python\n", 1)[1].split("```", 1)[0]
    assert example.count("cdk.App()") == 1
    # WHEN it runs (writing its cloud assembly to a temporary directory)
    example = example.replace("cdk.App()", f"cdk.App(outdir={str(tmp_path)!r})")
    exec(compile(example, "README.md", "exec"), {})  # noqa: S102  (our own README)
    # THEN it synthesized the pipeline, the producer's grant and the subscription
    template = json.loads((tmp_path / "Shop.template.json").read_text())
    types = [resource["Type"] for resource in template["Resources"].values()]
    assert types.count("AWS::Lambda::Function") == 2  # the consumer and the reconciler
    assert types.count("AWS::SNS::Subscription") == 1
    assert types.count("AWS::DynamoDB::Table") == 2


@pytest.mark.parametrize("stage", ["dev", "prod"])
def test_the_worked_app_has_an_order_schema_and_routable_notifications(
    synthesized_app: SynthesizedApp, stage: str
) -> None:
    # GIVEN a stage's pipeline as app.py builds it
    synthesized = synthesized_app.stages[stage]
    function = synthesized.template_json["Resources"][logical_id(synthesized.stack, synthesized.pipeline.function)]
    # WHEN the template is read as the producer and `order-pipeline send` discover the pipeline
    [discovered] = pipelines_in(synthesized.template_json, {})
    # THEN the producer finds the app's order schema, and every notification carries country, amount
    # and customer.tier
    assert discovered.order_schema == cdk_app.ORDER_SCHEMA
    assert json.loads(function["Properties"]["Environment"]["Variables"]["NOTIFICATION_ATTRIBUTES"]) == [
        "country",
        "amount",
        "customer.tier",
    ]


@pytest.mark.parametrize("stage", ["dev", "prod"])
def test_fulfilment_subscribes_to_german_orders_and_counts_with_the_example_handler(
    synthesized_app: SynthesizedApp, stage: str
) -> None:
    # GIVEN a stage's stack
    synthesized = synthesized_app.stages[stage]
    stack = synthesized.stack
    assert isinstance(stack, cdk_app.OrderPipelineStack)
    template_json = synthesized.template_json
    resources = template_json["Resources"]
    # WHEN the fulfilment subscription and function are read
    [subscription] = resources_of_type(template_json, "AWS::SNS::Subscription").values()
    function = resources[logical_id(stack, stack.fulfilment.function)]
    # THEN only orders whose country attribute is DE reach its queue, from the pipeline's topic
    assert subscription["Properties"]["FilterPolicy"] == {"country": ["DE"]}
    assert subscription["Properties"]["TopicArn"] == {"Ref": logical_id(stack, synthesized.pipeline.topic)}
    assert subscription["Properties"]["Endpoint"] == {"Fn::GetAtt": [logical_id(stack, stack.fulfilment.queue), "Arn"]}
    # AND its function runs the worked example's counter handler against the counter table
    assert function["Properties"]["Handler"] == "shipping.handler"
    assert function["Properties"]["Environment"]["Variables"]["COUNTERS_TABLE"] == {
        "Ref": logical_id(stack, stack.shipment_counters)
    }
    assert (cdk_app.FULFILMENT_CODE / "shipping.py").is_file()
    # AND its role may write that table (the effect commits in the subscriber's transaction)
    counters_arn = {"Fn::GetAtt": [logical_id(stack, stack.shipment_counters), "Arn"]}
    role = {"Ref": logical_id(stack, stack.fulfilment.function.role)}
    statements = [
        statement
        for policy in resources_of_type(template_json, "AWS::IAM::Policy").values()
        if role in policy["Properties"]["Roles"]
        for statement in policy["Properties"]["PolicyDocument"]["Statement"]
    ]
    assert statements
    assert any(
        "dynamodb:UpdateItem" in statement["Action"] and counters_arn in _as_list(statement["Resource"])
        for statement in statements
    )


def _as_list(value: Any) -> list[Any]:
    return value if isinstance(value, list) else [value]
