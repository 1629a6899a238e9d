#!/usr/bin/env python3
"""The CDK app: one Stage per environment, each holding the ``OrderPipeline`` stack.

The only place that reads context (``cdk.json`` and ``-c`` options):

- ``environments``: one entry per stage, e.g. ``{"dev": {"removal_policy": "destroy", ...}}``; see
  :data:`ENVIRONMENT_KEYS` for what an entry may hold. ``account``/``region`` are optional: without
  them the stage is environment-agnostic.
- ``env``: synthesize only this stage (``cdk deploy -c env=prod 'prod/*'``); default: every stage
  (``cdk deploy 'dev/*'`` still deploys only dev).
- ``powertools_layer_arn``: use this layer instead of the public Powertools layer (whose ARN the
  construct otherwise reads at deploy from Powertools' SSM parameter).

Running ``python app.py`` without the CDK CLI gives the same stages: ``cdk.json``'s context is the
default, and the CLI's context (``CDK_CONTEXT_JSON``, ``-c``) overrides it. Synthesis makes no AWS
call. cdk-nag's AwsSolutions and Serverless packs check every stage.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import aws_cdk as cdk
from aws_cdk import aws_cloudwatch_actions, aws_dynamodb, aws_lambda, aws_sns
from constructs import Construct

from idempotent_order_pipeline import IdempotentOrderPipeline, IdempotentSubscriber, nag
from idempotent_order_pipeline._lambda_asset.order_consumer.contract import names
from idempotent_order_pipeline.compliance import CheckovSuppression, add_skips

# The app's own outputs beside the contract's, defined where make demo reads them.
from idempotent_order_pipeline.sandbox.worked_app import (
    FULFILMENT_DEAD_LETTER_QUEUE_URL_OUTPUT,
    FULFILMENT_QUEUE_URL_OUTPUT,
    SHIPMENT_COUNTERS_TABLE_OUTPUT,
)

CDK_JSON = Path(__file__).resolve().parent / "cdk.json"
#: The fulfilment subscriber's code: the worked example's counter handler (``shipping.handler``),
#: deployed from where it lives rather than copied.
FULFILMENT_CODE = Path(__file__).resolve().parent / "examples" / "subscriber" / "subscriber_lambda"
STACK_ID = "OrderPipeline"
REMOVAL_POLICIES = {"destroy": cdk.RemovalPolicy.DESTROY, "retain": cdk.RemovalPolicy.RETAIN}
#: What an order is, for every stage: the consumer parks anything else as SCHEMA_VIOLATION before any
#: write, and ``order-pipeline send`` / ``OrderPublisher`` refuse it with the same message.
ORDER_SCHEMA: dict[str, Any] = {
    "$schema": "https://json-schema.org/draft/2020-12/schema",
    "type": "object",
    "required": ["order_id", "amount", "currency", "country", "customer", "items"],
    "properties": {
        "order_id": {"type": "string", "minLength": 1},
        "amount": {"type": "number", "minimum": 0},
        "currency": {"enum": ["EUR", "USD", "GBP"]},
        "country": {"type": "string", "pattern": "^[A-Z]{2}$"},
        "customer": {
            "type": "object",
            "required": ["id", "tier"],
            "properties": {"id": {"type": "string"}, "tier": {"enum": ["standard", "silver", "gold"]}},
        },
        "items": {
            "type": "array",
            "minItems": 1,
            "items": {
                "type": "object",
                "required": ["sku", "quantity"],
                "properties": {"sku": {"type": "string"}, "quantity": {"type": "integer", "minimum": 1}},
            },
        },
    },
}
#: Order fields every notification carries as SNS message attributes, for subscribers' filter policies.
NOTIFICATION_ATTRIBUTES = ("country", "amount", "customer.tier")
#: The fulfilment subscriber acts on the orders of this country only (an SNS filter policy).
FULFILMENT_COUNTRY = "DE"
#: What an ``environments`` entry may hold (anything else is a typo and fails the synth).
ENVIRONMENT_KEYS = frozenset(
    {
        "removal_policy",  # "destroy" | "retain" (required)
        "oldest_message_age_threshold_seconds",  # the backlog alarm's threshold (required)
        "alarm_evaluation_periods",  # minutes a sustained alarm must breach (required)
        "account",  # optional: pin the stage to an account...
        "region",  # ...and/or a region
        "alarm_topic_arn",  # optional: an existing SNS topic every alarm notifies
    }
)


#: checkov's findings on this app's own resources (the constructs answer for theirs), each with its reason.
APP_CHECKOV_SUPPRESSIONS = (
    CheckovSuppression(
        "CKV_AWS_119",
        "tables",
        "DynamoDB encrypts the fulfilment's counter table at rest with an AWS owned key; it holds order ids and "
        "shipment counts. A team storing personal data here would pass a customer managed key.",
    ),
)


@dataclass(frozen=True)
class EnvironmentSettings:
    """One ``environments`` entry, checked."""

    name: str
    removal_policy: cdk.RemovalPolicy
    oldest_message_age_threshold: cdk.Duration
    alarm_evaluation_periods: int
    account: str | None = None
    region: str | None = None
    alarm_topic_arn: str | None = None

    @classmethod
    def from_context(cls, name: str, entry: Mapping[str, Any]) -> EnvironmentSettings:
        """Parse an entry; raise ValueError naming the environment, the key and what is allowed."""
        unknown = sorted(set(entry) - ENVIRONMENT_KEYS)
        if unknown:
            raise ValueError(f"environments.{name}: unknown key(s) {unknown}; allowed {sorted(ENVIRONMENT_KEYS)}")
        policy = entry.get("removal_policy")
        if policy not in REMOVAL_POLICIES:
            raise ValueError(f"environments.{name}.removal_policy={policy!r}: allowed {sorted(REMOVAL_POLICIES)}")
        try:
            threshold = int(entry["oldest_message_age_threshold_seconds"])
            periods = int(entry["alarm_evaluation_periods"])
        except (KeyError, TypeError, ValueError) as exc:
            raise ValueError(
                f"environments.{name}: oldest_message_age_threshold_seconds and alarm_evaluation_periods "
                f"must be whole numbers ({exc})"
            ) from exc
        return cls(
            name=name,
            removal_policy=REMOVAL_POLICIES[policy],
            oldest_message_age_threshold=cdk.Duration.seconds(threshold),
            alarm_evaluation_periods=periods,
            account=entry.get("account"),
            region=entry.get("region"),
            alarm_topic_arn=entry.get("alarm_topic_arn"),
        )

    @property
    def environment(self) -> cdk.Environment | None:
        """The stage's environment, or None (environment-agnostic) when neither is given."""
        if self.account is None and self.region is None:
            return None
        return cdk.Environment(account=self.account, region=self.region)


