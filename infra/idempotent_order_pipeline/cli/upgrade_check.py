"""``order-pipeline upgrade-check``: which resources a deploy replaces or removes, and whether data can be lost.

Compares two CloudFormation templates (:mod:`idempotent_order_pipeline.upgrade_check` decides, from
the templates alone): ``--before`` a file (a template synthesized from the deployed code, or a
snapshot committed with ``snapshot_template``) or ``--before-stack NAME`` (the deployed stack's
template, ``GetTemplate``; then each replaced or removed queue's depth is read too), and ``--after``
the template about to be deployed (``cdk.out/<stack>.template.json``).

Output (a contract, docs/data-loss-gate.md): one line per replaced or removed resource, starting
with ``DATA-LOSS``, ``SAFE`` or ``ACKNOWLEDGED``, then the summary line ``upgrade-check: ...``; with
``--json`` one object per resource, then the summary object. Exit codes: 0 no data can be lost
(nothing replaced or removed, or only safe or acknowledged changes); 1 a replacement or removal can
lose data; 2 the check could not run (a usage error, an unreadable template or acknowledgements file,
a stack that cannot be read).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import click
from botocore.exceptions import BotoCoreError, ClientError

from idempotent_order_pipeline.cli.aws import AwsClients
from idempotent_order_pipeline.cli.context import operator_of, wants_json
from idempotent_order_pipeline.cli.errors import describe
from idempotent_order_pipeline.cli.output import echo
from idempotent_order_pipeline.upgrade_check import (
    QUEUE_DEPTH_ATTRIBUTES,
    REMOVE,
    Change,
    Report,
    find_changes,
    judge,
    library_versions,
)
from idempotent_order_pipeline.upgrade_check import describe as describe_verdict

#: Exit codes (a contract).
EXIT_SAFE = 0
EXIT_DATA_LOSS = 1
EXIT_CANNOT_CHECK = 2


class CannotCheck(click.ClickException):
    """The check could not run: one line on stderr, exit code 2."""

    exit_code = EXIT_CANNOT_CHECK


def _read_template(path: Path) -> dict[str, Any]:
    try:
        template = json.loads(path.read_text())
    except (OSError, ValueError) as exc:
        raise CannotCheck(f"{path}: not a readable JSON template ({exc})") from exc
    if not isinstance(template, dict) or not isinstance(template.get("Resources"), dict):
        raise CannotCheck(f"{path}: not a CloudFormation template (no Resources)")
    return template


def read_acknowledgements(text: str, *, name: str, source: str) -> dict[str, str]:
    """Lines ``<stack> <logical id> <reason>`` (``#`` comments; ``*`` for every stack): the reasons for stack
    ``name`` by logical id. A line without a reason is an error: it must say why."""
    chosen: dict[str, str] = {}
    for number, raw in enumerate(text.splitlines(), start=1):
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        parts = line.split(None, 2)
        if len(parts) < 3 or len(parts[2].split()) < 2:
            raise CannotCheck(
                f"{source}:{number}: {line!r}: expected '<stack> <logical id> <reason>', the reason saying why "
                "losing or replacing the resource is acceptable"
            )
        stack, logical_id, reason = parts
        if stack in ("*", name):
            chosen[logical_id] = reason
    return chosen


def _deployed(clients: AwsClients, stack: str) -> tuple[dict[str, Any], dict[str, str]]:
    """The deployed stack's template (as submitted) and its physical ids by logical id."""
    cloudformation = clients.cloudformation
    try:
        body: Any = cloudformation.get_template(StackName=stack, TemplateStage="Original")["TemplateBody"]
        physical: dict[str, str] = {}
        for page in cloudformation.get_paginator("list_stack_resources").paginate(StackName=stack):
            for summary in page["StackResourceSummaries"]:
                if summary.get("PhysicalResourceId"):
                    physical[summary["LogicalResourceId"]] = summary["PhysicalResourceId"]
    except (ClientError, BotoCoreError) as exc:
        raise CannotCheck(f"stack {stack!r} could not be read ({clients.where()}): {describe(exc)}") from exc
    template = json.loads(body) if isinstance(body, str) else body
    if not isinstance(template, dict):
        raise CannotCheck(f"stack {stack!r}: its template is not JSON (this command reads JSON templates)")
    return template, physical


def _queue_depths(clients: AwsClients, changes: list[Change], physical: dict[str, str]) -> dict[str, int | None]:
    """Messages in each replaced or removed deployed queue (visible, in flight, delayed); None where unreadable."""
    depths: dict[str, int | None] = {}
    for change in changes:
        if change.resource_type != "AWS::SQS::Queue" or change.logical_id not in physical:
            continue
        try:
            answer = clients.sqs.get_queue_attributes(
                QueueUrl=physical[change.logical_id],
                AttributeNames=[
                    "ApproximateNumberOfMessages",
                    "ApproximateNumberOfMessagesNotVisible",
                    "ApproximateNumberOfMessagesDelayed",
                ],
            )
            attributes: dict[str, str] = {str(key): value for key, value in answer["Attributes"].items()}
            depths[change.logical_id] = sum(int(attributes.get(name, "0")) for name in QUEUE_DEPTH_ATTRIBUTES)
        except (ClientError, BotoCoreError, ValueError) as exc:
            echo(f"queue {physical[change.logical_id]}: depth not read ({describe(exc)}): treated as holding messages")
            depths[change.logical_id] = None
    return depths


@click.command("upgrade-check")
@click.option(
    "--before",
    type=click.Path(exists=True, dir_okay=False, path_type=Path),
    help="The template deployed now (a synthesized template, or a snapshot_template snapshot).",
)
@click.option("--before-stack", metavar="NAME", help="Read the template deployed now from this stack (GetTemplate).")
@click.option(
    "--after",
    required=True,
    type=click.Path(exists=True, dir_okay=False, path_type=Path),
    help="The template about to be deployed (cdk.out/<stack>.template.json).",
)
@click.option(
    "--acknowledged",
    type=click.Path(exists=True, dir_okay=False, path_type=Path),
    help="Deliberate data-losing changes, one '<stack> <logical id> <reason>' per line (* = every stack).",
)
@click.option("--name", help="The stack's name in the report and the acknowledgements (default: --before-stack).")
@click.option("--json", "as_json", is_flag=True, help="One JSON object per change, then the summary, on stdout.")
@click.pass_context
def upgrade_check(
    ctx: click.Context,
    before: Path | None,
    before_stack: str | None,
    after: Path,
    acknowledged: Path | None,
    name: str | None,
    as_json: bool,
) -> None:
    """List every resource a deploy of AFTER replaces or removes; exit 1 where data can be lost.

    Data can be lost when a table, a queue holding messages, a topic, a KMS key, a log group or a
    bucket is replaced or removed. With --before-stack, a replaced queue's depth is read: an empty one
    is safe; from a file it is unknown, and the queue is treated as holding messages. Every other
    replacement or removal (a function, a role, an event source mapping, an alarm) is listed as safe,
    with why. Exit codes: 0 safe, 1 data can be lost, 2 the check could not run.
    """
    if (before is None) == (before_stack is None):
        raise CannotCheck("give --before FILE or --before-stack NAME (one of them)")
    as_json = wants_json(ctx, as_json)
    label = name or before_stack or after.stem.removesuffix(".template")
    acknowledgements: dict[str, str] = {}
    if acknowledged is not None:
        try:
            text = acknowledged.read_text()
        except OSError as exc:
            raise CannotCheck(f"{acknowledged}: {exc}") from exc
        acknowledgements = read_acknowledgements(text, name=label, source=str(acknowledged))
    new = _read_template(after)
    physical: dict[str, str] = {}
    if before_stack is not None:
        old, physical = _deployed(operator_of(ctx).clients, before_stack)
    else:
        assert before is not None
        old = _read_template(before)
    changes = find_changes(old, new)
    depths = _queue_depths(operator_of(ctx).clients, changes, physical) if physical else {}
    report = Report(judge(changes, queue_depths=depths, acknowledgements=acknowledgements))
    report.versions = library_versions(old, new)
    matched = {verdict.change.logical_id for verdict in report.verdicts if verdict.acknowledged is not None}
    unused = [logical_id for logical_id in acknowledgements if logical_id not in matched]
    _print(report, label, unused, as_json=as_json)
    ctx.exit(EXIT_DATA_LOSS if report.blocking else EXIT_SAFE)


def _print(report: Report, label: str, unused: list[str], *, as_json: bool) -> None:
    for verdict in report.verdicts:
        change = verdict.change
        if as_json:
            echo(
                json.dumps(
                    {
                        "logical_id": change.logical_id,
                        "type": change.resource_type,
                        "construct_path": change.construct_path,
                        "action": change.action,
                        "causes": list(change.causes),
                        "retained": change.retained,
                        "loses_data": verdict.loses_data,
                        "acknowledged": verdict.acknowledged,
                        "reason": verdict.reason,
                    },
                    sort_keys=True,
                )
            )
        else:
            echo(describe_verdict(verdict))
    for logical_id in unused:
        echo(f"note: the acknowledgement of {label} {logical_id} matches no change", err=as_json)
    removed = sum(1 for verdict in report.verdicts if verdict.change.action == REMOVE)
    replaced = len(report.verdicts) - removed
    blocking = len(report.blocking)
    old_version, new_version = report.versions
    if as_json:
        echo(
            json.dumps(
                {
                    "stack": label,
                    "replaced": replaced,
                    "removed": removed,
                    "data_loss": blocking,
                    "acknowledged": sum(1 for verdict in report.verdicts if verdict.acknowledged is not None),
                    "library_version": {"before": old_version, "after": new_version},
                },
                sort_keys=True,
            )
        )
        return
    versions = f"; library {old_version or '(none recorded)'} -> {new_version or '(none recorded)'}"
    outcome = f"{blocking} can lose data" if blocking else "no data can be lost"
    echo(f"upgrade-check: {label}: {replaced} replaced, {removed} removed; {outcome}{versions}")
