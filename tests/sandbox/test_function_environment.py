"""The environment the stand-in gives a deployed function: its variables, Lambda's, then the stand-in's endpoint."""

from __future__ import annotations

from pathlib import Path

from idempotent_order_pipeline.sandbox.function import DeployedFunction
from idempotent_order_pipeline.sandbox.lambda_runtime import lambda_environment
from idempotent_order_pipeline.sandbox.server import Endpoint

VPC_ENDPOINT = "https://vpce-0123456789abcdef0-abcdefgh.sqs.eu-west-1.vpce.amazonaws.com"


def test_vpc_endpoint_variables_give_way_to_the_stand_ins_one_endpoint(tmp_path: Path) -> None:
    # GIVEN a function deployed with create_vpc_endpoints: its SNS and SQS endpoint variables name VPC endpoints
    function = DeployedFunction(
        name="consumer",
        arn="arn:aws:lambda:eu-west-1:123456789012:function:consumer",
        handler="order_consumer.handler.handler",
        runtime="python3.14",
        timeout_seconds=30,
        memory_mb=1769,
        environment={
            "TOPIC_ARN": "arn:aws:sns:eu-west-1:123456789012:orders",
            "AWS_ENDPOINT_URL_SQS": VPC_ENDPOINT,
            "AWS_ENDPOINT_URL_SNS": VPC_ENDPOINT.replace(".sqs.", ".sns."),
        },
        code_sha256="-",
        code_zip=b"",
    )
    endpoint = Endpoint(url="http://127.0.0.1:4566")
    # WHEN the stand-in makes the function's environment
    environment = lambda_environment(function, endpoint, tmp_path)
    # THEN every call goes to the stand-in's endpoint (the VPC endpoints do not exist there); the
    # function's own variables stay
    assert [name for name in environment if name.startswith("AWS_ENDPOINT_URL_")] == []
    assert environment["AWS_ENDPOINT_URL"] == endpoint.url
    assert environment["TOPIC_ARN"] == function.environment["TOPIC_ARN"]
