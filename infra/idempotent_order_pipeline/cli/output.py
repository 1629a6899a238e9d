"""Every line the CLI writes goes out here, through :func:`~idempotent_order_pipeline.cli.render.safe`.

Results, summaries, prompts and error messages all carry values read from AWS (ids, bodies,
attribute values, queue URLs, an endpoint's error text), and any producer can put terminal control
sequences into them. So no command calls ``click.echo`` or raises ``click.ClickException`` itself
(a test holds the ``cli`` package to that): it calls :func:`echo`, :func:`confirm` and :class:`Failure`.
"""

from __future__ import annotations

import sys
from collections import Counter
from collections.abc import Iterable

import click

from idempotent_order_pipeline.cli.render import safe


def echo(line: str = "", *, err: bool = False) -> None:
    """Write one line, escaped, to stdout (or stderr)."""
    click.echo(safe(line), err=err)


def confirm(question: str) -> None:
    """Ask on the terminal (stderr); abort with exit code 1 unless the answer is yes."""
    click.confirm(safe(question), abort=True, err=True)


def on_terminal() -> bool:
    """Whether a person can answer a question: stdin is a terminal."""
    return sys.stdin.isatty()


class Failure(click.ClickException):
    """A command's end as one escaped line on stderr, exit code 1."""

    def __init__(self, message: str) -> None:
        super().__init__(safe(message))


def summarise(what: str, causes: Iterable[str]) -> None:
    """One stderr line per distinct cause with its count, most frequent first: ``  50 x <cause>``.

    Printed after the per-item lines, so that fifty items refused for one reason read as one cause;
    nothing for a single item, whose own line says it all.
    """
    counts = Counter(causes)
    if counts.total() < 2:
        return
    echo(f"{what}, by cause:", err=True)
    for cause, count in sorted(counts.items(), key=lambda item: (-item[1], item[0])):
        echo(f"  {count} x {cause}", err=True)
