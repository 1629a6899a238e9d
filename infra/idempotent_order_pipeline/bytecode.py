"""The runtime's bytecode the functions' assets ship: write it (``make bytecode``) or check it (``make test``).

Lambda's code directory is read-only, so a function whose asset ships only sources compiles every
module it imports at every cold start and keeps nothing. The consumer's asset and the subscriber's
layer therefore carry, beside each module, ``__pycache__/<module>.cpython-314.pyc`` compiled by the
runtime's own Python (python3.14) in *checked-hash* mode (PEP 552): the interpreter reads the source,
compares its hash with the one in the ``.pyc`` and uses the bytecode only if they match, so a stale
file costs a compile, never a wrong module, whatever modification times the zip gives the files.

Standard library only: run as a script by the runtime's interpreter (``tools/runtime_python.py`` runs
it in the python3.14 chroot), imported by :mod:`idempotent_order_pipeline.asset` (which ships only
checked-hash bytecode) and by the tests on any Python, which compile for their own. Bytecode is
written with ``PYTHONHASHSEED=0`` (set constants are marshalled in hash order), so writing twice gives
the same bytes, and a fresh file is never rewritten.

Usage: ``python infra/idempotent_order_pipeline/bytecode.py {write,check} ROOT...`` (roots: asset directories).
"""

from __future__ import annotations

import argparse
import importlib.util
import marshal
import os
import py_compile
import sys
from collections.abc import Iterable
from fnmatch import fnmatchcase
from pathlib import Path

#: PEP 552's flags word of a checked hash-based ``.pyc``: hash-based (bit 0) and checked (bit 1).
CHECKED_HASH_FLAGS = 0b11
HEADER_BYTES = 16

#: The bytecode tag of the functions' runtime, python3.14 (``core.sqs_function.RUNTIME``; a test ties
#: the two): the asset and the subscriber's layer ship ``__pycache__/<module>.cpython-314.pyc``.
RUNTIME_BYTECODE_TAG = "cpython-314"

#: CDK glob patterns, the last match deciding (``!`` keeps): left out so that the asset's hash depends
#: on the code only (build metadata, the bytecode the tests' own Pythons write beside the sources),
#: kept: the runtime's bytecode (of which ``asset.exclude_patterns`` drops any that is not checked-hash).
ASSET_EXCLUDES = ("*.egg-info", "*.pyc", f"!*.{RUNTIME_BYTECODE_TAG}.pyc")


def usable(path: Path) -> bool:
    """Whether the ``.pyc`` at ``path`` is checked-hash bytecode: used only while it matches its source.

    Timestamp bytecode (what ``pip install`` writes for its own Python, over the shipped files when that
    Python is the runtime's) would be stale in any zip and would change the asset's hash at every install;
    unchecked-hash bytecode would run even after its source changed.
    """
    with path.open("rb") as file:
        header = file.read(8)
    return len(header) == 8 and int.from_bytes(header[4:8], "little") == CHECKED_HASH_FLAGS


def excluded(path: Path) -> bool:
    """Whether the file or directory at ``path`` stays out of the asset: :data:`ASSET_EXCLUDES` (CDK's
    glob rule, the last match winning), and the runtime's bytecode unless checked-hash (:func:`usable`)."""
    verdict = False
    for pattern in ASSET_EXCLUDES:
        if fnmatchcase(path.name, pattern.removeprefix("!")):
            verdict = not pattern.startswith("!")
    return verdict or (path.suffix == ".pyc" and path.is_file() and not usable(path))


def copy_ignore(directory: str, names: Iterable[str]) -> set[str]:
    """The asset's rule as ``shutil.copytree``'s ``ignore``: a copy holds what the asset would."""
    return {name for name in names if excluded(Path(directory) / name)}


def sources(roots: Iterable[Path]) -> list[Path]:
    """Every module under ``roots``, caches left out."""
    return sorted(path for root in roots for path in root.rglob("*.py") if "__pycache__" not in path.parts)


