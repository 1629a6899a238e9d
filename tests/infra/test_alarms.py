"""Alarms, the dashboard and the outcome metrics."""

from __future__ import annotations

import json
import re
from typing import Any

import aws_cdk as cdk
import pytest
from aws_cdk.assertions import Template

from bench import deployment
from bench.prices import PRICES, fixed_monthly
from idempotent_order_pipeline import OUTCOME_METRICS, AlarmThreshold, IdempotentOrderPipeline
from idempotent_order_pipeline._lambda_asset.order_consumer.contract.metric_names import RECONCILER_METRICS
from idempotent_order_pipeline.monitoring import ALARM_KEYS, DEFAULT_RUNBOOK, EVENT_SOURCE_METRICS, SCHEMA_ALARM_KEYS
from tests.infra.synth import REPO, Synthesized, SynthesizedApp, logical_id, resources_of_type

#: A pipeline without an order_schema has every alarm but the schema's.
EXPECTED_ALARMS = set(ALARM_KEYS) - set(SCHEMA_ALARM_KEYS)
SUSTAINED = {
    "oldest_message_too_old",
    "messages_polled_not_deleted",
    "function_errors",
    "function_throttles",
    "processed_events_throttles",
    "order_records_throttles",
}

#: Alarms on a metric whose absence is itself the incident.
MISSING_IS_BREACHING = {"pending_too_old"}


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
    # THEN no traffic is not an incident (except the reconciler's age: every run reports it, so its
    # absence is the incident), the description names the runbook, and it has no action
    assert properties["TreatMissingData"] == ("breaching" if key in MISSING_IS_BREACHING else "notBreaching")
    assert properties["AlarmDescription"].endswith(f" Runbook ({key}): {DEFAULT_RUNBOOK}")
    assert "AlarmActions" not in properties
    assert "OKActions" not in properties
    # AND it is named after the service (the default prefix) and its key
    assert properties["AlarmName"] == f"TestStack-Pipeline-{key}"
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


def test_alarm_action_is_added_to_every_alarm_on_alarm_and_ok(cmk_pipeline: Synthesized) -> None:
    # GIVEN an alarm_action topic (ok_actions at its default, True)
    topic = ref(cmk_pipeline, cmk_pipeline.stack.node.find_child("AlarmTopic"))
    # WHEN every alarm is read
    alarms = resources_of_type(cmk_pipeline.template_json, "AWS::CloudWatch::Alarm")
    # THEN each notifies that topic when it fires and when it clears
    assert {json.dumps(alarm["Properties"]["AlarmActions"]) for alarm in alarms.values()} == {
        json.dumps([{"Ref": topic}])
    }
    assert {json.dumps(alarm["Properties"]["OKActions"]) for alarm in alarms.values()} == {json.dumps([{"Ref": topic}])}


def test_runbook_url_is_in_every_description(cmk_pipeline: Synthesized) -> None:
    # GIVEN runbook_url="https://runbooks.example.com/orders" and service_name="orders"
    alarms = resources_of_type(cmk_pipeline.template_json, "AWS::CloudWatch::Alarm")
    # WHEN the descriptions and names are read
    # THEN each says what it means, then links the team's runbook with the alarm's key; names use the service
    for key in sorted(EXPECTED_ALARMS):
        properties = alarm_properties(cmk_pipeline, key)
        assert properties["AlarmDescription"].endswith(f". Runbook ({key}): https://runbooks.example.com/orders")
        assert properties["AlarmName"] == f"orders-{key}"
    assert len(alarms) == len(EXPECTED_ALARMS)


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
    from idempotent_order_pipeline._lambda_asset.order_consumer.pipeline import outcome_counts

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


@pytest.fixture(scope="module")
def on_call() -> tuple[cdk.Stack, IdempotentOrderPipeline, dict[str, Any]]:
    """A pipeline wired for on-call: SNS and Lambda actions, a prefix, overrides, no dashboard, no OK actions."""
    from aws_cdk import aws_cloudwatch_actions, aws_lambda, aws_sns

    stack = cdk.Stack(cdk.App(), "OnCallStack")
    pager = aws_sns.Topic(stack, "Pager")
    responder = aws_lambda.Function.from_function_arn(
        stack, "Responder", "arn:aws:lambda:eu-west-1:111111111111:function:responder"
    )
    pipeline = IdempotentOrderPipeline(
        stack,
        "Pipeline",
        alarm_actions=[aws_cloudwatch_actions.SnsAction(pager), aws_cloudwatch_actions.LambdaAction(responder)],
        ok_actions=False,
        alarm_name_prefix="shop-orders",
        runbook_url="https://wiki.example.com/orders#alarms",
        alarm_overrides={
            "conflicts": False,
            "invalid_messages": True,
            "function_errors": AlarmThreshold(threshold=5, evaluation_periods=5, datapoints_to_alarm=3),
            "oldest_message_too_old": AlarmThreshold(evaluation_periods=10),
        },
        dashboard=False,
    )
    template = Template.from_stack(stack).to_json()
    return stack, pipeline, template