class OrderPipelineStack(cdk.Stack):
    """The pipeline with its order schema, the fulfilment subscriber, and the outputs the sandbox and the CLI read."""

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        settings: EnvironmentSettings,
        powertools_layer_arn: str | None = None,
        **kwargs: Any,
    ) -> None:
        super().__init__(
            scope,
            construct_id,
            description=f"Idempotent order pipeline ({settings.name}): SQS -> Lambda -> DynamoDB -> SNS",
            **kwargs,
        )
        powertools_layer = (
            aws_lambda.LayerVersion.from_layer_version_arn(self, "PowertoolsLayer", powertools_layer_arn)
            if powertools_layer_arn
            else None
        )
        alarm_actions = (
            [
                aws_cloudwatch_actions.SnsAction(
                    aws_sns.Topic.from_topic_arn(self, "AlarmTopic", settings.alarm_topic_arn)
                )
            ]
            if settings.alarm_topic_arn
            else []
        )
        self.pipeline = IdempotentOrderPipeline(
            self,
            "Pipeline",
            removal_policy=settings.removal_policy,
            oldest_message_age_threshold=settings.oldest_message_age_threshold,
            alarm_evaluation_periods=settings.alarm_evaluation_periods,
            powertools_layer=powertools_layer,
            alarm_actions=alarm_actions,
            order_schema=ORDER_SCHEMA,
            notification_attributes=NOTIFICATION_ATTRIBUTES,
        )
        pipeline = self.pipeline
        # Fulfilment ships each German order once: the team's counter table, written in one
        # transaction with the subscriber's done mark (docs/subscriber.md, worked example (a)).
        self.shipment_counters = aws_dynamodb.Table(
            self,
            "ShipmentCounters",
            partition_key=aws_dynamodb.Attribute(name="order_id", type=aws_dynamodb.AttributeType.STRING),
            billing_mode=aws_dynamodb.BillingMode.PAY_PER_REQUEST,
            point_in_time_recovery_specification=aws_dynamodb.PointInTimeRecoverySpecification(
                point_in_time_recovery_enabled=True
            ),
            removal_policy=settings.removal_policy,
            deletion_protection=settings.removal_policy != cdk.RemovalPolicy.DESTROY,
        )
        add_skips(APP_CHECKOV_SUPPRESSIONS, {"tables": [self.shipment_counters]})
        self.fulfilment = IdempotentSubscriber(
            self,
            "Fulfilment",
            pipeline=pipeline,
            code=aws_lambda.Code.from_asset(str(FULFILMENT_CODE), exclude=["__pycache__", "*.pyc"]),
            handler="shipping.handler",
            environment={"COUNTERS_TABLE": self.shipment_counters.table_name},
            filter_policy={"country": aws_sns.SubscriptionFilter.string_filter(allowlist=[FULFILMENT_COUNTRY])},
            removal_policy=settings.removal_policy,
            alarm_actions=alarm_actions,
            oldest_message_age_threshold=settings.oldest_message_age_threshold,
            alarm_evaluation_periods=settings.alarm_evaluation_periods,
        )
        self.fulfilment.grant_effect_writes(self.shipment_counters)
        # Output keys are a contract (sandbox, CLI): never rename them. No exports: nothing imports them.
        for key, value, description in (
            (names.QUEUE_URL_OUTPUT, pipeline.queue.queue_url, "Send orders here"),
            (names.DEAD_LETTER_QUEUE_URL_OUTPUT, pipeline.dead_letter_queue.queue_url, "Parked messages"),
            (names.PROCESSED_EVENTS_TABLE_OUTPUT, pipeline.processed_events_table.table_name, "Idempotency records"),
            (names.ORDER_RECORDS_TABLE_OUTPUT, pipeline.order_records_table.table_name, "One row per order"),
            (names.TOPIC_ARN_OUTPUT, pipeline.topic.topic_arn, "Order notifications"),
            (names.FUNCTION_NAME_OUTPUT, pipeline.function.function_name, "The consumer function"),
        ):
            cdk.CfnOutput(self, key, value=value, description=description)
        for key, value, description in (
            (SHIPMENT_COUNTERS_TABLE_OUTPUT, self.shipment_counters.table_name, "Shipments per order (fulfilment)"),
            (FULFILMENT_QUEUE_URL_OUTPUT, self.fulfilment.queue.queue_url, "Fulfilment notifications"),
            (
                FULFILMENT_DEAD_LETTER_QUEUE_URL_OUTPUT,
                self.fulfilment.dead_letter_queue.queue_url,
                "Parked notifications",
            ),
        ):
            cdk.CfnOutput(self, key, value=value, description=description)


