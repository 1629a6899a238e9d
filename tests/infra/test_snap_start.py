"""``snap_start``: a published version, the alias ``live`` on it, and the queue's mapping on the alias."""

from __future__ import annotations

import aws_cdk as cdk
import pytest
from aws_cdk import aws_lambda
from aws_cdk.assertions import Match

from idempotent_order_pipeline import IdempotentOrderPipeline
from idempotent_order_pipeline.construct import FUNCTION_ALIAS_NAME
from idempotent_order_pipeline.core import rules
from tests.infra.synth import Synthesized, logical_id, resources_of_type


def test_snap_start_publishes_a_version_and_points_the_alias_at_it(snap_start_pipeline: Synthesized) -> None:
    # GIVEN snap_start=True
    template = snap_start_pipeline.template_json
    [function_id] = [
        name
        for name, resource in resources_of_type(template, "AWS::Lambda::Function").items()
        if resource["Properties"].get("Handler") == "order_consumer.handler.handler"
    ]
    # WHEN the consumer function, its versions and aliases are read
    function = template["Resources"][function_id]["Properties"]
    [(version_id, version)] = resources_of_type(template, "AWS::Lambda::Version").items()
    [alias] = resources_of_type(template, "AWS::Lambda::Alias").values()
    # THEN SnapStart applies to published versions, the version is the function's, the alias points at it
    assert function["SnapStart"] == {"ApplyOn": "PublishedVersions"}
    assert version["Properties"]["FunctionName"] == {"Ref": function_id}
    assert alias["Properties"] == {
        "FunctionName": {"Ref": function_id},
        "FunctionVersion": {"Fn::GetAtt": [version_id, "Version"]},
        "Name": FUNCTION_ALIAS_NAME,
    }
    # AND the construct exposes the alias
    assert snap_start_pipeline.pipeline.function_alias is not None
    assert logical_id(snap_start_pipeline.stack, snap_start_pipeline.pipeline.function_alias) in {
        name for name in resources_of_type(template, "AWS::Lambda::Alias")
    }


def test_snap_start_maps_the_queue_to_the_alias_only(snap_start_pipeline: Synthesized) -> None:
    # GIVEN snap_start=True
    template = snap_start_pipeline.template_json
    [alias_id] = resources_of_type(template, "AWS::Lambda::Alias")
    # WHEN the event source mappings are read
    [mapping] = resources_of_type(template, "AWS::Lambda::EventSourceMapping").values()
    # THEN the one mapping invokes the alias (its ARN's function name plus ":live"), never $LATEST,
    # and still reports batch item failures
    function_name = mapping["Properties"]["FunctionName"]
    assert "Fn::Join" in function_name, function_name
    assert {"Ref": alias_id} in function_name["Fn::Join"][1][0]["Fn::Select"][1]["Fn::Split"]
    assert function_name["Fn::Join"][1][1] == f":{FUNCTION_ALIAS_NAME}"
    assert mapping["Properties"]["FunctionResponseTypes"] == ["ReportBatchItemFailures"]


def test_without_snap_start_there_is_no_version_no_alias_and_the_mapping_invokes_the_function(
    default_pipeline: Synthesized,
) -> None:
    # GIVEN the default props
    template = default_pipeline.template_json
    # WHEN the function, versions, aliases and the mapping are read
    # THEN nothing is published, and the mapping names the function itself
    assert resources_of_type(template, "AWS::Lambda::Version") == {}
    assert resources_of_type(template, "AWS::Lambda::Alias") == {}
    assert default_pipeline.pipeline.function_alias is None
    default_pipeline.template.has_resource_properties(
        "AWS::Lambda::Function", {"Handler": "order_consumer.handler.handler", "SnapStart": Match.absent()}
    )
    [mapping] = resources_of_type(template, "AWS::Lambda::EventSourceMapping").values()
    assert mapping["Properties"]["FunctionName"] == {
        "Ref": logical_id(default_pipeline.stack, default_pipeline.pipeline.function)
    }


@pytest.mark.parametrize("value", ["yes", 1])
def test_snap_start_must_be_a_bool(value: object) -> None:
    # GIVEN a snap_start that is not True or False
    stack = cdk.Stack(cdk.App(), "TestStack")
    # WHEN the pipeline is built
    # THEN it is refused, naming the prop, the value and what is allowed
    with pytest.raises(ValueError, match=r"snap_start=.*allowed True or False"):
        IdempotentOrderPipeline(stack, "Pipeline", snap_start=value)  # type: ignore[arg-type]


def test_snap_start_cannot_come_through_function_props() -> None:
    # GIVEN SnapStart asked for through function_props
    stack = cdk.Stack(cdk.App(), "TestStack")
    # WHEN the pipeline is built
    # THEN it is refused: the prop owns it (the alias and the mapping depend on it)
    with pytest.raises(ValueError, match="use snap_start="):
        IdempotentOrderPipeline(
            stack, "Pipeline", function_props={"snap_start": aws_lambda.SnapStartConf.ON_PUBLISHED_VERSIONS}
        )


@pytest.mark.parametrize(("region", "name"), sorted(rules.SNAP_START_UNSUPPORTED_REGIONS.items()))
def test_snap_start_in_a_region_without_it_is_a_synth_error(region: str, name: str) -> None:
    # GIVEN a stack in a region where Lambda offers no SnapStart (the Lambda guide's list)
    stack = cdk.Stack(cdk.App(), "Shop", env=cdk.Environment(account="111111111111", region=region))
    # WHEN the pipeline asks for SnapStart there
    # THEN synthesis fails naming the prop, the region and what is allowed, before anything is deployed
    with pytest.raises(ValueError, match=rf"snap_start=True: Lambda does not offer SnapStart in region {region}") as e:
        IdempotentOrderPipeline(stack, "Pipeline", snap_start=True)
    assert name in str(e.value)
    assert "allowed snap_start=False there" in str(e.value)
    assert rules.SNAP_START_DOCS in str(e.value)


def test_snap_start_is_not_checked_where_the_region_is_unknown_or_offers_it() -> None:
    # GIVEN a region-agnostic stack and a stack in a region that offers SnapStart
    app = cdk.App()
    agnostic = cdk.Stack(app, "Agnostic")
    offered = cdk.Stack(app, "Offered", env=cdk.Environment(account="111111111111", region="eu-west-1"))
    # WHEN the pipeline asks for SnapStart in each
    pipelines = [IdempotentOrderPipeline(stack, "Pipeline", snap_start=True) for stack in (agnostic, offered)]
    # THEN both are built with SnapStart (Lambda checks the agnostic one at deploy)
    assert [pipeline.function_alias is not None for pipeline in pipelines] == [True, True]


def test_snap_start_off_in_a_region_without_it_is_fine() -> None:
    # GIVEN a stack in Asia Pacific (New Zealand)
    stack = cdk.Stack(cdk.App(), "Shop", env=cdk.Environment(account="111111111111", region="ap-southeast-6"))
    # WHEN the pipeline keeps SnapStart off
    pipeline = IdempotentOrderPipeline(stack, "Pipeline")
    # THEN it is built, without the alias
    assert pipeline.function_alias is None
