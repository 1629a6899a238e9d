"""The Powertools layer: resolved at deploy from Powertools' public SSM parameter, never guessed."""

from __future__ import annotations

import aws_cdk as cdk
import pytest
from aws_cdk import aws_lambda
from aws_cdk.assertions import Template

from idempotent_order_pipeline import IdempotentOrderPipeline
from idempotent_order_pipeline.powertools import (
    LAYER_ARN_PARAMETER_ID,
    PARTITION_RULE_ID,
    POWERTOOLS_ARCHITECTURE,
    POWERTOOLS_LAYER_PARAMETER,
    POWERTOOLS_PYTHON_VERSION,
    POWERTOOLS_VERSION,
)
from tests.infra.synth import REPO, Synthesized, logical_id


def function_properties(synthesized: Synthesized) -> dict[str, object]:
    function = synthesized.template_json["Resources"][logical_id(synthesized.stack, synthesized.pipeline.function)]
    properties: dict[str, object] = function["Properties"]
    return properties


def test_parameter_name_is_powertools_published_path_for_the_pinned_release() -> None:
    # GIVEN the pinned version, the function's architecture and runtime
    # WHEN the parameter name is built
    # THEN it is Powertools' documented path /aws/service/powertools/python/{arch}/{python_version}/{version}
    assert POWERTOOLS_LAYER_PARAMETER == "/aws/service/powertools/python/arm64/python3.14/3.37.0"


def test_pinned_version_is_the_one_the_handler_is_tested_with() -> None:
    # GIVEN the Powertools version the handler is tested with (requirements-test.txt)
    requirements = (REPO / "requirements-test.txt").read_text().splitlines()
    # WHEN the layer module's version is compared with it
    # THEN they agree (bump them together)
    assert f"aws-lambda-powertools=={POWERTOOLS_VERSION}" in requirements


def test_parameter_path_names_the_functions_runtime_and_architecture(default_pipeline: Synthesized) -> None:
    # GIVEN the default function
    function = function_properties(default_pipeline)
    # WHEN its runtime and architecture are compared with the parameter's path
    # THEN they are the same, so the layer fits the function
    assert function["Runtime"] == POWERTOOLS_PYTHON_VERSION
    assert function["Architectures"] == [POWERTOOLS_ARCHITECTURE]


def test_default_layer_is_read_from_the_public_ssm_parameter_at_deploy(default_pipeline: Synthesized) -> None:
    # GIVEN the default pipeline in an environment-agnostic stack
    template = default_pipeline.template_json
    # WHEN its layers and parameters are read
    function = function_properties(default_pipeline)
    parameter = template["Parameters"][LAYER_ARN_PARAMETER_ID]
    # THEN the function's only layer is the stack parameter, an SSM parameter type defaulting to
    # Powertools' public path: CloudFormation resolves it in the deploy region; no ARN is in the template
    assert function["Layers"] == [{"Ref": LAYER_ARN_PARAMETER_ID}]
    assert parameter["Type"] == "AWS::SSM::Parameter::Value<String>"
    assert parameter["Default"] == POWERTOOLS_LAYER_PARAMETER
    assert "commercial regions only" in parameter["Description"]
    assert "powertools_layer=" in parameter["Description"]
    assert "017000801446" not in str(template)


def test_pipelines_of_one_stack_share_the_parameter(fresh_stack: cdk.Stack) -> None:
    # GIVEN two pipelines in one stack
    IdempotentOrderPipeline(fresh_stack, "Sales")
    IdempotentOrderPipeline(fresh_stack, "Returns")
    # WHEN the template is read
    template = Template.from_stack(fresh_stack).to_json()
    # THEN there is one layer parameter, and every function uses it
    assert [name for name in template["Parameters"] if name != "BootstrapVersion"] == [LAYER_ARN_PARAMETER_ID]
    functions = [r for r in template["Resources"].values() if r["Type"] == "AWS::Lambda::Function"]
    # (each pipeline's consumer and reconciler)
    assert [f["Properties"]["Layers"] for f in functions] == [[{"Ref": LAYER_ARN_PARAMETER_ID}]] * 4


