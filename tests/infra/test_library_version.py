"""The library's version in every synthesized template, and on the command line."""

from __future__ import annotations

import aws_cdk as cdk
from aws_cdk.assertions import Template
from click.testing import CliRunner

import idempotent_order_pipeline
from idempotent_order_pipeline import IdempotentOrderPipeline, IdempotentSubscriber
from idempotent_order_pipeline.cli import cli
from idempotent_order_pipeline.library_version import library_version_of
from tests.infra.test_subscriber import CODE


def test_the_template_records_the_version_and_each_construct() -> None:
    # GIVEN a stack with two pipelines and a subscriber of one
    stack = cdk.Stack(cdk.App(), "Shop")
    orders = IdempotentOrderPipeline(stack, "Orders")
    IdempotentOrderPipeline(stack, "Payments", fifo=True)
    IdempotentSubscriber(stack, "Shipper", pipeline=orders, code=CODE, handler="shipping.handler")
    # WHEN the stack is synthesized
    template = Template.from_stack(stack).to_json()
    # THEN its Metadata names the library version and every construct of it in this stack, by path and class
    assert library_version_of(template) == idempotent_order_pipeline.__version__
    assert template["Metadata"]["idempotent_order_pipeline"]["constructs"] == {
        "Orders": "IdempotentOrderPipeline",
        "Payments": "IdempotentOrderPipeline",
        "Shipper": "IdempotentSubscriber",
    }


def test_version_option_prints_the_library_version() -> None:
    # GIVEN / WHEN order-pipeline --version
    result = CliRunner().invoke(cli, ["--version"])
    # THEN it prints the distribution's __version__, past 0.2.0
    assert result.exit_code == 0
    assert result.output == f"order-pipeline {idempotent_order_pipeline.__version__}\n"
