"""The prop rules of an SQS-fed function, once for both constructs (after Solutions Constructs' input-validation).

Each check reads the props it needs from the props both constructs have
(:class:`~idempotent_order_pipeline.core.function_props.SqsFunctionProps`),
appends every problem to the :class:`~idempotent_order_pipeline.core.props.Findings`, names the prop,
the value and what is allowed, and leaves unresolved tokens to CloudFormation. What only one construct
has (the pipeline's message size or reconciler, the subscriber's lease) stays in its own props module.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from aws_cdk import Duration, RemovalPolicy, Token

from idempotent_order_pipeline._lambda_asset.order_consumer.contract.batching import EVENT_SOURCE_BATCH_SIZE
from idempotent_order_pipeline.core.props import Findings

if TYPE_CHECKING:
    from idempotent_order_pipeline.core.function_props import SqsFunctionProps

# ---- service limits and the design's fixed values ---------------------------------------------------

#: Fixed: the longest SQS allows, so a parked message has the most time to be looked at.
DEAD_LETTER_RETENTION = Duration.days(14)
#: AWS's advice for an SQS event source: visibility timeout at least 6x the function timeout (plus
#: the batching window), so a batch retried by Lambda is not redelivered while still in flight.
VISIBILITY_TIMEOUT_FACTOR = 6
#: Below this, one transient blip (a throttle, a deploy) can push a good message to the DLQ.
RECOMMENDED_MIN_RECEIVE_COUNT = 5
#: Records per invocation when no prop says otherwise (an SQS event source's own default).
DEFAULT_BATCH_SIZE = EVENT_SOURCE_BATCH_SIZE
MAX_RECEIVE_COUNT = 1000
MAX_BATCH_SIZE_STANDARD = 10_000
MAX_BATCH_SIZE_FIFO = 10
MAX_BATCH_SIZE_WITHOUT_WINDOW = 10
MAX_BATCHING_WINDOW_SECONDS = 300
MIN_MAX_CONCURRENCY, MAX_MAX_CONCURRENCY = 2, 1000
MIN_MEMORY_MB, MAX_MEMORY_MB = 128, 10_240
MAX_FUNCTION_TIMEOUT_SECONDS = 900
MAX_VISIBILITY_TIMEOUT_SECONDS = 12 * 3600
MIN_RETENTION_SECONDS = 60
#: Removal policies the constructs' resources support (none of SQS, DynamoDB, SNS, CloudWatch Logs
#: supports a CloudFormation ``Snapshot`` deletion policy).
ALLOWED_REMOVAL_POLICIES = (RemovalPolicy.DESTROY, RemovalPolicy.RETAIN, RemovalPolicy.RETAIN_ON_UPDATE_OR_DELETE)
#: Leaves room for ``-<key>`` within CloudWatch's 255 characters of an alarm name.
MAX_ALARM_NAME_PREFIX_LENGTH = 200
MAX_RUNBOOK_URL_LENGTH = 512
#: Lambda's quota of layers per function.
MAX_LAYERS_PER_FUNCTION = 5
#: Where Lambda does not offer SnapStart, by region code (Lambda developer guide, "Improving startup
#: performance with Lambda SnapStart", section "Supported Regions": every commercial Region except
#: these two; https://docs.aws.amazon.com/lambda/latest/dg/snapstart.html#snapstart-supported-regions).
SNAP_START_UNSUPPORTED_REGIONS = {
    "ap-southeast-6": "Asia Pacific (New Zealand)",
    "ap-east-2": "Asia Pacific (Taipei)",
}
SNAP_START_DOCS = "https://docs.aws.amazon.com/lambda/latest/dg/snapstart.html#snapstart-supported-regions"


# ---- values -------------------------------------------------------------------------------------------


def number(value: float | None) -> float | None:
    """The value, or None when it is unset or an unresolved token (not ours to check)."""
    if value is None or Token.is_unresolved(value):
        return None
    return value


def seconds(duration: Duration | None) -> float | None:
    """The duration in seconds, or None when it is unset or an unresolved token."""
    if duration is None or duration.is_unresolved():
        return None
    return duration.to_seconds(integral=False)


def as_time(value: float) -> str:
    """Seconds as people write them: ``20 days``, ``15 minutes``, ``901s``; never ``1.728e+06s``."""
    for unit, size in (("day", 86_400), ("hour", 3600), ("minute", 60)):
        if value >= size and value % size == 0:
            count = int(value // size)
            return f"{count} {unit}{'' if count == 1 else 's'}"
    return f"{value:.15g}s"


def whole_seconds_text(duration: Duration) -> str:
    """A duration as an environment variable holds it: whole seconds, or the token."""
    if duration.is_unresolved():
        return Token.as_string(duration.to_seconds())
    return str(int(duration.to_seconds()))


def derived_visibility_timeout(props: SqsFunctionProps) -> Duration:
    """The queue's visibility timeout: the prop, else 6x the function timeout plus the batching window."""
    if props.visibility_timeout is not None:
        return props.visibility_timeout
    timeout = seconds(props.function_timeout)
    window = seconds(props.max_batching_window) or 0
    if timeout is None:  # reported by check_function(); keep synthesis going to collect other errors
        return Duration.seconds(0)
    return Duration.seconds(int(VISIBILITY_TIMEOUT_FACTOR * timeout + window))


