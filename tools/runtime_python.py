"""The functions' own Python, python3.14 (``aws_lambda.Runtime.PYTHON_3_14``), on a machine that runs 3.11.

``make test-runtime`` (and ``make test``, with ``--fast``) run this: compile every module the functions
load on every interpreter found, check that the bytecode the assets ship is python3.14's and fresh
(``idempotent_order_pipeline/bytecode.py``; ``make bytecode`` rewrites it), then run the function tests
on the runtime's interpreter. The interpreter comes from, first found:

* ``RUNTIME_PYTHON=/path/to/python3.14``, given by hand (a venv is made from it);
* a Debian sid chroot (Debian's sid carries python3.14), built with ``debootstrap --variant=minbase``
  where the machine allows it (root, ``debootstrap``), and cached outside the work tree in
  ``$XDG_CACHE_HOME/idempotent-order-pipeline/`` (``~/.cache``), keyed by the lock it was installed from;
* otherwise the newest CPython found (pyenv's, then ``python3.1x`` on ``PATH``), and the report says
  that the runtime's own Python did not run.

A venv from the hashed lock ``requirements-runtime.lock`` (no CDK: these tests synthesize nothing). In the
chroot the repository is bind-mounted at ``/src`` inside a private mount namespace (``unshare``), so
nothing stays mounted when the run ends. The Lambda base image would serve as well where Docker runs;
no Docker engine runs on these machines, so that way is not built.

Usage: ``python tools/runtime_python.py [--fast] [-- PYTEST_ARGS...]``.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
#: The runtime the functions are deployed on (the construct's aws_lambda.Runtime.PYTHON_3_14).
RUNTIME_VERSION = (3, 14)
#: Its name, as make test's record (``--record``) and the runtime's interpreter name it.
RUNTIME_NAME = f"python{'.'.join(map(str, RUNTIME_VERSION))}"
LOCK = "requirements-runtime.lock"
#: Where the shipped modules live: the consumer's asset and the subscriber's layer.
SHIPPED_ROOTS = (
    "infra/idempotent_order_pipeline/_lambda_asset",
    "infra/idempotent_order_pipeline/_subscriber_layer/python",
)
#: Writes and checks the bytecode the shipped roots carry (standard library only, run as a script).
BYTECODE_TOOL = "infra/idempotent_order_pipeline/bytecode.py"
#: The function tests: the consumer, the reconciler and the subscriber's helper.
FUNCTION_TESTS = ("tests/consumer", "tests/reconciler", "tests/subscriber", "tests/test_function_source.py")
#: The fast tier of the same tests (make test): no process-spawning or long tests.
FAST_SELECTION = ("-m", "not slow and not e2e")
#: What the generated order-schema validator is compiled from: the worked app's schema.
SCHEMA_SOURCE = "app.py"
CHROOT_PACKAGES = "python3.14,python3.14-venv,ca-certificates"
#: Host files the chroot needs to reach the package registry as the host does.
HOST_FILES = ("/etc/resolv.conf", "/etc/ssl/certs/ca-certificates.crt")
MOUNT_POINT = "/src"
#: How the venv is installed: from the hashed lock only.
INSTALL = ("-m", "pip", "install", "--quiet", "--disable-pip-version-check", "--require-hashes", "-r")


@dataclass(frozen=True)
class Interpreter:
    """A Python to run the functions' code on."""

    name: str  # how the report names it: "python3.14 (Debian sid chroot)"
    version: tuple[int, int]
    command: tuple[str, ...]  # argv prefix that runs its python with the repository at `root`
    root: str  # the repository's path as that python sees it
    venv_python: tuple[str, ...] | None = None  # argv prefix of the venv's python, once made

    def run(self, args: list[str], *, venv: bool = False, **kwargs: object) -> subprocess.CompletedProcess[str]:
        prefix = self.venv_python if venv and self.venv_python else self.command
        return subprocess.run([*prefix, *args], text=True, check=False, **kwargs)  # type: ignore[call-overload]


def cache_dir() -> Path:
    base = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
    return base / "idempotent-order-pipeline"


def lock_digest() -> str:
    return hashlib.sha256((REPO / LOCK).read_bytes()).hexdigest()[:16]


def _version(command: list[str]) -> tuple[int, int] | None:
    try:
        out = subprocess.run(
            [*command, "-c", "import sys; print(*sys.version_info[:2])"],
            capture_output=True,
            text=True,
            check=True,
            timeout=60,
        ).stdout.split()
    except (OSError, subprocess.SubprocessError):
        return None
    return (int(out[0]), int(out[1])) if len(out) == 2 else None


def _in_chroot(root: Path) -> tuple[str, ...]:
    """argv prefix: a private mount namespace (gone with the process), the repository bound at /src, chroot."""
    script = (
        'mount --bind "$1" "$2/src" && mount -t proc proc "$2/proc" && mount --rbind /dev "$2/dev" '
        '&& root="$2" && shift 2 && exec chroot "$root" env --chdir=/src PYTHONDONTWRITEBYTECODE=1 "$@"'
    )
    return ("unshare", "--mount", "--propagation", "private", "sh", "-c", script, "sh", str(REPO), str(root))


