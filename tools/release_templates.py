"""Write tests/compat/templates/<release>/<configuration>.json: each release's construct, synthesized.

A release's construct is read from its commit (``git archive``; tags do not travel with the
repository, so the commits are named in tests/compat/released.py and the CHANGELOG), synthesized
in a child process with the release's ``infra/`` first on the path and this venv's aws-cdk-lib, and
written as ``snapshot_template`` writes a snapshot. ``upgrade-check`` and docs/upgrading.md compare
them with today's templates of the same configurations (tests/compat/test_template_upgrades.py).

    .venv/bin/python tools/release_templates.py
"""

from __future__ import annotations

import json
import subprocess
import sys
import tarfile
import tempfile
from io import BytesIO
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "infra"))

from idempotent_order_pipeline.templates import normalized  # noqa: E402
from tests.compat.released import RELEASE_COMMITS  # noqa: E402

OUT = REPO / "tests" / "compat" / "templates"
#: The configurations, as the code that builds each one's stack ``Shop`` (``stack`` in scope). ``cmk``
#: is a production stage: a customer-managed key, an on-call alarm topic, retained resources.
CONFIGURATIONS = {
    "default": 'IdempotentOrderPipeline(stack, "Orders")',
    "cmk": """
key = aws_kms.Key(stack, "Key", enable_key_rotation=True)
on_call = aws_sns.Topic.from_topic_arn(stack, "OnCall", "arn:aws:sns:eu-west-1:123456789012:on-call")
IdempotentOrderPipeline(stack, "Orders", encryption_key=key, removal_policy=cdk.RemovalPolicy.RETAIN, **alarms(on_call))
""",
}
SYNTH = """
import inspect, json, sys
import aws_cdk as cdk
from aws_cdk import aws_cloudwatch_actions, aws_kms, aws_sns
from idempotent_order_pipeline import IdempotentOrderPipeline

def alarms(topic):
    # 0.1.0 took one topic (alarm_action); 0.2.0 and later any alarm actions and a runbook
    names = inspect.signature(IdempotentOrderPipeline).parameters
    if "alarm_actions" in names:
        return {"alarm_actions": [aws_cloudwatch_actions.SnsAction(topic)], "runbook_url": "https://runbooks.example.com/orders"}
    return {"alarm_action": topic}

app = cdk.App(outdir=sys.argv[1])
stack = cdk.Stack(app, "Shop", env=cdk.Environment(account="123456789012", region="eu-west-1"))
exec(sys.stdin.read())
app.synth()
"""


def source_of(commit: str, into: Path) -> Path:
    """The commit's ``infra/`` and ``lambdas/`` (0.1.0's asset lived there) under ``into``."""
    listed = subprocess.run(  # noqa: S603 - git of this repository
        ["git", "ls-tree", "--name-only", commit],  # noqa: S607
        cwd=REPO,
        capture_output=True,
        text=True,
        check=True,
    ).stdout.split()
    paths = [path for path in ("infra", "lambdas") if path in listed]
    archive = subprocess.run(  # noqa: S603
        ["git", "archive", "--format=tar", commit, *paths],  # noqa: S607
        cwd=REPO,
        capture_output=True,
        check=True,
    )
    with tarfile.open(fileobj=BytesIO(archive.stdout)) as tar:
        tar.extractall(into, filter="data")
    return into


def synthesize(source: Path, code: str, out: Path) -> dict[str, object]:
    paths = [str(source / "infra"), str(source / "lambdas")]
    completed = subprocess.run(  # noqa: S603 - this interpreter, this repository's released code
        [sys.executable, "-c", f"import sys; sys.path[:0] = {paths!r}\n{SYNTH}", str(out)],
        input=code,
        capture_output=True,
        text=True,
        cwd=out.parent,
        check=False,
    )
    if completed.returncode != 0:
        raise SystemExit(f"synth failed:\n{completed.stderr[-3000:]}")
    return json.loads((out / "Shop.template.json").read_text())


def main() -> int:
    for release, commit in RELEASE_COMMITS.items():
        with tempfile.TemporaryDirectory() as work:
            source = source_of(commit, Path(work) / "source")
            for name, code in CONFIGURATIONS.items():
                template = normalized(synthesize(source, code, Path(work) / f"out-{name}"))
                target = OUT / release / f"{name}.json"
                target.parent.mkdir(parents=True, exist_ok=True)
                target.write_text(json.dumps(template, indent=2) + "\n")
                print(f"wrote {target.relative_to(REPO)} ({len(template['Resources'])} resources, {commit[:12]})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
