"""``IdempotentOrderPipeline``: SQS -> Lambda -> DynamoDB (exactly once) -> SNS (at least once)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from types import MappingProxyType

from aws_cdk import (
    Acknowledgment,
    Annotations,
    Duration,
    RemovalPolicy,
    Stack,
    Token,
    Validations,
    aws_cloudwatch,
    aws_dynamodb,
    aws_iam,
    aws_kms,
    aws_lambda,
    aws_lambda_event_sources,
    aws_logs,
    aws_sns,
    aws_sqs,
)
from constructs import Construct

from idempotent_order_pipeline import asset, monitoring, permissions, powertools
from idempotent_order_pipeline._lambda_asset.order_events.metric_names import OUTCOME_METRICS
from idempotent_order_pipeline.keys import DEFAULT_IDENTITY_FIELDS
from idempotent_order_pipeline.props import (
    DEAD_LETTER_RETENTION,
    PipelineProps,
    as_tuple,
    derived_visibility_timeout,
    validate,
)

#: Prefix of the warning annotations this construct adds (acknowledge them with this prefix + id).
WARNING_PREFIX = "idempotent-order-pipeline"
# SNS SSE without a customer key: the AWS managed key for SNS (its key policy lets principals of
# the account use it through SNS, so nothing to grant).
AWS_MANAGED_SNS_KEY = "alias/aws/sns"
# Duration defaults (immutable values; the class docstring states them as behaviour).
DEFAULT_FUNCTION_TIMEOUT = Duration.seconds(30)
DEFAULT_RETENTION_PERIOD = Duration.days(4)
DEFAULT_RECORD_RETENTION = Duration.days(30)
DEFAULT_OLDEST_MESSAGE_AGE_THRESHOLD = Duration.minutes(15)


class IdempotentOrderPipeline(Construct):
    """An SQS queue of orders, consumed by a Lambda function that records each order exactly once
    in DynamoDB and announces it at least once on an SNS topic.

    Secure by default: encrypted queues, topic and tables; TLS-only queue and topic policies; a
    dead-letter queue; point-in-time recovery; least-privilege IAM; alarms and a dashboard.
    Props are validated at synth (``ValueError`` naming every bad prop) unless they are tokens.

    :param scope: the parent construct.
    :param construct_id: the construct id. It is part of every logical id: changing it replaces the
        tables and queues.
    :param fifo: a FIFO queue, FIFO dead-letter queue and FIFO topic (content-based deduplication
        off: the handler sends group and deduplication ids itself). Default: False (standard).
    :param batch_size: records per Lambda invocation, 1..10 for FIFO, 1..10000 otherwise (above 10
        needs ``max_batching_window``). Default: 10.
    :param max_batching_window: how long Lambda gathers records before invoking. Not supported for
        FIFO. Default: None (invoke as soon as records are available).
    :param max_concurrency: the most concurrent invocations the event source may start, 2..1000.
        Default: None (Lambda's own scaling, up to the account limit).
    :param max_receive_count: deliveries before SQS moves a message to the dead-letter queue, at
        least 1; below 5 adds a warning. Default: 5.
    :param function_timeout: the Lambda timeout. Default: 30 seconds.
    :param memory_size: the Lambda memory in MB. Default: 1769 (one full vCPU; chosen by `make bench`'s memory sweep).
    :param visibility_timeout: the queue's visibility timeout, at least ``function_timeout``;
        below 6x ``function_timeout`` adds a warning. Default: None (6x ``function_timeout`` plus
        ``max_batching_window``, AWS's advice for SQS event sources).
    :param retention_period: how long the queue keeps a message, less than the dead-letter queue's
        fixed 14 days. Default: 4 days.
    :param record_retention: how long an idempotency record lives (``RECORD_TTL_SECONDS``); must
        exceed ``retention_period`` + 14 days, so a record outlives every copy of its message.
        Default: 30 days.
    :param identity_fields: the body fields whose values make the idempotency key when a message
        has neither ``event_id`` nor an ``idempotency_key`` attribute (``IDENTITY_FIELDS``).
        Default: ``order_events.keys.DEFAULT_IDENTITY_FIELDS``, i.e. ('order_id',).
    :param service_name: ``POWERTOOLS_SERVICE_NAME``, the logs' service and the outcome metrics'
        ``service`` dimension, which the alarms filter on. Default: None (the stack name and this
        construct's path in the stack, e.g. ``dev-OrderPipeline-Pipeline``: unique per deployment,
        so two stages in one account never trip each other's alarms).
    :param metrics_namespace: ``POWERTOOLS_METRICS_NAMESPACE``. Default: 'IdempotentOrderPipeline'.
    :param encryption_key: a customer managed KMS key for the queues, topic and tables. Default:
        None (SQS-managed SSE on the queues, the AWS managed ``alias/aws/sns`` key on the topic,
        AWS owned keys on the tables).
    :param removal_policy: what happens to the tables, queues and log group when they leave the
        stack. Default: RemovalPolicy.RETAIN (and table deletion protection on).
    :param log_retention: how long the function's log group keeps logs.
        Default: aws_logs.RetentionDays.ONE_MONTH.
    :param powertools_layer: the layer providing Powertools for AWS Lambda (Python). Default: None
        (the official public layer for the pinned version, arm64, Python 3.14, in the stack's
        region; see ``idempotent_order_pipeline.powertools``).
    :param alarm_action: an SNS topic every alarm notifies. Default: None (alarms without actions).
    :param oldest_message_age_threshold: the queue age above which the backlog alarm fires, less
        than ``retention_period``. Default: 15 minutes.
    :param alarm_evaluation_periods: consecutive breaching minutes before a sustained alarm (age,
        errors, throttles) fires; event alarms fire on the first. Default: 3.
    """

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        fifo: bool = False,
        batch_size: int = 10,
        max_batching_window: Duration | None = None,
        max_concurrency: int | None = None,
        max_receive_count: int = 5,
        function_timeout: Duration = DEFAULT_FUNCTION_TIMEOUT,
        memory_size: int = 1769,
        visibility_timeout: Duration | None = None,
        retention_period: Duration = DEFAULT_RETENTION_PERIOD,
        record_retention: Duration = DEFAULT_RECORD_RETENTION,
        identity_fields: Sequence[str] = DEFAULT_IDENTITY_FIELDS,
        service_name: str | None = None,
        metrics_namespace: str = "IdempotentOrderPipeline",
        encryption_key: aws_kms.IKey | None = None,
        removal_policy: RemovalPolicy = RemovalPolicy.RETAIN,
        log_retention: aws_logs.RetentionDays = aws_logs.RetentionDays.ONE_MONTH,
        powertools_layer: aws_lambda.ILayerVersion | None = None,
        alarm_action: aws_sns.ITopic | None = None,
        oldest_message_age_threshold: Duration = DEFAULT_OLDEST_MESSAGE_AGE_THRESHOLD,
        alarm_evaluation_periods: int = 3,
    ) -> None:
        super().__init__(scope, construct_id)
        props = PipelineProps(
            fifo=fifo,
            batch_size=batch_size,
            max_batching_window=max_batching_window,
            max_concurrency=max_concurrency,
            max_receive_count=max_receive_count,
            function_timeout=function_timeout,
            memory_size=memory_size,
            visibility_timeout=visibility_timeout,
            retention_period=retention_period,
            record_retention=record_retention,
            identity_fields=as_tuple(identity_fields),
            service_name=service_name,
            metrics_namespace=metrics_namespace,
            encryption_key=encryption_key,
            removal_policy=removal_policy,
            log_retention=log_retention,
            powertools_layer=powertools_layer,
            alarm_action=alarm_action,
            oldest_message_age_threshold=oldest_message_age_threshold,
            alarm_evaluation_periods=alarm_evaluation_periods,
        )
        findings = validate(props)
        if findings.errors:
            problems = "\n".join(f"  - {error}" for error in findings.errors)
            raise ValueError(f"IdempotentOrderPipeline {self.node.path}: invalid props:\n{problems}")
        for warning_id, message in findings.warnings:
            Annotations.of(self).add_warning_v2(f"{WARNING_PREFIX}:{warning_id}", message)

        self._props = props
        self._service_name = service_name or self._default_service_name()

        self.dead_letter_queue: aws_sqs.Queue = self._create_dead_letter_queue()
        """Messages that failed ``max_receive_count`` times, and permanent failures parked by the handler."""
        self.queue: aws_sqs.Queue = self._create_queue()
        """The orders queue producers send to (see :meth:`grant_send_orders`)."""
        self.processed_events_table: aws_dynamodb.Table = self._create_table(
            "ProcessedEventsTable", partition_key="event_id", time_to_live_attribute="ttl"
        )
        """One idempotency record per event (``event_id``), expiring after ``record_retention``."""
        self.order_records_table: aws_dynamodb.Table = self._create_table("OrderRecordsTable", partition_key="order_id")
        """One row per order (``order_id``), written in the same transaction as its event record."""
        self.topic: aws_sns.Topic = self._create_topic()
        """Where each recorded order is announced, at least once (see :meth:`add_subscription`)."""
        self.function: aws_lambda.Function = self._create_function()
        """The consumer Lambda function."""

        resources = monitoring.MonitoredResources(
            queue=self.queue,
            dead_letter_queue=self.dead_letter_queue,
            function=self.function,
            topic=self.topic,
            processed_events_table=self.processed_events_table,
            order_records_table=self.order_records_table,
            outcome_metrics={name: self._outcome_metric(name) for name in OUTCOME_METRICS},
        )
        self.alarms: Mapping[str, aws_cloudwatch.Alarm] = MappingProxyType(
            monitoring.create_alarms(
                self,
                resources,
                oldest_message_age_threshold=oldest_message_age_threshold,
                evaluation_periods=alarm_evaluation_periods,
                alarm_action=alarm_action,
            )
        )
        """Every alarm, by role (``dead_letter_queue_not_empty``, ``conflicts``, ...)."""
        self.dashboard: aws_cloudwatch.Dashboard = monitoring.create_dashboard(self, resources, self.alarms)
        """Queue, function, handler outcomes and tables on one CloudWatch dashboard."""

    def _default_service_name(self) -> str:
        """The stack name and this construct's path inside the stack: unique per account and region."""
        stack = Stack.of(self)
        inside_stack = self.node.path.removeprefix(f"{stack.node.path}/")
        return "-".join([stack.stack_name, *inside_stack.split("/")])

    # ---- resources -------------------------------------------------------------------------------

    def _queue_encryption(self) -> aws_sqs.QueueEncryption:
        if self._props.encryption_key is None:
            return aws_sqs.QueueEncryption.SQS_MANAGED
        return aws_sqs.QueueEncryption.KMS

    def _create_dead_letter_queue(self) -> aws_sqs.Queue:
        props = self._props
        return aws_sqs.Queue(
            self,
            "DeadLetterQueue",
            fifo=props.fifo or None,
            content_based_deduplication=False if props.fifo else None,
            retention_period=DEAD_LETTER_RETENTION,
            encryption=self._queue_encryption(),
            encryption_master_key=props.encryption_key,
            enforce_ssl=True,
            removal_policy=props.removal_policy,
        )

    def _create_queue(self) -> aws_sqs.Queue:
        props = self._props
        return aws_sqs.Queue(
            self,
            "Queue",
            fifo=props.fifo or None,
            content_based_deduplication=False if props.fifo else None,
            retention_period=props.retention_period,
            visibility_timeout=derived_visibility_timeout(props),
            dead_letter_queue=aws_sqs.DeadLetterQueue(
                queue=self.dead_letter_queue, max_receive_count=props.max_receive_count
            ),
            encryption=self._queue_encryption(),
            encryption_master_key=props.encryption_key,
            enforce_ssl=True,
            removal_policy=props.removal_policy,
        )

    def _create_table(
        self, construct_id: str, *, partition_key: str, time_to_live_attribute: str | None = None
    ) -> aws_dynamodb.Table:
        props = self._props
        key = props.encryption_key
        return aws_dynamodb.Table(
            self,
            construct_id,
            partition_key=aws_dynamodb.Attribute(name=partition_key, type=aws_dynamodb.AttributeType.STRING),
            billing_mode=aws_dynamodb.BillingMode.PAY_PER_REQUEST,
            point_in_time_recovery_specification=aws_dynamodb.PointInTimeRecoverySpecification(
                point_in_time_recovery_enabled=True
            ),
            time_to_live_attribute=time_to_live_attribute,
            # Without a key: no SSESpecification, i.e. DynamoDB's AWS owned key (tables are always encrypted).
            encryption=None if key is None else aws_dynamodb.TableEncryption.CUSTOMER_MANAGED,
            encryption_key=key,
            removal_policy=props.removal_policy,
            deletion_protection=props.removal_policy == RemovalPolicy.RETAIN,
        )

    def _create_topic(self) -> aws_sns.Topic:
        props = self._props
        topic = aws_sns.Topic(
            self,
            "Topic",
            fifo=props.fifo or None,
            content_based_deduplication=False if props.fifo else None,
            master_key=props.encryption_key,
            enforce_ssl=True,
        )
        if props.encryption_key is None:
            cfn_topic = topic.node.default_child
            assert isinstance(cfn_topic, aws_sns.CfnTopic)
            cfn_topic.kms_master_key_id = AWS_MANAGED_SNS_KEY
        return topic

    def _create_function(self) -> aws_lambda.Function:
        props = self._props
        log_group = aws_logs.LogGroup(
            self, "FunctionLogGroup", retention=props.log_retention, removal_policy=props.removal_policy
        )
        role = aws_iam.Role(
            self,
            "FunctionRole",
            assumed_by=aws_iam.ServicePrincipal("lambda.amazonaws.com"),
            description="Consumer of the idempotent order pipeline (least privilege, no managed policies).",
        )
        # Instead of AWSLambdaBasicExecutionRole (logs on every log group): this log group only.
        role.add_to_principal_policy(
            aws_iam.PolicyStatement(
                sid="WriteOwnLogs",
                actions=["logs:CreateLogStream", "logs:PutLogEvents"],
                resources=[log_group.log_group_arn],
            )
        )
        for statement in permissions.handler_statements(
            self,
            processed_events=self.processed_events_table,
            order_records=self.order_records_table,
            topic=self.topic,
            dead_letter_queue=self.dead_letter_queue,
            encryption_key=props.encryption_key,
        ):
            role.add_to_principal_policy(statement)
        layer = props.powertools_layer or powertools.default_powertools_layer(self, "PowertoolsLayer")
        function = aws_lambda.Function(
            self,
            "Function",
            description="Records each order from the queue exactly once in DynamoDB, then announces it on SNS.",
            runtime=aws_lambda.Runtime.PYTHON_3_14,
            architecture=aws_lambda.Architecture.ARM_64,
            handler=asset.HANDLER,
            code=asset.lambda_code(),
            layers=[layer],
            memory_size=props.memory_size,
            timeout=props.function_timeout,
            tracing=aws_lambda.Tracing.ACTIVE,
            log_group=log_group,
            role=role,
            environment=self._environment(),
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
        self._acknowledge_findings(function, role)
        return function

    def _environment(self) -> dict[str, str]:
        """The variables the handler reads (contract with ``lambdas/order_consumer/config.py``)."""
        props = self._props
        ttl_seconds = props.record_retention.to_seconds()
        ttl_text = Token.as_string(ttl_seconds) if props.record_retention.is_unresolved() else str(int(ttl_seconds))
        return {
            "PROCESSED_EVENTS_TABLE": self.processed_events_table.table_name,
            "ORDER_RECORDS_TABLE": self.order_records_table.table_name,
            "TOPIC_ARN": self.topic.topic_arn,
            "DEAD_LETTER_QUEUE_URL": self.dead_letter_queue.queue_url,
            "RECORD_TTL_SECONDS": ttl_text,
            "IDENTITY_FIELDS": ",".join(props.identity_fields),
            "POWERTOOLS_SERVICE_NAME": self._service_name,
            "POWERTOOLS_METRICS_NAMESPACE": props.metrics_namespace,
        }

    def _acknowledge_findings(self, function: aws_lambda.Function, role: aws_iam.Role) -> None:
        """cdk-nag findings this construct's design answers (each reason is in the README too)."""
        default_policy = role.node.find_child("DefaultPolicy")
        Validations.of(default_policy).acknowledge(
            Acknowledgment(
                id="AwsSolutions::AwsSolutions-IAM5[Resource::*]",
                reason="X-Ray PutTraceSegments and PutTelemetryRecords support no resource-level permissions; "
                "every other statement names its exact resource.",
            )
        )
        Validations.of(function).acknowledge(
            Acknowledgment(
                id="Serverless::Serverless-LambdaDLQ",
                reason="A function DLQ only catches asynchronous invocations; the SQS event source invokes this "
                "function synchronously, and failed records return to the queue, whose redrive policy moves them "
                "to the dead-letter queue.",
            ),
            Acknowledgment(
                id="Serverless::Serverless-LambdaEventSourceMappingDestination",
                reason="On-failure destinations exist for stream and Kafka event sources, not SQS: for an SQS "
                "source the queue's redrive policy (max_receive_count) is the failure destination.",
            ),
        )
        Validations.of(self.dead_letter_queue).acknowledge(
            Acknowledgment(
                id="Serverless::Serverless-SQSRedrivePolicy",
                reason="This is the dead-letter queue: messages stay 14 days for an operator to inspect and redrive "
                "(README runbook); a dead-letter queue of a dead-letter queue would only move the problem.",
            )
        )

    # ---- grants and subscriptions ---------------------------------------------------------------

    def grant_send_orders(self, grantee: aws_iam.IGrantable) -> aws_iam.Grant:
        """Let ``grantee`` send orders to the queue (and use its key, if it has a customer managed one)."""
        grant = aws_iam.Grant.add_to_principal(
            grantee=grantee,
            actions=["sqs:SendMessage", "sqs:GetQueueAttributes", "sqs:GetQueueUrl"],
            resource_arns=[self.queue.queue_arn],
        )
        key = self._props.encryption_key
        if key is not None:
            grant = grant.combine(
                aws_iam.Grant.add_to_principal(
                    grantee=grantee, actions=["kms:GenerateDataKey", "kms:Decrypt"], resource_arns=[key.key_arn]
                )
            )
        return grant

    def grant_subscribe(self, grantee: aws_iam.IGrantable) -> aws_iam.Grant:
        """Let ``grantee`` subscribe endpoints to the order notifications topic."""
        return aws_iam.Grant.add_to_principal(
            grantee=grantee, actions=["sns:Subscribe"], resource_arns=[self.topic.topic_arn]
        )

    def add_subscription(self, subscription: aws_sns.ITopicSubscription) -> aws_sns.Subscription:
        """Subscribe an endpoint (``aws_sns_subscriptions.SqsSubscription(queue)``, ...) to the notifications."""
        return self.topic.add_subscription(subscription)

    # ---- metrics ---------------------------------------------------------------------------------

    def _outcome_metric(
        self, metric_name: str, *, period: Duration | None = None, statistic: str = "Sum"
    ) -> aws_cloudwatch.Metric:
        return aws_cloudwatch.Metric(
            namespace=self._props.metrics_namespace,
            metric_name=metric_name,
            dimensions_map={"service": self._service_name},
            period=period or monitoring.PERIOD,
            statistic=statistic,
            unit=aws_cloudwatch.Unit.COUNT,
        )

    def metric_orders_recorded(
        self, *, period: Duration | None = None, statistic: str = "Sum"
    ) -> aws_cloudwatch.Metric:
        """Orders written for the first time (one transaction each). Default period: 1 minute."""
        return self._outcome_metric("OrdersRecorded", period=period, statistic=statistic)

    def metric_duplicates_skipped(
        self, *, period: Duration | None = None, statistic: str = "Sum"
    ) -> aws_cloudwatch.Metric:
        """Redeliveries of already recorded and announced orders, acknowledged without a write."""
        return self._outcome_metric("DuplicatesSkipped", period=period, statistic=statistic)

    def metric_notifications_published(
        self, *, period: Duration | None = None, statistic: str = "Sum"
    ) -> aws_cloudwatch.Metric:
        """Notifications published for newly recorded orders."""
        return self._outcome_metric("NotificationsPublished", period=period, statistic=statistic)

    def metric_notifications_republished(
        self, *, period: Duration | None = None, statistic: str = "Sum"
    ) -> aws_cloudwatch.Metric:
        """Notifications published again for orders recorded earlier but still ``pending``."""
        return self._outcome_metric("NotificationsRepublished", period=period, statistic=statistic)

    def metric_conflicts(self, *, period: Duration | None = None, statistic: str = "Sum") -> aws_cloudwatch.Metric:
        """Reused idempotency keys or order ids with another payload (parked in the DLQ)."""
        return self._outcome_metric("Conflicts", period=period, statistic=statistic)

    def metric_invalid_messages(
        self, *, period: Duration | None = None, statistic: str = "Sum"
    ) -> aws_cloudwatch.Metric:
        """Messages the handler can never accept (parked in the DLQ)."""
        return self._outcome_metric("InvalidMessages", period=period, statistic=statistic)

    def metric_transient_failures(
        self, *, period: Duration | None = None, statistic: str = "Sum"
    ) -> aws_cloudwatch.Metric:
        """Records reported back to SQS for redelivery (throttles, conflicts between transactions, ...)."""
        return self._outcome_metric("TransientFailures", period=period, statistic=statistic)