def on_call_alarm(on_call: tuple[cdk.Stack, IdempotentOrderPipeline, dict[str, Any]], key: str) -> dict[str, Any]:
    stack, pipeline, template = on_call
    properties: dict[str, Any] = template["Resources"][logical_id(stack, pipeline.alarms[key])]["Properties"]
    return properties


def test_alarm_actions_take_any_alarm_action(
    on_call: tuple[cdk.Stack, IdempotentOrderPipeline, dict[str, Any]],
) -> None:
    # GIVEN alarm_actions=[SnsAction(pager), LambdaAction(responder)] and ok_actions=False
    stack, _, _ = on_call
    pager = logical_id(stack, stack.node.find_child("Pager"))
    # WHEN an alarm is read
    properties = on_call_alarm(on_call, "dead_letter_queue_not_empty")
    # THEN it runs both actions when it fires, in order, and none on OK
    assert properties["AlarmActions"] == [
        {"Ref": pager},
        "arn:aws:lambda:eu-west-1:111111111111:function:responder",
    ]
    assert "OKActions" not in properties


def test_alarm_name_prefix_names_every_alarm(
    on_call: tuple[cdk.Stack, IdempotentOrderPipeline, dict[str, Any]],
) -> None:
    # GIVEN alarm_name_prefix="shop-orders"
    _, pipeline, _ = on_call
    # WHEN the alarm names are read
    names = {key: on_call_alarm(on_call, key)["AlarmName"] for key in pipeline.alarms}
    # THEN each is the prefix and its key
    assert names == {key: f"shop-orders-{key}" for key in pipeline.alarms}


def test_an_alarm_turned_off_is_not_created(on_call: tuple[cdk.Stack, IdempotentOrderPipeline, dict[str, Any]]) -> None:
    # GIVEN alarm_overrides={"conflicts": False, "invalid_messages": True, ...}
    _, pipeline, template = on_call
    # WHEN the alarms are listed
    alarms = resources_of_type(template, "AWS::CloudWatch::Alarm")
    # THEN conflicts has no alarm (neither in `alarms` nor in the template); every other alarm is there
    assert set(pipeline.alarms) == EXPECTED_ALARMS - {"conflicts"}
    assert len(alarms) == len(EXPECTED_ALARMS) - 1
    assert not [a for a in alarms.values() if a["Properties"].get("MetricName") == "Conflicts"]


def test_alarm_threshold_overrides_threshold_and_periods(
    on_call: tuple[cdk.Stack, IdempotentOrderPipeline, dict[str, Any]],
) -> None:
    # GIVEN function_errors=AlarmThreshold(threshold=5, evaluation_periods=5, datapoints_to_alarm=3)
    # AND oldest_message_too_old=AlarmThreshold(evaluation_periods=10)
    errors = on_call_alarm(on_call, "function_errors")
    age = on_call_alarm(on_call, "oldest_message_too_old")
    untouched = on_call_alarm(on_call, "function_throttles")
    # WHEN the alarms are read
    # THEN the overridden values are used, the rest keep their defaults
    assert (errors["Threshold"], errors["EvaluationPeriods"], errors["DatapointsToAlarm"]) == (5, 5, 3)
    assert (age["Threshold"], age["EvaluationPeriods"]) == (900, 10)
    assert "DatapointsToAlarm" not in age
    assert (untouched["Threshold"], untouched["EvaluationPeriods"]) == (1, 3)


def test_dashboard_false_creates_no_dashboard(
    on_call: tuple[cdk.Stack, IdempotentOrderPipeline, dict[str, Any]],
) -> None:
    # GIVEN dashboard=False
    _, pipeline, template = on_call
    # WHEN the dashboards are listed
    # THEN there is none, and the attribute says so
    assert resources_of_type(template, "AWS::CloudWatch::Dashboard") == {}
    assert pipeline.dashboard is None


