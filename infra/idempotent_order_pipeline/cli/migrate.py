"""``order-pipeline migrate``: state records written by older releases, brought into today's shape.

Today a ``pending`` record carries ``pending_shard`` (its partition of the pending index, ``"0"`` to
``"31"``, :func:`~order_consumer.contract.pending_index.pending_shard`) and no ``ttl``; a ``sent``
record carries a ``ttl`` and keeps the ``pending_shard`` it was written with (its index entry stays
until TTL deletes it; 0.2.0's sent records have none). What older releases left, by kind (the keys
of the figures):

==========================  =====================================================  ===================================
kind                        written by                                             made current by
==========================  =====================================================  ===================================
``pending_not_indexed``     0.1.0: pending with a ``ttl``, no ``pending_shard``    shard set, ``ttl`` removed
                            (the reconciler and ``pending`` never see it, and it
                            may expire while pending)
``pending_other_shard``     0.2.0: the index had 16 shards, so about half of its   shard set to today's
                            pending records carry another shard than today's
``pending_expiring``        a pending record with a ``ttl`` (none known today)     ``ttl`` removed
``sent_without_ttl``        0.1.0 marking a record after a rollback: ``sent``,     ``ttl`` set
                            no ``ttl`` (never expires)
``sent_still_indexed``      today's sent records, only with                        shard removed, ``ttl`` set if none
                            ``--for-rollback-to 0.2.0``
==========================  =====================================================  ===================================

A pending record put on a shard is given ``created_at`` = now, as the consumer's adoption does: the
reconciler reads each shard behind a checkpoint, and an entry with an older time could be behind it.

``--for-rollback-to 0.2.0`` prepares a rollback: it puts pending records on 0.2.0's 16 shards (its
reconciler and ``pending`` query only those; today's query all 32, so they still find them) and
takes sent records out of the index (0.2.0's index held only pending records, and its reconciler
reads every entry older than its threshold on every run: with today's sent entries left in, each
run would read every record of the retention period, oldest first, and run out of time before it
reached the pending ones). A plain run after upgrading again moves pending records back
(``pending_other_shard``); sent records without a shard are current.

Keys are not rewritten. 0.1.0 derived keys without escaping ``|`` and ``\\``; a record under such a
key stays under it, because its order row names it (``event_id``), subscribers deduplicate on it
and a redelivery under today's key already finds the record through that row
(``docs/upgrading.md``). They are counted (``legacy_key``) when the identity fields are the default.

Every write is one ``UpdateItem`` conditioned on the record being exactly as it was read in what
the update changes (named conditions below), so a consumer, the reconciler or the TTL that changed
or deleted it meanwhile wins: that record is counted ``changed_meanwhile`` and left as they left it
(a rerun looks at it again). Nothing is ever created or deleted. So a run is idempotent (a second
run finds everything ``already_current``), may run beside the consumers, and may stop anywhere:
``--checkpoint FILE`` saves where the scan is after every page (and the figures so far) and a rerun
with the same file goes on from there; ``--start-key`` (printed when a run stops) does the same by
hand. ``--dry-run`` reads and counts, and writes nothing.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import sys
import time
from collections import Counter
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click
from boto3.dynamodb.types import TypeDeserializer
from botocore.exceptions import BotoCoreError, ClientError

from idempotent_order_pipeline._lambda_asset.order_consumer.contract.keys import (
    DEFAULT_IDENTITY_FIELDS,
    IDENTITY_SEPARATOR,
    derive_event_id,
)
from idempotent_order_pipeline._lambda_asset.order_consumer.contract.names import (
    DEFAULT_RECORD_TTL_SECONDS,
    STATUS_PENDING,
    STATUS_SENT,
)
from idempotent_order_pipeline._lambda_asset.order_consumer.contract.pending_index import (
    CHECKPOINT_EVENT_ID,
    PENDING_SHARD_ATTRIBUTE,
    PENDING_SHARDS,
    PENDING_SINCE_ATTRIBUTE,
    SHARDS_OF_RELEASE,
    SPARSE_INDEX_RELEASES,
    pending_shard,
)
from idempotent_order_pipeline.cli.context import Operator, confirmed, operator_of, reported, wants_json
from idempotent_order_pipeline.cli.errors import OperationsError, describe
from idempotent_order_pipeline.cli.output import confirm, echo

if TYPE_CHECKING:
    from mypy_boto3_dynamodb.client import DynamoDBClient

# --- kinds (the figures' keys) ----------------------------------------------------------------------
PENDING_NOT_INDEXED = "pending_not_indexed"
PENDING_OTHER_SHARD = "pending_other_shard"
PENDING_EXPIRING = "pending_expiring"
SENT_STILL_INDEXED = "sent_still_indexed"
SENT_WITHOUT_TTL = "sent_without_ttl"
KINDS = (PENDING_NOT_INDEXED, PENDING_OTHER_SHARD, PENDING_EXPIRING, SENT_STILL_INDEXED, SENT_WITHOUT_TTL)
#: Counted, never changed (see the module docstring).
LEGACY_KEY = "legacy_key"
#: Neither pending nor sent, or without the attributes a record always has: left alone, reported.
UNRECOGNISED = "unrecognised"

# --- updates and their conditions ---------------------------------------------------------------------
# A pending record: in the index under today's shard as created now (never behind the reconciler's
# checkpoint of its shard), no ttl (it must never expire while pending).
INDEX_PENDING = f"SET {PENDING_SHARD_ATTRIBUTE} = :shard, {PENDING_SINCE_ATTRIBUTE} = :now REMOVE #ttl"
# Still pending with the content read (not marked sent, not deleted, not another record)...
STILL_PENDING_AS_READ = "#status = :pending AND payload_sha256 = :sha"
# ...and its shard still as read: absent (0.1.0) or the value read (0.2.0's 16 shards).
SHARD_ABSENT_AS_READ = f"attribute_not_exists({PENDING_SHARD_ATTRIBUTE})"
SHARD_AS_READ = f"{PENDING_SHARD_ATTRIBUTE} = :read_shard"
# A sent record without an expiry: one from now (later than its true sent time, never earlier), as
# the reconciler gives one (``store.EXPIRE_SENT``).
EXPIRE_SENT = "SET #ttl = if_not_exists(#ttl, :ttl)"
# Before a rollback to a release whose index held only pending records: a sent record out of the
# index, and an expiry if it has none.
RELEASE_SENT = f"SET #ttl = if_not_exists(#ttl, :ttl) REMOVE {PENDING_SHARD_ATTRIBUTE}"
# Still sent (a sent record never goes back to pending; this also fails once the TTL deleted it,
# so the update never creates a stub record).
STILL_SENT = "#status = :sent"

#: The attributes the scan reads (never the order's content).
SCANNED_ATTRIBUTES = (
    "event_id",
    "status",
    "order_id",
    "payload_sha256",
    PENDING_SHARD_ATTRIBUTE,
    PENDING_SINCE_ATTRIBUTE,
    "ttl",
)
#: Items per scan page: the checkpoint's granularity.
DEFAULT_PAGE_SIZE = 100
# The code of a conditional write whose condition failed.
_CONDITION_FAILED = "ConditionalCheckFailedException"
#: The checkpoint file's format.
CHECKPOINT_VERSION = 1

_deserializer = TypeDeserializer()


@dataclass(frozen=True)
class Change:
    """What one record needs: its kind and the conditioned ``UpdateItem`` that makes it current."""

    kind: str
    update: str
    condition: str
    values: dict[str, Any]


def _plain(item: Mapping[str, Any], name: str) -> Any:
    value = item.get(name)
    return None if value is None else _deserializer.deserialize(value)


def classify(
    item: Mapping[str, Any],
    *,
    now: float,
    shards: int = PENDING_SHARDS,
    record_ttl_seconds: int = DEFAULT_RECORD_TTL_SECONDS,
    sent_leave_index: bool = False,
) -> Change | str | None:
    """What a scanned record needs: a :class:`Change`, :data:`UNRECOGNISED`, or None (already current).

    ``shards``: the pending index's shards to put a pending record on (another release's for a rollback);
    ``record_ttl_seconds``: how long a sent record without a ``ttl`` is kept from now (the pipeline's
    ``record_retention``, as its consumer has it); ``sent_leave_index``: take sent records out of the
    index (before a rollback to a release in ``SPARSE_INDEX_RELEASES``).
    """
    event_id, status, sha = _plain(item, "event_id"), _plain(item, "status"), _plain(item, "payload_sha256")
    shard, has_ttl = _plain(item, PENDING_SHARD_ATTRIBUTE), "ttl" in item
    if event_id == CHECKPOINT_EVENT_ID:
        return None  # the reconciler's checkpoints: not a record, nothing to migrate
    if not isinstance(event_id, str) or not isinstance(sha, str):
        return UNRECOGNISED
    if status == STATUS_PENDING:
        if PENDING_SINCE_ATTRIBUTE not in item:
            return UNRECOGNISED  # the index's sort key: no release wrote a record without it
        today = pending_shard(event_id, shards)
        if shard == today and not has_ttl:
            return None
        kind = PENDING_NOT_INDEXED if shard is None else PENDING_OTHER_SHARD if shard != today else PENDING_EXPIRING
        values = {
            ":pending": {"S": STATUS_PENDING},
            ":sha": {"S": sha},
            ":shard": {"S": today},
            ":now": {"N": str(int(now))},
        }
        shard_condition = SHARD_ABSENT_AS_READ
        if shard is not None:
            shard_condition = SHARD_AS_READ
            values[":read_shard"] = {"S": str(shard)}
        return Change(kind, INDEX_PENDING, f"{STILL_PENDING_AS_READ} AND {shard_condition}", values)
    if status == STATUS_SENT:
        values = {":sent": {"S": STATUS_SENT.value}, ":ttl": {"N": str(int(now) + record_ttl_seconds)}}
        if sent_leave_index and shard is not None:
            return Change(SENT_STILL_INDEXED, RELEASE_SENT, STILL_SENT, values)
        if not has_ttl:
            return Change(SENT_WITHOUT_TTL, EXPIRE_SENT, STILL_SENT, values)
        return None
    return UNRECOGNISED


def has_legacy_key(item: Mapping[str, Any], identity_fields: tuple[str, ...]) -> bool:
    """Whether the record's key is 0.1.0's unescaped derivation of its order id, not today's."""
    order_id, event_id = _plain(item, "order_id"), _plain(item, "event_id")
    if identity_fields != DEFAULT_IDENTITY_FIELDS or not isinstance(order_id, str):
        return False
    if IDENTITY_SEPARATOR not in order_id and "\\" not in order_id:
        return False  # escaping changes nothing: both derivations agree
    unescaped = hashlib.sha256(order_id.encode("utf-8")).hexdigest()
    return bool(event_id == unescaped and event_id != derive_event_id({"order_id": order_id}))


