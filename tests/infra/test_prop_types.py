"""Props of the wrong type, misspelt override keys and durations in messages: one collected ValueError."""

from __future__ import annotations

import re
from typing import Any

import aws_cdk as cdk
import pytest
from aws_cdk.assertions import Template

from idempotent_order_pipeline import IdempotentOrderPipeline

seconds = cdk.Duration.seconds
days = cdk.Duration.days

#: Values of the wrong type, and what the error says (the prop, the value, its type, what is allowed).
WRONG_TYPES: list[tuple[dict[str, Any], str]] = [
    ({"memory_size": "1024"}, r"memory_size='1024' \(str\): allowed an int \(MB\)"),
    ({"function_timeout": 30}, r"function_timeout=30 \(int\): allowed a Duration, e\.g\. Duration\.seconds\(30\)"),
    ({"fifo": "yes"}, r"fifo='yes' \(str\): allowed True or False"),
    ({"batch_size": 10.5}, r"batch_size=10\.5 \(float\): allowed int"),
    ({"removal_policy": "RETAIN"}, r"removal_policy='RETAIN' \(str\): allowed a RemovalPolicy"),
    (
        {"encryption_key": "arn:aws:kms:eu-west-1:111111111111:key/k"},
        r"encryption_key='arn:.*' \(str\): allowed aws_kms\.IKey or None",
    ),
    ({"alarm_actions": "pager"}, r"alarm_actions='pager' \(str\): allowed a sequence of aws_cloudwatch\.IAlarmAction"),
    (
        {"queue_props": {"visiblity_timeout": seconds(60)}},
        r"queue_props\['visiblity_timeout'\]: not a keyword of aws_sqs\.Queue; did you mean 'visibility_timeout'\?",
    ),
    (
        {"function_props": {"ephemeral_storage_sizes": 1}},
        r"function_props\['ephemeral_storage_sizes'\]: not a keyword of aws_lambda\.Function; did you mean "
        r"'ephemeral_storage_size'\?",
    ),
]


@pytest.mark.parametrize(("props", "message"), WRONG_TYPES, ids=[next(iter(props)) for props, _ in WRONG_TYPES])
def test_a_prop_of_the_wrong_type_is_a_value_error_naming_prop_value_and_allowed(
    fresh_stack: cdk.Stack, props: dict[str, Any], message: str
) -> None:
    # GIVEN a prop of the wrong type (a string for a number, an int for a Duration, a misspelt key)
    # WHEN the construct is created
    # THEN the collected ValueError names the prop, the value and what is allowed (no TypeError, no silent use)
    with pytest.raises(ValueError, match=message):
        IdempotentOrderPipeline(fresh_stack, "Pipeline", **props)


def test_every_wrong_type_is_in_the_same_error(fresh_stack: cdk.Stack) -> None:
    # GIVEN several props of the wrong type and one out of range, together
    props = {key: value for case, _ in WRONG_TYPES for key, value in case.items()} | {"max_receive_count": 0}
    # WHEN the construct is created
    with pytest.raises(ValueError, match="invalid props") as raised:
        IdempotentOrderPipeline(fresh_stack, "Pipeline", **props)
    # THEN one ValueError lists every one of them
    message = str(raised.value)
    for _, expected in WRONG_TYPES:
        assert re.search(expected, message), expected
    assert "max_receive_count=0: allowed 1..1000" in message


def test_a_retention_period_past_the_dead_letter_queue_names_the_prop_given_in_days(fresh_stack: cdk.Stack) -> None:
    # GIVEN retention_period=20 days and no dead_letter_queue_props (its retention is the fixed 14 days)
    # WHEN the construct is created
    with pytest.raises(ValueError, match="invalid props") as raised:
        IdempotentOrderPipeline(fresh_stack, "Pipeline", retention_period=days(20))
    # THEN the error names retention_period in days, not a prop that was not passed, nor seconds in
    # scientific notation
    message = str(raised.value)
    assert "retention_period=20 days: allowed from 60 seconds to less than the dead-letter queue's 14 days" in message
    assert "dead_letter_queue_props" not in message
    assert "e+" not in message


def test_a_given_dead_letter_retention_shorter_than_the_queue_is_named_in_days(fresh_stack: cdk.Stack) -> None:
    # GIVEN a dead-letter queue retention the caller set below the queue's
    # WHEN the construct is created
    # THEN the error names that key, in days
    with pytest.raises(
        ValueError,
        match=r"dead_letter_queue_props\['retention_period'\]=3 days: must be longer than "
        r"retention_period \(4 days\)",
    ):
        IdempotentOrderPipeline(fresh_stack, "Pipeline", dead_letter_queue_props={"retention_period": days(3)})


def test_props_that_are_tokens_pass_the_type_checks(fresh_stack: cdk.Stack) -> None:
    # GIVEN a memory size and a timeout from CloudFormation parameters (unresolved tokens)
    memory = cdk.CfnParameter(fresh_stack, "Memory", type="Number", default=1024).value_as_number
    timeout = cdk.CfnParameter(fresh_stack, "Timeout", type="Number", default=30).value_as_number
    # WHEN the pipeline is built
    IdempotentOrderPipeline(
        fresh_stack,
        "Pipeline",
        memory_size=memory,  # type: ignore[arg-type]  # a number token is a float in Python
        function_timeout=seconds(timeout),
        visibility_timeout=cdk.Duration.minutes(3),
    )
    # THEN the function takes them as given
    Template.from_stack(fresh_stack).has_resource_properties(
        "AWS::Lambda::Function",
        {"MemorySize": {"Ref": "Memory"}, "Timeout": {"Ref": "Timeout"}, "Handler": "order_consumer.handler.handler"},
    )