def test_alarm_factory_adds_alarms_alike(fresh_stack: cdk.Stack) -> None:
    # GIVEN a pipeline with a prefix, a runbook and an action
    from aws_cdk import aws_cloudwatch_actions, aws_sns

    topic = aws_sns.Topic(fresh_stack, "Pager")
    pipeline = IdempotentOrderPipeline(
        fresh_stack,
        "Pipeline",
        alarm_actions=[aws_cloudwatch_actions.SnsAction(topic)],
        alarm_name_prefix="orders",
        runbook_url="https://wiki.example.com/orders",
        alarm_overrides={"function_throttles": False},
    )
    # WHEN an alarm is added through its factory again, or one turned off, or one not registered
    # THEN the factory refuses what would break the contract, and returns None for an alarm turned off
    with pytest.raises(ValueError, match="alarm key 'function_errors': already created"):
        pipeline.alarm_factory.add_alarm("function_errors", "Again", pipeline.metric_conflicts(), description="x.")
    assert (
        pipeline.alarm_factory.add_alarm("function_throttles", "Off", pipeline.metric_conflicts(), description="x.")
        is None
    )
    with pytest.raises(ValueError, match=r"alarm key 'unregistered': not among this factory's keys"):
        pipeline.alarm_factory.add_alarm("unregistered", "New", pipeline.metric_conflicts(), description="x.")
    # AND an alarm it creates carries the name, description and actions of the others
    properties = Template.from_stack(fresh_stack).to_json()["Resources"][
        logical_id(fresh_stack, pipeline.alarms["conflicts"])
    ]["Properties"]
    assert properties["AlarmName"] == "orders-conflicts"
    assert properties["AlarmDescription"].endswith("Runbook (conflicts): https://wiki.example.com/orders")
    assert properties["AlarmActions"] == properties["OKActions"] == [{"Ref": logical_id(fresh_stack, topic)}]


# CloudWatch list prices, us-east-1, from the benchmark's price list (their one home): a
# standard-resolution alarm costs per metric it watches, a dashboard beyond an account's 3 free
# ones, a custom metric beyond 10 free ones (the handler's EMF outcome metrics, one series each).
ALARM_METRIC_USD = PRICES.cloudwatch_alarm_metric_per_month
DASHBOARD_USD = PRICES.cloudwatch_dashboard_per_month
CUSTOM_METRIC_USD = PRICES.cloudwatch_custom_metric_per_month


def alarm_metric_count(template: dict[str, Any]) -> int:
    """Metrics the template's alarms watch (a metric math alarm is billed per metric it reads)."""
    count = 0
    for alarm in resources_of_type(template, "AWS::CloudWatch::Alarm").values():
        properties = alarm["Properties"]
        count += 1 if "MetricName" in properties else sum("MetricStat" in query for query in properties["Metrics"])
    return count


def test_the_fixed_monthly_cost_is_one_figure_in_the_bench_the_runbook_and_the_readme(
    default_pipeline: Synthesized,
) -> None:
    # GIVEN the default template, counted by the bench's own rules (bench.deployment.facts, bench.prices)
    template = default_pipeline.template_json
    counted = deployment.facts(template)
    fixed = fixed_monthly(counted)
    alarms = len(resources_of_type(template, "AWS::CloudWatch::Alarm"))
    metrics, custom = counted["alarm_metrics"], counted["custom_metrics"]
    # WHEN it is compared with a count by hand: the consumer's outcome metrics, the reconciler's and the
    # event source mapping's (both on by default), and the metrics the alarms watch
    assert custom == len(OUTCOME_METRICS) + len(RECONCILER_METRICS) + len(EVENT_SOURCE_METRICS)
    assert metrics == alarm_metric_count(template)
    # THEN docs/operations.md states the same counts and total
    page = " ".join((REPO / "docs" / "operations.md").read_text().split())
    line = (
        f"{alarms} alarms watching {metrics} metrics ({fixed['alarm_metrics']:.2f} USD), "
        f"{counted['dashboards']} dashboard ({fixed['dashboards']:.2f} USD) and {custom} custom "
        f"metrics ({fixed['custom_metrics']:.2f} USD): about {fixed['total']:.2f} USD per month"
    )
    assert line in page, line
    # AND the README states the same total as the bench's results (fixed_monthly_usd)
    readme = " ".join((REPO / "README.md").read_text().split())
    assert f"${fixed['total']:.2f} a month in all (`fixed_monthly_usd`)" in readme


