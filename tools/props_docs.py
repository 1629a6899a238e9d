"""Write the docs' props tables from the props' declarations (``make docs``); ``--check`` only compares.

Each table stands between two markers in its page; what is between them is :func:`props_table` of the
props class, nothing else (tests/test_docs.py fails when a page differs).
"""

from __future__ import annotations

import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
BEGIN = "<!-- props table: written by `make docs` from {name}; do not edit -->"
END = "<!-- end of props table -->"


def pages() -> dict[Path, type]:
    """Each page with a props table, and the props class it is made from."""
    from idempotent_order_pipeline.props import PipelineProps
    from idempotent_order_pipeline.subscriber.props import SubscriberProps

    return {REPO / "docs" / "construct.md": PipelineProps, REPO / "docs" / "subscriber.md": SubscriberProps}


def with_table(page: str, props_class: type) -> str:
    """``page`` with its props table made anew from ``props_class``."""
    from idempotent_order_pipeline.core.props import props_table

    begin = BEGIN.format(name=props_class.__name__)
    head, found, rest = page.partition(begin)
    if not found or END not in rest:
        raise ValueError(f"no {begin!r} ... {END!r} in the page")
    return f"{head}{begin}\n{props_table(props_class)}\n{END}{rest.split(END, 1)[1]}"


def main(argv: list[str]) -> int:
    stale = []
    for path, props_class in pages().items():
        text = path.read_text(encoding="utf-8")
        made = with_table(text, props_class)
        if made != text:
            stale.append(path.relative_to(REPO).as_posix())
            if "--check" not in argv:
                path.write_text(made, encoding="utf-8")
    verb = "differ from the props" if "--check" in argv else "rewritten"
    print(f"props tables {verb}: {', '.join(stale)}" if stale else "props tables: up to date")
    return 1 if stale and "--check" in argv else 0


if __name__ == "__main__":
    sys.path[:0] = [str(REPO / "infra")]
    sys.exit(main(sys.argv[1:]))
