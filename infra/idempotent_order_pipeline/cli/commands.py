"""The click commands: parse options, call the operations, print results.

Exit codes: 0 done; 1 failed or incomplete (an AWS error, a missing stack or output, orders not
sent, messages not moved, records not resent, a question answered no); 2 usage error (a
destructive command without a terminal to ask and without ``--yes``); 3 ``inspect`` found nothing.
Results go to stdout (``--json``, before or after the command: one JSON object per line, numbers
exact), progress and problems to stderr, every line through :mod:`.output` (escaped).

Commands that delete or send in bulk (``dlq drop``, ``redrive``, ``pending --resend``) ask first on
a terminal, take ``--yes`` instead, and refuse to run unasked without a terminal; ``--dry-run``
shows what they would do and changes nothing.
"""

from __future__ import annotations

import sys
import time
import uuid
from collections import Counter
from collections.abc import Iterable, Mapping
from typing import IO, TYPE_CHECKING, Any

import click
from botocore.exceptions import BotoCoreError, ClientError

from idempotent_order_pipeline import __version__
from idempotent_order_pipeline._lambda_asset.order_consumer.contract.batching import MAX_BATCH_ENTRIES
from idempotent_order_pipeline._lambda_asset.order_consumer.contract.message import parse_body
from idempotent_order_pipeline._lambda_asset.order_consumer.contract.names import STATUS_ATTRIBUTE, Status
from idempotent_order_pipeline._lambda_asset.order_consumer.contract.sns_ids import RESEND_DELIVERY
from idempotent_order_pipeline.cli.aws import (
    DEFAULT_STACK,
    STACK_ENVIRONMENT_VARIABLE,
    AwsClients,
    PipelineResources,
    Stack,
    approximate_depth,
    maximum_message_size,
    queue_arn,
)
from idempotent_order_pipeline.cli.context import (
    JSON_HELP,
    Operator,
    confirmed,
    destructive,
    operator_of,
    reported,
    seconds_option,
    wants_json,
)
from idempotent_order_pipeline.cli.dead_letters import (
    DEFAULT_PEEK_LIMIT,
    DEFAULT_WAIT_SECONDS,
    MAX_RECEIVES,
    DeadLetter,
    RedriveReport,
    Selection,
    drop,
    move_task_size_problem,
    other_source_queues,
    peek,
    redrive_loop,
    start_move_task,
    wait_for_move_task,
)
from idempotent_order_pipeline.cli.errors import (
    CannotResendError,
    MoveTaskUnsupportedError,
    OperationsError,
    describe,
    endpoint_message,
)
from idempotent_order_pipeline.cli.migrate import migrate
from idempotent_order_pipeline.cli.output import Failure, confirm, echo, summarise
from idempotent_order_pipeline.cli.records import (
    DEFAULT_PENDING_AGE,
    find_pending,
    get,
    inspect_records,
    order_from_row,
    pending_summary,
)
from idempotent_order_pipeline.cli.render import age, short, timestamp, to_json
from idempotent_order_pipeline.cli.sandbox import sandbox
from idempotent_order_pipeline.cli.smoke import smoke
from idempotent_order_pipeline.cli.upgrade_check import upgrade_check
from idempotent_order_pipeline.discovery import METADATA_KEY, ROLES
from idempotent_order_pipeline.errors import (
    InvalidMessageError,
    InvalidTextError,
    MessageTooLargeError,
    PermanentError,
)
from idempotent_order_pipeline.keys import parse_identity_fields
from idempotent_order_pipeline.producer import OrderPublisher, PreparedOrder

if TYPE_CHECKING:
    from mypy_boto3_sqs.client import SQSClient

EXIT_NOT_FOUND = 3
#: Default of ``redrive --timeout``: how long to watch a message move task.
DEFAULT_MOVE_TASK_TIMEOUT = "15m"