def test_sandbox_page_counts_the_alarms_of_the_dev_stage(synthesized_app: SynthesizedApp) -> None:
    # GIVEN the dev stage the sandbox deploys, and docs/sandbox.md's list of what moto skips
    page = " ".join((REPO / "docs" / "sandbox.md").read_text().split())
    # WHEN its alarms are counted
    alarms = len(resources_of_type(synthesized_app.stages["dev"].template_json, "AWS::CloudWatch::Alarm"))
    # THEN the page states that number
    assert f"`AWS::CloudWatch::Alarm` ({alarms} alarms)" in page


def test_docs_alarm_table_has_a_row_per_alarm_key() -> None:
    # GIVEN the "Alarms" table of docs/operations.md and the runbook the descriptions name
    page = (REPO / "docs" / "operations.md").read_text()
    section = page.split("\n## Alarms\n", 1)[1].split("\n## ", 1)[0]
    first_cells = [line.split("|")[1] for line in section.splitlines() if line.startswith("| `")]
    documented = {key for cell in first_cells for key in re.findall(r"`(\w+)`", cell)}
    # WHEN they are compared with the alarm keys
    # THEN every key has a row (and no row names an alarm that does not exist), and the runbook exists
    assert documented == set(ALARM_KEYS)
    assert "\n## Runbook: when an alarm fires\n" in page
    assert DEFAULT_RUNBOOK.startswith("docs/operations.md of ")
    assert "section 'Runbook: when an alarm fires'" in DEFAULT_RUNBOOK


@pytest.mark.parametrize(
    ("props", "message"),
    [
        (
            {"alarm_overrides": {"conflict": False}},
            "alarm_overrides['conflict']: unknown alarm; allowed keys ['dead_letter_queue_not_empty',",
        ),
        (
            {"alarm_overrides": {"conflicts": 3}},
            "alarm_overrides['conflicts']=3: allowed False, True or an AlarmThreshold(...)",
        ),
        (
            {"alarm_overrides": {"conflicts": AlarmThreshold(threshold=0)}},
            "alarm_overrides['conflicts'].threshold=0: allowed more than 0",
        ),
        (
            {"alarm_overrides": {"function_errors": AlarmThreshold(evaluation_periods=0)}},
            "alarm_overrides['function_errors'].evaluation_periods=0: allowed 1 or more",
        ),
        (
            {"alarm_overrides": {"function_errors": AlarmThreshold(evaluation_periods=2, datapoints_to_alarm=3)}},
            "alarm_overrides['function_errors'].datapoints_to_alarm=3: allowed 1..evaluation_periods (2)",
        ),
        (
            {"alarm_overrides": {"function_errors": AlarmThreshold(datapoints_to_alarm=2)}},
            "alarm_overrides['function_errors'].datapoints_to_alarm=2: needs evaluation_periods in the same",
        ),
        (
            {"alarm_overrides": {"oldest_message_too_old": AlarmThreshold(threshold=60)}},
            "alarm_overrides['oldest_message_too_old'].threshold=60: set oldest_message_age_threshold instead",
        ),
        ({"alarm_name_prefix": ""}, "alarm_name_prefix='': allowed 1..200 printable ASCII characters"),
        ({"alarm_name_prefix": "commandes-été"}, "alarm_name_prefix='commandes-été': allowed 1..200 printable ASCII"),
        ({"alarm_name_prefix": "x" * 201}, "allowed 1..200 printable ASCII characters, or None for the service name"),
        ({"runbook_url": "wiki/orders"}, "runbook_url='wiki/orders': allowed an http(s):// URL of at most 512"),
    ],
)
def test_bad_alarm_props_are_refused_with_the_prop_and_what_is_allowed(
    fresh_stack: cdk.Stack, props: dict[str, Any], message: str
) -> None:
    # GIVEN an alarm prop outside what is allowed
    # WHEN the pipeline is built
    # THEN the synth fails, naming the prop, the value and what is allowed
    with pytest.raises(ValueError, match="invalid props") as raised:
        IdempotentOrderPipeline(fresh_stack, "Pipeline", **props)
    assert message in str(raised.value)


def test_alarm_prop_errors_are_collected_together(fresh_stack: cdk.Stack) -> None:
    # GIVEN two bad alarm props and a bad function prop
    # WHEN the pipeline is built
    # THEN all three are reported in one error
    with pytest.raises(ValueError, match="invalid props") as raised:
        IdempotentOrderPipeline(
            fresh_stack, "Pipeline", memory_size=1, alarm_name_prefix="", alarm_overrides={"nope": False}
        )
    message = str(raised.value)
    assert "memory_size=1" in message
    assert "alarm_name_prefix=''" in message
    assert "alarm_overrides['nope']" in message


