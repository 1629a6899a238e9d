"""What every command shares: the operator's context, error reporting, and the options of bulk commands.

The command modules (:mod:`.commands`, :mod:`.migrate`) import from here, never from each other.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import ParamSpec, TypeVar, cast

import click
from botocore.exceptions import BotoCoreError, ClientError

from idempotent_order_pipeline.cli.aws import AwsClients, PipelineResources, Stack
from idempotent_order_pipeline.cli.errors import OperationsError, describe
from idempotent_order_pipeline.cli.output import Failure, on_terminal
from idempotent_order_pipeline.producer import OrderPublisher

P = ParamSpec("P")
R = TypeVar("R")


@dataclass
class Operator:
    """What every command gets: the stack, the pipeline's resources, the clients, the identity fields."""

    stack: Stack
    clients: AwsClients
    resources: PipelineResources
    explicit_identity_fields: tuple[str, ...] | None = None
    #: The global ``--json`` (each command's own ``--json`` asks the same).
    as_json: bool = False
    _identity: tuple[tuple[str, ...], str] | None = field(default=None, repr=False)

    def identity_fields(self) -> tuple[tuple[str, ...], str]:
        """``--identity-fields``, else the consumer function's ``IDENTITY_FIELDS``, else the default."""
        if self.explicit_identity_fields is not None:
            return self.explicit_identity_fields, "--identity-fields"
        if self._identity is None:
            self._identity = self.resources.identity_fields()
        return self._identity

    def publisher(self) -> OrderPublisher:
        return OrderPublisher(
            self.resources.queue_url,
            identity_fields=self.identity_fields()[0],
            client=self.clients.sqs,
            order_schema=self.resources.order_schema(),
        )


def reported(command: Callable[P, R]) -> Callable[P, R]:
    """Turn the errors that end a command into one line on stderr and exit code 1."""

    @functools.wraps(command)
    def wrapper(*args: P.args, **kwargs: P.kwargs) -> R:
        try:
            return command(*args, **kwargs)
        except OperationsError as exc:
            raise Failure(str(exc)) from exc
        except ClientError as exc:
            raise Failure(f"{exc.operation_name} failed: {describe(exc)}") from exc
        except BotoCoreError as exc:
            raise Failure(describe(exc)) from exc

    return wrapper


_DURATION_PART = re.compile(r"(\d+)([smhd])")
_DURATION_UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86400}


def seconds_option(ctx: click.Context, param: click.Parameter, value: str) -> int:
    """Parse ``90s``, ``15m``, ``2h``, ``1d``, ``1h30m`` or plain seconds."""
    text = value.strip().lower()
    if text.isdigit():
        return int(text)
    parts = _DURATION_PART.findall(text)
    if not parts or "".join(number + unit for number, unit in parts) != text:
        raise click.BadParameter(f"{value!r} is not a duration such as 90s, 15m, 2h, 1d or 1h30m")
    return sum(int(number) * _DURATION_UNITS[unit] for number, unit in parts)


def operator_of(ctx: click.Context) -> Operator:
    return cast(Operator, ctx.find_object(Operator))


def wants_json(ctx: click.Context, as_json: bool) -> bool:
    """Whether this command writes JSON: its own ``--json`` or the global one."""
    return as_json or operator_of(ctx).as_json


JSON_HELP = "One JSON object per line on stdout (the same as the global --json)."


def confirmed(*, yes: bool, dry_run: bool, command: str) -> bool:
    """Whether a destructive command may go on without asking; a usage error when nobody could be asked.

    Checked before anything is read, so a script without ``--yes`` fails the same way whatever
    the queues hold.
    """
    if yes or dry_run:
        return True
    if not on_terminal():
        raise click.UsageError(
            f"{command} changes the pipeline's queues and asks first, but there is no terminal to ask: "
            "pass --yes to go ahead, or --dry-run to see what it would do"
        )
    return False


def destructive(command: Callable[P, R]) -> Callable[P, R]:
    """``--yes`` and ``--dry-run`` for a command that deletes or sends in bulk."""
    command = click.option("--dry-run", is_flag=True, help="Show what would be done; change nothing (needs no --yes).")(
        command
    )
    return click.option("--yes", "-y", is_flag=True, help="Do not ask (needed without a terminal).")(command)
