"""``IdempotentSubscriber``: the team's own function, acting once per order notification of a pipeline."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from types import MappingProxyType
from typing import TYPE_CHECKING, Any

from aws_cdk import (
    Duration,
    RemovalPolicy,
    Stack,
    Token,
    aws_cloudwatch,
    aws_dynamodb,
    aws_iam,
    aws_lambda,
    aws_lambda_event_sources,
    aws_logs,
    aws_sns,
    aws_sns_subscriptions,
    aws_sqs,
)
from constructs import Construct

from idempotent_order_pipeline import compliance, monitoring, nag, removal
from idempotent_order_pipeline._subscriber_layer.python.idempotent_subscriber import config
from idempotent_order_pipeline.library_version import mark_library_version
from idempotent_order_pipeline.props import DEAD_LETTER_RETENTION, Findings
from idempotent_order_pipeline.subscriber import findings as subscriber_findings
from idempotent_order_pipeline.subscriber.layer import runtime_layer
from idempotent_order_pipeline.subscriber.props import (
    DEFAULTS,
    SubscriberProps,
    derived_lease,
    derived_visibility_timeout,
    is_fifo,
    topic_of,
    validate,
    well_typed,
)

if TYPE_CHECKING:
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
#: The subscriber's alarms, by key (the keys of ``alarms``).
ALARM_KEYS = ("dead_letter_queue_not_empty", "oldest_message_too_old", "function_errors")
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

    :param scope: the parent construct.
    :param construct_id: the construct id, part of every logical id: changing it replaces the
        queues and the table.
    :param code: the team's function code (any ``aws_lambda.Code``). Required.
    :param handler: the team's handler, ``module.function``, e.g. ``'shipping.handler'``. Required.
    :param pipeline: the ``IdempotentOrderPipeline`` whose notifications to act on (subscribed
        with its ``add_subscription``). Default: None (give ``topic``).
    :param topic: the pipeline's topic, e.g. from another stack or ``Topic.from_topic_arn``.
        Exactly one of ``pipeline`` and ``topic``. Default: None (give ``pipeline``).
    :param runtime: the function's Python runtime, 3.11 to 3.14 (the layer's). Default: Runtime.PYTHON_3_14.
    :param architecture: the function's architecture (the layer is pure Python). Default: Architecture.ARM_64.
    :param memory_size: the function's memory in MB. Default: 256.
    :param function_timeout: the function's timeout. Default: 30 seconds.
    :param environment: the team's own environment variables (the helper's ``ORDER_SUBSCRIBER_*``
        ones are the construct's). Default: None (none).
    :param filter_policy: an SNS filter policy on the message attributes (``{"country":
        SubscriptionFilter.string_filter(allowlist=["DE"])}``): only matching notifications reach
        the queue. With ``pipeline``, a name its notifications never carry (``event_id``, ``order_id``
        and its ``notification_attributes``) is a ``ValueError``: it would match nothing.
        Default: None (every notification).
    :param filter_policy_with_message_body: a filter policy on the JSON body instead (SNS filters
        one scope per subscription), e.g. on the fields of ``notification_body="order"``; with
        ``pipeline``, checked against the body it sends. Default: None.
    :param raw_message_delivery: deliver the notification itself, its attributes as SQS message
        attributes, rather than SNS's JSON envelope: smaller messages, and a body near SNS's size
        limit still fits the queue. The helper reads both, so switching is safe with messages
        queued. Default: True.
    :param batch_size: records per invocation, 1..10 on a FIFO topic's queue, 1..10000 (above 10
        needs ``max_batching_window``). Default: 10.
    :param max_batching_window: how long Lambda gathers records. Default: None (invoke at once).
    :param max_concurrency: the most concurrent invocations, 2..1000. Default: None (Lambda's scaling).
    :param max_receive_count: deliveries before the queue moves a notification to the
        dead-letter queue. Default: 5.
    :param lease: how long a claim holds an event, at least ``function_timeout``. Default: None
        (``function_timeout``: a live invocation never loses its claim).
    :param visibility_timeout: the queue's visibility timeout, longer than the lease. Default:
        None (6x ``function_timeout`` plus ``max_batching_window``).
    :param retention_period: how long the queue keeps a notification, less than the dead-letter
        queue's fixed 14 days. Default: 4 days.
    :param record_retention: how long a deduplication record lives after its last write (its
        ``ttl``), longer than ``retention_period`` + 14 days so it outlives every copy. Default: 30 days.
    :param removal_policy: for the queues, the table and the log group: DESTROY, RETAIN or
        RETAIN_ON_UPDATE_OR_DELETE; the table's deletion protection follows it. Default: RemovalPolicy.RETAIN.
    :param log_retention: how long the function's log group keeps logs. Default: RetentionDays.ONE_MONTH.
    :param alarm_actions: actions every alarm runs when it fires (and on OK with ``ok_actions``). Default: ().
    :param ok_actions: run the same actions on OK. Default: True.
    :param alarm_name_prefix: alarms are named ``<prefix>-<key>``. Default: None (the stack name
        and this construct's path, e.g. ``Shop-Shipping``).
    :param runbook_url: the runbook every alarm description links. Default: None (docs/subscriber.md's).
    :param oldest_message_age_threshold: the queue age above which ``oldest_message_too_old``
        fires, less than ``retention_period``. Default: 15 minutes.
    :param alarm_evaluation_periods: breaching minutes before the age and error alarms fire. Default: 3.
    :param create_alarms: create the alarms (False: ``alarm_definitions`` only). Default: True.
    """

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        code: aws_lambda.Code,
        handler: str,
        pipeline: IdempotentOrderPipeline | None = DEFAULTS.pipeline,
        topic: aws_sns.ITopic | None = DEFAULTS.topic,
        runtime: aws_lambda.Runtime = DEFAULTS.runtime,
        architecture: aws_lambda.Architecture = DEFAULTS.architecture,
        memory_size: int = DEFAULTS.memory_size,
        function_timeout: Duration = DEFAULTS.function_timeout,
        environment: Mapping[str, str] | None = DEFAULTS.environment,
        filter_policy: Mapping[str, aws_sns.SubscriptionFilter] | None = DEFAULTS.filter_policy,
        filter_policy_with_message_body: Mapping[str, aws_sns.FilterOrPolicy]
        | None = DEFAULTS.filter_policy_with_message_body,
        raw_message_delivery: bool = DEFAULTS.raw_message_delivery,
        batch_size: int = DEFAULTS.batch_size,
        max_batching_window: Duration | None = DEFAULTS.max_batching_window,
        max_concurrency: int | None = DEFAULTS.max_concurrency,
        max_receive_count: int = DEFAULTS.max_receive_count,
        lease: Duration | None = DEFAULTS.lease,
        visibility_timeout: Duration | None = DEFAULTS.visibility_timeout,
        retention_period: Duration = DEFAULTS.retention_period,
        record_retention: Duration = DEFAULTS.record_retention,
        removal_policy: RemovalPolicy = DEFAULTS.removal_policy,
        log_retention: aws_logs.RetentionDays = DEFAULTS.log_retention,
        alarm_actions: Sequence[aws_cloudwatch.IAlarmAction] = DEFAULTS.alarm_actions,
        ok_actions: bool = DEFAULTS.ok_actions,
        alarm_name_prefix: str | None = DEFAULTS.alarm_name_prefix,
        runbook_url: str | None = DEFAULTS.runbook_url,
        oldest_message_age_threshold: Duration = DEFAULTS.oldest_message_age_threshold,
        alarm_evaluation_periods: int = DEFAULTS.alarm_evaluation_periods,
        create_alarms: bool = DEFAULTS.create_alarms,
    ) -> None:
        # Only the parameters are bound yet: locals() holds the props exactly as given.
        props = SubscriberProps.from_arguments(locals())
        super().__init__(scope, construct_id)
        mark_library_version(self)  # the library's version in the template's Metadata (library_version.py)
        self._props = props = self._validate(props)
        fifo = is_fifo(props)

        self.dead_letter_queue: aws_sqs.Queue = aws_sqs.Queue(
            self, "DeadLetterQueue", retention_period=DEAD_LETTER_RETENTION, **self._queue_defaults(fifo)
        )
        """Notifications that failed ``max_receive_count`` times, that are not notifications, or that SNS could
        not deliver to the queue (the subscription's redrive policy)."""
        self.queue: aws_sqs.Queue = aws_sqs.Queue(
            self,
            "Queue",
            visibility_timeout=derived_visibility_timeout(props),
            retention_period=props.retention_period,
            dead_letter_queue=aws_sqs.DeadLetterQueue(
                queue=self.dead_letter_queue, max_receive_count=props.max_receive_count
            ),
            **self._queue_defaults(fifo),
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
        if findings.errors:
            problems = "\n".join(f"  - {error}" for error in findings.errors)
            raise ValueError(f"IdempotentSubscriber {self.node.path}: invalid props:\n{problems}")
        return props

    # ---- resources -------------------------------------------------------------------------------

    def _queue_defaults(self, fifo: bool) -> dict[str, Any]:
        return {
            **({"fifo": True} if fifo else {}),
            "encryption": aws_sqs.QueueEncryption.SQS_MANAGED,
            "enforce_ssl": True,
            "removal_policy": self._props.removal_policy,
        }

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
        table = aws_dynamodb.Table(
            self,
            "DedupTable",
            partition_key=aws_dynamodb.Attribute(name=DEDUP_PARTITION_KEY, type=aws_dynamodb.AttributeType.STRING),
            billing_mode=aws_dynamodb.BillingMode.PAY_PER_REQUEST,
            point_in_time_recovery_specification=aws_dynamodb.PointInTimeRecoverySpecification(
                point_in_time_recovery_enabled=True
            ),
            time_to_live_attribute=DEDUP_TTL_ATTRIBUTE,
            encryption=aws_dynamodb.TableEncryption.AWS_MANAGED,
            removal_policy=self._props.removal_policy,
        )
        cfn_table = table.node.default_child
        assert isinstance(cfn_table, aws_dynamodb.CfnTable)
        removal.protect_while_kept(cfn_table)
        return table

    def _environment(self) -> dict[str, str]:
        props = self._props
        lease = derived_lease(props)
        return {
            **(props.environment or {}),
            config.DEDUP_TABLE_VARIABLE: self.dedup_table.table_name,
            config.LEASE_SECONDS_VARIABLE: _whole_seconds(lease),
            config.RECORD_TTL_SECONDS_VARIABLE: _whole_seconds(props.record_retention),
        }

    def _create_function(self) -> aws_lambda.Function:
        props = self._props
        log_group = aws_logs.LogGroup(
            self, "FunctionLogGroup", retention=props.log_retention, removal_policy=props.removal_policy
        )
        role = aws_iam.Role(
            self,
            "FunctionRole",
            assumed_by=aws_iam.ServicePrincipal("lambda.amazonaws.com"),
            description="An idempotent order subscriber (least privilege, no managed policies).",
        )
        # Instead of AWSLambdaBasicExecutionRole (logs on every log group): this log group only.
        role.add_to_principal_policy(
            aws_iam.PolicyStatement(
                sid="WriteOwnLogs",
                actions=["logs:CreateLogStream", "logs:PutLogEvents"],
                resources=[log_group.log_group_arn],
            )
        )
        role.add_to_principal_policy(
            aws_iam.PolicyStatement(
                sid="ClaimAndMarkEvents", actions=list(DEDUP_ACTIONS), resources=[self.dedup_table.table_arn]
            )
        )
        function = aws_lambda.Function(
            self,
            "Function",
            code=props.code,
            handler=props.handler,
            runtime=props.runtime,
            architecture=props.architecture,
            memory_size=props.memory_size,
            timeout=props.function_timeout,
            layers=[self.runtime_layer],
            environment=self._environment(),
            log_group=log_group,
            role=role,
            description="Acts once per order notification (idempotent_subscriber).",
        )
        function.add_event_source(
            aws_lambda_event_sources.SqsEventSource(
                self.queue,
                batch_size=props.batch_size,
                max_batching_window=props.max_batching_window,
                max_concurrency=props.max_concurrency,
                report_batch_item_failures=True,
            )
        )
        return function

    # ---- alarms ----------------------------------------------------------------------------------

    def _alarm_settings(self) -> monitoring.AlarmSettings:
        props = self._props
        return monitoring.AlarmSettings(
            name_prefix=props.alarm_name_prefix or self._default_alarm_name_prefix(),
            actions=tuple(props.alarm_actions),
            ok_actions=props.ok_actions,
            runbook_url=props.runbook_url,
            evaluation_periods=props.alarm_evaluation_periods,
            create=props.create_alarms,
            default_runbook=DEFAULT_RUNBOOK,
        )

    def _default_alarm_name_prefix(self) -> str:
        """The stack name and this construct's path inside the stack: unique per account and region."""
        stack = Stack.of(self)
        return "-".join([stack.stack_name, *self.node.path.removeprefix(f"{stack.node.path}/").split("/")])

    def _create_alarms(self) -> None:
        period = monitoring.PERIOD
        alarm = self.alarm_factory.add_alarm
        alarm(
            "dead_letter_queue_not_empty",
            "DeadLetterQueueNotEmptyAlarm",
            self.dead_letter_queue.metric_approximate_number_of_messages_visible(period=period, statistic="Maximum"),
            description="Notifications are parked in the subscriber's dead-letter queue: not notifications, or an "
            "effect that kept failing.",
        )
        alarm(
            "oldest_message_too_old",
            "OldestMessageTooOldAlarm",
            self.queue.metric_approximate_age_of_oldest_message(period=period, statistic="Maximum"),
            description="The oldest notification waiting for the subscriber is older than the threshold: the "
            "function is behind or failing.",
            threshold=self._props.oldest_message_age_threshold.to_seconds(),
            sustained=True,
            comparison=aws_cloudwatch.ComparisonOperator.GREATER_THAN_THRESHOLD,
        )
        alarm(
            "function_errors",
            "FunctionErrorsAlarm",
            self.function.metric_errors(period=period, statistic="Sum"),
            description="The subscriber's function fails whole invocations (crash, timeout, configuration).",
            sustained=True,
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


def _whole_seconds(duration: Duration) -> str:
    if duration.is_unresolved():
        return Token.as_string(duration.to_seconds())
    return str(int(duration.to_seconds()))
