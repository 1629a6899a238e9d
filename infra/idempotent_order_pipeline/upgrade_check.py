"""What a deploy of one template over another replaces or removes, and where that can lose data.

``order-pipeline upgrade-check`` (:mod:`idempotent_order_pipeline.cli.upgrade_check`) runs this on two
templates; it needs no AWS, no CDK and no cfn-lint. docs/data-loss-gate.md is the reviewer's guide.

**Replacement** is read from the templates themselves, as CloudFormation decides it:

* a resource in "before" missing from "after" is **removed** (a renamed construct id or a moved
  construct gives a new logical id: the old resource is removed and a new, empty one created);
  ``DeletionPolicy: Retain`` keeps it in the account, outside the stack;
* a resource whose ``Type`` changed is **replaced**;
* a resource one of whose properties that cannot change in place changed is **replaced**; which
  properties those are comes from CloudFormation's resource schemas (``createOnlyProperties``; the
  ``conditionalCreateOnlyProperties`` "may" replace), extracted for the types the library's stacks
  use into ``update_behaviour.json`` by ``tools/update_behaviour.py``. A type not in that table is
  reported as *may be replaced* when any property changed;
* a property that refers (``Ref``, ``Fn::GetAtt``, ``Fn::Sub``) to a replaced resource changes at
  deploy, so a replacing property that does so replaces its resource too (a queue replaced
  replaces its event source mapping).

Both templates are first put through :func:`idempotent_order_pipeline.templates.normalized` (JSON
bodies expanded, hashes kept), and where "before" is a snapshot with masked asset hashes, each mask
is compared as equal to the hash in "after": a snapshot committed by ``snapshot_template`` is a valid
"before" (a change hidden by its masks, a layer's new code, is then not seen: pass real templates).

**Data loss**: :data:`STATEFUL_TYPES` hold data (a table's rows, a queue's messages, a topic's
subscriptions and publishers, a key's ciphertexts, a log group's events, a bucket's objects).
Replacing or removing one can lose data (exit 1), except a queue known to be empty (read from the
deployed stack: ``ApproximateNumberOfMessages``, ``...NotVisible`` and ``...Delayed`` all 0); a queue
whose depth is unknown is treated as holding messages. Every other replacement or removal is listed
as safe, with why.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from functools import cache
from importlib import resources
from typing import Any

from idempotent_order_pipeline.library_version import library_version_of
from idempotent_order_pipeline.templates import ASSET_HASH, ASSET_MASK, normalized

#: The resource types that hold data, with what a replacement or removal loses.
STATEFUL_TYPES: Mapping[str, str] = {
    "AWS::DynamoDB::Table": "its items stay in the old table; the stack goes on with a new, empty one",
    "AWS::DynamoDB::GlobalTable": "its items stay in the old table; the stack goes on with a new, empty one",
    "AWS::SQS::Queue": "its messages stay in the old queue, and producers still sending to the old URL lose theirs",
    "AWS::SNS::Topic": "its subscriptions stay on the old topic: what is published meanwhile reaches no subscriber "
    "of the new one, and subscribers in other stacks keep the old ARN",
    "AWS::KMS::Key": "what it encrypted (items, messages, logs) needs the old key, which is scheduled for deletion "
    "unless retained",
    "AWS::Logs::LogGroup": "its log events stay in the old log group (or are deleted with it)",
    "AWS::S3::Bucket": "its objects stay in the old bucket",
}
#: Why a replacement or removal of these types loses nothing (the others: the generic reason below).
SAFE_REASONS: Mapping[str, str] = {
    "AWS::Lambda::EventSourceMapping": "a mapping holds no messages: they wait in the queue while it is replaced, and "
    "the new mapping polls them (a batch in flight becomes visible again after the visibility timeout; the consumer "
    "records each order once)",
    "AWS::Lambda::Function": "a function holds no data (its log group is a resource of its own)",
    "AWS::Lambda::Version": "a published version is code and configuration from the template",
    "AWS::Lambda::LayerVersion": "a layer version is code from the template",
    "AWS::IAM::Role": "a role holds no data; the functions that assume it get the new one",
    "AWS::IAM::Policy": "a policy holds no data",
    "AWS::CloudWatch::Alarm": "an alarm holds no data (its history restarts)",
    "AWS::CloudWatch::Dashboard": "a dashboard holds no data (the metrics it shows stay in CloudWatch)",
}
GENERIC_SAFE = "holds no data: CloudFormation makes it anew from the template"
#: Not checked: the CDK's version report (``CDKMetadata``), whose ``Analytics`` change with every CDK
#: version; it holds nothing and is updated in place.
IGNORED_TYPES = frozenset({"AWS::CDK::Metadata"})
#: Conditional create-only properties, and types the table does not know.
MAY_REPLACE = "may be replaced"
REPLACE = "replaced"
REMOVE = "removed"
# A name ``Fn::Sub`` substitutes (``${Queue.Arn}``, ``${AWS::Region}``; ``${!Literal}`` is none).
_SUB_NAME = re.compile(r"\$\{(?!!)([A-Za-z0-9:.]+)\}")
RETAIN_POLICIES = frozenset({"Retain", "RetainExceptOnCreate"})
#: The three SQS attributes that together say whether a queue holds any message.
QUEUE_DEPTH_ATTRIBUTES = (
    "ApproximateNumberOfMessages",
    "ApproximateNumberOfMessagesNotVisible",
    "ApproximateNumberOfMessagesDelayed",
)


@cache
def update_behaviour() -> Mapping[str, Any]:
    """The shipped table: each type's replacing (``replace``) and maybe-replacing (``may_replace``) properties."""
    text = (resources.files("idempotent_order_pipeline") / "update_behaviour.json").read_text()
    table: Mapping[str, Any] = json.loads(text)
    return table


