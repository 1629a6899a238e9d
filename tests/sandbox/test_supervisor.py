"""The stand-in's supervisor: every enabled SQS mapping on the endpoint is live, as deployed now.

A function created on the endpoint (code in S3, as ``cdk deploy`` uploads it) echoes each record's
body, prefixed with its code's version, to an output queue, and reports the records whose body is
``fail`` as failed. The supervisor, reconciling with the endpoint round by round, must run it with
its mapping's settings, pick up new code, and stop when the mapping goes.
"""

from __future__ import annotations

import io
import json
import re
import time
import urllib.request
import zipfile
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from idempotent_order_pipeline.sandbox.function import CONSUMER_HANDLER, DeployedFunction, QueueMapping
from idempotent_order_pipeline.sandbox.poller import SqsPoller
from idempotent_order_pipeline.sandbox.server import Endpoint, SandboxServer, restore_moto
from idempotent_order_pipeline.sandbox.supervisor import (
    MappingWorker,
    ScheduleWorker,
    Supervisor,
    SupervisorOptions,
    crash_plan,
    rate_seconds,
    scheduled_event,
)

HANDLER = """
import os

import boto3

VERSION = {version!r}


def handler(event, context):
    sqs = boto3.client("sqs")
    for record in event["Records"]:
        sqs.send_message(QueueUrl=os.environ["OUT"], MessageBody=f"{{VERSION}}:{{record['body']}}")
    return {{"batchItemFailures": [
        {{"itemIdentifier": record["messageId"]}} for record in event["Records"] if record["body"] == "fail"
    ]}}
"""
TRUST = {
    "Version": "2012-10-17",
    "Statement": [{"Effect": "Allow", "Principal": {"Service": "lambda.amazonaws.com"}, "Action": "sts:AssumeRole"}],
}


def test_rate_expressions_give_their_period_and_cron_none() -> None:
    # GIVEN EventBridge schedule expressions
    # WHEN their periods are read
    # THEN rate(...) is in seconds, singular or plural, and cron(...) is not run
    assert rate_seconds("rate(5 minutes)") == 300
    assert rate_seconds("rate(1 hour)") == 3600
    assert rate_seconds("rate(2 days)") == 172_800
    assert rate_seconds("cron(0 12 * * ? *)") is None


def test_a_scheduled_event_is_what_eventbridge_sends() -> None:
    # GIVEN a rule
    rule = "arn:aws:events:eu-west-1:123456789012:rule/nightly"
    # WHEN its scheduled event is built
    event = scheduled_event(rule, "eu-west-1", "123456789012")
    # THEN it carries EventBridge's source, type and the rule as its resource
    assert (event["source"], event["detail-type"], event["resources"]) == ("aws.events", "Scheduled Event", [rule])


def _zip(version: str) -> bytes:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive:
        archive.writestr("echo.py", HANDLER.format(version=version))
    return buffer.getvalue()


def _role(endpoint: Endpoint) -> str:
    role = endpoint.client("iam").create_role(RoleName="fn", AssumeRolePolicyDocument=json.dumps(TRUST))
    return str(role["Role"]["Arn"])


