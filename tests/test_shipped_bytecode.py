"""The python3.14 bytecode the consumer's asset and the subscriber's layer ship (idempotent_order_pipeline.bytecode).

The shipped files are compiled by the runtime's Python (``make bytecode``) and checked fresh on it by
``make test`` (``tools/runtime_python.py``). Here, on whichever Python runs the suite: that every shipped
module has its file in the repository, in checked-hash mode, and that the tool's write and check do what
they say (on this interpreter's own bytecode, in a temporary root).
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from idempotent_order_pipeline import bytecode
from idempotent_order_pipeline.asset import RUNTIME_BYTECODE_TAG
from idempotent_order_pipeline.core.sqs_function import RUNTIME
from tools import runtime_python
from tools.runtime_python import REPO, SHIPPED_ROOTS, shipped_modules

MODULE = 'STATES = {"pending", "sent", "parked"}\n\n\ndef state(name):\n    return name in STATES\n'


def test_every_shipped_module_has_its_runtime_bytecode_in_the_repository() -> None:
    # GIVEN the modules of the asset and the layer, and the python3.14 bytecode beside them (which only
    # the repository puts there: the runtime's tests run with PYTHONDONTWRITEBYTECODE, and a fresh
    # clone's make test runs this test)
    modules = shipped_modules()
    tracked = {
        path.relative_to(REPO).as_posix()
        for root in SHIPPED_ROOTS
        for path in (REPO / root).rglob(f"__pycache__/*.{RUNTIME_BYTECODE_TAG}.pyc")
    }
    # WHEN each module's python3.14 bytecode path is named
    expected = {f"{Path(m).parent.as_posix()}/__pycache__/{Path(m).stem}.{RUNTIME_BYTECODE_TAG}.pyc" for m in modules}
    # THEN the repository holds exactly those, each checked-hash, all from one Python (one magic number)
    assert len(modules) >= 30
    assert tracked == expected
    assert all(bytecode.usable(REPO / name) for name in tracked)
    assert len({(REPO / name).read_bytes()[:4] for name in tracked}) == 1


def test_the_shipped_tag_is_the_construct_runtimes() -> None:
    # GIVEN the functions' runtime (python3.14) WHEN its bytecode tag is spelled THEN it is the shipped one
    assert "cpython-" + RUNTIME.name.removeprefix("python").replace(".", "") == RUNTIME_BYTECODE_TAG


def _root(tmp_path: Path) -> tuple[Path, Path]:
    root = tmp_path / "asset"
    (root / "package").mkdir(parents=True)
    (root / "package" / "__init__.py").write_text("")
    source = root / "package" / "states.py"
    source.write_text(MODULE)
    return root, source


@pytest.mark.slow
def test_write_then_check_is_fresh_and_loads_as_checked_hash(tmp_path: Path) -> None:
    # GIVEN a root with two modules and no bytecode
    root, source = _root(tmp_path)
    assert len(bytecode.check([root])) == 2
    # WHEN the bytecode is written
    written = bytecode.write([root])
    # THEN both are written, checked-hash, the check finds nothing, and this Python uses the file
    assert {p.name for p in written} == {
        f"__init__.{sys.implementation.cache_tag}.pyc",
        f"states.{sys.implementation.cache_tag}.pyc",
    }
    assert bytecode.check([root]) == []
    assert bytecode.usable(bytecode.bytecode_path(source))
    loaded = subprocess.run(
        [sys.executable, "-c", "import package.states as s, sys; print(s.__cached__, s.state('sent'))"],
        cwd=root,
        env={**os.environ, "PYTHONDONTWRITEBYTECODE": "1", "PYTHONPATH": str(root)},
        capture_output=True,
        text=True,
        check=True,
    )
    assert loaded.stdout.split() == [str(bytecode.bytecode_path(source)), "True"]


@pytest.mark.slow
def test_a_fresh_file_is_not_rewritten_and_writing_is_reproducible(tmp_path: Path) -> None:
    # GIVEN written bytecode of a module holding a set constant (marshalled in hash order)
    root, source = _root(tmp_path)
    command = [sys.executable, str(REPO / runtime_python.BYTECODE_TOOL), "write", str(root)]
    subprocess.run(command, check=True, capture_output=True, env={**os.environ, "PYTHONHASHSEED": "1"})  # noqa: S603
    target = bytecode.bytecode_path(source)
    first, first_mtime = target.read_bytes(), target.stat().st_mtime_ns
    # WHEN it is written again, then written anew under another hash seed
    again = subprocess.run(command, check=True, capture_output=True, text=True)  # noqa: S603
    assert target.stat().st_mtime_ns == first_mtime
    target.unlink()
    subprocess.run(command, check=True, capture_output=True, env={**os.environ, "PYTHONHASHSEED": "2"})  # noqa: S603
    # THEN the fresh file was left alone, and the new bytes are the same
    assert "0 files written or removed" in again.stdout
    assert target.read_bytes() == first


@pytest.mark.parametrize(
    ("change", "reason"),
    [
        (lambda source, pyc: source.write_text(MODULE + "# edited\n"), "stale: the source changed"),
        (lambda source, pyc: pyc.write_bytes(b"\0\0\0\0" + pyc.read_bytes()[4:]), "compiled by another Python"),
        (
            lambda source, pyc: pyc.write_bytes(pyc.read_bytes()[:4] + b"\0\0\0\0" + pyc.read_bytes()[8:]),
            "not checked-hash bytecode",
        ),
        (lambda source, pyc: pyc.unlink(), "no bytecode"),
    ],
    ids=["source-edited", "other-python", "timestamp-mode", "missing"],
)
def test_check_names_each_way_the_bytecode_falls_short(tmp_path: Path, change: object, reason: str) -> None:
    # GIVEN fresh bytecode
    root, source = _root(tmp_path)
    bytecode.write([root])
    pyc = bytecode.bytecode_path(source)
    # WHEN the source or the file changes
    change(source, pyc)  # type: ignore[operator]
    # THEN the check names the file and the reason, and writing makes it fresh again
    (line,) = bytecode.check([root])
    assert line.startswith(f"{pyc}: {reason}")
    bytecode.write([root])
    assert bytecode.check([root]) == []


def test_check_finds_and_write_removes_the_bytecode_of_a_deleted_module(tmp_path: Path) -> None:
    # GIVEN fresh bytecode, then the module deleted
    root, source = _root(tmp_path)
    bytecode.write([root])
    pyc = bytecode.bytecode_path(source)
    source.unlink()
    # WHEN checked, then written
    problems = bytecode.check([root])
    bytecode.write([root])
    # THEN the orphan is named, then gone
    assert problems == [f"{pyc}: bytecode of a module that no longer exists"]
    assert not pyc.exists()
    assert bytecode.check([root]) == []


@pytest.mark.slow
def test_make_test_runtime_fails_when_the_shipped_bytecode_is_not_the_runtimes(
    monkeypatch: pytest.MonkeyPatch, capfd: pytest.CaptureFixture[str]
) -> None:
    # GIVEN this Python standing in as the runtime's (its magic number is not python3.14's)
    here = runtime_python.Interpreter("this python", runtime_python.RUNTIME_VERSION, (sys.executable,), str(REPO))
    monkeypatch.setattr(runtime_python, "interpreters", lambda build: [here])
    monkeypatch.setattr(runtime_python, "with_venv", lambda interpreter: pytest.fail("the tests ran"))
    # WHEN the runtime step of make test runs
    status = runtime_python.main(["--fast", "--no-build"])
    # THEN it fails at the bytecode check of both roots, before any function test runs
    out = capfd.readouterr().out
    assert status == 1
    assert "check the shipped bytecode on this python" in out
    assert all(f"{REPO}/{root}/" in out for root in SHIPPED_ROOTS)
    assert "run `make bytecode` and commit the result" in out