@dataclass(frozen=True)
class Change:
    """One resource the deploy replaces or removes."""

    logical_id: str
    resource_type: str
    action: str  # REPLACE, MAY_REPLACE or REMOVE
    causes: tuple[str, ...] = ()
    construct_path: str | None = None
    #: The old resource stays in the account, outside the stack (DeletionPolicy / UpdateReplacePolicy Retain).
    retained: bool = False
    #: A mapping removed while another one, added, polls the same queue for the same function.
    conflict: str | None = None


@dataclass(frozen=True)
class Verdict:
    """A change and whether it can lose data, with why."""

    change: Change
    loses_data: bool
    reason: str
    acknowledged: str | None = None

    @property
    def blocking(self) -> bool:
        return self.loses_data and self.acknowledged is None


@dataclass
class Report:
    verdicts: list[Verdict] = field(default_factory=list)
    #: The library version each template records (None: none recorded).
    versions: tuple[str | None, str | None] = (None, None)

    @property
    def blocking(self) -> list[Verdict]:
        return [verdict for verdict in self.verdicts if verdict.blocking]


def _resources(template: Mapping[str, Any]) -> dict[str, Any]:
    found = template.get("Resources")
    return dict(found) if isinstance(found, Mapping) else {}


def _path(resource: Mapping[str, Any]) -> str | None:
    metadata = resource.get("Metadata")
    path = metadata.get("aws:cdk:path") if isinstance(metadata, Mapping) else None
    return path if isinstance(path, str) else None


def _same(old: Any, new: Any) -> bool:
    """Equal values; a masked asset hash in ``old`` (a snapshot) equals any hash in the same place in ``new``."""
    if isinstance(old, str) and isinstance(new, str):
        return old == new or (ASSET_MASK in old and ASSET_HASH.sub(ASSET_MASK, new) == old)
    if isinstance(old, Mapping) and isinstance(new, Mapping):
        return old.keys() == new.keys() and all(_same(old[key], new[key]) for key in old)
    if isinstance(old, list) and isinstance(new, list):
        return len(old) == len(new) and all(_same(a, b) for a, b in zip(old, new, strict=True))
    return bool(old == new)


def _at(properties: Any, path: str) -> Any:
    """The value at a property path (``A`` or ``A/B``); None where absent."""
    value = properties
    for part in path.split("/"):
        value = value.get(part) if isinstance(value, Mapping) else None
    return value