def _until(condition: Callable[[], Any], supervisor: Supervisor, timeout: float = 60.0) -> Any:
    """Reconcile round by round until ``condition()`` is truthy; return it."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        supervisor.reconcile()
        result = condition()
        if result:
            return result
        time.sleep(0.3)
    raise AssertionError("condition not met in time")


@pytest.fixture
def endpoint() -> Iterator[Endpoint]:
    server = SandboxServer()
    try:
        started = server.start()
        # moto's state is this process's: another test's functions and mappings must not be seen here
        request = urllib.request.Request(f"{started.url}/moto-api/reset", method="POST")  # noqa: S310
        urllib.request.urlopen(request, timeout=10).close()  # noqa: S310 - our own local endpoint
        yield started
    finally:
        server.stop()
        restore_moto()


class _CountingEndpoint(Endpoint):
    """The endpoint, counting the boto3 clients made of it by service."""

    made: dict[str, int]

    def client(self, service: str, **kwargs: Any) -> Any:
        self.made[service] = self.made.get(service, 0) + 1
        return super().client(service, **kwargs)


def _counting(endpoint: Endpoint) -> _CountingEndpoint:
    counting = _CountingEndpoint(url=endpoint.url, region=endpoint.region)
    object.__setattr__(counting, "made", {})
    return counting


def test_rounds_and_drain_polls_reuse_their_clients(endpoint: Endpoint, tmp_path: Path) -> None:
    # GIVEN a supervisor and a poller over an endpoint that counts the clients made of it, and a queue
    counting = _counting(endpoint)
    url = endpoint.client("sqs").create_queue(QueueName="idle")["QueueUrl"]
    supervisor = Supervisor(counting, tmp_path, {}, SupervisorOptions(concurrency=1))
    mapping = QueueMapping("uuid", f"arn:aws:sqs:{endpoint.region}:123456789012:idle", url, 10, (), None, None)
    poller = SqsPoller(counting, mapping, [])
    try:
        # WHEN the supervisor reconciles 12 rounds (schedules read at 3 of them) and a drain reads the depth 8 times
        for _ in range(12):
            supervisor.reconcile()
        depths = {poller.queue_depth() for _ in range(8)}
    finally:
        supervisor.close()
    # THEN each made its clients once: a client made per call (its own boto3 session) costs about 100 ms
    # of CPU, which made an idle stand-in take a quarter of a core
    assert depths == {(0, 0)}
    assert counting.made == {"lambda": 1, "events": 1, "sqs": 1}


@pytest.mark.slow
def test_mappings_are_live_as_deployed_new_code_is_picked_up_and_a_deleted_mapping_stops(
    endpoint: Endpoint, tmp_path: Path
) -> None:
    # GIVEN a function whose code is in S3, an input queue mapped to it (batch 5, partial batch
    # responses) and an output queue
    s3, sqs, lam = endpoint.client("s3"), endpoint.client("sqs"), endpoint.client("lambda")
    s3.create_bucket(Bucket="assets", CreateBucketConfiguration={"LocationConstraint": endpoint.region})
    s3.put_object(Bucket="assets", Key="v1.zip", Body=_zip("v1"))
    source = sqs.create_queue(QueueName="in")["QueueUrl"]
    out = sqs.create_queue(QueueName="out")["QueueUrl"]
    source_arn = sqs.get_queue_attributes(QueueUrl=source, AttributeNames=["QueueArn"])["Attributes"]["QueueArn"]
    lam.create_function(
        FunctionName="echo",
        Runtime="python3.12",
        Role=_role(endpoint),
        Handler="echo.handler",
        Code={"S3Bucket": "assets", "S3Key": "v1.zip"},
        Environment={"Variables": {"OUT": out}},
        Timeout=10,
    )
    mapping = lam.create_event_source_mapping(
        EventSourceArn=source_arn, FunctionName="echo", BatchSize=5, FunctionResponseTypes=["ReportBatchItemFailures"]
    )
    supervisor = Supervisor(endpoint, tmp_path, {}, SupervisorOptions(concurrency=1, visibility_timeout=1))
    received: list[str] = []

    def echoed(count: int) -> list[str]:
        for message in sqs.receive_message(QueueUrl=out, MaxNumberOfMessages=10).get("Messages", []):
            received.append(message["Body"])
            sqs.delete_message(QueueUrl=out, ReceiptHandle=message["ReceiptHandle"])
        return received if len(received) >= count else []

    try:
        # WHEN messages are sent, one of which the function reports as failed
        for body in ("a", "b", "fail"):
            sqs.send_message(QueueUrl=source, MessageBody=body)
        supervisor.reconcile()
        # THEN the supervisor runs the deployed code with the mapping's settings
        [worker] = [w for _, w in supervisor._workers.values() if isinstance(w, MappingWorker)]
        assert (worker.mapping.batch_size, worker.mapping.reports_batch_item_failures) == (5, True)
        assert sorted(_until(lambda: echoed(3), supervisor)[:3]) == ["v1:a", "v1:b", "v1:fail"]
        # AND only the reported record stays in the queue, to come back
        status = supervisor.status()["mappings"][0]
        assert status["function"] == "echo"
        assert status["records_reported_failed"] >= 1
        assert status["environments"][0]["handler_from"] == str(
            tmp_path
            / "functions"
            / "echo"
            / worker.function.code_sha256.rstrip("=").replace("/", "_").replace("+", "-")
            / "task"
            / "echo.py"
        )

        # WHEN the function gets new code (a redeploy)
        s3.put_object(Bucket="assets", Key="v2.zip", Body=_zip("v2"))
        lam.update_function_code(FunctionName="echo", S3Bucket="assets", S3Key="v2.zip")
        supervisor.reconcile()
        sqs.send_message(QueueUrl=source, MessageBody="c")
        # THEN the worker was replaced, and the new code handles what comes next
        [replaced] = [w for _, w in supervisor._workers.values() if isinstance(w, MappingWorker)]
        assert replaced is not worker
        assert replaced.function.code_sha256 != worker.function.code_sha256
        assert _until(lambda: "v2:c" in echoed(1), supervisor)
        assert "v1:c" not in received

        # WHEN the mapping is deleted (its stack was)
        lam.delete_event_source_mapping(UUID=mapping["UUID"])
        supervisor.reconcile()
        # THEN nothing polls the queue any more
        assert supervisor.status()["mappings"] == []
        sqs.send_message(QueueUrl=source, MessageBody="d")
        time.sleep(2)
        attributes = sqs.get_queue_attributes(QueueUrl=source, AttributeNames=["ApproximateNumberOfMessages"])
        assert int(attributes["Attributes"]["ApproximateNumberOfMessages"]) >= 1
    finally:
        supervisor.close()


@pytest.mark.slow
def test_a_scheduled_rule_invokes_its_function_and_a_cron_rule_is_reported(endpoint: Endpoint, tmp_path: Path) -> None:
    # GIVEN a function that records each invocation, on a rate(1 minute) rule and a cron rule
    s3, sqs, lam, events = (endpoint.client(name) for name in ("s3", "sqs", "lambda", "events"))
    s3.create_bucket(Bucket="assets", CreateBucketConfiguration={"LocationConstraint": endpoint.region})
    code = io.BytesIO()
    with zipfile.ZipFile(code, "w") as archive:
        archive.writestr(
            "tick.py",
            "import json, os\nimport boto3\n\ndef handler(event, context):\n"
            "    boto3.client('sqs').send_message(QueueUrl=os.environ['OUT'], MessageBody=json.dumps(event))\n",
        )
    s3.put_object(Bucket="assets", Key="tick.zip", Body=code.getvalue())
    out = sqs.create_queue(QueueName="ticks")["QueueUrl"]
    arn = lam.create_function(
        FunctionName="tick",
        Runtime="python3.12",
        Role=_role(endpoint),
        Handler="tick.handler",
        Code={"S3Bucket": "assets", "S3Key": "tick.zip"},
        Environment={"Variables": {"OUT": out}},
    )["FunctionArn"]
    events.put_rule(Name="every-minute", ScheduleExpression="rate(1 minute)")
    events.put_targets(Rule="every-minute", Targets=[{"Id": "t", "Arn": arn}])
    events.put_rule(Name="nightly", ScheduleExpression="cron(0 2 * * ? *)")
    events.put_targets(Rule="nightly", Targets=[{"Id": "t", "Arn": arn}])
    supervisor = Supervisor(endpoint, tmp_path, {}, SupervisorOptions(concurrency=1))
    try:
        # WHEN the supervisor reads the rules
        supervisor.reconcile()
        # THEN the rate rule runs its function every 60 s, and the cron rule is reported, not run
        [worker] = [w for _, w in supervisor._workers.values() if isinstance(w, ScheduleWorker)]
        assert (worker.function.name, worker.period) == ("tick", 60)
        assert [problem for problem in supervisor.status()["problems"] if "nightly" in problem and "cron" in problem]
        # WHEN its period passes (shortened for the test)
        worker.stop()
        runtime = supervisor.runtimes.for_runtime(worker.function.runtime)
        fast = ScheduleWorker(endpoint, worker.rule_arn, 1, None, worker.function, tmp_path, lambda _: None, runtime)
        try:
            message = _until(lambda: sqs.receive_message(QueueUrl=out).get("Messages"), supervisor, timeout=30)
        finally:
            fast.stop()
        # THEN the function got EventBridge's scheduled event for that rule
        event = json.loads(message[0]["Body"])
        assert (event["detail-type"], event["resources"]) == ("Scheduled Event", [worker.rule_arn])
    finally:
        supervisor.close()


LAYERED_HANDLER = """
import os