def default_context() -> dict[str, Any]:
    """``cdk.json``'s context: the defaults when the app runs without the CDK CLI."""
    context: dict[str, Any] = json.loads(CDK_JSON.read_text())["context"]
    return context


def build_app(context: Mapping[str, Any] | None = None, outdir: str | None = None) -> cdk.App:
    """The app with its stages; ``context`` overrides ``cdk.json`` (the CLI's context overrides both)."""
    app = cdk.App(context={**default_context(), **(context or {})}, outdir=outdir)
    environments = app.node.try_get_context("environments")
    if not isinstance(environments, Mapping) or not environments:
        raise ValueError("context 'environments' must map stage names to settings (see cdk.json)")
    selected = app.node.try_get_context("env")
    if selected is not None and selected not in environments:
        raise ValueError(f"-c env={selected!r}: allowed {sorted(environments)}")
    powertools_layer_arn = app.node.try_get_context("powertools_layer_arn") or None
    for name, entry in environments.items():
        if selected is not None and name != selected:
            continue
        settings = EnvironmentSettings.from_context(name, entry)
        stage = cdk.Stage(app, name, env=settings.environment)
        OrderPipelineStack(stage, STACK_ID, settings=settings, powertools_layer_arn=powertools_layer_arn)
    nag.add_checks(app)  # cdk-nag 3.x or 2.x, as installed
    return app


if __name__ == "__main__":
    build_app().synth()