def chroot_interpreter(build: bool) -> Interpreter | None:
    """The cached Debian sid chroot with python3.14, built first when ``build`` and the machine allows it."""
    root = cache_dir() / "python3.14-sid"
    ready = root / ".ready"
    if not ready.exists():
        if not build or os.geteuid() != 0 or not shutil.which("debootstrap") or not shutil.which("unshare"):
            return None
        staging = root.with_name(root.name + ".partial")
        shutil.rmtree(staging, ignore_errors=True)
        staging.parent.mkdir(parents=True, exist_ok=True)
        print(f"runtime: building a Debian sid chroot with python3.14 in {root} (debootstrap, about a minute)")
        done = subprocess.run(
            ["debootstrap", "--variant=minbase", f"--include={CHROOT_PACKAGES}", "sid", str(staging)],
            capture_output=True,
            text=True,
            check=False,
        )
        if done.returncode != 0:
            print(f"runtime: debootstrap failed ({done.returncode}): {done.stderr.strip()[-500:]}")
            return None
        (staging / MOUNT_POINT.lstrip("/")).mkdir(exist_ok=True)
        shutil.rmtree(root, ignore_errors=True)
        staging.rename(root)
        ready.touch()
    for host_file in HOST_FILES:  # refreshed each run: the host's resolver and CA bundle may change
        if Path(host_file).exists():
            target = root / host_file.lstrip("/")
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(host_file, target)
    command = (*_in_chroot(root), "python3.14")
    version = _version(list(command))
    if version is None:
        return None
    venv = f"/venv-{lock_digest()}"
    return Interpreter(
        "python3.14 (Debian sid chroot, debootstrap)",
        version,
        command,
        MOUNT_POINT,
        (*_in_chroot(root), f"{venv}/bin/python"),
    )


def local_interpreters() -> list[Interpreter]:
    """Every other CPython 3.11+ on this machine: pyenv's versions, then python3.1x on PATH."""
    found: dict[tuple[int, int], Interpreter] = {}
    candidates: list[str] = []
    pyenv = Path(os.environ.get("PYENV_ROOT") or Path.home() / ".pyenv") / "versions"
    if pyenv.is_dir():
        candidates += [str(path / "bin" / "python3") for path in sorted(pyenv.iterdir())]
    candidates += [path for minor in range(11, 20) if (path := shutil.which(f"python3.{minor}"))]
    for candidate in candidates:
        version = _version([candidate])
        if version and version >= (3, 11) and version not in found:
            found[version] = Interpreter(
                f"python{version[0]}.{version[1]} ({candidate})", version, (candidate,), str(REPO)
            )
    return [found[version] for version in sorted(found, reverse=True)]


def given_interpreter() -> Interpreter | None:
    given = os.environ.get("RUNTIME_PYTHON")
    if not given:
        return None
    version = _version([given])
    if version is None:
        sys.exit(f"runtime: RUNTIME_PYTHON={given!r} does not run")
    return Interpreter(f"python{version[0]}.{version[1]} (RUNTIME_PYTHON={given})", version, (given,), str(REPO))


def interpreters(build: bool) -> list[Interpreter]:
    """The runtime's interpreter first (given, the chroot's, else the newest 3.12+ found), then every other one.

    Raises:
        SystemExit: no Python 3.12 or later on this machine.
    """
    runtime = given_interpreter() or chroot_interpreter(build=build)
    local = local_interpreters()
    if runtime is None:
        runtime = next((found for found in local if found.version >= (3, 12)), None)
    if runtime is None:
        sys.exit("runtime: no python3.14 and no Python 3.12+ on this machine: the function tests cannot run")
    return [runtime, *(other for other in local if other.version != runtime.version)]


def with_venv(interpreter: Interpreter) -> Interpreter:
    """The interpreter with a venv from the runtime lock (made once per lock, cached)."""
    if interpreter.venv_python is not None:  # the chroot's venv lives inside the chroot
        python = list(interpreter.venv_python)
    else:
        major, minor = interpreter.version
        python = [str(cache_dir() / f"venv-{major}.{minor}-{lock_digest()}" / "bin" / "python")]
    if _version(python) is None:
        print(f"runtime: a venv for {interpreter.name} from {LOCK}")
        venv = python[-1].removesuffix("/bin/python")
        made = interpreter.run(["-m", "venv", "--clear", venv]).returncode == 0
        install = [*python, *INSTALL, f"{interpreter.root}/{LOCK}"]
        env = {**os.environ, "PIP_CERT": HOST_FILES[1]}
        if not made or subprocess.run(install, check=False, env=env).returncode != 0:
            sys.exit(f"runtime: could not install {LOCK} for {interpreter.name}")
    return Interpreter(interpreter.name, interpreter.version, interpreter.command, interpreter.root, tuple(python))


def shipped_modules() -> list[str]:
    """Every module the functions load, relative to the repository."""
    return sorted(
        path.relative_to(REPO).as_posix()
        for root in SHIPPED_ROOTS
        for path in (REPO / root).rglob("*.py")
        if "__pycache__" not in path.parts
    )