def _references(value: Any) -> set[str]:
    """The logical ids a value refers to (``Ref``, ``Fn::GetAtt``, ``${...}`` of ``Fn::Sub``)."""
    found: set[str] = set()
    if isinstance(value, Mapping):
        if isinstance(value.get("Ref"), str):
            found.add(value["Ref"])
        attribute = value.get("Fn::GetAtt")
        if isinstance(attribute, list) and attribute and isinstance(attribute[0], str):
            found.add(attribute[0])
        elif isinstance(attribute, str):
            found.add(attribute.split(".")[0])
        sub = value.get("Fn::Sub")
        text = sub[0] if isinstance(sub, list) and sub else sub
        if isinstance(text, str):
            found |= {name.split(".")[0] for name in _SUB_NAME.findall(text)}
        for item in value.values():
            found |= _references(item)
    elif isinstance(value, list):
        for item in value:
            found |= _references(item)
    return found


def _rules(resource_type: str) -> Mapping[str, Sequence[str]] | None:
    types: Mapping[str, Any] = update_behaviour()["types"]
    rules: Mapping[str, Sequence[str]] | None = types.get(resource_type)
    return rules


def find_changes(before: Mapping[str, Any], after: Mapping[str, Any]) -> list[Change]:
    """Every resource of ``before`` that deploying ``after`` over it replaces or removes (module docstring)."""
    old_resources = _resources(normalized(before, mask=False))
    new_resources = _resources(normalized(after, mask=False))
    changes: dict[str, Change] = {}
    for logical_id, old in old_resources.items():
        new = new_resources.get(logical_id)
        resource_type = str(old.get("Type"))
        if resource_type in IGNORED_TYPES:
            continue
        path = _path(old)
        if new is None:
            retained = old.get("DeletionPolicy") in RETAIN_POLICIES
            changes[logical_id] = Change(
                logical_id, resource_type, REMOVE, ("not in the new template",), path, retained=retained
            )
            continue
        if new.get("Type") != old.get("Type"):
            changes[logical_id] = _replaced(logical_id, old, REPLACE, (f"Type changed to {new.get('Type')}",))
            continue
        action, causes = _direct(resource_type, old.get("Properties") or {}, new.get("Properties") or {})
        if action is not None:
            changes[logical_id] = _replaced(logical_id, old, action, causes)
    # A replacing property that refers to a replaced resource changes too: until nothing more is found.
    grew = True
    while grew:
        grew = False
        for logical_id, old in old_resources.items():
            if logical_id in changes or logical_id not in new_resources:
                continue
            cause = _cascade(str(old.get("Type")), new_resources[logical_id].get("Properties") or {}, changes)
            if cause is not None:
                action, text = cause
                changes[logical_id] = _replaced(logical_id, old, action, (text,))
                grew = True
    _mark_mapping_conflicts(changes, old_resources, new_resources)
    return sorted(changes.values(), key=lambda change: (change.action != REMOVE, change.logical_id))


def _replaced(logical_id: str, old: Mapping[str, Any], action: str, causes: tuple[str, ...]) -> Change:
    retained = old.get("UpdateReplacePolicy") in RETAIN_POLICIES
    return Change(logical_id, str(old.get("Type")), action, causes, _path(old), retained=retained)


def _direct(resource_type: str, old: Mapping[str, Any], new: Mapping[str, Any]) -> tuple[str | None, tuple[str, ...]]:
    rules = _rules(resource_type)
    if rules is None:
        changed = sorted(key for key in {*old, *new} if not _same(old.get(key), new.get(key)))
        if not changed:
            return None, ()
        return MAY_REPLACE, (
            f"{', '.join(changed)} changed; the update behaviour of {resource_type} is not known here",
        )
    for action, key in ((REPLACE, "replace"), (MAY_REPLACE, "may_replace")):
        changed = [path for path in rules[key] if not _same(_at(old, path), _at(new, path))]
        if changed:
            return action, tuple(f"{path} changed" for path in changed)
    return None, ()


def _cascade(resource_type: str, new: Mapping[str, Any], changes: Mapping[str, Change]) -> tuple[str, str] | None:
    rules = _rules(resource_type)
    replaced = {logical_id for logical_id, change in changes.items() if change.action != REMOVE}
    groups = (
        [(REPLACE, list(new))] if rules is None else [(REPLACE, rules["replace"]), (MAY_REPLACE, rules["may_replace"])]
    )
    for action, paths in groups:
        for path in paths:
            hit = sorted(_references(_at(new, path)) & replaced)
            if hit:
                return action, f"{path} refers to {', '.join(hit)}, which is replaced"
    return None


