"""Shared synths for the infrastructure tests.

Synthesis costs seconds, so each meaningful configuration is synthesized once per session, with
cdk-nag's AwsSolutions and Serverless packs registered exactly as ``app.py`` registers them (a
synth with an unacknowledged finding fails, so every fixture below is also a cdk-nag check).
"""

from __future__ import annotations

import aws_cdk as cdk
import pytest

from tests.infra.synth import (
    Synthesized,
    SynthesizedApp,
    customer_managed_key_and_alarm_topic,
    synth_app,
    synth_brownfield,
    synth_pipeline,
    synth_trust_boundaries,
)


@pytest.fixture(scope="session")
def default_pipeline(tmp_path_factory: pytest.TempPathFactory) -> Synthesized:
    """Every prop at its default."""
    return synth_pipeline(tmp_path_factory.mktemp("default"))


@pytest.fixture(scope="session")
def fifo_pipeline(tmp_path_factory: pytest.TempPathFactory) -> Synthesized:
    """``fifo=True``."""
    return synth_pipeline(tmp_path_factory.mktemp("fifo"), fifo=True)


@pytest.fixture(scope="session")
def snap_start_pipeline(tmp_path_factory: pytest.TempPathFactory) -> Synthesized:
    """``snap_start=True``: a published version, the alias ``live`` and the event source mapping on it."""
    return synth_pipeline(tmp_path_factory.mktemp("snapstart"), snap_start=True)


@pytest.fixture(scope="session")
def cmk_pipeline(tmp_path_factory: pytest.TempPathFactory) -> Synthesized:
    """A customer managed key, an alarm action and a runbook, plus non-default batching, naming and removal props."""
    return synth_pipeline(
        tmp_path_factory.mktemp("cmk"),
        customer_managed_key_and_alarm_topic,
        max_batching_window=cdk.Duration.seconds(5),
        batch_size=100,
        max_concurrency=20,
        removal_policy=cdk.RemovalPolicy.DESTROY,
        identity_fields=("customer_id", "order_id"),
        service_name="orders",
        metrics_namespace="Shop/Orders",
        runbook_url="https://runbooks.example.com/orders",
    )


@pytest.fixture(scope="session")
def schema_pipeline(tmp_path_factory: pytest.TempPathFactory) -> Synthesized:
    """An order schema, notification attributes and the order as the notification body."""
    from tests.consumer.test_order_schema import ORDER_SCHEMA

    return synth_pipeline(
        tmp_path_factory.mktemp("schema"),
        order_schema=ORDER_SCHEMA,
        notification_attributes=("country", "amount", "customer.tier"),
        notification_body="order",
    )


@pytest.fixture(scope="session")
def brownfield_pipeline(tmp_path_factory: pytest.TempPathFactory) -> Synthesized:
    """The sandbox's brownfield app: existing queue, DLQ, tables and CMK imported, a VPC with the
    service endpoints, topic and function overrides, reserved concurrency (the e2e test deploys it)."""
    return synth_brownfield(tmp_path_factory.mktemp("brownfield"))


@pytest.fixture(scope="session")
def trust_boundaries(tmp_path_factory: pytest.TempPathFactory) -> Synthesized:
    """A CMK, a VPC with the construct's endpoints, same-account and cross-account grants."""
    return synth_trust_boundaries(tmp_path_factory.mktemp("trust"))


@pytest.fixture(scope="session")
def synthesized_app(tmp_path_factory: pytest.TempPathFactory) -> SynthesizedApp:
    """The app exactly as ``cdk synth`` builds it from cdk.json (every stage)."""
    return synth_app(tmp_path_factory.mktemp("app"))


@pytest.fixture(scope="session")
def all_configurations(
    default_pipeline: Synthesized,
    fifo_pipeline: Synthesized,
    cmk_pipeline: Synthesized,
    brownfield_pipeline: Synthesized,
    snap_start_pipeline: Synthesized,
    schema_pipeline: Synthesized,
    synthesized_app: SynthesizedApp,
) -> dict[str, Synthesized]:
    """Every synthesized configuration by name."""
    return {
        "default": default_pipeline,
        "fifo": fifo_pipeline,
        "cmk": cmk_pipeline,
        "brownfield": brownfield_pipeline,
        "snapstart": snap_start_pipeline,
        "schema": schema_pipeline,
        **{f"app-{name}": synthesized for name, synthesized in synthesized_app.stages.items()},
    }


@pytest.fixture
def fresh_stack() -> cdk.Stack:
    """An empty stack for tests that construct (and usually fail) without synthesizing."""
    return cdk.Stack(cdk.App(), "TestStack")