def bytecode_path(source: Path) -> Path:
    """Where this interpreter looks for ``source``'s bytecode (``__pycache__/<stem>.<cache tag>.pyc``)."""
    return Path(importlib.util.cache_from_source(str(source), optimization=""))


def display_name(source: Path, root: Path) -> str:
    """The file name compiled into the code object: relative to the asset root, as under ``/var/task``."""
    return source.relative_to(root).as_posix()


def problem(source: Path, root: Path) -> str | None:
    """Why ``source``'s shipped bytecode would not be used as it is by this interpreter, or None if it would."""
    path = bytecode_path(source)
    if not path.is_file():
        return "no bytecode"
    data = path.read_bytes()
    if data[:4] != importlib.util.MAGIC_NUMBER:
        return f"compiled by another Python (magic {data[:4].hex()}, this one {importlib.util.MAGIC_NUMBER.hex()})"
    flags = int.from_bytes(data[4:8], "little")
    if flags != CHECKED_HASH_FLAGS:
        return f"not checked-hash bytecode (flags {flags:#b}): a zip's modification times would make it stale"
    code = source.read_bytes()
    if data[8:HEADER_BYTES] != importlib.util.source_hash(code):
        return "stale: the source changed since it was compiled"
    shipped = marshal.loads(data[HEADER_BYTES:])  # noqa: S302 - the repository's own file, compared, never run
    if shipped != compile(code, display_name(source, root), "exec", dont_inherit=True):
        return "the bytecode is not what this interpreter compiles from the source"
    return None


def orphans(roots: Iterable[Path]) -> list[Path]:
    """Bytecode of this interpreter's tag left behind by a module that no longer exists."""
    tag = sys.implementation.cache_tag
    found = []
    for root in roots:
        for path in root.rglob(f"__pycache__/*.{tag}.pyc"):
            stem = path.name.split(".", 1)[0]
            if not (path.parent.parent / f"{stem}.py").is_file():
                found.append(path)
    return sorted(found)


def check(roots: list[Path]) -> list[str]:
    """Every way the shipped bytecode under ``roots`` falls short, one line each (none: all fresh)."""
    lines = []
    for root in roots:
        for source in sources([root]):
            reason = problem(source, root)
            if reason:
                lines.append(f"{bytecode_path(source)}: {reason}")
    lines += [f"{path}: bytecode of a module that no longer exists" for path in orphans(roots)]
    return lines


def write(roots: list[Path]) -> list[Path]:
    """Compile every module whose shipped bytecode is missing or stale and remove orphans; what changed."""
    changed = []
    for root in roots:
        for source in sources([root]):
            if problem(source, root) is not None:
                target = bytecode_path(source)
                py_compile.compile(
                    str(source),
                    cfile=str(target),
                    dfile=display_name(source, root),
                    doraise=True,
                    invalidation_mode=py_compile.PycInvalidationMode.CHECKED_HASH,
                )
                changed.append(target)
    for path in orphans(roots):
        path.unlink()
        changed.append(path)
    return changed


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("action", choices=("write", "check"))
    parser.add_argument("roots", nargs="+", type=Path)
    args = parser.parse_args(argv)
    tag = sys.implementation.cache_tag
    if args.action == "write":
        if os.environ.get("PYTHONHASHSEED") != "0":  # reproducible bytes: set constants in a fixed order
            os.execve(sys.executable, [sys.executable, *sys.argv], {**os.environ, "PYTHONHASHSEED": "0"})  # noqa: S606
        changed = write(args.roots)
        print(f"bytecode: {tag}: {len(changed)} files written or removed, {len(sources(args.roots))} modules")
        for path in changed:
            print(f"  {path}")
        return 0
    lines = check(args.roots)
    for line in lines:
        print(f"  {line}")
    verdict = "fresh" if not lines else f"{len(lines)} problems: run `make bytecode` and commit the result"
    print(f"bytecode: {tag}: {len(sources(args.roots))} modules, {verdict}")
    return 1 if lines else 0


if __name__ == "__main__":
    sys.exit(main())
