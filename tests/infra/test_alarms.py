"""Alarms, the dashboard and the outcome metrics."""

from __future__ import annotations

import json
from typing import Any

import aws_cdk as cdk
import pytest

from idempotent_order_pipeline import OUTCOME_METRICS, IdempotentOrderPipeline
from tests.infra.synth import Synthesized, SynthesizedApp, logical_id, resources_of_type

EXPECTED_ALARMS = {
    "dead_letter_queue_not_empty",
    "oldest_message_too_old",
    "function_errors",
    "function_throttles",
    "conflicts",
    "invalid_messages",
    "notifications_failed",
    "processed_events_throttles",
    "processed_events_system_errors",
    "order_records_throttles",
    "order_records_system_errors",
    "pending_too_old",  # the reconciler's (tests/infra/test_reconciliation.py)
}
SUSTAINED = {
    "oldest_message_too_old",
    "function_errors",
    "function_throttles",
    "processed_events_throttles",
    "order_records_throttles",
}


def alarm_properties(synthesized: Synthesized, key: str) -> dict[str, Any]:
    logical = logical_id(synthesized.stack, synthesized.pipeline.alarms[key])
    properties: dict[str, Any] = synthesized.template_json["Resources"][logical]["Properties"]
    return properties


def ref(synthesized: Synthesized, construct: Any) -> str:
    return logical_id(synthesized.stack, construct)


def test_alarms_cover_every_failure_mode(default_pipeline: Synthesized) -> None:
    # GIVEN the default pipeline
    # WHEN its alarms are listed
    # THEN there is one per failure mode, each in the template
    assert set(default_pipeline.pipeline.alarms) == EXPECTED_ALARMS
    assert len(resources_of_type(default_pipeline.template_json, "AWS::CloudWatch::Alarm")) == len(EXPECTED_ALARMS)


@pytest.mark.parametrize("key", sorted(EXPECTED_ALARMS))
def test_every_alarm_points_at_the_runbook_and_ignores_missing_data(default_pipeline: Synthesized, key: str) -> None:
    # GIVEN an alarm of the default pipeline
    properties = alarm_properties(default_pipeline, key)
    # WHEN its settings are read
    # THEN no traffic is not an incident, the description names the runbook, and it has no action
    assert properties["TreatMissingData"] == "notBreaching"
    assert "Runbook: README.md, section 'Alarms'" in properties["AlarmDescription"]
    assert "AlarmActions" not in properties
    # AND event alarms fire on the first breaching minute, sustained ones after 3 (the default)
    assert properties["EvaluationPeriods"] == (3 if key in SUSTAINED else 1)


def test_dead_letter_queue_alarm_fires_on_one_visible_message(default_pipeline: Synthesized) -> None:
    # GIVEN the default pipeline
    properties = alarm_properties(default_pipeline, "dead_letter_queue_not_empty")
    dlq = ref(default_pipeline, default_pipeline.pipeline.dead_letter_queue)
    # WHEN the DLQ alarm is read
    # THEN it fires as soon as one message is visible in the DLQ
    assert properties["Namespace"] == "AWS/SQS"
    assert properties["MetricName"] == "ApproximateNumberOfMessagesVisible"
    assert properties["Dimensions"] == [{"Name": "QueueName", "Value": {"Fn::GetAtt": [dlq, "QueueName"]}}]
    assert properties["Statistic"] == "Maximum"
    assert properties["Period"] == 60
    assert properties["Threshold"] == 1
    assert properties["ComparisonOperator"] == "GreaterThanOrEqualToThreshold"


def test_oldest_message_alarm_uses_the_threshold(default_pipeline: Synthesized) -> None:
    # GIVEN the default 15-minute threshold
    properties = alarm_properties(default_pipeline, "oldest_message_too_old")
    queue = ref(default_pipeline, default_pipeline.pipeline.queue)
    # WHEN the age alarm is read
    # THEN it fires when the source queue's oldest message is older than 900 seconds
    assert properties["MetricName"] == "ApproximateAgeOfOldestMessage"
    assert properties["Dimensions"] == [{"Name": "QueueName", "Value": {"Fn::GetAtt": [queue, "QueueName"]}}]
    assert properties["Threshold"] == 900
    assert properties["ComparisonOperator"] == "GreaterThanThreshold"