@click.group(context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 110})
@click.version_option(__version__, "--version", prog_name="order-pipeline", message="%(prog)s %(version)s")
@click.option(
    "--stack",
    envvar=STACK_ENVIRONMENT_VARIABLE,
    default=DEFAULT_STACK,
    show_default=True,
    help=f"The pipeline's CloudFormation stack (or ${STACK_ENVIRONMENT_VARIABLE}).",
)
@click.option(
    "--pipeline",
    metavar="PATH",
    help="The pipeline in the stack, by construct path or id, when the stack holds several (see `pipelines`).",
)
@click.option("--queue-url", help="Use this queue instead of the discovered one.")
@click.option("--dead-letter-queue-url", help="Use this dead-letter queue instead of the discovered one.")
@click.option("--processed-events-table", help="Use this idempotency table instead of the discovered one.")
@click.option("--order-records-table", help="Use this order table instead of the discovered one.")
@click.option("--topic-arn", help="Use this topic instead of the discovered one.")
@click.option("--endpoint-url", help="AWS endpoint, e.g. the sandbox's http://localhost:PORT (or $AWS_ENDPOINT_URL).")
@click.option("--region", help="AWS region (default: the environment's).")
@click.option("--profile", help="AWS profile (default: the environment's).")
@click.option(
    "--identity-fields",
    help="Comma-separated fields hashed into the key of an order without event_id "
    "(default: the consumer function's IDENTITY_FIELDS, else order_id).",
)
@click.option("--json", "as_json", is_flag=True, help="Every command's results as JSON lines on stdout.")
@click.pass_context
def cli(
    ctx: click.Context,
    stack: str,
    pipeline: str | None,
    queue_url: str | None,
    dead_letter_queue_url: str | None,
    processed_events_table: str | None,
    order_records_table: str | None,
    topic_arn: str | None,
    endpoint_url: str | None,
    region: str | None,
    profile: str | None,
    identity_fields: str | None,
    as_json: bool,
) -> None:
    """Operate an idempotent order pipeline: send orders, follow one, empty the DLQ safely.

    The pipeline's queues and tables are found in the stack itself (its template's resource
    metadata), so --stack is enough when it holds one pipeline; --pipeline picks one of several,
    and the resource options override what was found.
    """
    # Tests (and embedding programs) may hand in their clients as the context object.
    clients = (
        ctx.obj
        if isinstance(ctx.obj, AwsClients)
        else AwsClients(endpoint_url=endpoint_url, region=region, profile=profile)
    )
    try:
        explicit = parse_identity_fields(identity_fields) if identity_fields else None
    except ValueError as exc:
        raise click.BadParameter(str(exc), param_hint="--identity-fields") from exc
    the_stack = Stack(stack, clients)
    explicit_resources = {
        "queue": queue_url,
        "dead_letter_queue": dead_letter_queue_url,
        "processed_events_table": processed_events_table,
        "order_records_table": order_records_table,
        "topic": topic_arn,
    }
    ctx.obj = Operator(
        stack=the_stack,
        clients=clients,
        resources=PipelineResources(the_stack, selector=pipeline, explicit=explicit_resources),
        explicit_identity_fields=explicit,
        as_json=as_json,
    )


# --- send --------------------------------------------------------------------------------------------


def _order_line(publisher: OrderPublisher, raw: bytes) -> PreparedOrder:
    """One input line as a prepared order; PermanentError when it is not one the consumer accepts."""
    try:
        line = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise InvalidTextError(f"the line is not valid UTF-8 (byte {exc.start})") from exc
    return publisher.prepare(parse_body(line))


@cli.command()
@click.argument("source", type=click.File("rb"), metavar="FILE|-")
@click.option(
    "--on-invalid",
    type=click.Choice(["fail", "skip"]),
    default="fail",
    show_default=True,
    help="fail: send nothing when a line is invalid; skip: send the valid lines, report the others.",
)
@click.option("--json", "as_json", is_flag=True, help="One JSON result per input line on stdout.")
@click.pass_context
@reported
def send(ctx: click.Context, source: IO[bytes], on_invalid: str, as_json: bool) -> None:
    """Send orders, one JSON object per line, to the pipeline's queue.

    Each order carries its idempotency key (its own event_id, else one derived from the identity
    fields) in the body and as the idempotency_key attribute, so sending a file twice records
    every order once. Every line is checked against the consumer's contract first; with
    --on-invalid skip the valid lines are sent and each invalid one is listed with its number.
    """
    as_json = wants_json(ctx, as_json)
    operator = operator_of(ctx)
    publisher = operator.publisher()
    fields, fields_source = operator.identity_fields()
    lines = [(number, line) for number, line in enumerate(source, start=1) if line.strip()]
    prepared: list[tuple[int, PreparedOrder]] = []
    invalid: list[tuple[int, str]] = []
    for number, line in lines:
        try:
            prepared.append((number, _order_line(publisher, line)))
        except PermanentError as exc:
            invalid.append((number, f"{exc.error_code}: {exc}"))
        except Exception as exc:
            invalid.append((number, f"{InvalidMessageError.error_code}: {type(exc).__name__}: {exc}"[:1000]))
    for number, reason in invalid:
        echo(f"line {number}: invalid: {reason}", err=True)
        if as_json:
            echo(to_json({"line": number, "sent": False, "error": reason}))
    summarise("invalid", (reason for _, reason in invalid))
    if invalid and on_invalid == "fail":
        raise Failure(
            f"{len(invalid)} invalid line(s) of {len(lines)}; nothing sent (--on-invalid skip sends the valid ones)"
        )

    not_sent: list[str] = []
    with click.progressbar(length=len(prepared), label="sending", file=sys.stderr) as bar:
        for start in range(0, len(prepared), MAX_BATCH_ENTRIES):
            chunk = prepared[start : start + MAX_BATCH_ENTRIES]
            results = publisher.send_prepared([order for _, order in chunk])
            for (number, order), result in zip(chunk, results, strict=True):
                if not result.ok:
                    not_sent.append(endpoint_message(result.error or "no answer"))
                    echo(f"line {number}: order {order.order_id}: not sent: {not_sent[-1]}", err=True)
                if as_json:
                    echo(
                        to_json(
                            {
                                "line": number,
                                "sent": result.ok,
                                "order_id": order.order_id,
                                "event_id": order.event_id,
                                "message_id": result.message_id,
                                "error": None if result.ok else not_sent[-1],
                            }
                        )
                    )
            bar.update(len(chunk))
    summarise("not sent", not_sent)
    echo(
        f"sent {len(prepared) - len(not_sent)} of {len(lines)} order(s) to {publisher.queue_url} "
        f"({len(invalid)} invalid, {len(not_sent)} failed; identity fields {','.join(fields)} from {fields_source})",
        err=as_json,
    )
    if not_sent:
        raise Failure(f"{len(not_sent)} order(s) not sent; sending the same lines again is safe")


