"""Python packages install only from hashed locks: every package of each closure pinned, every file checked.

``requirements*.txt`` name the top-level pins; ``make lock`` (pip-tools' ``pip-compile
--generate-hashes``) writes ``requirements*.lock`` from them, and the Makefile installs each
virtualenv from its lock with ``pip install --require-hashes``.
"""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

import pytest

from idempotent_order_pipeline.powertools import POWERTOOLS_VERSION

REPO = Path(__file__).resolve().parents[1]
#: Each virtualenv the Makefile makes: its top-level pins and its lock.
LOCKS = {
    "requirements-dev.txt": "requirements-dev.lock",
    "requirements-checkov.txt": "requirements-checkov.lock",
    "requirements-parliament.txt": "requirements-parliament.lock",
    "requirements-mutation.txt": "requirements-mutation.lock",
    "requirements-runtime.txt": "requirements-runtime.lock",
}
#: Installed by tools/runtime_python.py (make test-runtime) on the functions' Python, not by the Makefile.
RUNTIME_LOCK = "requirements-runtime.lock"
PIN = re.compile(r"^([A-Za-z0-9][A-Za-z0-9._-]*)(?:\[[^\]]*\])?==([^\s;\\]+)")


def normalized(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def top_level_pins(path: Path) -> dict[str, str]:
    """The ``name==version`` lines of a requirements file and of the files it includes (``-r``)."""
    pins: dict[str, str] = {}
    for line in path.read_text().splitlines():
        if line.startswith("-r "):
            pins |= top_level_pins(path.parent / line.split(maxsplit=1)[1])
        elif match := PIN.match(line):
            pins[normalized(match[1])] = match[2]
    return pins


def locked(path: Path) -> dict[str, list[str]]:
    """Each package of a lock: its version, then its hashes."""
    entries: dict[str, list[str]] = {}
    current: list[str] | None = None
    for line in path.read_text().splitlines():
        if match := PIN.match(line):
            current = entries.setdefault(normalized(match[1]), [match[2]])
        elif current is not None and (hashed := re.search(r"--hash=sha256:([0-9a-f]{64})", line)):
            current.append(hashed[1])
    return entries


@pytest.mark.parametrize("requirements", sorted(LOCKS))
def test_the_lock_pins_every_top_level_requirement_at_its_version_with_hashes(requirements: str) -> None:
    # GIVEN a requirements file and its lock
    pins = top_level_pins(REPO / requirements)
    lock = locked(REPO / LOCKS[requirements])
    # THEN every top-level pin is in the lock at the same version, and every package of the lock
    # carries at least one sha256 hash
    assert pins
    assert {name: lock.get(name, ["missing"])[0] for name in pins} == pins
    assert [name for name, (_version, *hashes) in lock.items() if not hashes] == []
    # AND the lock names no index or local path (it must install the same anywhere)
    text = (REPO / LOCKS[requirements]).read_text()
    assert not re.search(r"^--(extra-)?index-url|^--find-links|file://|/tmp/", text, re.M)


def test_the_makefile_installs_every_virtualenv_from_its_lock_with_require_hashes() -> None:
    # GIVEN the Makefile's pip installs, its lock-install command spelled out
    makefile = (REPO / "Makefile").read_text()
    (lock_install,) = re.findall(r"^LOCK_INSTALL = (.*)$", makefile, re.M)
    lines = [line.replace("$(LOCK_INSTALL)", lock_install) for line in makefile.splitlines()]
    installs = [line for line in lines if "PIP_INSTALL)" in line or "pip install" in line]
    requirement_installs = [line for line in installs if " -r " in line]
    # THEN each lock is installed with --require-hashes, and no requirements*.txt is installed directly
    for lock in set(LOCKS.values()) - {RUNTIME_LOCK}:
        assert [line for line in requirement_installs if f"-r {lock}" in line and "--require-hashes" in line], lock
    assert [line for line in requirement_installs if ".txt" in line] == []
    # AND each lock install leaves compiling to compileall, on every core, in the same venv, right after it
    compiled_after = [
        lines[index + 1].strip().startswith(f"{line.split('/$(PIP_INSTALL)')[0].strip()}/$(COMPILE_ALL) ")
        for index, line in enumerate(lines)
        if "--no-compile" in line and "/$(PIP_INSTALL)" in line
    ]
    assert compiled_after == [True] * makefile.count("/$(LOCK_INSTALL) ")
    assert len(compiled_after) >= len(set(LOCKS.values()) - {RUNTIME_LOCK})
    assert re.search(r"^COMPILE_ALL = python -m compileall -q -j 0$", makefile, re.M)


def test_the_runtime_venv_is_installed_from_its_lock_at_the_test_stacks_versions() -> None:
    # GIVEN the runtime check's venv (the function tests on python3.14) and the test stack's lock
    from tools import runtime_python

    runtime = locked(REPO / RUNTIME_LOCK)
    dev = locked(REPO / "requirements-dev.lock")
    # THEN it installs its lock with --require-hashes
    assert runtime_python.LOCK == RUNTIME_LOCK
    assert runtime_python.INSTALL[-2:] == ("--require-hashes", "-r")
    # AND every package it shares with the test stack is at the same version and top-level pin, so the
    # function tests on 3.14 test what the 3.11 suite tests
    assert runtime
    assert {name: dev.get(name, ["missing"])[0] for name in runtime} == {
        name: entry[0] for name, entry in runtime.items()
    }
    dev_pins = top_level_pins(REPO / "requirements-dev.txt")
    assert {name: dev_pins[name] for name in top_level_pins(REPO / "requirements-runtime.txt")} == top_level_pins(
        REPO / "requirements-runtime.txt"
    )


def test_the_sandbox_extra_pins_what_the_stand_in_is_built_and_tested_against() -> None:
    # GIVEN the `sandbox` extra of the distribution, and the pins the test stack runs the stand-in with
    extra = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["optional-dependencies"]["sandbox"]
    pins = {normalized(match[1]): match[2] for line in extra if (match := PIN.match(line))}
    tested = top_level_pins(REPO / "requirements-dev.txt")
    assert pins
    # THEN moto is the version the patches are written against, and Powertools the version whose
    # public SSM parameter the construct's default layer names (the stand-in publishes that layer)
    assert pins["moto"] == tested["moto"]
    assert pins["aws-lambda-powertools"] == POWERTOOLS_VERSION == tested["aws-lambda-powertools"]
    # AND the extra brings the CLI that fronts it
    assert "idempotent-order-pipeline[ops]" in extra