def _mark_mapping_conflicts(
    changes: dict[str, Change], old_resources: Mapping[str, Any], new_resources: Mapping[str, Any]
) -> None:
    """A mapping removed while an added one maps the same queue to the same function: CloudFormation
    creates the new mapping before it deletes the old one, and Lambda refuses a second mapping of one
    queue and one function (``ResourceConflictException``), so the deploy fails and rolls back."""

    def key(resource: Mapping[str, Any]) -> str:
        properties = resource.get("Properties") or {}
        return json.dumps([properties.get("EventSourceArn"), properties.get("FunctionName")], sort_keys=True)

    added = {
        key(resource): logical_id
        for logical_id, resource in new_resources.items()
        if logical_id not in old_resources and resource.get("Type") == "AWS::Lambda::EventSourceMapping"
    }
    for logical_id, change in list(changes.items()):
        if change.action == REMOVE and change.resource_type == "AWS::Lambda::EventSourceMapping":
            twin = added.get(key(old_resources[logical_id]))
            if twin is not None:
                changes[logical_id] = replace(change, causes=(f"its logical id is now {twin}",), conflict=twin)


def judge(
    changes: Iterable[Change],
    *,
    queue_depths: Mapping[str, int | None] | None = None,
    acknowledgements: Mapping[str, str] | None = None,
) -> list[Verdict]:
    """Each change's verdict. ``queue_depths``: messages in each deployed queue by logical id (None or
    absent: unknown); ``acknowledgements``: a reason by logical id for a deliberate data-losing change."""
    depths = queue_depths or {}
    acknowledged = acknowledgements or {}
    verdicts = []
    for change in changes:
        loses, reason = _assess(change, depths.get(change.logical_id))
        verdicts.append(Verdict(change, loses, reason, acknowledged.get(change.logical_id) if loses else None))
    return verdicts


def _assess(change: Change, depth: int | None) -> tuple[bool, str]:
    kept = ""
    if change.retained:
        kept = " (the old one is kept in the account, outside the stack, by its Retain policy)"
    if change.resource_type not in STATEFUL_TYPES:
        reason = SAFE_REASONS.get(change.resource_type, GENERIC_SAFE)
        if change.conflict:
            reason += (
                f"; but {change.conflict} maps the same queue to the same function, and Lambda refuses a second "
                "mapping of one queue and one function while the first exists: the deploy fails and rolls back "
                "(keep the mapping's logical id)"
            )
        return False, reason
    loss = STATEFUL_TYPES[change.resource_type] + kept
    if change.resource_type == "AWS::SQS::Queue":
        if depth == 0:
            return False, (
                "the deployed queue was empty when checked (0 messages visible, in flight or delayed); stop its "
                "producers until the deploy is done, or what they send to the old URL is lost"
            )
        if depth is None:
            return True, f"it may hold messages (not read from a deployed stack: pass --before-stack): {loss}"
        return True, f"it holds {depth} message(s): {loss}"
    return True, loss


def describe(verdict: Verdict) -> str:
    """The report's line for one verdict (docs/data-loss-gate.md: a contract)."""
    change = verdict.change
    if verdict.acknowledged is not None:
        word = "ACKNOWLEDGED"
    elif verdict.loses_data:
        word = "DATA-LOSS"
    else:
        word = "SAFE"
    where = f", {change.construct_path}" if change.construct_path else ""
    causes = "; ".join(change.causes)
    line = f"{word} {change.action}: {change.logical_id} ({change.resource_type}{where}): {causes}: {verdict.reason}"
    if verdict.acknowledged is not None:
        line += f"; acknowledged: {verdict.acknowledged}"
    return line


def library_versions(before: Mapping[str, Any], after: Mapping[str, Any]) -> tuple[str | None, str | None]:
    """The library version each template records (:mod:`idempotent_order_pipeline.library_version`)."""
    return library_version_of(before), library_version_of(after)