# --- inspect ---------------------------------------------------------------------------------------


@cli.command()
@click.argument("event_id", required=False)
@click.option("--order", "order_id", help="Look up by order id instead of event id.")
@click.option("--json", "as_json", is_flag=True, help="One JSON object (the same as the global --json).")
@click.pass_context
@reported
def inspect(ctx: click.Context, event_id: str | None, order_id: str | None, as_json: bool) -> None:
    """What happened to an event (or an order): state record, order row, whether notified.

    Exits with 3 when neither table knows it.
    """
    if (event_id is None) == (order_id is None):
        raise click.UsageError("give an EVENT_ID or --order ORDER_ID (one of them)")
    as_json = wants_json(ctx, as_json)
    operator = operator_of(ctx)
    result = inspect_records(
        operator.clients.dynamodb,
        operator.resources.processed_events_table,
        operator.resources.order_records_table,
        event_id=event_id,
        order_id=order_id,
    )
    if as_json:
        echo(to_json(result.as_dict()))
    else:
        notified = {True: "yes (status sent)", False: "no (status pending)", None: "unknown (no state record)"}
        echo(f"event_id   {result.event_id or event_id or '-'}")
        echo(f"order_id   {result.order_id or order_id or '-'}")
        echo(f"notified   {notified[result.notified]}")
        if result.state is not None:
            state = result.state
            echo(
                f"state      {state.get('status')}: created {timestamp(state.get('created_at'))}, "
                f"sent {timestamp(state.get('sent_at')) or '-'}, expires {_expiry(state)}"
            )
        else:
            echo("state      -")
        if result.order_row is not None:
            echo("order row")
            for name in sorted(result.order_row):
                echo(f"  {name}: {to_json(result.order_row[name])}")
        else:
            echo("order row  -")
        for finding in result.findings:
            echo(f"note: {finding}")
    if not result.found:
        ctx.exit(EXIT_NOT_FOUND)


# --- the dead-letter queue -------------------------------------------------------------------------


@cli.group()
def dlq() -> None:
    """The dead-letter queue: parked and repeatedly failing messages."""


_TABLE_HEADER = f"{'ERROR_CODE':<22}{'ORDER_ID':<20}{'EVENT_ID':<18}{'SENT':<22}{'RECV':<6}ERROR_MESSAGE"


def _table_row(letter: DeadLetter) -> str:
    return (
        f"{letter.error_code:<22}{short(letter.order_id, 18):<20}{short(letter.event_id, 16):<18}"
        f"{letter.sent_at or '-':<22}{letter.receive_count:<6}{short(letter.error_message, 80)}"
    )


def _held_back_note(held_back: int) -> str:
    """Why a FIFO sweep stopped short (empty when it did not)."""
    if not held_back:
        return ""
    return (
        f"; ~{held_back} more not reached: a FIFO queue hands out no more of a message group while its first "
        "messages are in flight, and these wait behind messages not deleted (redrive or drop those first)"
    )


