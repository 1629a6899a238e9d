"""Every error the operations raise on purpose, under one base class.

The commands turn each into a one-line message on stderr and exit code 1; the message says what
is wrong and what to do.
"""

from __future__ import annotations

import re

from botocore.exceptions import ClientError, NoCredentialsError

from idempotent_order_pipeline.cli.sandbox import DEFAULT_STATE_DIR

#: The longest endpoint message kept; beyond it, an emulator's page or a stack trace, not a reason.
MAX_ENDPOINT_MESSAGE = 200
_HTML = re.compile(r"<\s*(?:!doctype|html|head|title|body|h1|p)\b", re.IGNORECASE)
_TITLE = re.compile(r"<title[^>]*>(.*?)</title>", re.IGNORECASE | re.DOTALL)
_TAG = re.compile(r"<[^>]*>")
# How botocore words a ClientError (``str(exc)``), wherever it ended up in a message: the code is what counts.
_BOTOCORE_WORDING = re.compile(
    r"An error occurred \((?P<code>[^)]*)\) when calling the \w+ operation(?: \(reached max retries: \d+\))?: "
)


#: What a command says after botocore's "Unable to locate credentials".
NO_CREDENTIALS_HINT = (
    "set AWS credentials (AWS_PROFILE or --profile, AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY, ...); for the "
    f"local stand-in, source the env file `order-pipeline sandbox start` printed ({DEFAULT_STATE_DIR}/sandbox.env "
    "in the directory it ran in), which sets its credentials and AWS_ENDPOINT_URL"
)


class OperationsError(Exception):
    """Base class of the operator tooling's errors."""


class StackNotFoundError(OperationsError):
    """The named CloudFormation stack does not exist at this endpoint and region."""


class StackOutputMissingError(OperationsError):
    """The stack exists but lacks an output a command needs (not a pipeline stack, or not fully deployed)."""


class PipelineNotFoundError(OperationsError):
    """The stack holds no pipeline (or none that ``--pipeline`` names), or not one of its resources."""


class AmbiguousPipelineError(OperationsError):
    """The stack holds several pipelines and ``--pipeline`` does not pick exactly one."""


class MoveTaskUnsupportedError(OperationsError):
    """The endpoint does not implement SQS StartMessageMoveTask (moto and other emulators)."""


class NotRedrivableError(OperationsError):
    """A parked message's attributes cannot be sent back as the producer sent them (it stays in the DLQ)."""


class CannotResendError(OperationsError):
    """A pending record's order cannot be rebuilt faithfully from its row, so it is not resent."""


def endpoint_message(text: str) -> str:
    """An endpoint's error text as one short line: botocore's wording reduced to ``Code: message``, an HTML
    page to its title, whitespace collapsed, cut."""
    text = _BOTOCORE_WORDING.sub(lambda match: f"{match.group('code')}: ", text)
    if _HTML.search(text):
        title = _TITLE.search(text)
        text = title.group(1) if title else _TAG.sub(" ", text)
    text = " ".join(text.split())
    return text if len(text) <= MAX_ENDPOINT_MESSAGE else text[: MAX_ENDPOINT_MESSAGE - 1] + "…"


def describe(exc: BaseException) -> str:
    """What an AWS call's failure says, reduced to ``Code: message`` (the code alone when the message repeats it)."""
    if isinstance(exc, NoCredentialsError):
        return f"{endpoint_message(str(exc))}: {NO_CREDENTIALS_HINT}"
    if not isinstance(exc, ClientError):
        return endpoint_message(str(exc))
    error = exc.response.get("Error", {})
    code = str(error.get("Code") or exc.response.get("ResponseMetadata", {}).get("HTTPStatusCode") or "?")
    message = endpoint_message(str(error.get("Message") or ""))
    return f"{code}: {message}" if message and message != code else code