@pytest.mark.parametrize(("key", "metric_name"), [("function_errors", "Errors"), ("function_throttles", "Throttles")])
def test_function_alarms_watch_the_consumer(default_pipeline: Synthesized, key: str, metric_name: str) -> None:
    # GIVEN the default pipeline
    properties = alarm_properties(default_pipeline, key)
    function = ref(default_pipeline, default_pipeline.pipeline.function)
    # WHEN the function alarm is read
    # THEN it sums the consumer's metric per minute and fires from 1
    assert (properties["Namespace"], properties["MetricName"]) == ("AWS/Lambda", metric_name)
    assert properties["Dimensions"] == [{"Name": "FunctionName", "Value": {"Ref": function}}]
    assert (properties["Statistic"], properties["Threshold"]) == ("Sum", 1)


@pytest.mark.parametrize(("key", "metric_name"), [("conflicts", "Conflicts"), ("invalid_messages", "InvalidMessages")])
def test_handler_outcome_alarms_filter_on_the_service(cmk_pipeline: Synthesized, key: str, metric_name: str) -> None:
    # GIVEN a pipeline with service_name="orders" and metrics_namespace="Shop/Orders"
    properties = alarm_properties(cmk_pipeline, key)
    # WHEN the outcome alarm is read
    # THEN it watches the handler's EMF metric in that namespace, for that service only
    assert (properties["Namespace"], properties["MetricName"]) == ("Shop/Orders", metric_name)
    assert properties["Dimensions"] == [{"Name": "service", "Value": "orders"}]
    assert (properties["Statistic"], properties["Threshold"], properties["EvaluationPeriods"]) == ("Sum", 1, 1)
    assert properties["Unit"] == "Count"


def test_notification_failures_alarm_watches_the_topic(default_pipeline: Synthesized) -> None:
    # GIVEN the default pipeline
    properties = alarm_properties(default_pipeline, "notifications_failed")
    topic = ref(default_pipeline, default_pipeline.pipeline.topic)
    # WHEN the SNS alarm is read
    # THEN it fires on one failed delivery
    assert (properties["Namespace"], properties["MetricName"]) == ("AWS/SNS", "NumberOfNotificationsFailed")
    assert properties["Dimensions"] == [{"Name": "TopicName", "Value": {"Fn::GetAtt": [topic, "TopicName"]}}]


@pytest.mark.parametrize(
    ("key", "table_attribute", "metric_name", "operations"),
    [
        (
            "processed_events_throttles",
            "processed_events_table",
            "ThrottledRequests",
            ["TransactWriteItems", "UpdateItem"],
        ),
        (
            "processed_events_system_errors",
            "processed_events_table",
            "SystemErrors",
            ["TransactWriteItems", "UpdateItem"],
        ),
        ("order_records_throttles", "order_records_table", "ThrottledRequests", ["TransactWriteItems"]),
        ("order_records_system_errors", "order_records_table", "SystemErrors", ["TransactWriteItems"]),
    ],
)
def test_dynamodb_alarms_sum_the_handlers_operations(
    default_pipeline: Synthesized, key: str, table_attribute: str, metric_name: str, operations: list[str]
) -> None:
    # GIVEN the default pipeline
    properties = alarm_properties(default_pipeline, key)
    table = ref(default_pipeline, getattr(default_pipeline.pipeline, table_attribute))
    # WHEN the table alarm's metrics are read
    metrics = [query["MetricStat"]["Metric"] for query in properties["Metrics"] if "MetricStat" in query]
    # THEN it sums the metric over exactly the operations the handler performs on that table
    assert {metric["MetricName"] for metric in metrics} == {metric_name}
    assert sorted(
        next(d["Value"] for d in metric["Dimensions"] if d["Name"] == "Operation") for metric in metrics
    ) == sorted(operations)
    assert all({"Name": "TableName", "Value": {"Ref": table}} in metric["Dimensions"] for metric in metrics)


def test_alarm_action_is_added_to_every_alarm(cmk_pipeline: Synthesized) -> None:
    # GIVEN an alarm_action topic
    topic = ref(cmk_pipeline, cmk_pipeline.stack.node.find_child("AlarmTopic"))
    # WHEN every alarm is read
    alarms = resources_of_type(cmk_pipeline.template_json, "AWS::CloudWatch::Alarm")
    # THEN each notifies that topic
    assert {json.dumps(alarm["Properties"]["AlarmActions"]) for alarm in alarms.values()} == {
        json.dumps([{"Ref": topic}])
    }


