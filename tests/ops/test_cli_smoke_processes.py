"""``order-pipeline smoke`` in processes of their own: the installed command as CI runs it, against a moto
server on ``localhost``, with real time; parliament on its documented permissions.

One run with the consumer running beside it (a thread of this process, over the server) passes; one
without a consumer is stopped with SIGINT while it waits, and it removes its queue and subscription
before it exits with 130. And parliament (a process of its own venv) lints the permissions the
runbook gives for it. The in-process tests of every check are in ``test_cli_smoke.py``.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from moto import mock_aws
from moto.server import ThreadedMotoServer

from idempotent_order_pipeline._lambda_asset.order_consumer import handler as handler_module
from idempotent_order_pipeline.cli.inbox import QUEUE_NAME_PREFIX
from idempotent_order_pipeline.cli.smoke import EXIT_INTERRUPTED
from tests.ops.conftest import STACK, OpsWorld
from tests.ops.test_cli_against_a_local_endpoint import ORDER_PIPELINE, REGION, REPO
from tests.ops.test_cli_smoke import documented_policy

pytestmark = pytest.mark.slow

#: How long the test waits for the run to reach its wait, and to end after SIGINT (never reached when it works).
PATIENCE_SECONDS = 60


def _ctrl_c_as_in_a_terminal() -> None:
    """In the child: SIGINT delivered and at its default, as a shell starts a command.

    A child inherits an ignored or blocked SIGINT from the process that starts it: the full suite's
    worker can hand one down (seen twice in `make test`, never with this file alone), and the run
    then never sees the test's Ctrl-C.
    """
    signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGINT})
    signal.signal(signal.SIGINT, signal.SIG_DFL)


@dataclass
class Local:
    world: OpsWorld
    endpoint: str

    def smoke(self, *args: str) -> subprocess.Popen[str]:
        """``order-pipeline --endpoint-url URL --region R --stack S smoke ARGS``, started."""
        environment = {
            name: value for name, value in os.environ.items() if not name.startswith("AWS_") and name != "PYTHONPATH"
        }
        environment |= {
            "AWS_ACCESS_KEY_ID": "testing",
            "AWS_SECRET_ACCESS_KEY": "testing",
            "PYTHONPATH": os.pathsep.join([str(REPO / "infra"), str(REPO)]),
        }
        return subprocess.Popen(  # noqa: S603 - the installed command, arguments of this test
            [
                str(ORDER_PIPELINE),
                "--endpoint-url",
                self.endpoint,
                "--region",
                REGION,
                "--stack",
                STACK,
                "smoke",
                *args,
            ],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=environment,
            preexec_fn=_ctrl_c_as_in_a_terminal,  # two signal calls in the child, nothing that takes a lock
        )

    def smoke_queues(self) -> list[str]:
        return [url for url in self.world.sqs.list_queues().get("QueueUrls", []) if QUEUE_NAME_PREFIX in url]

    def subscriptions(self) -> list[str]:
        topic = self.world.topic_arn
        return sorted(
            s["Endpoint"] for s in self.world.sns.list_subscriptions_by_topic(TopicArn=topic)["Subscriptions"]
        )


@pytest.fixture
def local() -> Iterator[Local]:
    """A moto server on localhost holding the pipeline's resources (the consumer's harness pointed at it)."""
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    server.start()
    host, port = server.get_host_and_port()
    endpoint = f"http://{host}:{port}"
    monkeypatch = pytest.MonkeyPatch()
    monkeypatch.setenv("AWS_ENDPOINT_URL", endpoint)
    try:
        yield Local(OpsWorld(), endpoint)
    finally:
        handler_module.configure()
        monkeypatch.undo()
        server.stop()
        mock_aws().reset()


def test_with_the_consumer_running_beside_it_the_installed_command_passes(local: Local) -> None:
    # GIVEN the consumer, taking what the queue holds every 200 ms while the run goes on
    stop = threading.Event()

    def consume() -> None:
        while not stop.wait(0.2):
            local.world.consume()

    consumer = threading.Thread(target=consume, daemon=True)
    consumer.start()
    try:
        # WHEN the installed command checks the pipeline
        run = local.smoke("--json", "--timeout", "30s")
        stdout, stderr = run.communicate(timeout=PATIENCE_SECONDS)
    finally:
        stop.set()
        consumer.join()
    # THEN every check passed and nothing of the run is left
    assert run.returncode == 0, stderr
    report = json.loads(stdout)
    assert report["passed"] is True
    assert report["failed"] == report["skipped"] == []
    assert local.smoke_queues() == []
    assert [key for key in local.world.event_records() if key.startswith("smoke-")] == []


def test_sigint_while_it_waits_removes_the_queue_and_subscription_and_exits_130(local: Local) -> None:
    # GIVEN a run against a pipeline with no consumer, waiting for its canaries
    subscriptions_before = local.subscriptions()
    run = local.smoke("--timeout", "5m")
    deadline = time.monotonic() + PATIENCE_SECONDS
    while not (local.smoke_queues() and len(local.subscriptions()) > len(subscriptions_before)):
        assert run.poll() is None, run.communicate()
        assert time.monotonic() < deadline, "the run never subscribed its queue"
        time.sleep(0.1)
    # WHEN it gets SIGINT (Ctrl-C)
    time.sleep(1.0)  # the canaries are out by now
    run.send_signal(signal.SIGINT)
    stdout, stderr = run.communicate(timeout=PATIENCE_SECONDS)
    # THEN it exits with 130, having removed its queue and its subscription
    assert run.returncode == EXIT_INTERRUPTED, stderr
    assert "interrupted" in stderr
    assert "recorded        skip    not run: interrupted" in stdout
    assert local.smoke_queues() == []
    assert local.subscriptions() == subscriptions_before
    # AND it names the canaries that are still in the pipeline's queue, where only the consumer may read them
    assert "3 message(s) the consumer did not take may still be in the queue" in stderr
    # AND nothing of the run is in the tables
    assert [key for key in local.world.order_rows() if key.startswith("smoke-")] == []


#: parliament runs from its own virtualenv (requirements-parliament.lock; `make venv` creates it).
PARLIAMENT_PYTHON = Path(os.environ.get("PARLIAMENT_PYTHON", REPO / ".venv-parliament" / "bin" / "python"))


def test_parliament_finds_nothing_in_the_documented_policy_but_the_temporary_queues_own_policy(
    tmp_path: Path,
) -> None:
    # GIVEN the permissions docs/operations.md gives for smoke
    if not PARLIAMENT_PYTHON.exists():
        pytest.fail(f"{PARLIAMENT_PYTHON} not found: run `make venv` (it creates .venv-parliament)")
    path = tmp_path / "policies.json"
    path.write_text(json.dumps({"smoke": documented_policy()}), encoding="utf-8")
    # WHEN parliament lints them
    completed = subprocess.run(  # noqa: S603 - a fixed interpreter from the repository's venv, our script
        [str(PARLIAMENT_PYTHON), str(REPO / "tools" / "policy_lint.py"), str(path)],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    # THEN its one finding is that CreateQueue and SetQueueAttributes manage permissions: they set the
    # temporary queue's policy, on queues named order-pipeline-smoke-* only; no resource is of the wrong type
    assert completed.returncode == 0, completed.stderr[-2000:]
    findings = json.loads(completed.stdout)
    assert [(f["issue"], sorted(f["location"]["actions"])) for f in findings] == [
        ("PERMISSIONS_MANAGEMENT_ACTIONS", ["sqs:createqueue", "sqs:setqueueattributes"])
    ]