import boto3
from runtime_helper import HELPER


def handler(event, context):
    sqs = boto3.client("sqs")
    for record in event["Records"]:
        sqs.send_message(QueueUrl=os.environ["OUT"], MessageBody=f"{HELPER}:{record['body']}")
    return {"batchItemFailures": []}
"""


def _zip_of(files: dict[str, str]) -> bytes:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive:
        for name, text in files.items():
            archive.writestr(name, text)
    return buffer.getvalue()


def _layered_stack(role_arn: str) -> dict[str, Any]:
    """A function whose layer is a layer version of its own stack (as an IdempotentSubscriber's), mapped to a queue."""
    return {
        "Resources": {
            "RuntimeLayer": {
                "Type": "AWS::Lambda::LayerVersion",
                "Properties": {"Content": {"S3Bucket": "assets", "S3Key": "layer.zip"}},
            },
            "In": {"Type": "AWS::SQS::Queue", "Properties": {"QueueName": "layered-in"}},
            "Out": {"Type": "AWS::SQS::Queue", "Properties": {"QueueName": "layered-out"}},
            "Fn": {
                "Type": "AWS::Lambda::Function",
                "Properties": {
                    "FunctionName": "layered",
                    "Runtime": "python3.12",
                    "Handler": "layered.handler",
                    "Role": role_arn,
                    "Code": {"S3Bucket": "assets", "S3Key": "code.zip"},
                    "Layers": [{"Ref": "RuntimeLayer"}],
                    "Environment": {"Variables": {"OUT": {"Ref": "Out"}}},
                    "Timeout": 10,
                },
            },
            "Mapping": {
                "Type": "AWS::Lambda::EventSourceMapping",
                "Properties": {"EventSourceArn": {"Fn::GetAtt": ["In", "Arn"]}, "FunctionName": {"Ref": "Fn"}},
            },
        }
    }


@pytest.mark.slow
def test_a_function_whose_layer_its_stack_deploys_runs_with_that_layer_on_its_path(
    endpoint: Endpoint, tmp_path: Path
) -> None:
    # GIVEN a stack that deploys a layer version (zip in the asset bucket, as cdk deploy uploads it)
    # and a function using it through a Ref, mapped to a queue
    s3, sqs = endpoint.client("s3"), endpoint.client("sqs")
    s3.create_bucket(Bucket="assets", CreateBucketConfiguration={"LocationConstraint": endpoint.region})
    s3.put_object(Bucket="assets", Key="layer.zip", Body=_zip_of({"python/runtime_helper.py": "HELPER = 'layer'\n"}))
    s3.put_object(Bucket="assets", Key="code.zip", Body=_zip_of({"layered.py": LAYERED_HANDLER}))
    endpoint.client("cloudformation").create_stack(
        StackName="Layered", TemplateBody=json.dumps(_layered_stack(_role(endpoint)))
    )
    source = sqs.get_queue_url(QueueName="layered-in")["QueueUrl"]
    out = sqs.get_queue_url(QueueName="layered-out")["QueueUrl"]
    supervisor = Supervisor(endpoint, tmp_path, {}, SupervisorOptions(concurrency=1, visibility_timeout=1))
    try:
        # WHEN a message arrives and the supervisor reconciles
        sqs.send_message(QueueUrl=source, MessageBody="a")
        supervisor.reconcile()
        # THEN the function was read with the stack's layer version, by its ARN
        [worker] = [w for _, w in supervisor._workers.values() if isinstance(w, MappingWorker)]
        [layer] = worker.function.layers
        assert re.fullmatch(rf"arn:aws:lambda:{endpoint.region}:\d+:layer:Layered-RuntimeLayer-\w+:1", layer.arn)
        # AND unpacked with that layer's python directory on its path: the handler imports from it
        unpacked = next((tmp_path / "functions" / "layered").glob("*/layer-0/python/runtime_helper.py"))
        assert unpacked.read_text() == "HELPER = 'layer'\n"

        def echoed() -> list[str]:
            messages = sqs.receive_message(QueueUrl=out, MaxNumberOfMessages=10).get("Messages", [])
            return [message["Body"] for message in messages]

        assert _until(echoed, supervisor) == ["layer:a"]
    finally:
        supervisor.close()


def test_chaos_crashes_only_the_pipeline_consumer() -> None:
    # GIVEN a chaos run's options, the consumer's function and a subscriber's, on their queues
    options = SupervisorOptions(crash_rate=0.3, seed=7)
    mapping = QueueMapping(
        uuid="m",
        queue_arn="arn:aws:sqs:eu-west-1:123456789012:q",
        queue_url="http://localhost/q",
        batch_size=10,
        function_response_types=("ReportBatchItemFailures",),
        max_receive_count=5,
        dead_letter_queue_arn=None,
    )

    def function(handler: str) -> DeployedFunction:
        return DeployedFunction(
            name=handler,
            arn=f"arn:aws:lambda:eu-west-1:123456789012:function:{handler}",
            handler=handler,
            runtime="python3.12",
            timeout_seconds=30,
            memory_mb=128,
            environment={},
            code_sha256="",
            code_zip=b"",
        )

    # WHEN their crash plans are made
    # THEN only the consumer crashes: a subscriber's copy would come back within its claim's lease
    assert crash_plan(function(CONSUMER_HANDLER), mapping, options) is not None
    assert crash_plan(function("shipping.handler"), mapping, options) is None
    assert crash_plan(function(CONSUMER_HANDLER), mapping, SupervisorOptions(crash_rate=0.0)) is None