@dlq.command("list")
@click.option("--max-messages", type=click.IntRange(min=1), default=DEFAULT_PEEK_LIMIT, show_default=True)
@click.option(
    "--error-code",
    "error_codes",
    multiple=True,
    help=f"Only this code (repeatable); {MAX_RECEIVES} = moved by the queue after maxReceiveCount.",
)
@click.option("--event-id", help="Only the messages of this event.")
@click.option("--order-id", help="Only the messages of this order.")
@click.option("--body", "with_body", is_flag=True, help="Include body and attributes (with --json).")
@click.option("--json", "as_json", is_flag=True, help=JSON_HELP)
@click.option("--wait-seconds", type=click.IntRange(0, 20), default=DEFAULT_WAIT_SECONDS, show_default=True)
@click.pass_context
@reported
def dlq_list(
    ctx: click.Context,
    max_messages: int,
    error_codes: tuple[str, ...],
    event_id: str | None,
    order_id: str | None,
    with_body: bool,
    as_json: bool,
    wait_seconds: int,
) -> None:
    """List DLQ messages with their error_code, leaving them in the queue."""
    as_json = wants_json(ctx, as_json)
    operator = operator_of(ctx)
    url = operator.resources.dead_letter_queue_url
    reading = peek(
        operator.clients.sqs,
        url,
        max_messages=max_messages,
        wait_seconds=wait_seconds,
        identity_fields=operator.identity_fields()[0],
    )
    letters = reading.letters
    selection = Selection.of(error_codes, event_id, order_id)
    shown = [letter for letter in letters if selection.matches(letter)]
    if as_json:
        for letter in shown:
            echo(to_json(letter.summary(with_body=with_body)))
    else:
        echo(_TABLE_HEADER)
        for letter in shown:
            echo(_table_row(letter))
    counts = ", ".join(f"{n} {code}" for code, n in sorted(Counter(x.error_code for x in shown).items()))
    depth = approximate_depth(operator.clients.sqs, url)
    echo(
        f"{len(shown)} shown of {len(letters)} read (~{depth} in the queue): {counts or 'none'}; all left in the queue"
        + _held_back_note(reading.held_back),
        err=True,
    )


@dlq.command("drop")
@click.option(
    "--error-code",
    "error_codes",
    multiple=True,
    help=f"Drop messages with this code (repeatable; {MAX_RECEIVES}: moved by the queue).",
)
@click.option("--event-id", help="Drop the messages of this event.")
@click.option("--order-id", help="Drop the messages of this order.")
@click.option("--all", "everything", is_flag=True, help="Drop every message (instead of selecting).")
@destructive
@click.option("--json", "as_json", is_flag=True, help="Each dropped message as JSON, body included (a record).")
@click.option("--wait-seconds", type=click.IntRange(0, 20), default=DEFAULT_WAIT_SECONDS, show_default=True)
@click.pass_context
@reported
def dlq_drop(
    ctx: click.Context,
    error_codes: tuple[str, ...],
    event_id: str | None,
    order_id: str | None,
    everything: bool,
    yes: bool,
    dry_run: bool,
    as_json: bool,
    wait_seconds: int,
) -> None:
    """Delete selected DLQ messages for good, printing each as it goes (--json: with its body, as a record).

    For messages that will never be processed: invalid or conflicting orders that were corrected
    and sent again. Everything not selected stays in the queue.
    """
    selection = Selection.of(error_codes, event_id, order_id)
    if selection.everything != everything:
        raise click.UsageError("select what to drop (--error-code, --event-id, --order-id) or pass --all, not both")
    go_ahead = confirmed(yes=yes, dry_run=dry_run, command="dlq drop")
    as_json = wants_json(ctx, as_json)
    operator = operator_of(ctx)
    url = operator.resources.dead_letter_queue_url
    if not go_ahead:
        confirm(f"Delete {'EVERY message' if everything else 'the selected messages'} from {url} for good?")
    dropped = drop(
        operator.clients.sqs,
        url,
        selection,
        dry_run=dry_run,
        wait_seconds=wait_seconds,
        identity_fields=operator.identity_fields()[0],
    )
    if not as_json:
        echo(_TABLE_HEADER)
    for letter in dropped.deleted:
        echo(to_json(letter.summary(with_body=True)) if as_json else _table_row(letter))
    verb = "would drop" if dry_run else "dropped"
    echo(
        f"{verb} {len(dropped.deleted)} message(s) from the DLQ"
        + (" (dry run: nothing deleted)" if dry_run else "")
        + _held_back_note(dropped.held_back),
        err=True,
    )
    problems = []
    if dropped.left:
        problems.append(f"{len(dropped.left)} selected message(s) could not be deleted and are still in the DLQ")
    if dropped.held_back and not dry_run:
        problems.append(f"~{dropped.held_back} message(s) not reached (FIFO groups held back; see above)")
    if problems:
        raise Failure("; ".join(problems))