# ---- the rules ------------------------------------------------------------------------------------------


def check_snap_start_region(region: str, findings: Findings, *, prop: str = "snap_start") -> None:
    """SnapStart asked for in ``region`` (the stack's, when known: a token is not checked), where Lambda offers it.

    Call only when the construct enables SnapStart; a region-agnostic stack is checked by Lambda at deploy.
    """
    if Token.is_unresolved(region) or region not in SNAP_START_UNSUPPORTED_REGIONS:
        return
    unsupported = ", ".join(f"{code} ({name})" for code, name in SNAP_START_UNSUPPORTED_REGIONS.items())
    findings.errors.append(
        f"{prop}=True: Lambda does not offer SnapStart in region {region} "
        f"({SNAP_START_UNSUPPORTED_REGIONS[region]}); allowed {prop}=False there, or {prop}=True in any other "
        f"commercial region (not {unsupported}; {SNAP_START_DOCS})"
    )


def check_batching(props: SqsFunctionProps, findings: Findings, *, fifo: bool) -> None:
    """Batch size, batching window and maximum concurrency, as Lambda's SQS event source allows them."""
    errors = findings.errors
    batch_size = number(props.batch_size)
    window = seconds(props.max_batching_window)
    if batch_size is not None:
        limit = MAX_BATCH_SIZE_FIFO if fifo else MAX_BATCH_SIZE_STANDARD
        kind = "a FIFO" if fifo else "a standard"
        if not 1 <= batch_size <= limit:
            errors.append(f"batch_size={props.batch_size!r}: allowed 1..{limit} for {kind} queue")
        elif batch_size > MAX_BATCH_SIZE_WITHOUT_WINDOW and not window:
            errors.append(
                f"batch_size={props.batch_size!r}: above {MAX_BATCH_SIZE_WITHOUT_WINDOW} Lambda requires "
                f"max_batching_window of at least 1 second (got {props.max_batching_window!r})"
            )
    if window is not None:
        if fifo and window > 0:
            errors.append(f"max_batching_window={as_time(window)}: not supported for a FIFO queue (allowed: None)")
        elif not 0 <= window <= MAX_BATCHING_WINDOW_SECONDS:
            errors.append(f"max_batching_window={as_time(window)}: allowed 0..{MAX_BATCHING_WINDOW_SECONDS} seconds")
    max_concurrency = number(props.max_concurrency)
    if max_concurrency is not None and not MIN_MAX_CONCURRENCY <= max_concurrency <= MAX_MAX_CONCURRENCY:
        errors.append(
            f"max_concurrency={props.max_concurrency!r}: allowed None or {MIN_MAX_CONCURRENCY}..{MAX_MAX_CONCURRENCY}"
        )


def check_redrive(props: SqsFunctionProps, findings: Findings, *, item: str) -> None:
    """``max_receive_count`` within SQS's range; below the recommended count, a warning (``item``: what is moved)."""
    count = number(props.max_receive_count)
    if count is None:
        return
    if not 1 <= count <= MAX_RECEIVE_COUNT:
        findings.errors.append(f"max_receive_count={props.max_receive_count!r}: allowed 1..{MAX_RECEIVE_COUNT}")
    elif count < RECOMMENDED_MIN_RECEIVE_COUNT:
        findings.warnings.append(
            (
                "max-receive-count-low",
                f"max_receive_count={props.max_receive_count!r} is below {RECOMMENDED_MIN_RECEIVE_COUNT}: a transient "
                f"failure (throttle, deploy, timeout) can move a valid {item} to the dead-letter queue",
            )
        )


