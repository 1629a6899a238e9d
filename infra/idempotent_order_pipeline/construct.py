"""``IdempotentOrderPipeline``: SQS -> Lambda -> DynamoDB (exactly once) -> SNS (at least once)."""

from __future__ import annotations

import re
import warnings
import weakref
from collections.abc import Mapping
from dataclasses import replace
from types import MappingProxyType
from typing import TYPE_CHECKING, Any, TypedDict

import jsii
from aws_cdk import (
    Annotations,
    CfnResource,
    Duration,
    Fn,
    Stack,
    Token,
    aws_cloudwatch,
    aws_cloudwatch_actions,
    aws_dynamodb,
    aws_ec2,
    aws_iam,
    aws_lambda,
    aws_sns,
    aws_sqs,
)
from constructs import Construct, IConstruct, IValidation

from idempotent_order_pipeline import (
    asset,
    compliance,
    monitoring,
    nag,
    notifications,
    order_schema,
    permissions,
    powertools,
    reconciliation,
    removal,
    resources,
)
from idempotent_order_pipeline._lambda_asset.order_consumer.contract import metric_names, names
from idempotent_order_pipeline._lambda_asset.order_consumer.contract.metric_names import (
    OUTCOME_METRICS,
    SCHEMA_VIOLATIONS,
)
from idempotent_order_pipeline._lambda_asset.order_consumer.contract.notification import NotificationFormat
from idempotent_order_pipeline._lambda_asset.order_consumer.contract.pending_index import (
    ORDER_ROW_ATTRIBUTES,
    PENDING_INDEX_NAME,
)
from idempotent_order_pipeline.core import props as core_props
from idempotent_order_pipeline.core import rules, sqs_function, tables
from idempotent_order_pipeline.core.props import WARNING_PREFIX, Findings
from idempotent_order_pipeline.discovery import mark as mark_for_discovery
from idempotent_order_pipeline.library_version import mark_library_version
from idempotent_order_pipeline.props import (
    DEFAULTS,
    PipelineKwargs,
    PipelineProps,
    derived_reconcile_after,
    validate,
    well_typed,
)

if TYPE_CHECKING:
    from typing_extensions import Unpack

# SNS SSE without a customer key: the AWS managed key for SNS (its key policy lets principals of
# the account use it through SNS, so nothing to grant).
AWS_MANAGED_SNS_KEY = "alias/aws/sns"
#: What the standard alarms (core.sqs_function.STANDARD_ALARMS) mean for the pipeline.
STANDARD_ALARM_MEANINGS = {
    "dead_letter_queue_not_empty": "Messages are parked in the dead-letter queue: invalid, conflicting or repeatedly "
    "failing orders.",
    "oldest_message_too_old": "The oldest order waiting in the queue is older than the threshold: the consumer is "
    "behind or failing.",
    "function_errors": "The consumer function fails whole invocations (crash, timeout, configuration).",
}
#: With ``snap_start``: the alias the event source mapping invokes.
FUNCTION_ALIAS_NAME = "live"
#: The only subscription protocol an SNS FIFO topic delivers to (SQS FIFO or standard queues; SNS
#: developer guide, "Message delivery for FIFO topics": Lambda, HTTP(S), email, SMS are refused).
FIFO_TOPIC_PROTOCOLS = ("sqs",)
#: CloudWatch statistics (aws_cloudwatch.Stats): the named ones, then pNN / tmNN / wmNN / tcNN / tsNN
#: and the range forms TM(10%:90%), PR(:300), ...
NAMED_STATISTICS = ("SampleCount", "Average", "Sum", "Minimum", "Maximum", "IQM")
_STATISTIC = re.compile(
    r"^(?:(?:p|tm|wm|tc|ts)(?:100|\d{1,2}(?:\.\d+)?)"
    r"|(?:TM|WM|TC|TS|PR)\((?:\d+(?:\.\d+)?%?)?:(?:\d+(?:\.\d+)?%?)?\))$",
    flags=re.IGNORECASE,
)


class MetricOptions(TypedDict, total=False):
    """The keywords of ``aws_cloudwatch.MetricOptions``, accepted by every ``metric_*`` method."""

    account: str
    color: str
    dimensions_map: Mapping[str, str]
    id: str
    label: str
    period: Duration
    region: str
    stack_account: str
    stack_region: str
    statistic: str
    unit: aws_cloudwatch.Unit
    visible: bool


def check_statistic(statistic: str) -> None:
    """Raise ValueError unless ``statistic`` is one CloudWatch knows (or a token)."""
    if Token.is_unresolved(statistic) or statistic in NAMED_STATISTICS or _STATISTIC.match(statistic):
        return
    raise ValueError(
        f"statistic={statistic!r}: allowed {', '.join(NAMED_STATISTICS)}, pNN, tmNN, wmNN, tcNN, tsNN (NN 0..100) "
        "or a range such as TM(10%:90%) (see aws_cloudwatch.Stats)"
    )