@cli.command()
@click.option(
    "--method",
    type=click.Choice(["auto", "move-task", "loop"]),
    default="auto",
    show_default=True,
    help=(
        "move-task: SQS StartMessageMoveTask; loop: receive-send-delete from here; auto: move-task if available "
        "and every DLQ message fits the queue (its MaximumMessageSize), else the loop."
    ),
)
@click.option(
    "--error-code",
    "error_codes",
    multiple=True,
    help=f"Only messages with this code (repeatable; {MAX_RECEIVES}: moved by the queue). Uses the loop.",
)
@click.option("--event-id", help="Only the messages of this event. Uses the loop.")
@click.option("--order-id", help="Only the messages of this order. Uses the loop.")
@click.option("--max-messages", type=click.IntRange(min=1), help="Move at most this many. Uses the loop.")
@click.option("--rate", type=click.IntRange(1, 500), help="Messages per second (move task only).")
@click.option("--wait/--no-wait", default=True, show_default=True, help="Wait until a move task ends.")
@click.option(
    "--timeout", default=DEFAULT_MOVE_TASK_TIMEOUT, show_default=True, callback=seconds_option, help="Wait at most."
)
@click.option("--wait-seconds", type=click.IntRange(0, 20), default=DEFAULT_WAIT_SECONDS, show_default=True)
@destructive
@click.option("--json", "as_json", is_flag=True, help="The outcome as one JSON object on stdout.")
@click.pass_context
@reported
def redrive(
    ctx: click.Context,
    method: str,
    error_codes: tuple[str, ...],
    event_id: str | None,
    order_id: str | None,
    max_messages: int | None,
    rate: int | None,
    wait: bool,
    timeout: int,
    wait_seconds: int,
    yes: bool,
    dry_run: bool,
    as_json: bool,
) -> None:
    """Move DLQ messages back to the pipeline's queue; each leaves the DLQ only once it was sent.

    Safe to run at any time: the consumer skips an order already recorded, publishes and marks
    one left 'pending', and parks a message that fails again. The loop returns messages as the
    producer sent them (reason attributes removed) and parks one too large for the queue again as
    MESSAGE_TOO_LARGE; a move task moves them as they are, so it runs only when the DLQ's
    MaximumMessageSize is at most the queue's. Messages
    another queue's redrive policy moved to the DLQ stay there (listed); while another queue names
    the DLQ as its dead-letter queue, the loop runs instead of a move task.
    """
    selection = Selection.of(error_codes, event_id, order_id)
    if not selection.everything or max_messages is not None:
        if method == "move-task":
            raise click.UsageError("selecting messages or --max-messages needs the loop (a move task moves everything)")
        method = "loop"
    go_ahead = confirmed(yes=yes, dry_run=dry_run, command="redrive")
    as_json = wants_json(ctx, as_json)
    operator = operator_of(ctx)
    sqs = operator.clients.sqs
    dlq_url = operator.resources.dead_letter_queue_url
    queue_url = operator.resources.queue_url
    if dry_run:
        _redrive_dry_run(operator, selection, max_messages, wait_seconds, method=method, as_json=as_json)
        return
    if not go_ahead:
        what = "every message" if selection.everything and max_messages is None else "the selected messages"
        confirm(f"Move {what} of {dlq_url} (~{approximate_depth(sqs, dlq_url)} in it) to {queue_url}?")
    report: RedriveReport | None = None
    required = method == "move-task"
    if (
        method != "loop"
        and _only_this_queue_dead_letters_here(sqs, dlq_url, queue_url, required=required)
        and _every_message_fits(sqs, dlq_url, queue_url, required=required)
    ):
        report = _start_move_task(sqs, dlq_url, queue_url, rate=rate, required=required)
        if report is not None and wait:
            wait_for_move_task(
                sqs,
                queue_arn(sqs, dlq_url),
                report,
                timeout_seconds=timeout,
                on_progress=lambda moved, total: echo(f"  moved {moved} of {total or '?'}", err=True),
            )
    if report is None:
        depth = max_messages or approximate_depth(sqs, dlq_url)
        with click.progressbar(length=depth, label="redriving", file=sys.stderr) as bar:
            done = [0]

            def progress(moved: int) -> None:
                bar.update(moved - done[0])
                done[0] = moved

            report = redrive_loop(
                sqs,
                dlq_url,
                queue_url,
                selection=selection,
                max_messages=max_messages,
                wait_seconds=wait_seconds,
                identity_fields=operator.identity_fields()[0],
                on_moved=progress,
            )
    _print_redrive(report, queue_url, as_json=as_json)
    if report.task_status == "RUNNING" and not wait:
        return
    if not report.complete:
        raise Failure(
            "redrive incomplete: "
            + (
                f"task {report.task_status}"
                if report.task_handle
                else f"{len(report.failed) + len(report.too_large)} message(s) not moved"
            )
            + "; what was not moved is still in the DLQ"
        )