def test_alarms_with_actions_but_no_runbook_url_warn(fresh_stack: cdk.Stack) -> None:
    # GIVEN alarms with an action and no runbook_url
    from aws_cdk import aws_cloudwatch_actions, aws_sns
    from aws_cdk.assertions import Annotations, Match

    IdempotentOrderPipeline(
        fresh_stack, "Pipeline", alarm_actions=[aws_cloudwatch_actions.SnsAction(aws_sns.Topic(fresh_stack, "Pager"))]
    )
    # WHEN the annotations are read
    # THEN a warning says to pass runbook_url
    Annotations.from_stack(fresh_stack).has_warning(
        "/TestStack/Pipeline", Match.string_like_regexp("alarms notify on-call but runbook_url=None")
    )


def test_override_values_that_are_tokens_are_left_to_cloudformation(fresh_stack: cdk.Stack) -> None:
    # GIVEN a threshold given as a CloudFormation parameter
    threshold = cdk.CfnParameter(fresh_stack, "Threshold", type="Number", default=5).value_as_number
    # WHEN the pipeline is built
    pipeline = IdempotentOrderPipeline(
        fresh_stack, "Pipeline", alarm_overrides={"conflicts": AlarmThreshold(threshold=threshold)}
    )
    # THEN it is not checked at synth, and the alarm uses the parameter
    properties = Template.from_stack(fresh_stack).to_json()["Resources"][
        logical_id(fresh_stack, pipeline.alarms["conflicts"])
    ]["Properties"]
    assert properties["Threshold"] == {"Ref": "Threshold"}


def test_deprecated_alarm_action_warns_naming_alarm_actions_and_still_notifies(fresh_stack: cdk.Stack) -> None:
    # GIVEN the deprecated alarm_action topic next to an alarm_actions entry
    from aws_cdk import aws_cloudwatch_actions, aws_sns

    pager, chat = aws_sns.Topic(fresh_stack, "Pager"), aws_sns.Topic(fresh_stack, "Chat")
    # WHEN the pipeline is built
    with pytest.warns(
        DeprecationWarning, match=r"use alarm_actions=\[aws_cloudwatch_actions\.SnsAction\(topic\)\]"
    ) as seen:
        pipeline = IdempotentOrderPipeline(
            fresh_stack,
            "Pipeline",
            alarm_action=pager,
            alarm_actions=[aws_cloudwatch_actions.SnsAction(chat)],
            runbook_url="https://runbooks.example.com/orders",
        )
    # THEN the warning points at the caller's line, and every alarm notifies both topics, on ALARM and OK
    assert [warning.filename for warning in seen] == [__file__]
    template = Template.from_stack(fresh_stack)
    expected = [{"Ref": logical_id(fresh_stack, chat)}, {"Ref": logical_id(fresh_stack, pager)}]
    alarms = template.find_resources("AWS::CloudWatch::Alarm")
    assert len(alarms) == len(pipeline.alarms) > 0
    for alarm in alarms.values():
        assert alarm["Properties"]["AlarmActions"] == expected
        assert alarm["Properties"]["OKActions"] == expected


def test_the_event_source_mapping_publishes_its_event_counts_by_default(default_pipeline: Synthesized) -> None:
    # GIVEN the default pipeline
    mappings = resources_of_type(default_pipeline.template_json, "AWS::Lambda::EventSourceMapping")
    # WHEN its event source mapping is read
    # THEN it publishes the EventCount metrics (polled, filtered, invoked, failed, deleted)
    assert [m["Properties"].get("MetricsConfig") for m in mappings.values()] == [{"Metrics": ["EventCount"]}]