@pytest.mark.parametrize(("stage", "threshold", "periods"), [("dev", 300, 1), ("prod", 900, 3)])
def test_stages_take_their_thresholds_from_cdk_json(
    synthesized_app: SynthesizedApp, stage: str, threshold: int, periods: int
) -> None:
    # GIVEN the app's stages (cdk.json: dev has low thresholds)
    properties = alarm_properties(synthesized_app.stages[stage], "oldest_message_too_old")
    # WHEN the age alarm is read
    # THEN it uses the stage's threshold and evaluation periods
    assert properties["Threshold"] == threshold
    assert properties["EvaluationPeriods"] == periods


def test_dashboard_shows_queue_function_outcomes_and_tables(default_pipeline: Synthesized) -> None:
    # GIVEN the default pipeline
    dashboards = resources_of_type(default_pipeline.template_json, "AWS::CloudWatch::Dashboard")
    # WHEN the dashboard body is rendered to text
    (dashboard,) = dashboards.values()
    body = json.dumps(dashboard["Properties"]["DashboardBody"])
    # THEN every signal an operator needs is on it
    for metric in (
        "ApproximateNumberOfMessagesVisible",
        "ApproximateNumberOfMessagesNotVisible",
        "ApproximateAgeOfOldestMessage",
        "Invocations",
        "Errors",
        "Throttles",
        "Duration",
        "ConcurrentExecutions",
        "NumberOfMessagesPublished",
        "NumberOfNotificationsFailed",
        "ConsumedWriteCapacityUnits",
        "ThrottledRequests",
        *OUTCOME_METRICS,
    ):
        assert f'\\"{metric}\\"' in body, metric
    assert '\\"type\\":\\"alarm\\"' in body  # the alarm status widget
    assert default_pipeline.pipeline.dashboard is not None


METRIC_METHODS = {
    "metric_orders_recorded": "OrdersRecorded",
    "metric_duplicates_skipped": "DuplicatesSkipped",
    "metric_notifications_published": "NotificationsPublished",
    "metric_notifications_republished": "NotificationsRepublished",
    "metric_conflicts": "Conflicts",
    "metric_invalid_messages": "InvalidMessages",
    "metric_transient_failures": "TransientFailures",
}


@pytest.mark.parametrize(("method", "metric_name"), METRIC_METHODS.items())
def test_metric_methods_return_the_handlers_metrics(fresh_stack: cdk.Stack, method: str, metric_name: str) -> None:
    # GIVEN a pipeline with a service name and namespace
    pipeline = IdempotentOrderPipeline(fresh_stack, "Pipeline", service_name="orders", metrics_namespace="Shop")
    # WHEN the metric method is called with a period and statistic
    metric = getattr(pipeline, method)(period=cdk.Duration.minutes(5), statistic="Average")
    # THEN it is the handler's metric, in its namespace, for its service
    assert (metric.namespace, metric.metric_name) == ("Shop", metric_name)
    assert metric.dimensions == {"service": "orders"}
    assert (metric.period.to_minutes(), metric.statistic) == (5, "Average")


def test_outcome_metrics_are_the_ones_the_handler_emits() -> None:
    # GIVEN the metric names the handler emits on every invocation
    from order_consumer.pipeline import outcome_counts

    handler_metrics = outcome_counts([])
    # WHEN they are compared with the construct's
    # THEN they are the same names, and each has a metric_* method
    assert set(OUTCOME_METRICS) == set(handler_metrics)
    assert set(METRIC_METHODS.values()) == set(OUTCOME_METRICS)


def test_default_service_name_is_the_stack_name_and_the_path_in_the_stack(fresh_stack: cdk.Stack) -> None:
    # GIVEN two pipelines with the same id under different parents of one stack
    from constructs import Construct

    sales = IdempotentOrderPipeline(Construct(fresh_stack, "Sales"), "Orders")
    returns = IdempotentOrderPipeline(Construct(fresh_stack, "Returns"), "Orders")
    # WHEN their metrics' service dimensions are read
    # THEN each is distinct, so one pipeline's alarms never count the other's outcomes
    assert sales.metric_conflicts().dimensions == {"service": "TestStack-Sales-Orders"}
    assert returns.metric_conflicts().dimensions == {"service": "TestStack-Returns-Orders"}