def check_function(props: SqsFunctionProps, findings: Findings) -> None:
    """Memory, timeout, and a visibility timeout the function's runs fit in (6x recommended)."""
    errors = findings.errors
    memory = number(props.memory_size)
    if memory is not None and not MIN_MEMORY_MB <= memory <= MAX_MEMORY_MB:
        errors.append(f"memory_size={props.memory_size!r}: allowed {MIN_MEMORY_MB}..{MAX_MEMORY_MB} MB")
    timeout = seconds(props.function_timeout)
    if timeout is not None and not 1 <= timeout <= MAX_FUNCTION_TIMEOUT_SECONDS:
        errors.append(f"function_timeout={as_time(timeout)}: allowed 1..{MAX_FUNCTION_TIMEOUT_SECONDS} seconds")
        return
    if props.visibility_timeout is None:
        if props.function_timeout.is_unresolved():
            errors.append(
                "visibility_timeout=None: cannot be derived from a function_timeout that is a token; "
                "give visibility_timeout explicitly"
            )
        return
    visibility = seconds(props.visibility_timeout)
    if visibility is None or timeout is None:
        return
    recommended = VISIBILITY_TIMEOUT_FACTOR * timeout
    if not 0 <= visibility <= MAX_VISIBILITY_TIMEOUT_SECONDS:
        errors.append(f"visibility_timeout={as_time(visibility)}: allowed 0..{MAX_VISIBILITY_TIMEOUT_SECONDS} seconds")
    elif visibility < timeout:
        errors.append(
            f"visibility_timeout={as_time(visibility)}: must be at least function_timeout ({as_time(timeout)}), "
            "or messages are redelivered while still being processed"
        )
    elif visibility < recommended:
        findings.warnings.append(
            (
                "visibility-timeout-low",
                f"visibility_timeout={as_time(visibility)} is below {VISIBILITY_TIMEOUT_FACTOR}x function_timeout "
                f"({as_time(recommended)}): a batch Lambda retries after throttling can be redelivered while in flight",
            )
        )


def check_retention(props: SqsFunctionProps, findings: Findings, *, record: str, expires: str) -> None:
    """The queue keeps a message less long than its DLQ; a record (``record``) outlives every copy of it.

    ``expires``: when the record expires, as the message says it (after which write).
    """
    errors = findings.errors
    retention = seconds(props.retention_period)
    dlq_retention = DEAD_LETTER_RETENTION.to_seconds()
    if retention is not None and not MIN_RETENTION_SECONDS <= retention < dlq_retention:
        errors.append(
            f"retention_period={as_time(retention)}: allowed from 60 seconds to less than the dead-letter queue's "
            f"{as_time(dlq_retention)} (a message keeps its first enqueue time in the DLQ, so the DLQ must keep it "
            "longer)"
        )
    kept = seconds(props.record_retention)
    if kept is not None and retention is not None and kept <= retention + dlq_retention:
        errors.append(
            f"record_retention={as_time(kept)}: must be longer than retention_period + dead-letter retention "
            f"({as_time(retention + dlq_retention)}), so {record} outlives every copy of its message ({expires})"
        )


def check_removal(props: SqsFunctionProps, findings: Findings, *, resources: str) -> None:
    """A removal policy every resource created supports (``resources``: what they are, for the message)."""
    if props.removal_policy not in ALLOWED_REMOVAL_POLICIES:
        findings.errors.append(
            f"removal_policy={props.removal_policy}: none of {resources} can be snapshotted by CloudFormation; "
            "allowed DESTROY, RETAIN or RETAIN_ON_UPDATE_OR_DELETE"
        )


def check_alarms(
    props: SqsFunctionProps, findings: Findings, *, default_prefix: str, item: str, default_runbook: str
) -> None:
    """The standard alarms' threshold and periods, their names' prefix and the runbook they link.

    ``default_prefix``: what names the alarms without ``alarm_name_prefix``; ``item``: what waits in the
    queue ("messages", "notifications"); ``default_runbook``: the page the descriptions name without
    ``runbook_url``. Each for its message.
    """
    errors = findings.errors
    threshold = seconds(props.oldest_message_age_threshold)
    retention = seconds(props.retention_period)
    if threshold is not None and threshold <= 0:
        errors.append(f"oldest_message_age_threshold={as_time(threshold)}: allowed more than 0 seconds")
    elif threshold is not None and retention is not None and threshold >= retention:
        errors.append(
            f"oldest_message_age_threshold={as_time(threshold)}: must be less than retention_period "
            f"({as_time(retention)}), or {item} expire before the alarm fires"
        )
    periods = number(props.alarm_evaluation_periods)
    if periods is not None and periods < 1:
        errors.append(f"alarm_evaluation_periods={props.alarm_evaluation_periods!r}: allowed 1 or more")
    prefix = props.alarm_name_prefix
    if (
        prefix is not None
        and not Token.is_unresolved(prefix)
        and not (0 < len(prefix) <= MAX_ALARM_NAME_PREFIX_LENGTH and prefix.isascii() and prefix.isprintable())
    ):
        errors.append(
            f"alarm_name_prefix={prefix!r}: allowed 1..{MAX_ALARM_NAME_PREFIX_LENGTH} printable ASCII characters, "
            f"or None for {default_prefix}"
        )
    url = props.runbook_url
    if (
        url is not None
        and not Token.is_unresolved(url)
        and (not url.startswith(("https://", "http://")) or len(url) > MAX_RUNBOOK_URL_LENGTH)
    ):
        errors.append(
            f"runbook_url={url!r}: allowed an http(s):// URL of at most {MAX_RUNBOOK_URL_LENGTH} characters, or None"
        )
    if props.alarm_actions and url is None:
        findings.warnings.append(
            (
                "no-runbook-url",
                "alarms notify on-call but runbook_url=None: their descriptions name this library's runbook "
                f"({default_runbook}); pass runbook_url= to link your team's runbook",
            )
        )
