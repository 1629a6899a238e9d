"""The sandbox provides Powertools' public layer parameter, and reads the function's layer through it."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from idempotent_order_pipeline.powertools import LAYER_ARN_PARAMETER_ID, POWERTOOLS_LAYER_PARAMETER
from idempotent_order_pipeline.sandbox import function as deployed
from idempotent_order_pipeline.sandbox.deploy import Layer, publish_powertools_parameter
from idempotent_order_pipeline.sandbox.server import Endpoint, SandboxServer, restore_moto

LAYER_ARN = "arn:aws:lambda:eu-west-1:123456789012:layer:sandbox-aws-lambda-powertools:1"


@pytest.fixture
def endpoint() -> Iterator[Endpoint]:
    server = SandboxServer()
    try:
        yield server.start()
    finally:
        server.stop()
        restore_moto()


def test_the_sandbox_publishes_the_layer_under_powertools_parameter(endpoint: Endpoint, tmp_path: Path) -> None:
    # GIVEN a layer published into the endpoint
    layer = Layer(arn=LAYER_ARN, zip_path=tmp_path / "layer.zip", sha256="0" * 64)
    # WHEN the sandbox publishes its parameter
    name = publish_powertools_parameter(endpoint, layer)
    # THEN the endpoint holds the layer's ARN under the construct's default parameter name
    assert name == POWERTOOLS_LAYER_PARAMETER
    assert endpoint.client("ssm").get_parameter(Name=name)["Parameter"]["Value"] == LAYER_ARN


def test_a_stack_parameter_of_ssm_type_resolves_to_the_published_layer(endpoint: Endpoint, tmp_path: Path) -> None:
    # GIVEN the published parameter and a stack whose parameter (the construct's) names it
    publish_powertools_parameter(endpoint, Layer(arn=LAYER_ARN, zip_path=tmp_path / "l.zip", sha256=""))
    template = {
        "Parameters": {
            LAYER_ARN_PARAMETER_ID: {
                "Type": "AWS::SSM::Parameter::Value<String>",
                "Default": POWERTOOLS_LAYER_PARAMETER,
            }
        },
        "Resources": {"Queue": {"Type": "AWS::SQS::Queue"}},
    }
    endpoint.client("cloudformation").create_stack(StackName="layer", TemplateBody=json.dumps(template))
    # WHEN the sandbox resolves the function's template layers against the stack's parameters
    parameters = deployed._stack_parameters(endpoint, "layer")
    # THEN the Ref becomes the published ARN; a plain ARN stays as it is
    assert deployed._resolve({"Ref": LAYER_ARN_PARAMETER_ID}, parameters) == LAYER_ARN
    assert deployed._resolve(LAYER_ARN, parameters) == LAYER_ARN


def test_a_layer_that_is_neither_an_arn_nor_a_parameter_is_refused() -> None:
    # GIVEN a layer entry the sandbox cannot resolve (a Ref to something that is no stack parameter)
    # WHEN it is resolved
    # THEN the sandbox says so rather than running the function without its layer
    with pytest.raises(deployed.DeployedFunctionError, match="neither an ARN, nor a stack parameter"):
        deployed._resolve({"Ref": "Elsewhere"}, {LAYER_ARN_PARAMETER_ID: LAYER_ARN})