# Service names in use, per app (weakly: an app's entries go with it) and environment: two
# pipelines with one name would watch each other's metrics (the alarms filter on the service dimension).
_SERVICE_NAMES: weakref.WeakKeyDictionary[IConstruct, dict[tuple[str, str, str], str]] = weakref.WeakKeyDictionary()


@jsii.implements(IValidation)
class _FifoSubscriptionsOnly:
    """A synth error for a subscription an SNS FIFO topic cannot deliver to (however it was added)."""

    def __init__(self, scope: Construct, topic: aws_sns.ITopic) -> None:
        self._scope = scope
        self._topic = topic

    def validate(self) -> list[str]:
        if not self._topic.fifo:
            return []
        return [
            f"{child.node.path}: protocol {child.protocol!r} on the FIFO topic; an SNS FIFO topic delivers only to "
            "SQS queues (subscribe a queue and trigger the function from it)"
            for child in self._scope.node.root.node.find_all()
            if isinstance(child, aws_sns.CfnSubscription)
            and child.topic_arn == self._topic.topic_arn
            and child.protocol not in FIFO_TOPIC_PROTOCOLS
        ]


def _endpoint_url(endpoint: aws_ec2.InterfaceVpcEndpoint) -> str:
    """``https://`` and the endpoint's regional DNS name: the first of its DNS entries, each
    ``<hosted zone id>:<DNS name>`` (CloudFormation's ``DnsEntries``; the zonal names follow)."""
    first = Fn.select(0, endpoint.vpc_endpoint_dns_entries)
    return Fn.join("", ["https://", Fn.select(1, Fn.split(":", first))])


def _deprecated_alarm_action(topic: aws_sns.ITopic) -> aws_cloudwatch.IAlarmAction:
    """``alarm_action=topic`` (deprecated since 0.3.0) as the action it stands for, with a warning."""
    warnings.warn(
        "IdempotentOrderPipeline(alarm_action=topic) is deprecated and will be removed in 1.0: use "
        "alarm_actions=[aws_cloudwatch_actions.SnsAction(topic)]",
        DeprecationWarning,
        stacklevel=4,  # the caller's line: above this helper, __init__ and jsii's metaclass __call__
    )
    return aws_cloudwatch_actions.SnsAction(topic)