def _only_this_queue_dead_letters_here(sqs: SQSClient, dlq_url: str, queue_url: str, *, required: bool) -> bool:
    """Whether a move task may run: it moves every message of the DLQ, so no other queue may use the
    DLQ as its dead-letter queue. If one does (or the list cannot be read), the loop runs instead,
    which leaves that queue's messages in the DLQ; with ``--method move-task`` the command fails."""
    try:
        others = other_source_queues(sqs, dlq_url, queue_url)
    except (ClientError, BotoCoreError) as exc:
        why = f"the queues that use the DLQ as their dead-letter queue could not be listed ({describe(exc)})"
    else:
        if not others:
            return True
        why = f"{len(others)} other queue(s) use the DLQ as their dead-letter queue: {', '.join(others)}"
    if required:
        raise Failure(
            f"a move task moves every message of the DLQ, and {why}; "
            "use --method loop, which leaves their messages in the DLQ"
        )
    echo(f"{why}: moving with receive-send-delete, which leaves their messages in the DLQ", err=True)
    return False


def _every_message_fits(sqs: SQSClient, dlq_url: str, queue_url: str, *, required: bool) -> bool:
    """Whether a move task may run: it moves messages as they are, so each must fit the queue, which
    only the queues' sizes prove (:func:`move_task_size_problem`). Otherwise the loop runs, which
    checks each message; with ``--method move-task`` the command fails."""
    why = move_task_size_problem(sqs, dlq_url, queue_url)
    if why is None:
        return True
    if required:
        raise Failure(
            f"a move task moves messages as they are, and {why}; use --method loop, which parks what does "
            f"not fit as {MessageTooLargeError.error_code} and moves the rest"
        )
    echo(
        f"{why}: moving with receive-send-delete, which parks what does not fit as {MessageTooLargeError.error_code}",
        err=True,
    )
    return False


def _redrive_dry_run(
    operator: Operator,
    selection: Selection,
    max_messages: int | None,
    wait_seconds: int,
    *,
    method: str,
    as_json: bool,
) -> None:
    """What a redrive would move: the DLQ read (and left) as ``dlq list`` reads it, with the same selection."""
    dlq_url = operator.resources.dead_letter_queue_url
    queue_url = operator.resources.queue_url
    reading = peek(
        operator.clients.sqs,
        dlq_url,
        max_messages=sys.maxsize,
        wait_seconds=wait_seconds,
        identity_fields=operator.identity_fields()[0],
    )
    own_arn = queue_arn(operator.clients.sqs, queue_url)
    foreign = [letter for letter in reading.letters if letter.from_another_queue(own_arn)]
    chosen = [letter for letter in reading.letters if letter not in foreign and selection.matches(letter)][
        :max_messages
    ]
    limit = maximum_message_size(operator.clients.sqs, queue_url)
    too_large = [letter for letter in chosen if limit is not None and letter.redrive_size > limit]
    chosen = [letter for letter in chosen if letter not in too_large]
    by_code = Counter(letter.error_code for letter in chosen)
    if as_json:
        echo(
            to_json(
                {
                    "dry_run": True,
                    "method": method,
                    "would_move": len(chosen),
                    "moved_by_code": dict(by_code),
                    "too_large": len(too_large),
                    "skipped": len(reading.letters) - len(chosen) - len(too_large) - len(foreign),
                    "held_back": reading.held_back,
                    "from_other_queues": _foreign_json(
                        (letter.message_id, str(letter.source_queue_arn)) for letter in foreign
                    ),
                }
            )
        )
    else:
        codes = ", ".join(f"{n} {code}" for code, n in sorted(by_code.items()))
        echo(
            f"redrive (dry run): would move {len(chosen)} message(s) to {queue_url}"
            + (f" [{codes}]" if codes else "")
            + _foreign_note(len(foreign))
            + (
                f"; would park {len(too_large)} too large for the queue as {MessageTooLargeError.error_code}"
                if too_large
                else ""
            )
            + f"; nothing moved{_held_back_note(reading.held_back)}"
        )
        _print_foreign((letter.message_id, str(letter.source_queue_arn)) for letter in foreign)


def _start_move_task(
    sqs: SQSClient, dlq_url: str, queue_url: str, *, rate: int | None, required: bool
) -> RedriveReport | None:
    try:
        handle = start_move_task(sqs, queue_arn(sqs, dlq_url), queue_arn(sqs, queue_url), rate)
    except MoveTaskUnsupportedError as exc:
        if required:
            raise Failure(f"this endpoint lacks StartMessageMoveTask ({exc}); use --method loop") from exc
        echo("StartMessageMoveTask is not available here: moving with receive-send-delete", err=True)
        return None
    echo(f"started message move task {handle}", err=True)
    return RedriveReport(method="move-task", task_handle=handle, task_status="RUNNING")