@pytest.mark.parametrize("region", ["eu-west-1"])
def test_a_commercial_region_uses_the_parameter(region: str) -> None:
    # GIVEN a stack pinned to a commercial region
    stack = cdk.Stack(cdk.App(), "Pinned", env=cdk.Environment(account="111111111111", region=region))
    # WHEN the pipeline is built with the default layer
    IdempotentOrderPipeline(stack, "Pipeline")
    # THEN the layer comes from the parameter, and the partition needs no check at deploy (known: aws)
    template = Template.from_stack(stack)
    template.has_resource_properties("AWS::Lambda::Function", {"Layers": [{"Ref": LAYER_ARN_PARAMETER_ID}]})
    assert PARTITION_RULE_ID not in template.to_json().get("Rules", {})


@pytest.mark.parametrize(("region", "partition"), [("cn-north-1", "aws-cn"), ("us-gov-west-1", "aws-us-gov")])
def test_a_partition_without_the_parameter_fails_the_synth(region: str, partition: str) -> None:
    # GIVEN a stack in China or GovCloud, where Powertools publishes no SSM parameter
    stack = cdk.Stack(cdk.App(), "Pinned", env=cdk.Environment(account="111111111111", region=region))
    # WHEN the pipeline is built with the default layer
    # THEN the synth fails, naming the region, partition and the prop to pass
    with pytest.raises(ValueError, match="invalid props") as raised:
        IdempotentOrderPipeline(stack, "Pipeline")
    message = str(raised.value)
    assert f"powertools_layer=None: Powertools publishes no SSM parameter {POWERTOOLS_LAYER_PARAMETER}" in message
    assert f"in region {region} (partition {partition}); pass powertools_layer=" in message


def test_a_partition_without_the_parameter_is_collected_with_the_other_errors() -> None:
    # GIVEN a GovCloud stack and another bad prop
    stack = cdk.Stack(cdk.App(), "Pinned", env=cdk.Environment(account="111111111111", region="us-gov-east-1"))
    # WHEN the pipeline is built
    # THEN both problems are reported at once
    with pytest.raises(ValueError, match=r"memory_size=64(.|\n)*powertools_layer=None"):
        IdempotentOrderPipeline(stack, "Pipeline", memory_size=64)


def test_a_given_layer_works_in_any_partition() -> None:
    # GIVEN a China stack and the partition's layer passed explicitly
    stack = cdk.Stack(cdk.App(), "Pinned", env=cdk.Environment(account="111111111111", region="cn-north-1"))
    arn = "arn:aws-cn:lambda:cn-north-1:498634801083:layer:AWSLambdaPowertoolsPythonV3-python314-arm64:37"
    layer = aws_lambda.LayerVersion.from_layer_version_arn(stack, "Layer", arn)
    # WHEN the pipeline is built
    IdempotentOrderPipeline(stack, "Pipeline", powertools_layer=layer)
    # THEN the function uses that layer and the template has no SSM parameter
    template = Template.from_stack(stack).to_json()
    template_function = next(r for r in template["Resources"].values() if r["Type"] == "AWS::Lambda::Function")
    assert template_function["Properties"]["Layers"] == [arn]
    assert LAYER_ARN_PARAMETER_ID not in template.get("Parameters", {})


def test_an_environment_agnostic_stack_checks_the_partition_at_deploy(default_pipeline: Synthesized) -> None:
    # GIVEN the default pipeline in an environment-agnostic stack (its partition unknown at synth)
    rules = default_pipeline.template_json["Rules"]
    # WHEN its template rules are read
    # THEN one refuses, before any resource is created, a partition without Powertools' parameter,
    # saying what to do
    assert rules[PARTITION_RULE_ID] == {
        "Assertions": [
            {
                "Assert": {"Fn::Equals": [{"Ref": "AWS::Partition"}, "aws"]},
                "AssertDescription": f"Powertools publishes its layer parameter {POWERTOOLS_LAYER_PARAMETER} in the "
                "aws partition only: synthesize with powertools_layer= (the layer ARN for this partition)",
            }
        ]
    }