class IdempotentOrderPipeline(Construct):
    """An SQS queue of orders, consumed by a Lambda function that records each order exactly once
    in DynamoDB and announces it at least once on an SNS topic.

    Secure by default: encrypted queues, topic and tables; TLS-only queue and topic policies; a
    dead-letter queue; point-in-time recovery; least-privilege IAM; alarms and a dashboard.
    Props are validated at synth (``ValueError`` naming every bad prop) unless they are tokens.

    Bring your own (see ``idempotent_order_pipeline.resources`` for every requirement): each of the
    queue, the dead-letter queue, the topic and the tables is either created, shaped by its
    ``*_props`` override, or given as ``existing_*`` (never both). An existing resource is used as it
    is: ``removal_policy``, ``max_receive_count``, ``visibility_timeout``, ``retention_period``,
    ``encryption_key`` (for encryption) and ``fifo_high_throughput`` then do not change it. What the
    design needs of it is checked at synth when it was created in the same app (keys, TTL, redrive,
    visibility timeout, FIFO, its key); an imported one (``Queue.from_queue_arn``,
    ``Table.from_table_name``, ...) adds a warning ``idempotent-order-pipeline:existing-<role>-unverified``
    listing what the caller guarantees; acknowledge it with
    ``Annotations.of(pipeline).acknowledge_warning(id)`` once checked.

    Every prop is keyword-only; the ``:param`` lines of the props below are made from their
    declarations in :class:`~idempotent_order_pipeline.props.PipelineProps` (the one place each prop's
    default, type and doc are written).

    :param scope: the parent construct.
    :param construct_id: the construct id. It is part of every logical id: changing it replaces the
        tables and queues.
    :param alarm_action: deprecated, use ``alarm_actions=[aws_cloudwatch_actions.SnsAction(topic)]``
        (a ``DeprecationWarning`` says so); the topic's ``SnsAction`` is added to ``alarm_actions``.
        Default: None.
    """

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        alarm_action: aws_sns.ITopic | None = None,
        **kwargs: Unpack[PipelineKwargs],
    ) -> None:
        props = core_props.given(PipelineProps, kwargs, "IdempotentOrderPipeline")
        super().__init__(scope, construct_id)
        mark_library_version(self)  # the library's version in the template's Metadata (library_version.py)
        if alarm_action is not None:
            props = replace(props, alarm_actions=(*props.alarm_actions, _deprecated_alarm_action(alarm_action)))
        self._props = props
        self._service_name = props.service_name or sqs_function.default_name(self)
        self._validate(props)

        self.dead_letter_queue: aws_sqs.IQueue = self._dead_letter_queue()
        """Messages that failed ``max_receive_count`` times, and permanent failures parked by the handler."""
        self.queue: aws_sqs.IQueue = self._queue()
        """The orders queue producers send to (see :meth:`grant_send_orders`)."""
        self.processed_events_table: aws_dynamodb.ITable = self._processed_events_table()
        """One idempotency record per event (``event_id``), expiring ``record_retention`` after it was sent."""
        self.order_records_table: aws_dynamodb.ITable = self._table(
            resources.ORDER_RECORDS, props.existing_order_records_table
        )
        """One row per order (``order_id``), written in the same transaction as its event record."""
        self.topic: aws_sns.ITopic = self._topic()
        """Where each recorded order is announced, at least once (see :meth:`add_subscription`)."""
        self.function_alias: aws_lambda.Alias | None = None
        """With ``snap_start``: the alias (``live``) on the latest published version, which the queue invokes."""
        self.function: aws_lambda.Function = self._create_function()
        """The consumer Lambda function."""
        self.vpc_endpoints: Mapping[str, aws_ec2.IVpcEndpoint] = MappingProxyType(self._create_vpc_endpoints())
        """With ``create_vpc_endpoints``: ``dynamodb`` (gateway), ``sns`` and ``sqs`` (interface); else empty."""
        self.node.add_validation(_FifoSubscriptionsOnly(self, self.topic))

        watched = self._monitored_resources()
        self.alarm_factory = monitoring.AlarmFactory(self, self._alarm_settings())
        """Makes every alarm alike (name prefix, runbook, actions, overrides); sub-constructs add theirs here."""
        sqs_function.add_standard_alarms(
            self.alarm_factory,
            props,
            queue=self.queue,
            dead_letter_queue=self.dead_letter_queue,
            function=self.function,
            meanings=STANDARD_ALARM_MEANINGS,
        )
        monitoring.create_alarms(self.alarm_factory, watched)
        self.reconciliation: reconciliation.Reconciliation | None = self._create_reconciliation()
        """The scheduled reconciler (function, rule, ``pending_too_old`` and ``reconciler_errors`` alarms); None
        with ``reconcile_every=None``."""
        self.alarms: Mapping[str, aws_cloudwatch.Alarm] = MappingProxyType(self.alarm_factory.alarms)
        """Every alarm, by key (``dead_letter_queue_not_empty``, ``conflicts``, ...), less those turned off."""
        self.alarm_definitions: Mapping[str, monitoring.AlarmDefinition] = MappingProxyType(
            self.alarm_factory.definitions
        )
        """Every alarm's metric, threshold, periods and description by key, created or not (``create_alarms``)."""
        self.dashboard: aws_cloudwatch.Dashboard | None = self._create_dashboard(watched)
        """Queue, function, handler outcomes and tables on one CloudWatch dashboard (None with ``dashboard=False``)."""
        self._suppress_checkov_findings()
        self._follow_removal_policy()
        mark_for_discovery(self)  # resource metadata the operator CLI finds this pipeline by

    # ---- validation ------------------------------------------------------------------------------

    def _validate(self, props: PipelineProps) -> None:
        """Every prop, every override after the merge and every existing resource: one error lists all."""
        findings = Findings()
        props = well_typed(props, findings)
        validate(props, findings)
        resources.check_resources(props, findings)
        if props.snap_start:
            rules.check_snap_start_region(Stack.of(self).region, findings)
        if props.powertools_layer is None and (layer_problem := powertools.default_layer_problem(self)):
            findings.errors.append(layer_problem)
        self._check_service_name_unique(findings)
        core_props.report(self, "IdempotentOrderPipeline", findings)
        _SERVICE_NAMES.setdefault(self.node.root, {})[self._service_name_key()] = self.node.path

    def _check_service_name_unique(self, findings: Findings) -> None:
        """Two pipelines of one app in one account and region may not share a service name."""
        other = _SERVICE_NAMES.get(self.node.root, {}).get(self._service_name_key())
        if other is not None and other != self.node.path:
            findings.errors.append(
                f"service_name={self._service_name!r}: already used by {other} in the same account and region; "
                "allowed a name of its own (the alarms filter the outcome metrics on it)"
            )

    def _service_name_key(self) -> tuple[str, str, str]:
        stack = Stack.of(self)
        return (stack.account, stack.region, self._service_name)

    def _alarm_settings(self) -> monitoring.AlarmSettings:
        props = self._props
        return monitoring.AlarmSettings(
            name_prefix=props.alarm_name_prefix or self._service_name,
            actions=tuple(props.alarm_actions),
            ok_actions=props.ok_actions,
            runbook_url=props.runbook_url,
            evaluation_periods=props.alarm_evaluation_periods,
            overrides=props.alarm_override_map,
            create=props.create_alarms,
        )

    def _monitored_resources(self) -> monitoring.MonitoredResources:
        return monitoring.MonitoredResources(
            queue=self.queue,
            dead_letter_queue=self.dead_letter_queue,
            function=self.function,
            topic=self.topic,
            processed_events_table=self.processed_events_table,
            order_records_table=self.order_records_table,
            outcome_metrics={
                name: self._outcome_metric(name)
                for name in (*OUTCOME_METRICS, *((SCHEMA_VIOLATIONS,) if self._props.order_schema is not None else ()))
            },
            event_source_metrics={
                name: monitoring.event_source_metric(self._event_source.event_source_mapping_id, name)
                for name in (monitoring.EVENT_SOURCE_METRICS if self._props.event_source_metrics else ())
            },
        )

    def _create_dashboard(self, watched: monitoring.MonitoredResources) -> aws_cloudwatch.Dashboard | None:
        if not self._props.dashboard:
            return None
        dashboard = monitoring.create_dashboard(self, watched, self.alarms)
        if self.reconciliation is not None:
            self.reconciliation.add_to_dashboard(dashboard)
        return dashboard

    # ---- resources (one helper each: existing_x, or created from the defaults merged with x_props) ----

    def _dead_letter_queue(self) -> aws_sqs.IQueue:
        if self._props.existing_dead_letter_queue is not None:
            return self._props.existing_dead_letter_queue
        return sqs_function.build_dead_letter_queue(self, **resources.dead_letter_queue_kwargs(self._props))

    def _queue(self) -> aws_sqs.IQueue:
        props = self._props
        if props.existing_queue is not None:
            return props.existing_queue
        return sqs_function.build_queue(
            self,
            dead_letter_queue=self.dead_letter_queue,
            max_receive_count=props.max_receive_count,
            **resources.queue_kwargs(props),
        )

    def _table(self, spec: resources.TableSpec, existing: aws_dynamodb.ITable | None) -> aws_dynamodb.ITable:
        if existing is not None:
            return existing
        return tables.build_table(self, spec.construct_id, **resources.table_kwargs(self._props, spec))

    def _processed_events_table(self) -> aws_dynamodb.ITable:
        """The idempotency table, with the reconciler's pending index when the construct creates it."""
        existing = self._props.existing_processed_events_table
        table = self._table(resources.PROCESSED_EVENTS, existing)
        if isinstance(table, aws_dynamodb.Table) and existing is None:
            reconciliation.add_pending_index(table)
        else:
            Annotations.of(self).add_warning_v2(
                f"{WARNING_PREFIX}:existing-processed-events-table-index",
                "existing_processed_events_table must have the global secondary index "
                f"{PENDING_INDEX_NAME!r} (partition key pending_shard S, sort key created_at N, "
                "KEYS_ONLY; reconciliation.add_pending_index makes it): the reconciler and the CLI's pending "
                "command query it. Acknowledge this warning once the table has it.",
            )
        return table

    def _topic(self) -> aws_sns.ITopic:
        props = self._props
        if props.existing_topic is not None:
            return props.existing_topic
        kwargs = resources.topic_kwargs(props)
        topic = aws_sns.Topic(self, "Topic", **kwargs)
        if kwargs.get("master_key") is None:
            cfn_topic = topic.node.default_child
            assert isinstance(cfn_topic, aws_sns.CfnTopic)
            cfn_topic.kms_master_key_id = AWS_MANAGED_SNS_KEY
        # Topics hold no messages, but subscribers (possibly other accounts) hold its ARN: keep it
        # with the data it announces.
        topic.apply_removal_policy(props.removal_policy)
        return topic

    def _follow_removal_policy(self) -> None:
        """SNAPSHOT, however it was applied (here or by RemovalPolicies.of later), fails the synth."""
        created = [child for child in self.node.find_all() if isinstance(child, CfnResource)]
        self.node.add_validation(removal.NoSnapshotPolicy(created))

    def _create_function(self) -> aws_lambda.Function:
        props = self._props
        log_group = sqs_function.build_log_group(
            self,
            retention=props.log_retention,
            removal_policy=props.removal_policy,
            encryption_key=props.encryption_key,
        )
        if props.encryption_key is not None and not permissions.allow_log_encryption(self, props.encryption_key):
            Annotations.of(self).add_warning_v2(
                f"{WARNING_PREFIX}:imported-key-policy",
                "encryption_key is imported: its key policy must let logs.<region>.amazonaws.com use it for this "
                "account's log groups (kms:EncryptionContext:aws:logs:arn), or the log group cannot be created",
            )
        role = sqs_function.build_role(
            self,
            log_group=log_group,
            description="Consumer of the idempotent order pipeline (least privilege, no managed policies).",
        )
        if props.vpc is not None:
            for statement in permissions.vpc_network_interface_statements(self):
                role.add_to_principal_policy(statement)
        for statement in permissions.handler_statements(
            self,
            processed_events=self.processed_events_table,
            order_records=self.order_records_table,
            topic=self.topic,
            queue=self.queue,
            dead_letter_queue=self.dead_letter_queue,
            encryption_key=props.encryption_key,
        ):
            role.add_to_principal_policy(statement)
        layer = props.powertools_layer or powertools.default_powertools_layer(self, "PowertoolsLayer")
        defaults: dict[str, Any] = {
            **sqs_function.function_defaults(
                props,
                description="Records each order from the queue exactly once in DynamoDB, then announces it on SNS.",
                code=self._function_code(),
                handler=asset.HANDLER,
                layers=[layer],
                environment=self._environment(),
                log_group=log_group,
                role=role,
            ),
            "tracing": aws_lambda.Tracing.ACTIVE if props.tracing else None,
            "snap_start": aws_lambda.SnapStartConf.ON_PUBLISHED_VERSIONS if props.snap_start else None,
            "reserved_concurrent_executions": props.reserved_concurrency,
            "vpc": props.vpc,
            "vpc_subnets": props.vpc_subnets,
            "security_groups": list(props.security_groups) if props.security_groups is not None else None,
        }
        self._powertools_layer = layer
        function = aws_lambda.Function(
            self, "Function", **resources.merged(defaults, resources.function_overrides(props), {})
        )
        self._event_source = sqs_function.build_event_source(
            self.queue, props, grant_through=self._queue_without_key(), provisioned_pollers=props.provisioned_pollers
        )
        if props.snap_start:
            # SnapStart applies to published versions only: the mapping invokes the alias, never $LATEST.
            self.function_alias = aws_lambda.Alias(
                self, "FunctionAlias", alias_name=FUNCTION_ALIAS_NAME, version=function.current_version
            )
            self.function_alias.add_event_source(self._event_source)
        else:
            function.add_event_source(self._event_source)
        self._acknowledge_findings(function, role)
        return function

    def _function_code(self) -> aws_lambda.Code:
        """The consumer's asset; with ``order_schema``, a copy that carries the schema's generated validator."""
        if self._props.order_schema is None:
            return asset.lambda_code()
        directory = order_schema.asset_directory(self._props.order_schema)
        return asset.code_from(directory)

    def _queue_without_key(self) -> aws_sqs.IQueue:
        """The queue as the event source sees it: without its key, so that the event source's grant
        (``grantConsumeMessages``) adds no unconditioned ``kms:Decrypt``; the role's key statement
        scoped to this queue (``permissions.handler_statements``) is what polling needs."""
        if self.queue.encryption_master_key is None:
            return self.queue
        return aws_sqs.Queue.from_queue_attributes(
            self,
            "EventSourceQueue",
            queue_arn=self.queue.queue_arn,
            queue_url=self.queue.queue_url,
            fifo=self.queue.fifo,
        )

    def _create_vpc_endpoints(self) -> dict[str, aws_ec2.IVpcEndpoint]:
        """The DynamoDB gateway endpoint and the SNS and SQS interface endpoints, HTTPS from the function only.

        Private DNS stays off unless ``vpc_endpoints_private_dns``: with it on, every workload of the VPC
        would resolve SNS's and SQS's regional names to these endpoints and meet their policies (and a
        VPC that has such an endpoint already could not take a second one). Off, the functions reach the
        endpoints by their own DNS names, through the SDK's ``AWS_ENDPOINT_URL_<SERVICE>`` variables
        (:meth:`_endpoint_environment`). DynamoDB's gateway endpoint routes through the route tables, by
        prefix list, with no DNS to take over.
        """
        props = self._props
        if props.vpc is None or not props.create_vpc_endpoints:
            return {}
        # The function's subnets (None: the VPC's default choice, private ones, as aws_lambda.Function makes it).
        subnets = props.vpc_subnets
        dynamodb = aws_ec2.GatewayVpcEndpoint(
            self,
            "DynamoDbEndpoint",
            vpc=props.vpc,
            service=aws_ec2.GatewayVpcEndpointAwsService.DYNAMODB,
            subnets=None if subnets is None else [subnets],
        )
        for statement in permissions.dynamodb_endpoint_statements(self):
            dynamodb.add_to_policy(statement)
        endpoints: dict[str, aws_ec2.IVpcEndpoint] = {"dynamodb": dynamodb}
        for key, construct_id, service, statement in (
            (
                "sns",
                "SnsEndpoint",
                aws_ec2.InterfaceVpcEndpointAwsService.SNS,
                permissions.sns_endpoint_statement(self, self.topic),
            ),
            (
                "sqs",
                "SqsEndpoint",
                aws_ec2.InterfaceVpcEndpointAwsService.SQS,
                permissions.sqs_endpoint_statement(self, self.dead_letter_queue),
            ),
        ):
            endpoint = aws_ec2.InterfaceVpcEndpoint(
                self,
                construct_id,
                vpc=props.vpc,
                service=service,
                subnets=subnets,
                private_dns_enabled=props.vpc_endpoints_private_dns,
                open=False,  # not the whole VPC: HTTPS from the function's security groups only
            )
            endpoint.connections.allow_default_port_from(self.function, "HTTPS from the order pipeline's function")
            endpoint.add_to_policy(statement)
            endpoints[key] = endpoint
        for name, value in self._endpoint_environment(endpoints).items():
            self.function.add_environment(name, value)
        return endpoints

    def _endpoint_environment(self, endpoints: Mapping[str, aws_ec2.IVpcEndpoint]) -> dict[str, str]:
        """``AWS_ENDPOINT_URL_SNS`` and ``AWS_ENDPOINT_URL_SQS``: each interface endpoint's regional DNS name,
        for the functions' SDK clients, when private DNS is off (with it on, the services' own names lead there)."""
        if self._props.vpc_endpoints_private_dns:
            return {}
        variables = {}
        for key, name in (("sns", names.SNS_ENDPOINT_URL_VARIABLE), ("sqs", names.SQS_ENDPOINT_URL_VARIABLE)):
            endpoint = endpoints.get(key)
            if isinstance(endpoint, aws_ec2.InterfaceVpcEndpoint):
                variables[name] = _endpoint_url(endpoint)
        return variables

    def _create_reconciliation(self) -> reconciliation.Reconciliation | None:
        props = self._props
        if props.reconcile_every is None:
            return None
        return reconciliation.Reconciliation(
            self,
            "Reconciliation",
            processed_events_table=self.processed_events_table,
            order_records_table=self.order_records_table,
            topic=self.topic,
            environment={**self._environment(), **self._endpoint_environment(self.vpc_endpoints)},
            reconcile_every=props.reconcile_every,
            reconcile_after=derived_reconcile_after(props),
            powertools_layer=self._powertools_layer,
            encryption_key=props.encryption_key,
            log_retention=props.log_retention,
            removal_policy=props.removal_policy,
            metrics_namespace=props.metrics_namespace,
            service_name=self._service_name,
            alarm_factory=self.alarm_factory,
            order_row_attributes=self.notification_format.row_attributes(ORDER_ROW_ATTRIBUTES),
            tracing=props.tracing,
            vpc=props.vpc,
            vpc_subnets=props.vpc_subnets,
            # The consumer's security groups, so VPC endpoints made for it serve the reconciler too.
            security_groups=tuple(self.function.connections.security_groups) if props.vpc is not None else None,
        )

    def _environment(self) -> dict[str, str]:
        """The variables the handler reads (contract with ``lambdas/order_consumer/config.py``)."""
        props = self._props
        ttl_seconds = props.record_retention.to_seconds()
        ttl_text = Token.as_string(ttl_seconds) if props.record_retention.is_unresolved() else str(int(ttl_seconds))
        return {
            names.PROCESSED_EVENTS_TABLE_VARIABLE: self.processed_events_table.table_name,
            names.ORDER_RECORDS_TABLE_VARIABLE: self.order_records_table.table_name,
            names.TOPIC_ARN_VARIABLE: self.topic.topic_arn,
            names.DEAD_LETTER_QUEUE_URL_VARIABLE: self.dead_letter_queue.queue_url,
            names.RECORD_TTL_SECONDS_VARIABLE: ttl_text,
            names.IDENTITY_FIELDS_VARIABLE: ",".join(props.identity_field_names),
            names.SERVICE_NAME_VARIABLE: self._service_name,
            names.METRICS_NAMESPACE_VARIABLE: props.metrics_namespace,
            **self._notification_environment(),
        }

    def _notification_environment(self) -> dict[str, str]:
        """The notification variables, only when a prop differs from its default (a default pipeline's
        template stays as it was)."""
        props = self._props
        variables = {}
        if props.notification_attributes:
            variables[names.NOTIFICATION_ATTRIBUTES_VARIABLE] = self.notification_format.attributes_text()
        if props.notification_body != DEFAULTS.notification_body:
            variables[names.NOTIFICATION_BODY_VARIABLE] = props.notification_body
        return variables

    @property
    def order_schema(self) -> Mapping[str, Any] | None:
        """The ``order_schema`` prop (None: the pipeline has none)."""
        return self._props.order_schema

    @property
    def notification_format(self) -> NotificationFormat:
        """What the notifications carry: the ``notification_attributes`` and ``notification_body`` props."""
        props = self._props
        return NotificationFormat(attributes=tuple(props.notification_attributes), body=props.notification_body)

    def _acknowledge_findings(self, function: aws_lambda.Function, role: aws_iam.Role) -> None:
        """cdk-nag findings this construct's design answers (each reason is in docs/compliance.md too)."""
        default_policy = role.node.find_child("DefaultPolicy")
        nag.acknowledge(
            default_policy,
            "AwsSolutions",
            "AwsSolutions-IAM5",
            "Only actions without resource-level permissions use Resource '*': X-Ray PutTraceSegments and "
            "PutTelemetryRecords (with tracing=True) and the EC2 Describe calls of a function in a "
            "VPC; every other statement names its exact resource.",
            applies_to="Resource::*",
        )
        permissions.acknowledge_vpc_network_interfaces(default_policy)
        nag.acknowledge(
            function,
            "Serverless",
            "Serverless-LambdaDLQ",
            "A function DLQ only catches asynchronous invocations; the SQS event source invokes this "
            "function synchronously, and failed records return to the queue, whose redrive policy moves them "
            "to the dead-letter queue.",
        )
        nag.acknowledge(
            self.function_alias or function,  # the mapping is the alias's child with snap_start
            "Serverless",
            "Serverless-LambdaEventSourceMappingDestination",
            "On-failure destinations exist for stream and Kafka event sources, not SQS: for an SQS "
            "source the queue's redrive policy (max_receive_count) is the failure destination.",
        )
        if not self._props.tracing:
            nag.acknowledge(
                function,
                "Serverless",
                "Serverless-LambdaTracing",
                "The handler does not instrument its DynamoDB and SNS calls, so active tracing would show "
                "only the invocation segment; tracing is opt-in (tracing=True) rather than a trace that shows "
                "nothing by default.",
            )
        if isinstance(self.dead_letter_queue, aws_sqs.Queue) and self._props.existing_dead_letter_queue is None:
            nag.acknowledge(
                self.dead_letter_queue,
                "Serverless",
                "Serverless-SQSRedrivePolicy",
                "This is the dead-letter queue: messages stay 14 days for an operator to inspect and "
                "redrive (the runbook in docs/operations.md); a dead-letter queue of a dead-letter queue would "
                "only move the problem.",
            )

    def _suppress_checkov_findings(self) -> None:
        """checkov findings this design answers, as resource metadata (each reason is in docs/compliance.md too)."""

        def reconciler_parts(child: str) -> list[IConstruct]:
            return [self.reconciliation.node.find_child(child)] if self.reconciliation is not None else []

        cfn_function = self.function.node.default_child
        assert isinstance(cfn_function, aws_lambda.CfnFunction)
        facts = compliance.PipelineFacts(
            customer_managed_key=self._props.encryption_key is not None,
            function_in_vpc=self.function.is_bound_to_vpc,
            reserved_concurrency=cfn_function.reserved_concurrent_executions is not None,
        )
        compliance.suppress(
            facts,
            {
                "queues": [self.queue, self.dead_letter_queue],
                "tables": [self.processed_events_table, self.order_records_table],
                "log_group": [self.node.find_child("FunctionLogGroup"), *reconciler_parts("LogGroup")],
                "function": [self.function, *reconciler_parts("Function")],
                "function_policy": [
                    *(
                        [policy]
                        if (policy := self.function.role and self.function.role.node.try_find_child("DefaultPolicy"))
                        else []
                    ),
                    *[p for r in reconciler_parts("Role") if (p := r.node.try_find_child("DefaultPolicy"))],
                ],
                "reconciler_function": reconciler_parts("Function"),
            },
        )

    # ---- grants and subscriptions ---------------------------------------------------------------

    def grant_send_orders(self, grantee: aws_iam.IGrantable) -> aws_iam.Grant:
        """Let ``grantee`` send orders to the queue (and use its customer managed key, if any).

        Same account: an identity policy on the grantee. Another account (``AccountPrincipal``, a
        role of another stack's account): a queue policy statement naming it, and a key policy
        statement for the key; the other account must still allow its own principals.
        """
        return permissions.grant_send_orders(grantee, queue=self.queue, encryption_key=self._props.encryption_key)

    def grant_subscribe(self, grantee: aws_iam.IGrantable) -> aws_iam.Grant:
        """Let ``grantee`` subscribe endpoints to the order notifications topic.

        Same account: an identity policy on the grantee; another account: a topic policy statement.
        """
        return permissions.grant_subscribe(grantee, topic=self.topic)

    def add_subscription(
        self,
        subscription: aws_sns.ITopicSubscription,
        *,
        filter_policy: Mapping[str, Any] | None = None,
        filter_policy_scope: str = notifications.ATTRIBUTES_SCOPE,
    ) -> aws_sns.Subscription:
        """Subscribe an endpoint (``aws_sns_subscriptions.SqsSubscription(queue)``, ...) to the notifications.

        With ``fifo=True`` only SQS queues (FIFO or standard) can be subscribed: SNS FIFO topics
        deliver to nothing else, so anything else is a ``ValueError`` here (and a synth error when
        added to ``topic`` directly).

        :param filter_policy: an SNS filter policy as its JSON (a dict), e.g.
            ``{"country": ["DE"]}`` or ``{"total": [{"numeric": [">", 1000]}]}``: the endpoint gets only
            the notifications that match. On attributes (the default scope) it may name ``event_id``,
            ``order_id`` and the ``notification_attributes``; on the body (``filter_policy_scope=
            "MessageBody"``) the body's fields, which are the order's with ``notification_body="order"``.
            Anything else is a ``ValueError``: a policy on a field never sent matches nothing.
            Default: None (every notification).
        :param filter_policy_scope: ``"MessageAttributes"`` or ``"MessageBody"``. Default: "MessageAttributes".
        """
        problems = notifications.filter_policy_problems(filter_policy, filter_policy_scope, self.notification_format)
        if problems:
            raise ValueError(f"add_subscription({type(subscription).__name__}): {'; '.join(problems)}")
        added = self.topic.add_subscription(subscription)
        cfn_subscription = added.node.default_child
        assert isinstance(cfn_subscription, aws_sns.CfnSubscription)
        if self.topic.fifo and cfn_subscription.protocol not in FIFO_TOPIC_PROTOCOLS:
            raise ValueError(
                f"add_subscription({type(subscription).__name__}): protocol {cfn_subscription.protocol!r} on a FIFO "
                "pipeline; an SNS FIFO topic delivers only to SQS queues (FIFO or standard)"
            )
        if filter_policy is not None:
            if cfn_subscription.filter_policy is not None:
                raise ValueError(
                    f"add_subscription({type(subscription).__name__}): the subscription has a filter policy of its "
                    "own; pass it here or there, not both"
                )
            cfn_subscription.filter_policy = dict(filter_policy)
            cfn_subscription.filter_policy_scope = filter_policy_scope
        return added

    # ---- metrics ---------------------------------------------------------------------------------

    def _outcome_metric(self, metric_name: str, **options: Unpack[MetricOptions]) -> aws_cloudwatch.Metric:
        """The handler's outcome metric, one minute ``Sum`` by default; ``options`` as ``Metric.with_``."""
        unknown = sorted(set(options) - set(MetricOptions.__annotations__))
        if unknown:
            raise TypeError(f"unexpected metric option(s) {unknown}; allowed {sorted(MetricOptions.__annotations__)}")
        if "statistic" in options:
            check_statistic(options["statistic"])
        metric = aws_cloudwatch.Metric(
            namespace=self._props.metrics_namespace,
            metric_name=metric_name,
            dimensions_map={"service": self._service_name},
            period=monitoring.PERIOD,
            statistic="Sum",
            unit=aws_cloudwatch.Unit.COUNT,
        )
        return metric.with_(**options) if options else metric

    def metric_orders_recorded(self, **options: Unpack[MetricOptions]) -> aws_cloudwatch.Metric:
        """Orders written for the first time (their record and row committed). Default: Sum over 1 minute."""
        return self._outcome_metric(metric_names.ORDERS_RECORDED, **options)

    def metric_duplicates_skipped(self, **options: Unpack[MetricOptions]) -> aws_cloudwatch.Metric:
        """Redeliveries of already recorded and announced orders, acknowledged without a write."""
        return self._outcome_metric(metric_names.DUPLICATES_SKIPPED, **options)

    def metric_notifications_published(self, **options: Unpack[MetricOptions]) -> aws_cloudwatch.Metric:
        """Notifications published for newly recorded orders."""
        return self._outcome_metric(metric_names.NOTIFICATIONS_PUBLISHED, **options)

    def metric_notifications_republished(self, **options: Unpack[MetricOptions]) -> aws_cloudwatch.Metric:
        """Notifications published again for orders recorded earlier but still ``pending``."""
        return self._outcome_metric(metric_names.NOTIFICATIONS_REPUBLISHED, **options)

    def metric_conflicts(self, **options: Unpack[MetricOptions]) -> aws_cloudwatch.Metric:
        """Reused idempotency keys or order ids with another payload (parked in the DLQ)."""
        return self._outcome_metric(metric_names.CONFLICTS, **options)

    def metric_invalid_messages(self, **options: Unpack[MetricOptions]) -> aws_cloudwatch.Metric:
        """Messages the handler can never accept (parked in the DLQ)."""
        return self._outcome_metric(metric_names.INVALID_MESSAGES, **options)

    def metric_schema_violations(self, **options: Unpack[MetricOptions]) -> aws_cloudwatch.Metric:
        """Orders that break ``order_schema`` (parked in the DLQ with ``SCHEMA_VIOLATION``; emitted with a schema)."""
        return self._outcome_metric(SCHEMA_VIOLATIONS, **options)

    def metric_transient_failures(self, **options: Unpack[MetricOptions]) -> aws_cloudwatch.Metric:
        """Records reported back to SQS for redelivery (throttles, conflicts between transactions, ...)."""
        return self._outcome_metric(metric_names.TRANSIENT_FAILURES, **options)


core_props.document(IdempotentOrderPipeline, PipelineProps, DEFAULTS)