def _print_redrive(report: RedriveReport, queue_url: str, *, as_json: bool) -> None:
    if as_json:
        echo(
            to_json(
                {
                    "method": report.method,
                    "moved": report.moved,
                    "moved_by_code": dict(report.moved_by_code),
                    "skipped": report.skipped,
                    "arrived_later": report.arrived_later,
                    "failed": [{"message_id": message_id, "reason": reason} for message_id, reason in report.failed],
                    "not_deleted": report.not_deleted,
                    "task_handle": report.task_handle,
                    "task_status": report.task_status,
                    "task_failure": report.task_failure,
                    "held_back": report.held_back,
                    "from_other_queues": _foreign_json(report.from_other_queues),
                    "too_large": [
                        {"message_id": message_id, "reason": reason} for message_id, reason in report.too_large
                    ],
                    "complete": report.complete,
                }
            )
        )
    by_code = ", ".join(f"{n} {code}" for code, n in sorted(report.moved_by_code.items()))
    line = f"redrive ({report.method}): moved {report.moved} message(s) to {queue_url}"
    if by_code:
        line += f" [{by_code}]"
    if report.skipped:
        line += f"; left {report.skipped} not selected"
    if report.arrived_later:
        line += f"; left {report.arrived_later} that arrived after the redrive started (failed again? dlq list)"
    line += _foreign_note(len(report.from_other_queues))
    if report.too_large:
        line += f"; left {len(report.too_large)} too large for the queue (as {MessageTooLargeError.error_code})"
    if report.task_handle:
        line += f"; task {report.task_status}"
        if report.task_failure:
            line += f": {report.task_failure}"
    line += _held_back_note(report.held_back)
    echo(line, err=as_json)
    for message_id in report.not_deleted:
        echo(f"  {message_id}: sent but not deleted from the DLQ; a later redrive sends it again (harmless)", err=True)
    _print_foreign(report.from_other_queues)
    for message_id, reason in report.too_large:
        echo(f"  {message_id}: stays in the DLQ as {MessageTooLargeError.error_code}: {reason}", err=True)
    for message_id, reason in report.failed:
        echo(f"  {message_id}: stays in the DLQ: {reason}", err=True)
    summarise("stays in the DLQ", (reason for _, reason in report.failed))


def _foreign_note(count: int) -> str:
    return f"; left {count} that another queue dead-lettered (never sent to this pipeline)" if count else ""


def _foreign_json(letters: Iterable[tuple[str, str]]) -> list[dict[str, str]]:
    return [{"message_id": message_id, "source_queue_arn": source} for message_id, source in letters]


def _print_foreign(letters: Iterable[tuple[str, str]]) -> None:
    for message_id, source in letters:
        echo(f"  {message_id}: stays in the DLQ: dead-lettered by {source}, not the pipeline's queue", err=True)


# --- pending -----------------------------------------------------------------------------------------


@cli.command()
@click.option(
    "--older-than", default=DEFAULT_PENDING_AGE, show_default=True, callback=seconds_option, help="Minimum age."
)
@click.option("--limit", type=click.IntRange(min=1), help="At most this many, oldest first.")
@click.option("--resend", is_flag=True, help="Re-enqueue each order, rebuilt from its row, so that it gets published.")
@destructive
@click.option("--json", "as_json", is_flag=True, help=JSON_HELP)
@click.pass_context
@reported
def pending(
    ctx: click.Context, older_than: int, limit: int | None, resend: bool, yes: bool, dry_run: bool, as_json: bool
) -> None:
    """State records stuck in 'pending': recorded, notification never confirmed.

    Any redelivery of the message publishes and marks them (redrive the DLQ first). When no copy is
    left - it expired in the DLQ - --resend rebuilds each order from its row and sends it with the
    same event_id: the consumer finds the pending record with the same payload, publishes it and
    marks it sent, and the row is not written again. --yes and --dry-run apply to --resend.
    """
    go_ahead = confirmed(yes=yes, dry_run=dry_run, command="pending --resend") if resend else True
    as_json = wants_json(ctx, as_json)
    operator = operator_of(ctx)
    now = time.time()
    records = find_pending(
        operator.clients.dynamodb,
        operator.resources.processed_events_table,
        older_than_seconds=older_than,
        now=now,
        limit=limit,
    )
    publisher = operator.publisher() if resend and records else None
    if publisher is not None and not go_ahead:
        confirm(f"Re-enqueue the orders of {len(records)} pending record(s) to {publisher.queue_url}?")
    orders_table = operator.resources.order_records_table if publisher is not None else ""
    resent = 0
    problems: list[str] = []
    for record in records:
        outcome: dict[str, Any] = {}
        if publisher is not None:
            try:
                order = order_from_row(
                    record, get(operator.clients.dynamodb, orders_table, "order_id", record.order_id)
                )
                if dry_run:
                    outcome = {"resent": False, "dry_run": True}
                else:
                    outcome = {"resent": True, "message_id": _resend(publisher, order)}
                    resent += 1
            except OperationsError as exc:
                problems.append(str(exc))
                outcome = {"resent": False, "error": problems[-1]}
        if as_json:
            echo(to_json({**pending_summary(record, now), **outcome}))
        else:
            line = (
                f"{record.event_id}  order {record.order_id}  pending since {timestamp(record.created_at)} "
                f"({age(now - record.created_at)})"
            )
            if "error" in outcome:
                line += f"  -> NOT resent: {outcome['error']}"
            elif outcome:
                line += "  -> resent" if outcome["resent"] else "  -> would resend (dry run)"
            echo(line)
    summarise("not resent", problems)
    if not resend:
        hint = "; redrive the DLQ, or re-enqueue them with --resend"
    elif dry_run:
        hint = f"; would resend {len(records) - len(problems)} (dry run: nothing sent)"
    else:
        hint = f"; resent {resent}"
    echo(f"{len(records)} record(s) pending for more than {age(older_than)}{hint if records else ''}", err=True)
    if problems:
        raise Failure(f"{len(problems)} pending record(s) not resent (see above)")