def test_messages_polled_and_never_deleted_raise_a_sustained_alarm(default_pipeline: Synthesized) -> None:
    # GIVEN the default pipeline's event source mapping
    mapping = next(iter(resources_of_type(default_pipeline.template_json, "AWS::Lambda::EventSourceMapping")))
    # WHEN the messages_polled_not_deleted alarm is read
    properties = alarm_properties(default_pipeline, "messages_polled_not_deleted")
    queries = {query["Id"]: query for query in properties["Metrics"]}
    # THEN it fires when, for alarm_evaluation_periods 5-minute windows, messages were polled and none deleted,
    # reading the mapping's own PolledEventCount and DeletedEventCount
    assert queries["expr_1"]["Expression"] == "IF(FILL(polled, 0) > 0 AND FILL(deleted, 0) == 0, 1, 0)"
    for name, metric_name in (("polled", "PolledEventCount"), ("deleted", "DeletedEventCount")):
        stat = queries[name]["MetricStat"]
        assert stat["Metric"]["Namespace"] == "AWS/Lambda"
        assert stat["Metric"]["MetricName"] == metric_name
        assert stat["Metric"]["Dimensions"] == [{"Name": "EventSourceMappingUUID", "Value": {"Ref": mapping}}]
        assert (stat["Period"], stat["Stat"]) == (300, "Sum")
    assert properties["Threshold"] == 1
    assert properties["EvaluationPeriods"] == 3
    assert properties["ComparisonOperator"] == "GreaterThanOrEqualToThreshold"
    assert properties["TreatMissingData"] == "notBreaching"


def test_the_dashboard_shows_the_event_source_mapping_counts(default_pipeline: Synthesized) -> None:
    # GIVEN the default pipeline's dashboard
    dashboard = next(iter(resources_of_type(default_pipeline.template_json, "AWS::CloudWatch::Dashboard").values()))
    body = json.dumps(dashboard["Properties"]["DashboardBody"])
    # WHEN its widgets are read
    # THEN one graphs the mapping's five EventCount metrics
    assert "Event source mapping: polled, filtered, invoked, failed, deleted" in body
    for metric_name in EVENT_SOURCE_METRICS:
        assert f'\\"{metric_name}\\"' in body, metric_name


def test_event_source_metrics_false_publishes_none_and_drops_their_alarm(fresh_stack: cdk.Stack) -> None:
    # GIVEN event_source_metrics=False
    pipeline = IdempotentOrderPipeline(fresh_stack, "Pipeline", event_source_metrics=False)
    template = Template.from_stack(fresh_stack).to_json()
    # WHEN the mapping, the alarms and the dashboard are read
    mappings = resources_of_type(template, "AWS::Lambda::EventSourceMapping")
    body = json.dumps(next(iter(resources_of_type(template, "AWS::CloudWatch::Dashboard").values())))
    # THEN no metrics config, no messages_polled_not_deleted alarm, no widget; the other alarms stay
    assert [m["Properties"].get("MetricsConfig") for m in mappings.values()] == [None]
    assert "messages_polled_not_deleted" not in pipeline.alarms
    assert "function_errors" in pipeline.alarms
    assert "PolledEventCount" not in body


def test_create_alarms_false_creates_none_and_defines_every_one(fresh_stack: cdk.Stack) -> None:
    # GIVEN create_alarms=False and one alarm re-tuned
    pipeline = IdempotentOrderPipeline(
        fresh_stack,
        "Pipeline",
        create_alarms=False,
        alarm_overrides={"function_errors": AlarmThreshold(threshold=5, evaluation_periods=4, datapoints_to_alarm=2)},
    )
    # WHEN the template and alarm_definitions are read
    template = Template.from_stack(fresh_stack)
    # THEN no CloudWatch alarm exists, and every alarm key is defined with its own threshold and periods
    template.resource_count_is("AWS::CloudWatch::Alarm", 0)
    assert dict(pipeline.alarms) == {}
    assert set(pipeline.alarm_definitions) == EXPECTED_ALARMS
    errors = pipeline.alarm_definitions["function_errors"]
    assert (errors.threshold, errors.evaluation_periods, errors.datapoints_to_alarm) == (5, 4, 2)
    age = pipeline.alarm_definitions["oldest_message_too_old"]
    assert (age.threshold, age.evaluation_periods) == (900, 3)
    assert "Runbook (oldest_message_too_old)" in age.description


def test_alarm_definitions_match_the_alarms_created(default_pipeline: Synthesized) -> None:
    # GIVEN the default pipeline, whose alarms are created
    pipeline = default_pipeline.pipeline
    # WHEN each definition is compared with its alarm's template
    # THEN threshold, periods, datapoints and description are the same
    assert set(pipeline.alarm_definitions) == set(pipeline.alarms) == EXPECTED_ALARMS
    for key, definition in pipeline.alarm_definitions.items():
        properties = alarm_properties(default_pipeline, key)
        assert properties["Threshold"] == definition.threshold, key
        assert properties["EvaluationPeriods"] == definition.evaluation_periods, key
        assert properties.get("DatapointsToAlarm", definition.evaluation_periods) == definition.datapoints_to_alarm
        assert properties["AlarmDescription"] == definition.description, key
