"""The construct as a user gets it: the built wheel, installed into an empty virtualenv, imported by an
app outside the repo that has packages of its own named like the Lambda's (``order_events``,
``order_consumer``)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import sysconfig
import textwrap
import zipfile
from dataclasses import dataclass
from pathlib import Path

import pytest

from idempotent_order_pipeline import bytecode, compliance
from idempotent_order_pipeline.asset import RUNTIME_BYTECODE_TAG
from idempotent_order_pipeline.keys import derive_event_id
from idempotent_order_pipeline.subscriber import findings as subscriber_findings
from tests.infra.test_compliance import CHECKOV

# Builds the wheel and installs it into throwaway virtualenvs.
pytestmark = pytest.mark.slow

THROWAWAY_APP = textwrap.dedent(
    """
    import json
    import sys

    import aws_cdk as cdk

    import order_events  # the app's own package, not the pipeline's
    import order_consumer
    import idempotent_order_pipeline
    from idempotent_order_pipeline import IdempotentOrderPipeline
    from idempotent_order_pipeline.asset import lambda_asset_path
    from idempotent_order_pipeline.producer import OrderPublisher, derive_event_id

    app = cdk.App(outdir=sys.argv[1])
    stack = cdk.Stack(app, "ShopStack")
    IdempotentOrderPipeline(stack, "Orders", fifo=True)
    app.synth()
    print(json.dumps({
        "module": idempotent_order_pipeline.__file__,
        "asset": str(lambda_asset_path()),
        "own": [order_events.OWNER, order_consumer.OWNER],
        "key": derive_event_id({"order_id": "o-1"}),
        "publisher": OrderPublisher.__module__,
    }))
    """
)


def dependency_paths() -> str:
    """The .pth lines that let a throwaway venv see this interpreter's packages: its site-packages (and any
    other site-packages directory on its path), never this checkout."""
    paths = [sysconfig.get_paths()["purelib"]]
    paths += [entry for entry in sys.path if entry.endswith("site-packages") and entry not in paths]
    return "".join(f"{path}\n" for path in paths)


@pytest.fixture(scope="module")
def wheel(distributions: Path) -> Path:
    """The wheel built from a copy of the distribution's sources (the sdist's, as ``make dist`` builds it)."""
    (built,) = distributions.glob("*.whl")
    return built


def test_wheel_adds_one_top_level_package_the_library_with_its_stand_in_inside(wheel: Path) -> None:
    # GIVEN the built wheel
    # WHEN its files are listed
    names = zipfile.ZipFile(wheel).namelist()
    top_level = {name.split("/")[0] for name in names if not name.split("/")[0].endswith((".dist-info", ".data"))}
    # THEN the one top-level package is the library (the Lambda asset and the stand-in inside it)
    assert top_level == {"idempotent_order_pipeline"}
    assert "idempotent_order_pipeline/_lambda_asset/order_consumer/handler.py" in names
    assert "idempotent_order_pipeline/_lambda_asset/order_consumer/contract/keys.py" in names
    assert "idempotent_order_pipeline/_subscriber_layer/python/idempotent_subscriber/dedup.py" in names
    assert "idempotent_order_pipeline/subscriber/construct.py" in names
    assert {"idempotent_order_pipeline/sandbox/standin.py", "idempotent_order_pipeline/sandbox/supervisor.py"} <= set(
        names
    )
    # AND no development-only app of the repository comes along
    assert not [name for name in names if "brownfield_app" in name]


@dataclass(frozen=True)
class InstalledWheel:
    """An empty virtualenv with the wheel installed, seeing the test stack's dependencies but not this checkout."""

    venv: Path
    python: Path
    site: Path
    #: The environment to run it in: without this checkout on PYTHONPATH.
    environment: dict[str, str]