def _resend(publisher: OrderPublisher, order: Mapping[str, Any]) -> str | None:
    """Send a rebuilt order again; its message id.

    On a FIFO queue the message gets a deduplication id of its own (the event, the content and a
    ``resend:`` token of this send): under the event's usual one, SQS would accept a resend within
    five minutes of the first send (or of an earlier resend) and drop it unseen, and the record
    would stay pending while this reported it resent.

    Raises:
        OperationsError: SQS did not accept it (the reason reduced to code and message).
    """
    try:
        prepared = publisher.prepare(order)
    except PermanentError as exc:  # a row an older version recorded that the contract now refuses
        raise CannotResendError(f"the consumer would refuse it: {exc.error_code}: {exc}") from exc
    if publisher.fifo:
        prepared = prepared.redelivered(f"{RESEND_DELIVERY}{uuid.uuid4().hex}")
    [result] = publisher.send_prepared([prepared])
    if not result.ok:
        raise OperationsError(endpoint_message(result.error or "not sent"))
    return result.message_id


# --- pipelines ---------------------------------------------------------------------------------------


@cli.command()
@click.option("--json", "as_json", is_flag=True, help=JSON_HELP)
@click.pass_context
@reported
def pipelines(ctx: click.Context, as_json: bool) -> None:
    """List every IdempotentOrderPipeline of the stack, with its queues, tables, topic and function.

    Found in the stack itself: the construct marks its resources with template metadata. Pass a
    pipeline's path (or construct id) as --pipeline to the other commands.
    """
    as_json = wants_json(ctx, as_json)
    operator = operator_of(ctx)
    found = operator.stack.pipelines()
    if not found and not operator.stack.deployed_before_discovery():
        raise operator.stack.no_pipeline()
    if not found:
        raise OperationsError(
            f"stack {operator.stack.name!r} was deployed with a version before 0.2.0: no resource carries "
            f"'{METADATA_KEY}' metadata, so there is nothing to list; the other commands read its outputs"
        )
    for pipeline in found:
        # Through PipelineResources, so resources handed in (existing_queue=...) are named too.
        resources = PipelineResources(operator.stack, selector=pipeline.path)
        ids: dict[str, str] = {}
        for role in ROLES:
            try:
                ids[role] = resources.get(role)
            except OperationsError:
                continue
        if as_json:
            echo(to_json({"pipeline": pipeline.path, "id": pipeline.construct_id, **ids}))
        else:
            echo(pipeline.path)
            for role in ROLES:
                echo(f"  {role:<24}{ids.get(role, '- (not deployed)')}")
    echo(f"{len(found)} pipeline(s) in stack {operator.stack.name}", err=True)


def _expiry(state: Mapping[str, Any]) -> str:
    """When the record expires: its ``ttl``, set by the sent mark; a pending record never expires."""
    if state.get("ttl") is not None:
        return timestamp(state.get("ttl")) or "-"
    return "never while pending (the sent mark sets the ttl)" if state.get(STATUS_ATTRIBUTE) == Status.PENDING else "-"


# Commands in modules of their own.
cli.add_command(migrate)
cli.add_command(sandbox)
cli.add_command(smoke)
cli.add_command(upgrade_check)


def main() -> None:
    """The ``order-pipeline`` console script."""
    cli(prog_name="order-pipeline")