@dataclass
class Figures:
    """What a run found and did (cumulative over a resumed run)."""

    scanned: int = 0
    already_current: int = 0
    #: Records changed (with ``--dry-run``: that would be changed), by kind.
    changed: Counter[str] = field(default_factory=Counter)
    #: Records whose condition failed: changed or deleted meanwhile by someone else, left as they are.
    changed_meanwhile: int = 0
    unrecognised: int = 0
    notes: Counter[str] = field(default_factory=Counter)
    seconds: float = 0.0

    def as_dict(self) -> dict[str, Any]:
        return {
            "scanned": self.scanned,
            "changed": sum(self.changed.values()),
            "already_current": self.already_current,
            "changed_meanwhile": self.changed_meanwhile,
            "unrecognised": self.unrecognised,
            "by_kind": {kind: self.changed.get(kind, 0) for kind in KINDS},
            LEGACY_KEY: self.notes.get(LEGACY_KEY, 0),
            "seconds": round(self.seconds, 3),
            "records_per_second": round(self.scanned / self.seconds, 1) if self.seconds > 0 else None,
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Figures:
        return cls(
            scanned=int(data["scanned"]),
            already_current=int(data["already_current"]),
            changed=Counter({k: int(v) for k, v in data["by_kind"].items() if v}),
            changed_meanwhile=int(data["changed_meanwhile"]),
            unrecognised=int(data["unrecognised"]),
            notes=Counter({LEGACY_KEY: int(data.get(LEGACY_KEY, 0))}),
            seconds=float(data.get("seconds", 0.0)),
        )


class MigrationStopped(OperationsError):
    """The run stopped before the end of the table (an AWS error); ``start_key`` resumes it."""

    def __init__(self, message: str, start_key: str | None) -> None:
        super().__init__(message)
        self.start_key = start_key


@dataclass
class Checkpoint:
    """Where a run is (the last event id of the last page done) and its figures, kept in a file after every page."""

    path: Path
    table: str

    def load(self) -> tuple[str | None, Figures] | None:
        """The saved position and figures; None when there is no checkpoint (a fresh run)."""
        if not self.path.exists():
            return None
        data = json.loads(self.path.read_text())
        if data.get("version") != CHECKPOINT_VERSION or data.get("table") != self.table:
            raise OperationsError(
                f"checkpoint {self.path} is not a migrate checkpoint of table {self.table!r}: remove it to start over"
            )
        return data["start_key"], Figures.from_dict(data["figures"])

    def save(self, start_key: str | None, figures: Figures) -> None:
        """Atomically: a crash leaves the previous checkpoint or this one, never half of one."""
        partial = self.path.with_name(self.path.name + ".partial")
        content = {"version": CHECKPOINT_VERSION, "table": self.table, "start_key": start_key}
        partial.write_text(json.dumps({**content, "figures": figures.as_dict()}))
        os.replace(partial, self.path)

    def finish(self) -> None:
        self.path.unlink(missing_ok=True)


def _pages(
    dynamodb: DynamoDBClient, table: str, *, start_key: str | None, page_size: int
) -> Iterator[tuple[list[dict[str, Any]], str | None]]:
    """(items, the key to resume after them, None at the end) for each page of a consistent scan."""
    names = {f"#a{i}": name for i, name in enumerate(SCANNED_ATTRIBUTES)}
    request: dict[str, Any] = {
        "TableName": table,
        "Limit": page_size,
        "ConsistentRead": True,
        "ProjectionExpression": ", ".join(names),
        "ExpressionAttributeNames": names,
    }
    next_key = start_key
    while True:
        if next_key is not None:
            request["ExclusiveStartKey"] = {"event_id": {"S": next_key}}
        response = dynamodb.scan(**request)
        last = response.get("LastEvaluatedKey")
        next_key = None if last is None else str(_plain(last, "event_id"))
        yield list(response.get("Items", [])), next_key
        if next_key is None:
            return


def _apply(dynamodb: DynamoDBClient, table: str, event_id: str, change: Change) -> bool:
    """Make one record current; False when its condition failed (someone else changed it first)."""
    try:
        dynamodb.update_item(
            TableName=table,
            Key={"event_id": {"S": event_id}},
            UpdateExpression=change.update,
            ConditionExpression=change.condition,
            ExpressionAttributeNames={"#status": "status", "#ttl": "ttl"},
            ExpressionAttributeValues=change.values,
        )
    except ClientError as exc:
        if exc.response.get("Error", {}).get("Code") == _CONDITION_FAILED:
            return False
        raise
    return True


def migrate_records(
    dynamodb: DynamoDBClient,
    table: str,
    *,
    dry_run: bool = False,
    start_key: str | None = None,
    page_size: int = DEFAULT_PAGE_SIZE,
    identity_fields: tuple[str, ...] = DEFAULT_IDENTITY_FIELDS,
    checkpoint: Checkpoint | None = None,
    figures: Figures | None = None,
    shards: int = PENDING_SHARDS,
    record_ttl_seconds: int = DEFAULT_RECORD_TTL_SECONDS,
    sent_leave_index: bool = False,
    on_page: Callable[[int], None] | None = None,
    clock: Callable[[], float] = time.time,
) -> Figures:
    """Scan ``table`` from ``start_key`` and make every record current (see the module docstring).

    ``figures`` continues a resumed run's; the checkpoint, if any, is saved after every page (never
    on a dry run) and removed at the end. ``on_page`` gets the records scanned in each page.

    Raises:
        MigrationStopped: an AWS call failed; nothing after the saved position is known to be done.
    """
    figures = figures or Figures()
    started = time.monotonic()
    position = start_key
    try:
        for items, next_key in _pages(dynamodb, table, start_key=start_key, page_size=page_size):
            now = clock()
            for item in items:
                figures.scanned += 1
                if has_legacy_key(item, identity_fields):
                    figures.notes[LEGACY_KEY] += 1
                change = classify(
                    item,
                    now=now,
                    shards=shards,
                    record_ttl_seconds=record_ttl_seconds,
                    sent_leave_index=sent_leave_index,
                )
                if change is None:
                    figures.already_current += 1
                elif isinstance(change, str):
                    figures.unrecognised += 1
                elif dry_run or _apply(dynamodb, table, str(_plain(item, "event_id")), change):
                    figures.changed[change.kind] += 1
                else:
                    figures.changed_meanwhile += 1
            position = next_key
            if checkpoint is not None and not dry_run:
                figures.seconds += time.monotonic() - started
                started = time.monotonic()
                checkpoint.save(position, figures)
            if on_page is not None:
                on_page(len(items))
    except (ClientError, BotoCoreError) as exc:
        figures.seconds += time.monotonic() - started
        raise MigrationStopped(f"migrate stopped: {describe(exc)}", position) from exc
    figures.seconds += time.monotonic() - started
    if checkpoint is not None and not dry_run:
        checkpoint.finish()
    return figures


def stdout_is_terminal() -> bool:
    """Whether progress is shown: stdout is a terminal (never in a pipe, a file or a script)."""
    return sys.stdout.isatty()


def _summary_line(figures: Figures, table: str, *, dry_run: bool) -> str:
    counts = figures.as_dict()
    kinds = ", ".join(f"{n} {kind}" for kind, n in counts["by_kind"].items() if n)
    verb = "would change" if dry_run else "changed"
    line = (
        f"migrate{' (dry run)' if dry_run else ''} {table}: scanned {figures.scanned}, {verb} {counts['changed']}"
        + (f" [{kinds}]" if kinds else "")
        + f", already current {figures.already_current}"
    )
    if figures.changed_meanwhile:
        line += f", {figures.changed_meanwhile} changed meanwhile by a consumer (left as they are; rerun to check)"
    if figures.unrecognised:
        line += f", {figures.unrecognised} unrecognised (left alone)"
    if counts[LEGACY_KEY]:
        line += f"; {counts[LEGACY_KEY]} under 0.1.0's unescaped key (kept, see docs/upgrading.md)"
    if counts["records_per_second"] is not None:
        line += f"; {figures.seconds:.1f} s, {counts['records_per_second']:g} records/s"
    return line


@click.command()
@click.option("--start-key", metavar="EVENT_ID", help="Resume the scan after this event id (printed when a run stops).")
@click.option(
    "--checkpoint",
    type=click.Path(dir_okay=False, path_type=Path),
    help="Save the scan's position after every page here; a rerun with the same file resumes (removed at the end).",
)
@click.option("--page-size", type=click.IntRange(1, 1000), default=DEFAULT_PAGE_SIZE, show_default=True)
@click.option(
    "--for-rollback-to",
    "rollback_to",
    type=click.Choice(sorted(SHARDS_OF_RELEASE)),
    help=(
        "Prepare a rollback to this older release: pending records on the shards it reads, sent records out of "
        "the index its reconciler reads whole (see docs/upgrading.md)."
    ),
)
@click.option("--dry-run", is_flag=True, help="Count what would change; write nothing (needs no --yes).")
@click.option("--yes", "-y", is_flag=True, help="Do not ask (needed without a terminal).")
@click.option("--json", "as_json", is_flag=True, help="The figures as one JSON object on stdout.")
@click.pass_context
def migrate(
    ctx: click.Context,
    start_key: str | None,
    checkpoint: Path | None,
    page_size: int,
    rollback_to: str | None,
    dry_run: bool,
    yes: bool,
    as_json: bool,
) -> None:
    """Bring state records written by older releases (0.1.0, 0.2.0) into today's shape.

    Pending records get into the pending index (so the reconciler and `pending` find them) and
    lose any ttl; sent records get a ttl if they have none (with --for-rollback-to 0.2.0 they also
    leave the index). Every write is conditioned on the
    record being as read, so it may run beside the consumers; idempotent and resumable
    (--checkpoint, --start-key). Prints the figures at the end (--json: one object).
    """
    go_ahead = confirmed(yes=yes, dry_run=dry_run, command="migrate")
    reported(_migrate)(
        operator_of(ctx),
        start_key=start_key,
        checkpoint=checkpoint,
        page_size=page_size,
        shards=SHARDS_OF_RELEASE[rollback_to] if rollback_to else PENDING_SHARDS,
        sent_leave_index=rollback_to in SPARSE_INDEX_RELEASES,
        dry_run=dry_run,
        ask=not go_ahead,
        as_json=wants_json(ctx, as_json),
    )


def _migrate(
    operator: Operator,
    *,
    start_key: str | None,
    checkpoint: Path | None,
    page_size: int,
    shards: int,
    sent_leave_index: bool,
    dry_run: bool,
    ask: bool,
    as_json: bool,
) -> None:
    table = operator.resources.processed_events_table
    dynamodb = operator.clients.dynamodb
    if ask:
        confirm(f"Bring the records of {table} into today's shape (conditioned updates)?")
    saved = Checkpoint(checkpoint, table) if checkpoint is not None else None
    record_ttl_seconds, source = operator.resources.record_ttl_seconds()
    echo(f"sent records without a ttl get one {record_ttl_seconds} s from now ({source})", err=True)
    figures = Figures()
    resumed = saved.load() if saved is not None else None
    if resumed is not None:
        if start_key is not None:
            raise OperationsError("give --start-key or a --checkpoint that exists, not both")
        start_key, figures = resumed
        echo(f"resuming from checkpoint {checkpoint} after {figures.scanned} record(s)", err=True)
    try:
        with contextlib.ExitStack() as stack:
            on_page = None
            if stdout_is_terminal() and not as_json:
                total = dynamodb.describe_table(TableName=table)["Table"].get("ItemCount", 0)
                bar = stack.enter_context(click.progressbar(length=max(total, 1), label="migrating", file=sys.stdout))
                on_page = bar.update
            figures = migrate_records(
                dynamodb,
                table,
                dry_run=dry_run,
                start_key=start_key,
                page_size=page_size,
                identity_fields=operator.identity_fields()[0],
                checkpoint=saved,
                figures=figures,
                on_page=on_page,
                shards=shards,
                record_ttl_seconds=record_ttl_seconds,
                sent_leave_index=sent_leave_index,
            )
    except MigrationStopped as exc:
        resume = f"with --checkpoint {checkpoint}" if checkpoint else f"with --start-key {exc.start_key}"
        if exc.start_key is None and not checkpoint:
            resume = "from the start"
        raise OperationsError(f"{exc}; rerun {resume} (every change is conditioned: nothing is done twice)") from exc
    if as_json:
        echo(json.dumps({"table": table, "dry_run": dry_run, **figures.as_dict()}, sort_keys=True))
    echo(_summary_line(figures, table, dry_run=dry_run), err=as_json)
