"""The reconciler: a second function from the consumer's asset that notifies records left ``pending``.

A record stays ``pending`` when its order was written but SNS never accepted its notification and
no copy of the message is left (dropped from the DLQ, or expired there). Every ``reconcile_every``
an EventBridge rule runs ``order_consumer.reconciler.handler``, which reads the index
``pending-by-age`` behind its per-shard checkpoints for records older than ``reconcile_after``,
publishes those still pending with the consumer's notifier and marks them ``sent`` (see
``order_consumer/reconciliation.py``).

What this module adds to the construct:

- :func:`add_pending_index`: the GSI on ``processed_events`` (partition ``pending_shard`` S, sort
  ``created_at`` N, keys only), one entry per record until TTL deletes it. Always created: the
  CLI's ``pending`` listing reads it too.
- :class:`Reconciliation`: the function, its log group and least-privilege role, the schedule
  rule, the ``pending_too_old`` and ``reconciler_errors`` alarms and a dashboard row. Only with ``reconcile_every`` set.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from aws_cdk import (
    Duration,
    RemovalPolicy,
    Stack,
    Token,
    aws_cloudwatch,
    aws_dynamodb,
    aws_ec2,
    aws_events,
    aws_events_targets,
    aws_iam,
    aws_kms,
    aws_lambda,
    aws_logs,
    aws_sns,
)
from constructs import Construct

from idempotent_order_pipeline import asset, monitoring, nag, permissions
from idempotent_order_pipeline._lambda_asset.order_consumer.contract.metric_names import (
    OLDEST_PENDING_AGE_SECONDS,
    PENDING_RECONCILED,
)
from idempotent_order_pipeline._lambda_asset.order_consumer.contract.names import (
    RECONCILE_AFTER_VARIABLE,
    RECONCILER_UPDATE_ATTRIBUTES,
)
from idempotent_order_pipeline._lambda_asset.order_consumer.contract.names import (
    RECONCILER_HANDLER as RECONCILER_HANDLER,  # the reconciler's entry point, re-exported
)
from idempotent_order_pipeline._lambda_asset.order_consumer.contract.pending_index import (
    CHECKPOINT_ATTRIBUTES,
    CHECKPOINT_EVENT_ID,
    INDEX_ENTRY_ATTRIBUTES,
    ORDER_ROW_ATTRIBUTES,
    PENDING_INDEX_NAME,
    PENDING_RECORD_ATTRIBUTES,
    PENDING_SHARD_ATTRIBUTE,
    PENDING_SINCE_ATTRIBUTE,
    SELECT_SPECIFIC_ATTRIBUTES,
)
from idempotent_order_pipeline.core import sqs_function

#: A run stops starting work 15 s before this (``reconciliation.DEFAULT_MIN_REMAINING_MS``) and returns
#: its report 2 s before it whatever a call does (``reconciliation.DEFAULT_RETURN_MARGIN_MS``).
RECONCILER_TIMEOUT = Duration.minutes(2)
RECONCILER_MEMORY_MB = 512
#: Runs of margin the ``pending_too_old`` alarm allows past ``reconcile_after``.
ALARM_RUNS_OF_MARGIN = 2


def _only_attributes(attributes: Sequence[str]) -> dict[str, dict[str, Any]]:
    """Reads of these attributes only, as the IAM user guide writes it: a projection (``Select``
    SPECIFIC_ATTRIBUTES, or none given) naming nothing else (``dynamodb:Attributes``)."""
    return {
        "ForAllValues:StringEquals": {"dynamodb:Attributes": list(attributes)},
        "StringEqualsIfExists": {"dynamodb:Select": SELECT_SPECIFIC_ATTRIBUTES},
    }


def checkpoint_item_only(action: str) -> dict[str, dict[str, Any]]:
    """The reconciler's checkpoint item and nothing else: its key (``dynamodb:LeadingKeys``) and its
    attributes (``dynamodb:Attributes``); read (``GetItem``) with a projection, written (``PutItem``)
    returning nothing (each action's condition keys, as the Service Authorization Reference lists them)."""
    only = (
        {"dynamodb:Select": SELECT_SPECIFIC_ATTRIBUTES}
        if action == "dynamodb:GetItem"
        else {"dynamodb:ReturnValues": "NONE"}
    )
    return {
        "ForAllValues:StringEquals": {
            "dynamodb:LeadingKeys": [CHECKPOINT_EVENT_ID],
            "dynamodb:Attributes": list(CHECKPOINT_ATTRIBUTES),
        },
        "StringEqualsIfExists": only,
    }


def add_pending_index(table: aws_dynamodb.Table) -> None:
    """The sharded, keys-only index of records by age (contract with ``pending_index.py``): each record's
    entry is written with it and stays until TTL deletes the record (the sent mark changes no key)."""
    table.add_global_secondary_index(
        index_name=PENDING_INDEX_NAME,
        partition_key=aws_dynamodb.Attribute(name=PENDING_SHARD_ATTRIBUTE, type=aws_dynamodb.AttributeType.STRING),
        sort_key=aws_dynamodb.Attribute(name=PENDING_SINCE_ATTRIBUTE, type=aws_dynamodb.AttributeType.NUMBER),
        projection_type=aws_dynamodb.ProjectionType.KEYS_ONLY,
    )


def _seconds_text(duration: Duration) -> str:
    seconds = duration.to_seconds()
    return Token.as_string(seconds) if duration.is_unresolved() else str(int(seconds))


def pending_index_arn(table: aws_dynamodb.ITable) -> str:
    return f"{table.table_arn}/index/{PENDING_INDEX_NAME}"


def alarm_threshold_seconds(reconcile_after: Duration, reconcile_every: Duration) -> float:
    """``reconcile_after`` plus two runs: a record older than that was missed by at least one run."""
    return reconcile_after.to_seconds() + ALARM_RUNS_OF_MARGIN * reconcile_every.to_seconds()


class Reconciliation(Construct):
    """The scheduled reconciler of one pipeline (created by ``IdempotentOrderPipeline``).

    :param environment: the consumer's environment variables; ``RECONCILE_AFTER_SECONDS`` is added.
    :param reconcile_every: the schedule (a whole number of minutes, validated by the pipeline).
    :param reconcile_after: how long a record must have been pending before the reconciler sends it.
    """

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        processed_events_table: aws_dynamodb.ITable,
        order_records_table: aws_dynamodb.ITable,
        topic: aws_sns.ITopic,
        environment: Mapping[str, str],
        reconcile_every: Duration,
        reconcile_after: Duration,
        powertools_layer: aws_lambda.ILayerVersion,
        encryption_key: aws_kms.IKey | None,
        log_retention: aws_logs.RetentionDays,
        removal_policy: RemovalPolicy,
        metrics_namespace: str,
        service_name: str,
        alarm_factory: monitoring.AlarmFactory,
        tracing: bool = False,
        vpc: aws_ec2.IVpc | None = None,
        vpc_subnets: aws_ec2.SubnetSelection | None = None,
        security_groups: Sequence[aws_ec2.ISecurityGroup] | None = None,
        order_row_attributes: Sequence[str] | None = ORDER_ROW_ATTRIBUTES,
    ) -> None:
        super().__init__(scope, construct_id)
        self._namespace = metrics_namespace
        self._service_name = service_name
        self._every = reconcile_every
        self.alarm_threshold_seconds = alarm_threshold_seconds(reconcile_after, reconcile_every)
        """The ``pending_too_old`` threshold: ``reconcile_after`` plus two runs, in seconds."""
        log_group = sqs_function.build_log_group(
            self,
            retention=log_retention,
            removal_policy=removal_policy,
            encryption_key=encryption_key,  # the pipeline's key policy already lets CloudWatch Logs use it
            construct_id="LogGroup",
        )
        role = sqs_function.build_role(
            self,
            log_group=log_group,
            description="Reconciler of the idempotent order pipeline (least privilege, no managed policies).",
            construct_id="Role",
        )
        for statement in self._statements(
            processed_events_table, order_records_table, topic, encryption_key, order_row_attributes
        ):
            role.add_to_principal_policy(statement)
        if vpc is not None:
            for statement in permissions.vpc_network_interface_statements(self):
                role.add_to_principal_policy(statement)
        # With tracing, aws_lambda.Function itself grants the X-Ray writes, as it does the consumer's.
        self.function = aws_lambda.Function(
            self,
            "Function",
            description="Notifies orders whose record stayed pending (no copy of the message left to redeliver).",
            runtime=sqs_function.RUNTIME,
            architecture=sqs_function.ARCHITECTURE,
            handler=RECONCILER_HANDLER,
            code=asset.lambda_code(),
            layers=[powertools_layer],
            memory_size=RECONCILER_MEMORY_MB,
            timeout=RECONCILER_TIMEOUT,
            tracing=aws_lambda.Tracing.ACTIVE if tracing else None,
            vpc=vpc,
            vpc_subnets=vpc_subnets,
            security_groups=list(security_groups) if security_groups is not None else None,
            log_group=log_group,
            role=role,
            # The next scheduled run is the retry: what is still pending is still in the index.
            retry_attempts=0,
            environment={**environment, RECONCILE_AFTER_VARIABLE: _seconds_text(reconcile_after)},
        )
        """The reconciler function."""
        self.schedule = aws_events.Rule(
            self,
            "Schedule",
            description="Runs the order pipeline's reconciler.",
            schedule=aws_events.Schedule.rate(reconcile_every),
            targets=[aws_events_targets.LambdaFunction(self.function, retry_attempts=0)],
        )
        """The EventBridge rule that runs it every ``reconcile_every``."""
        self.pending_too_old: aws_cloudwatch.Alarm | None = alarm_factory.add_alarm(
            "pending_too_old",
            "PendingTooOldAlarm",
            self.metric_oldest_pending_age().with_(period=self._alarm_window(reconcile_every)),
            description=(
                "A record has been pending (recorded, never notified) for longer than reconcile_after plus two "
                "reconciler runs, or the reconciler reported no age for two runs (killed, failing to read the "
                "pending index, or not scheduled): SNS keeps refusing it, the reconciler is failing, or its order "
                "row is inconsistent."
            ),
            threshold=self.alarm_threshold_seconds,
            comparison=aws_cloudwatch.ComparisonOperator.GREATER_THAN_THRESHOLD,
            # Every run that read the index emits the age, so no age for two runs is itself the incident.
            treat_missing_data=aws_cloudwatch.TreatMissingData.BREACHING,
        )
        """Fires when the oldest pending record outlived ``reconcile_after`` plus two runs, or when no run
        reported the age for two runs (None if turned off)."""
        self.reconciler_errors: aws_cloudwatch.Alarm | None = alarm_factory.add_alarm(
            "reconciler_errors",
            "ReconcilerErrorsAlarm",
            self.function.metric_errors(period=reconcile_every, statistic="Sum"),
            description=(
                "A reconciler run failed (an unforeseen error after its metrics, a crash, a timeout or a "
                "missing variable): records left pending may not be notified until it runs clean."
            ),
        )
        """Fires when a reconciler invocation fails (error, crash or timeout; None if turned off)."""
        self._acknowledge_findings(role, tracing=tracing)

    # ---- permissions ------------------------------------------------------------------------------

    def _statements(
        self,
        processed_events: aws_dynamodb.ITable,
        order_records: aws_dynamodb.ITable,
        topic: aws_sns.ITopic,
        encryption_key: aws_kms.IKey | None,
        order_row_attributes: Sequence[str] | None = ORDER_ROW_ATTRIBUTES,
    ) -> list[aws_iam.PolicyStatement]:
        """Exactly the reconciler's calls: its checkpoints, find, confirm, publish, mark; nothing writes an
        order row (its own log group is the role's from the start, core.sqs_function.build_role)."""
        statements = [
            aws_iam.PolicyStatement(
                sid="FindPendingRecords",
                actions=["dynamodb:Query"],
                resources=[pending_index_arn(processed_events)],
                conditions=_only_attributes(INDEX_ENTRY_ATTRIBUTES),
            ),
            aws_iam.PolicyStatement(
                sid="ConfirmPendingRecords",
                actions=["dynamodb:BatchGetItem"],
                resources=[processed_events.table_arn],
                conditions=_only_attributes(PENDING_RECORD_ATTRIBUTES),
            ),
            # The identity part of the row, plus the fields its notification carries (notification_attributes),
            # or the whole row when the notification is the order (notification_body="order").
            aws_iam.PolicyStatement(
                sid="ReadOrderRowIdentities" if order_row_attributes == ORDER_ROW_ATTRIBUTES else "ReadOrderRows",
                actions=["dynamodb:BatchGetItem"],
                resources=[order_records.table_arn],
                conditions=_only_attributes(order_row_attributes) if order_row_attributes is not None else None,
            ),
            permissions.mark_sent_statement(processed_events),
            # Where each shard's next read starts: one item under a key no order can have.
            aws_iam.PolicyStatement(
                sid="ReadCheckpoints",
                actions=["dynamodb:GetItem"],
                resources=[processed_events.table_arn],
                conditions=checkpoint_item_only("dynamodb:GetItem"),
            ),
            aws_iam.PolicyStatement(
                sid="WriteCheckpoints",
                actions=["dynamodb:PutItem"],
                resources=[processed_events.table_arn],
                conditions=checkpoint_item_only("dynamodb:PutItem"),
            ),
            aws_iam.PolicyStatement(
                sid="ExpireSentRecordsWithoutTtl",
                actions=["dynamodb:UpdateItem"],
                resources=[processed_events.table_arn],
                conditions=permissions.update_only(RECONCILER_UPDATE_ATTRIBUTES),
            ),
            aws_iam.PolicyStatement(sid="PublishNotifications", actions=["sns:Publish"], resources=[topic.topic_arn]),
        ]
        if encryption_key is not None:
            stack = Stack.of(self)
            services = [f"{service}.{stack.region}.{stack.url_suffix}" for service in ("dynamodb", "sns")]
            statements.append(
                aws_iam.PolicyStatement(
                    sid="UseTheCustomerManagedKeyThroughDynamoDBAndSNS",
                    # Reads (Decrypt), the sent mark (Encrypt/GenerateDataKey on DynamoDB),
                    # publishing (GenerateDataKey/Decrypt on SNS).
                    actions=list(permissions.KMS_ACTIONS),
                    resources=[encryption_key.key_arn],
                    conditions={"StringEquals": {"kms:ViaService": services}},
                )
            )
        return statements

    def _acknowledge_findings(self, role: aws_iam.Role, *, tracing: bool) -> None:
        """cdk-nag findings the design answers (the same rules, with these reasons, are in docs/compliance.md)."""
        default_policy = role.node.find_child("DefaultPolicy")
        nag.acknowledge(
            default_policy,
            "AwsSolutions",
            "AwsSolutions-IAM5",
            "X-Ray PutTraceSegments and PutTelemetryRecords (with tracing) and the VPC network interface "
            "Describe calls (in a VPC) support no resource-level permissions; every other statement names its "
            "exact resource.",
            applies_to="Resource::*",
        )
        permissions.acknowledge_vpc_network_interfaces(default_policy)
        if not tracing:
            nag.acknowledge(
                self.function,
                "Serverless",
                "Serverless-LambdaTracing",
                "The reconciler does not instrument its DynamoDB and SNS calls, so active tracing would "
                "show only the invocation segment; tracing is opt-in (tracing=True), as for the consumer.",
            )
        nothing_to_keep = (
            "A failed scheduled run has nothing to keep: the next run finds every record still pending in the "
            "index, so retries are off and a DLQ or failure destination would only collect empty schedule events."
        )
        nag.acknowledge(self.function, "Serverless", "Serverless-LambdaDLQ", nothing_to_keep)
        nag.acknowledge(
            self.function.node.find_child("EventInvokeConfig"),
            "Serverless",
            "Serverless-LambdaAsyncFailureDestination",
            nothing_to_keep,
        )
        nag.acknowledge(self.schedule, "Serverless", "Serverless-EventBusDLQ", nothing_to_keep)

    # ---- metrics and dashboard --------------------------------------------------------------------

    def _metric(self, name: str, *, statistic: str, unit: aws_cloudwatch.Unit) -> aws_cloudwatch.Metric:
        return aws_cloudwatch.Metric(
            namespace=self._namespace,
            metric_name=name,
            dimensions_map={"service": self._service_name},
            period=self._every,
            statistic=statistic,
            unit=unit,
        )

    @staticmethod
    def _alarm_window(every: Duration) -> Duration:
        """Two runs: each window holds a run even when the schedule's runs drift across period boundaries."""
        if every.is_unresolved():
            return every
        return Duration.seconds(ALARM_RUNS_OF_MARGIN * every.to_seconds())

    def metric_pending_reconciled(self) -> aws_cloudwatch.Metric:
        """Records the reconciler published and marked sent, per ``reconcile_every``."""
        return self._metric(PENDING_RECONCILED, statistic="Sum", unit=aws_cloudwatch.Unit.COUNT)

    def metric_oldest_pending_age(self) -> aws_cloudwatch.Metric:
        """Age of the oldest record still pending past ``reconcile_after`` when a run ended (0 when none)."""
        return self._metric(OLDEST_PENDING_AGE_SECONDS, statistic="Maximum", unit=aws_cloudwatch.Unit.SECONDS)

    def add_to_dashboard(self, dashboard: aws_cloudwatch.Dashboard) -> None:
        """One row: reconciled records, the oldest pending age against the alarm, the runs' errors."""
        dashboard.add_widgets(
            aws_cloudwatch.GraphWidget(
                title="Reconciler: records notified",
                left=[self.metric_pending_reconciled()],
                width=8,
            ),
            aws_cloudwatch.GraphWidget(
                title="Reconciler: oldest pending record (seconds)",
                left=[self.metric_oldest_pending_age()],
                left_annotations=[
                    aws_cloudwatch.HorizontalAnnotation(value=self.alarm_threshold_seconds, label="pending_too_old")
                ],
                width=8,
            ),
            aws_cloudwatch.GraphWidget(
                title="Reconciler: runs and errors",
                left=[
                    self.function.metric_invocations(period=self._every, statistic="Sum"),
                    self.function.metric_errors(period=self._every, statistic="Sum"),
                ],
                width=8,
            ),
        )