def generated_sources() -> dict[str, str]:
    """The code generated at synth that ships with a function: the worked app's order-schema validator."""
    sys.path[:0] = [str(REPO / "infra"), str(REPO)]
    from app import ORDER_SCHEMA  # the worked app's schema, imported only when asked
    from idempotent_order_pipeline import order_schema

    return {"<generated order_consumer/order_schema_validator.py>": order_schema.validator_code(ORDER_SCHEMA)}


#: Run by each interpreter: compile the files named in argv and the sources given as JSON on stdin.
_COMPILE = """
import json, sys
sources = {path: open(path, "rb").read() for path in sys.argv[1:]}
sources.update(json.load(sys.stdin))
failed = 0
for name, source in sources.items():
    try:
        compile(source, name, "exec", dont_inherit=True)
    except (SyntaxError, ValueError, UnicodeError) as exc:
        failed += 1
        print(f"  {name}: {type(exc).__name__}: {exc}")
print(f"  compiled {len(sources) - failed} of {len(sources)} modules")
sys.exit(1 if failed else 0)
"""


def compile_everywhere(interpreters: list[Interpreter], modules: list[str], sources: dict[str, str]) -> bool:
    """Compile ``modules`` (repository paths) and ``sources`` on each interpreter; False if any failed."""
    ok = True
    for interpreter in interpreters:
        print(f"runtime: compile on {interpreter.name}, {'.'.join(map(str, interpreter.version))}")
        paths = [f"{interpreter.root}/{module}" for module in modules]
        ok = interpreter.run(["-c", _COMPILE, *paths], input=json.dumps(sources)).returncode == 0 and ok
    return ok


def bytecode(interpreter: Interpreter, action: str) -> int:
    """:mod:`idempotent_order_pipeline.bytecode` on ``interpreter``: ``write`` or ``check`` the shipped roots."""
    print(f"runtime: {action} the shipped bytecode on {interpreter.name}")
    roots = [f"{interpreter.root}/{root}" for root in SHIPPED_ROOTS]
    return interpreter.run([f"{interpreter.root}/{BYTECODE_TOOL}", action, *roots]).returncode


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--fast", action="store_true", help="the fast tier of the function tests (make test)")
    parser.add_argument("--no-build", action="store_true", help="use a cached chroot only, never build one")
    parser.add_argument(
        "--prepare",
        action="store_true",
        help="only build (or find) the interpreter and its venv: standard library only, so make test runs it "
        "beside the dev venv's install",
    )
    parser.add_argument(
        "--write-bytecode",
        action="store_true",
        help="only (re)write the runtime's bytecode the assets ship (make bytecode): needs python3.14",
    )
    parser.add_argument(
        "--record",
        type=Path,
        help="with --prepare and no pytest arguments: write the runtime's name into this file when it is python3.14 "
        "(make test reads it: the functions' fast tests then run there only)",
    )
    parser.add_argument("pytest_args", nargs="*", help="after --: more pytest arguments")
    args = parser.parse_args(argv)

    runtime, *others = interpreters(build=not args.no_build)
    if args.prepare:
        with_venv(runtime)
        print(f"runtime: {runtime.name} ready, {'.'.join(map(str, runtime.version))}")
        if args.record and runtime.version == RUNTIME_VERSION and not args.pytest_args:  # a -k runs only some
            args.record.write_text(f"{RUNTIME_NAME}\n", encoding="utf-8")
        return 0
    if args.write_bytecode:
        if runtime.version != RUNTIME_VERSION:
            sys.exit(f"runtime: the shipped bytecode must be compiled by python3.14; found only {runtime.name}")
        return bytecode(runtime, "write")
    if runtime.version != RUNTIME_VERSION:
        print(f"runtime: NO python3.14 here (no RUNTIME_PYTHON, no chroot); falling back to {runtime.name}")
    compiled_on = [runtime, *others]
    if not compile_everywhere(compiled_on, shipped_modules(), generated_sources()):
        return 1
    if runtime.version == RUNTIME_VERSION and bytecode(runtime, "check") != 0:
        return 1
    if runtime.version != RUNTIME_VERSION:
        print("runtime: the shipped python3.14 bytecode was NOT checked (no python3.14 here)")
    runtime = with_venv(runtime)
    selection = list(FAST_SELECTION) if args.fast else []
    tests = [f"{runtime.root}/{path}" for path in FUNCTION_TESTS]
    print(f"runtime: the function tests on {runtime.name}: {' '.join(FUNCTION_TESTS)} {' '.join(selection)}")
    done = runtime.run(
        [
            "-m",
            "pytest",
            "-q",
            "-p",
            "no:cacheprovider",
            f"--rootdir={runtime.root}",
            *selection,
            *args.pytest_args,
            *tests,
        ],
        venv=True,
        cwd=str(REPO),
    )
    version = ".".join(map(str, runtime.version))
    print(f"runtime: the function tests ran on {runtime.name}, {version}: exit {done.returncode}")
    return done.returncode


if __name__ == "__main__":
    sys.exit(main())