def install_into_empty_venv(wheel: Path, tmp_path: Path) -> InstalledWheel:
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", venv], check=True)  # noqa: S603
    python = venv / "bin" / "python"
    venv_site = Path(
        subprocess.run(  # noqa: S603
            [python, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
            check=True,
            capture_output=True,
            text=True,
        ).stdout.strip()
    )
    # A .pth line adds a directory only: the editable install's own .pth in it is not processed.
    (venv_site / "deps.pth").write_text(dependency_paths())
    subprocess.run(  # noqa: S603
        [sys.executable, "-m", "pip", "--python", python, "install", "--quiet", "--no-deps", wheel],
        check=True,
        capture_output=True,
    )
    environment = {
        key: value for key, value in os.environ.items() if key not in ("PYTHONPATH", "VIRTUAL_ENV", "PYTHONHOME")
    }
    environment["JSII_SILENCE_WARNING_UNTESTED_NODE_VERSION"] = "1"
    return InstalledWheel(venv=venv, python=python, site=venv_site, environment=environment)


def test_installed_wheel_synthesizes_beside_colliding_packages(wheel: Path, tmp_path: Path) -> None:
    # GIVEN an empty virtualenv that sees the test stack's dependencies but not this checkout
    # AND the wheel installed into it
    installed = install_into_empty_venv(wheel, tmp_path)
    venv, python, venv_site, environment = installed.venv, installed.python, installed.site, installed.environment
    # AND an app with packages of its own named order_events and order_consumer
    app_dir = tmp_path / "shop-app"
    for own in ("order_events", "order_consumer"):
        (app_dir / own).mkdir(parents=True)
        (app_dir / own / "__init__.py").write_text(f"OWNER = 'shop-app {own}'\n")
    (app_dir / "app.py").write_text(THROWAWAY_APP)
    outdir = app_dir / "cdk.out"
    # WHEN the app imports the construct and the producer, and synthesizes
    completed = subprocess.run(  # noqa: S603  (our temporary interpreter and paths)
        [python, "app.py", str(outdir)], cwd=app_dir, env=environment, capture_output=True, text=True
    )
    assert completed.returncode == 0, completed.stderr[-3000:]
    # THEN everything came from the installed wheel, and the app's own packages stayed its own
    found = json.loads(completed.stdout.strip().splitlines()[-1])
    assert Path(found["module"]).is_relative_to(venv_site)
    assert Path(found["asset"]) == venv_site / "idempotent_order_pipeline" / "_lambda_asset"
    assert found["own"] == ["shop-app order_events", "shop-app order_consumer"]
    assert found["publisher"] == "idempotent_order_pipeline.producer"
    assert found["key"] == derive_event_id({"order_id": "o-1"})
    # AND the function's asset is the installed Lambda code, handler included
    template = json.loads((outdir / "ShopStack.template.json").read_text())
    functions = [r for r in template["Resources"].values() if r["Type"] == "AWS::Lambda::Function"]
    handlers = [f["Properties"]["Handler"] for f in functions]
    assert sorted(handlers) == ["order_consumer.handler.handler", "order_consumer.reconciler.handler"]
    functions = [f for f in functions if f["Properties"]["Handler"] == "order_consumer.handler.handler"]
    asset_hash = functions[0]["Properties"]["Code"]["S3Key"].removesuffix(".zip")
    staged = outdir / f"asset.{asset_hash}"
    assert (staged / "order_consumer" / "handler.py").is_file()
    assert (staged / "order_consumer" / "contract" / "keys.py").is_file()
    # AND it ships the runtime's bytecode the wheel carries beside each module, checked-hash, and no other
    shipped = {p.parent / "__pycache__" / f"{p.stem}.{RUNTIME_BYTECODE_TAG}.pyc" for p in staged.rglob("*.py")}
    assert set(staged.rglob("*.pyc")) == shipped
    assert all(bytecode.usable(path) for path in shipped)
    # AND the operator CLI's script is installed and starts
    cli = subprocess.run(  # noqa: S603
        [venv / "bin" / "order-pipeline", "--help"], cwd=app_dir, env=environment, capture_output=True, text=True
    )
    assert cli.returncode == 0, cli.stderr[-2000:]
    assert "redrive" in cli.stdout


SUBSCRIBER_APP = textwrap.dedent(
    """
    import json
    import sys

    import aws_cdk as cdk
    from aws_cdk import aws_lambda, aws_sns

    from idempotent_order_pipeline import IdempotentOrderPipeline, IdempotentSubscriber, nag

    app = cdk.App(outdir=sys.argv[1])
    stack = cdk.Stack(app, "ShopStack")
    # The pipeline says what an order is and sends country as an attribute, which the subscriber filters on.
    pipeline = IdempotentOrderPipeline(
        stack,
        "Orders",
        order_schema={
            "type": "object",
            "required": ["order_id", "country"],
            "properties": {"order_id": {"type": "string"}, "country": {"type": "string", "maxLength": 2}},
        },
        notification_attributes=["country"],
    )
    shipping = IdempotentSubscriber(
        stack,
        "Shipping",
        pipeline=pipeline,
        code=aws_lambda.Code.from_asset("shipping"),
        handler="shipping.handler",
        filter_policy={"country": aws_sns.SubscriptionFilter.string_filter(allowlist=["DE"])},
    )
    nag.add_checks(app)
    app.synth()  # cdk-nag 3.x fails the synth on a finding; 2.x leaves error annotations
    messages = app.synth().get_stack_artifact(stack.artifact_id).messages
    print(json.dumps({
        "errors": [str(m.entry.data) for m in messages if m.level.value.lower() == "error"],
        "layer": str(cdk.Stack.of(shipping).resolve(shipping.runtime_layer.layer_version_arn)),
    }))
    """
)
TEAM_HANDLER = textwrap.dedent(
    """
    from idempotent_subscriber import once_per_event


    @once_per_event
    def handler(notification, claim):
        return []
    """
)


def test_an_app_outside_the_repository_synthesizes_a_filtered_subscriber_that_passes_nag_and_checkov(
    wheel: Path, tmp_path: Path
) -> None:
    # GIVEN the wheel in an empty virtualenv, and an app with its own handler and a filtered IdempotentSubscriber
    # on a pipeline with an order_schema and the notification attribute the subscriber filters on
    installed = install_into_empty_venv(wheel, tmp_path)
    app_dir = tmp_path / "shop-app"
    (app_dir / "shipping").mkdir(parents=True)
    (app_dir / "shipping" / "shipping.py").write_text(TEAM_HANDLER)
    (app_dir / "app.py").write_text(SUBSCRIBER_APP)
    outdir = app_dir / "cdk.out"
    # WHEN it synthesizes with cdk-nag's AwsSolutions and Serverless packs
    completed = subprocess.run(  # noqa: S603  (our temporary interpreter and paths)
        [installed.python, "app.py", str(outdir)],
        cwd=app_dir,
        env=installed.environment,
        capture_output=True,
        text=True,
    )
    # THEN it succeeds with no cdk-nag finding left
    assert completed.returncode == 0, completed.stderr[-3000:]
    assert json.loads(completed.stdout.strip().splitlines()[-1])["errors"] == []
    # AND the subscription carries the filter, the function the team's handler with the layer from the wheel
    template = json.loads((outdir / "ShopStack.template.json").read_text())
    resources = template["Resources"]
    [subscription] = [r["Properties"] for r in resources.values() if r["Type"] == "AWS::SNS::Subscription"]
    assert subscription["FilterPolicy"] == {"country": ["DE"]}
    [function] = [
        r["Properties"]
        for r in resources.values()
        if r["Type"] == "AWS::Lambda::Function" and r["Properties"]["Handler"] == "shipping.handler"
    ]
    [layer_id] = [n for n, r in resources.items() if r["Type"] == "AWS::Lambda::LayerVersion"]
    assert sorted(map(str, function["Layers"])) == sorted(map(str, [{"Ref": layer_id}, {"Ref": "PowertoolsLayerArn"}]))
    layer = resources[layer_id]
    staged = outdir / f"asset.{layer['Properties']['Content']['S3Key'].removesuffix('.zip')}"
    assert (staged / "python" / "idempotent_subscriber" / "dedup.py").read_bytes() == (
        installed.site / "idempotent_order_pipeline/_subscriber_layer/python/idempotent_subscriber/dedup.py"
    ).read_bytes()
    # AND checkov finds nothing that fails, and every skip is one the library ships with its reason
    checkov = subprocess.run(  # noqa: S603  (the repository's checkov)
        [str(CHECKOV), "-f", str(outdir / "ShopStack.template.json"), "--framework", "cloudformation", "-o", "json"],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    report = json.loads(checkov.stdout)["results"]
    assert [f"{c['check_id']} {c['resource']}" for c in report["failed_checks"]] == []
    assert report["passed_checks"]
    shipped = {(s.check_id, s.reason) for s, _ in compliance.CHECKOV_SUPPRESSIONS} | {
        (s.check_id, s.reason) for s in subscriber_findings.CHECKOV_SUPPRESSIONS
    }
    assert report["skipped_checks"]
    for check in report["skipped_checks"]:
        assert (check["check_id"], check["check_result"]["suppress_comment"]) in shipped, check["resource"]


SCHEMA_APP = textwrap.dedent(
    """
    import json
    import sys

    import aws_cdk as cdk
    from aws_cdk import aws_sns_subscriptions, aws_sqs

    from idempotent_order_pipeline import IdempotentOrderPipeline

    app = cdk.App(outdir=sys.argv[1])
    stack = cdk.Stack(app, "ShopStack")
    orders = IdempotentOrderPipeline(
        stack,
        "Orders",
        order_schema=json.loads(sys.argv[2]),
        notification_attributes=["country", "customer.tier"],
    )
    fulfilment = aws_sqs.Queue(stack, "Fulfilment", enforce_ssl=True)
    orders.add_subscription(aws_sns_subscriptions.SqsSubscription(fulfilment), filter_policy={"country": ["DE"]})
    app.synth()
    """
)

#: Run in the throwaway venv: the consumer loaded from its staged asset (top-level ``order_consumer``, as Lambda
#: loads it), with the template's environment (each ``Ref`` stands for a resource created here under its logical
#: id), on moto, with jsonschema (the synth-time check) made unimportable: the asset must need nothing beyond the layer.
CONSUMER_FROM_ASSET = textwrap.dedent(
    """
    import json
    import os
    import sys

    import boto3
    from moto import mock_aws

    from idempotent_order_pipeline.sandbox import moto_patches

    moto_patches.apply_partiql_fix()  # the sent marks are PartiQL statements, which moto alone mis-answers
    sys.modules["jsonschema"] = None  # any import of it from here fails: the asset must not need it
    asset, variables = sys.argv[1], json.loads(sys.argv[2])
    sys.path.insert(0, asset)
    os.environ.update(AWS_DEFAULT_REGION="eu-west-1", AWS_ACCESS_KEY_ID="x", AWS_SECRET_ACCESS_KEY="x")

    with mock_aws():
        dynamodb, sns, sqs = boto3.client("dynamodb"), boto3.client("sns"), boto3.client("sqs")
        refs = {}
        for name, value in variables.items():
            if not isinstance(value, dict):
                continue
            logical = value["Ref"]
            if name.endswith("_TABLE"):
                key = "event_id" if name == "PROCESSED_EVENTS_TABLE" else "order_id"
                dynamodb.create_table(
                    TableName=logical,
                    KeySchema=[{"AttributeName": key, "KeyType": "HASH"}],
                    AttributeDefinitions=[{"AttributeName": key, "AttributeType": "S"}],
                    BillingMode="PAY_PER_REQUEST",
                )
                refs[name] = logical
            elif name == "TOPIC_ARN":
                refs[name] = sns.create_topic(Name=logical)["TopicArn"]
            else:
                refs[name] = sqs.create_queue(QueueName=logical)["QueueUrl"]
        os.environ.update({name: refs.get(name, value) for name, value in variables.items()})
        subscriber = sqs.create_queue(QueueName="subscriber")["QueueUrl"]
        subscriber_arn = sqs.get_queue_attributes(QueueUrl=subscriber, AttributeNames=["QueueArn"])["Attributes"]
        sns.subscribe(TopicArn=os.environ["TOPIC_ARN"], Protocol="sqs", Endpoint=subscriber_arn["QueueArn"])

        from order_consumer import handler

        class Context:
            function_name, memory_limit_in_mb, aws_request_id = "consumer", 1769, "request"
            invoked_function_arn = "arn:aws:lambda:eu-west-1:123456789012:function:consumer"

            def get_remaining_time_in_millis(self):
                return 60_000

        def record(number, body):
            return {
                "messageId": f"m-{number}", "receiptHandle": "h", "body": json.dumps(body), "attributes": {},
                "messageAttributes": {}, "eventSource": "aws:sqs",
                "eventSourceARN": "arn:aws:sqs:eu-west-1:123456789012:orders",
            }

        good = {"order_id": "o-1", "amount": 12.5, "country": "DE", "customer": {"id": "c", "tier": "gold"},
                "items": [{"sku": "A", "quantity": 1}]}
        response = handler.handler({"Records": [record(1, good), record(2, {**good, "order_id": "o-2", "amount": -1})]},
                                   Context())
        parked = sqs.receive_message(QueueUrl=os.environ["DEAD_LETTER_QUEUE_URL"], MessageAttributeNames=["All"])
        notified = sqs.receive_message(QueueUrl=subscriber)
        print(json.dumps({
            "response": response,
            "parked": [{k: v["StringValue"] for k, v in m["MessageAttributes"].items() if k.startswith("error_")}
                       for m in parked.get("Messages", [])],
            "notified": [json.loads(m["Body"]) for m in notified.get("Messages", [])],
            "jsonschema_loaded": sys.modules.get("jsonschema") is not None,
        }))
    """
)


def test_installed_wheel_with_an_order_schema_ships_a_self_contained_consumer(wheel: Path, tmp_path: Path) -> None:
    # GIVEN the wheel installed into an empty virtualenv, and an app outside the repo with an order schema,
    # notification attributes and a subscriber filtering on one of them
    from tests.consumer.test_order_schema import ORDER_SCHEMA

    installed = install_into_empty_venv(wheel, tmp_path)
    python, environment = installed.python, installed.environment
    app_dir = tmp_path / "shop-app"
    app_dir.mkdir()
    (app_dir / "app.py").write_text(SCHEMA_APP)
    outdir = app_dir / "cdk.out"
    synthesized = subprocess.run(  # noqa: S603  (our temporary interpreter and paths)
        [python, "app.py", str(outdir), json.dumps(ORDER_SCHEMA)],
        cwd=app_dir,
        env=environment,
        capture_output=True,
        text=True,
    )
    assert synthesized.returncode == 0, synthesized.stderr[-3000:]
    template = json.loads((outdir / "ShopStack.template.json").read_text())
    [consumer] = [
        r
        for r in template["Resources"].values()
        if r["Type"] == "AWS::Lambda::Function" and r["Properties"]["Handler"] == "order_consumer.handler.handler"
    ]
    staged = outdir / f"asset.{consumer['Properties']['Code']['S3Key'].removesuffix('.zip')}"
    assert (staged / "order_consumer" / "order_schema_validator.py").is_file()
    # WHEN its consumer is loaded from the staged asset with the template's environment, and gets a good order
    # and one that breaks the schema
    ran = subprocess.run(  # noqa: S603
        [
            python,
            "-c",
            CONSUMER_FROM_ASSET,
            str(staged),
            json.dumps(consumer["Properties"]["Environment"]["Variables"]),
        ],
        cwd=tmp_path,
        env=environment,
        capture_output=True,
        text=True,
    )
    assert ran.returncode == 0, ran.stderr[-3000:]
    found = json.loads(ran.stdout.strip().splitlines()[-1])
    # THEN the violation is parked with SCHEMA_VIOLATION and its path and rule, never retried
    assert found["response"] == {"batchItemFailures": []}
    assert found["parked"] == [
        {
            "error_code": "SCHEMA_VIOLATION",
            "error_message": "the order does not match order_schema: $.amount must be bigger than or equal to 0 "
            "(rule: minimum)",
        }
    ]
    # AND the good order is announced with the configured attributes, typed
    [notification] = found["notified"]
    attributes = {name: (a["Type"], a["Value"]) for name, a in notification["MessageAttributes"].items()}
    assert attributes["country"] == ("String", "DE")
    assert attributes["customer.tier"] == ("String", "gold")
    assert json.loads(notification["Message"])["order_id"] == "o-1"
    # AND nothing imported jsonschema: the generated validator needs only the asset and the standard library
    assert found["jsonschema_loaded"] is False
    # AND the subscriber's filter policy is in the template
    [subscription] = [r for r in template["Resources"].values() if r["Type"] == "AWS::SNS::Subscription"]
    assert subscription["Properties"]["FilterPolicy"] == {"country": ["DE"]}
