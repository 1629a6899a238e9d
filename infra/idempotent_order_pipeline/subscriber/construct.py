"""``IdempotentSubscriber``: the team's own function, acting once per order notification of a pipeline."""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType
from typing import TYPE_CHECKING

from aws_cdk import (
    aws_cloudwatch,
    aws_dynamodb,
    aws_iam,
    aws_lambda,
    aws_sns,
    aws_sns_subscriptions,
    aws_sqs,
)
from constructs import Construct

from idempotent_order_pipeline import compliance, monitoring, nag, powertools, removal
from idempotent_order_pipeline._lambda_asset.order_consumer.contract.names import SERVICE_NAME_VARIABLE
from idempotent_order_pipeline._subscriber_layer.python.idempotent_subscriber import config
from idempotent_order_pipeline.core import props as core_props
from idempotent_order_pipeline.core import sqs_function, tables
from idempotent_order_pipeline.core.props import Findings
from idempotent_order_pipeline.core.rules import derived_visibility_timeout, whole_seconds_text
from idempotent_order_pipeline.library_version import mark_library_version
from idempotent_order_pipeline.subscriber import findings as subscriber_findings
from idempotent_order_pipeline.subscriber.layer import runtime_layer
from idempotent_order_pipeline.subscriber.props import (
    DEFAULTS,
    SubscriberKwargs,
    SubscriberProps,
    derived_lease,
    source_environment_problems,
    topic_of,
    validate,
    well_typed,
)

if TYPE_CHECKING:
    from typing_extensions import Unpack

    from idempotent_order_pipeline.construct import IdempotentOrderPipeline

#: The deduplication table's key and TTL attribute (contract with the helper's ``dedup`` module).
DEDUP_PARTITION_KEY = "event_id"
DEDUP_TTL_ATTRIBUTE = "ttl"
#: What the helper does on the deduplication table: claim (Put), done mark (Update in a
#: transaction), release (Delete). Nothing reads it.
DEDUP_ACTIONS = ("dynamodb:PutItem", "dynamodb:UpdateItem", "dynamodb:DeleteItem")
#: What the effect's own writes in the done transaction may need on a table of the team's.
EFFECT_WRITE_ACTIONS = (
    "dynamodb:PutItem",
    "dynamodb:UpdateItem",
    "dynamodb:DeleteItem",
    "dynamodb:ConditionCheckItem",
)
#: The subscriber's alarms, by key (the keys of ``alarms``): the standard ones of an SQS-fed function.
ALARM_KEYS = tuple(sqs_function.STANDARD_ALARMS)
#: What they mean for a subscriber.
STANDARD_ALARM_MEANINGS = {
    "dead_letter_queue_not_empty": "Notifications are parked in the subscriber's dead-letter queue: not "
    "notifications, or an effect that kept failing.",
    "oldest_message_too_old": "The oldest notification waiting for the subscriber is older than the threshold: the "
    "function is behind or failing.",
    "function_errors": "The subscriber's function fails whole invocations (crash, timeout, configuration).",
}
#: Where an alarm description points on-call when ``runbook_url`` is None.
DEFAULT_RUNBOOK = "docs/subscriber.md of idempotent-order-pipeline, section 'Runbook'"


class IdempotentSubscriber(Construct):
    """A queue subscribed to an order pipeline's topic and the team's own function, acting once per order.

    The function gets the ``idempotent_subscriber`` helper as a layer (``runtime_layer``); its
    handler is ``once_per_event(effect)``: each notification's ``event_id`` is claimed with a lease
    in the deduplication table, the effect runs, and its own DynamoDB writes commit in one
    transaction with the ``done`` mark (see docs/subscriber.md). Secure by default: encrypted,
    TLS-only queues with a dead-letter queue, an on-demand table with point-in-time recovery and
    TTL, a role that may write its log group and its deduplication table only (grant the effect's
    own resources with :meth:`grant_effect_writes` or on ``function``), alarms.

    Every prop is keyword-only; their ``:param`` lines below are made from their declarations in
    :class:`~idempotent_order_pipeline.subscriber.props.SubscriberProps`.

    :param scope: the parent construct.
    :param construct_id: the construct id, part of every logical id: changing it replaces the
        queues and the table.
    """

    def __init__(self, scope: Construct, construct_id: str, **kwargs: Unpack[SubscriberKwargs]) -> None:
        props = core_props.given(SubscriberProps, kwargs, "IdempotentSubscriber")
        super().__init__(scope, construct_id)
        mark_library_version(self)  # the library's version in the template's Metadata (library_version.py)
        self._props = props = self._validate(props)
        queue_defaults = sqs_function.queue_defaults(fifo=props.fifo, removal_policy=props.removal_policy)

        self.dead_letter_queue: aws_sqs.Queue = sqs_function.build_dead_letter_queue(self, **queue_defaults)
        """Notifications that failed ``max_receive_count`` times, that are not notifications, or that SNS could
        not deliver to the queue (the subscription's redrive policy)."""
        self.queue: aws_sqs.Queue = sqs_function.build_queue(
            self,
            dead_letter_queue=self.dead_letter_queue,
            max_receive_count=props.max_receive_count,
            visibility_timeout=derived_visibility_timeout(props),
            retention_period=props.retention_period,
            **queue_defaults,
        )
        """The queue subscribed to the topic, the function's event source."""
        self.subscription: aws_sns.Subscription = self._subscribe()
        """The SNS subscription (raw delivery and filter policy per the props)."""
        self.dedup_table: aws_dynamodb.Table = self._dedup_table()
        """One record per ``event_id``: the claim, then the ``done`` mark (TTL ``record_retention``)."""
        self.runtime_layer: aws_lambda.ILayerVersion = runtime_layer(self)
        """The layer holding the helper ``idempotent_subscriber`` (one per stack)."""
        self.function: aws_lambda.Function = self._create_function()
        """The team's function, with the layer, partial batch responses and its dedup table's grant."""
        self.alarm_factory = monitoring.AlarmFactory(self, self._alarm_settings(), keys=ALARM_KEYS)
        self._create_alarms()
        self.alarms: Mapping[str, aws_cloudwatch.Alarm] = MappingProxyType(self.alarm_factory.alarms)
        """Every alarm by key (:data:`ALARM_KEYS`)."""
        self.alarm_definitions: Mapping[str, monitoring.AlarmDefinition] = MappingProxyType(
            self.alarm_factory.definitions
        )
        """Every alarm's metric, threshold and description by key, created or not (``create_alarms``)."""
        self._answer_findings()
        self.node.add_validation(removal.NoSnapshotPolicy([self.dedup_table.node.default_child]))  # type: ignore[list-item]

    # ---- validation ------------------------------------------------------------------------------

    def _validate(self, props: SubscriberProps) -> SubscriberProps:
        findings = Findings()
        props = well_typed(props, findings)
        validate(props, findings)
        findings.errors.extend(source_environment_problems(self, props))
        if props.powertools_layer is None and (
            layer_problem := powertools.default_layer_problem(self, props.runtime.name, props.architecture.name)
        ):
            findings.errors.append(layer_problem)
        core_props.report(self, "IdempotentSubscriber", findings)
        return props

    # ---- resources -------------------------------------------------------------------------------

    def _subscribe(self) -> aws_sns.Subscription:
        props = self._props
        subscription = aws_sns_subscriptions.SqsSubscription(
            self.queue,
            raw_message_delivery=props.raw_message_delivery,
            # What SNS cannot deliver to the queue (its policy, a deleted queue) is parked with the rest.
            dead_letter_queue=self.dead_letter_queue,
            filter_policy=dict(props.filter_policy) if props.filter_policy is not None else None,
            filter_policy_with_message_body=(
                dict(props.filter_policy_with_message_body)
                if props.filter_policy_with_message_body is not None
                else None
            ),
        )
        if props.pipeline is not None:
            pipeline: IdempotentOrderPipeline = props.pipeline
            return pipeline.add_subscription(subscription)
        topic = topic_of(props)
        assert topic is not None  # validate() requires pipeline or topic
        return topic.add_subscription(subscription)

    def _dedup_table(self) -> aws_dynamodb.Table:
        return tables.build_table(
            self,
            "DedupTable",
            **tables.table_defaults(
                partition_key=DEDUP_PARTITION_KEY,
                time_to_live_attribute=DEDUP_TTL_ATTRIBUTE,
                removal_policy=self._props.removal_policy,
                encryption=aws_dynamodb.TableEncryption.AWS_MANAGED,
            ),
        )

    def _environment(self) -> dict[str, str]:
        props = self._props
        lease = derived_lease(props)
        return {
            **(props.environment or {}),
            SERVICE_NAME_VARIABLE: props.service_name or sqs_function.default_name(self),
            config.DEDUP_TABLE_VARIABLE: self.dedup_table.table_name,
            config.LEASE_SECONDS_VARIABLE: whole_seconds_text(lease),
            config.RECORD_TTL_SECONDS_VARIABLE: whole_seconds_text(props.record_retention),
        }

    def _create_function(self) -> aws_lambda.Function:
        props = self._props
        log_group = sqs_function.build_log_group(
            self, retention=props.log_retention, removal_policy=props.removal_policy
        )
        role = sqs_function.build_role(
            self,
            log_group=log_group,
            description="An idempotent order subscriber (least privilege, no managed policies).",
        )
        role.add_to_principal_policy(
            aws_iam.PolicyStatement(
                sid="ClaimAndMarkEvents", actions=list(DEDUP_ACTIONS), resources=[self.dedup_table.table_arn]
            )
        )
        self.powertools_layer: aws_lambda.ILayerVersion = props.powertools_layer or powertools.default_powertools_layer(
            self, "PowertoolsLayer", runtime=props.runtime, architecture=props.architecture
        )
        """Powertools for AWS Lambda (Python) for ``runtime`` and ``architecture``, or ``powertools_layer``."""
        function = aws_lambda.Function(
            self,
            "Function",
            **sqs_function.function_defaults(
                props,
                description="Acts once per order notification (idempotent_subscriber).",
                code=props.code,
                handler=props.handler,
                layers=[self.runtime_layer, self.powertools_layer, *props.layers],
                environment=self._environment(),
                log_group=log_group,
                role=role,
                runtime=props.runtime,
                architecture=props.architecture,
            ),
        )
        function.add_event_source(sqs_function.build_event_source(self.queue, props))
        return function

    # ---- alarms ----------------------------------------------------------------------------------

    def _alarm_settings(self) -> monitoring.AlarmSettings:
        props = self._props
        return monitoring.AlarmSettings(
            name_prefix=props.alarm_name_prefix or sqs_function.default_name(self),
            actions=tuple(props.alarm_actions),
            ok_actions=props.ok_actions,
            runbook_url=props.runbook_url,
            evaluation_periods=props.alarm_evaluation_periods,
            create=props.create_alarms,
            default_runbook=DEFAULT_RUNBOOK,
        )

    def _create_alarms(self) -> None:
        sqs_function.add_standard_alarms(
            self.alarm_factory,
            self._props,
            queue=self.queue,
            dead_letter_queue=self.dead_letter_queue,
            function=self.function,
            meanings=STANDARD_ALARM_MEANINGS,
        )

    # ---- compliance ------------------------------------------------------------------------------

    def _answer_findings(self) -> None:
        """cdk-nag and checkov findings this design answers, each with its reason (docs/subscriber.md lists them)."""
        for construct, pack, rule, reason in subscriber_findings.nag_acknowledgements(self):
            nag.acknowledge(construct, pack, rule, reason)
        compliance.add_skips(
            subscriber_findings.CHECKOV_SUPPRESSIONS,
            {
                "queues": [self.queue, self.dead_letter_queue],
                "tables": [self.dedup_table],
                "log_group": [self.node.find_child("FunctionLogGroup")],
                "function": [self.function],
            },
        )

    # ---- grants ----------------------------------------------------------------------------------

    def grant_effect_writes(self, table: aws_dynamodb.ITable) -> aws_iam.Grant:
        """Let the function write ``table`` in the done transaction (Put, Update, Delete, ConditionCheck).

        For the effect's own DynamoDB writes; anything else the effect calls, grant on ``function``.
        """
        return table.grant(self.function, *EFFECT_WRITE_ACTIONS)


core_props.document(IdempotentSubscriber, SubscriberProps, DEFAULTS)
