"""Which Python runs a deployed function: the one its runtime names, when this machine has it.

Lambda runs a ``python3.14`` function on Python 3.14, with the AWS SDK for Python (boto3 and the
distributions it requires) beside its code and layers. The stand-in does the same where it can: for
a runtime ``pythonX.Y`` it takes the first interpreter of X.Y found here:

1. ``ORDER_PIPELINE_SANDBOX_PYTHON_X_Y=/path/to/python`` (one variable per runtime, e.g.
   ``ORDER_PIPELINE_SANDBOX_PYTHON_3_14``), when it runs X.Y;
2. the stand-in's own interpreter, when it is X.Y;
3. ``ORDER_PIPELINE_SANDBOX_CHROOT=DIR``: a Linux root holding ``/usr/bin/pythonX.Y`` (a
   debootstrapped Debian, say). The function then runs in it through ``unshare --mount`` and
   ``chroot`` (root only), in a private mount namespace where every directory it reads (its code,
   its layers, the SDK, the stand-in's runtime script) is bound read-only at the same path, with
   ``/proc``, ``/dev``, the host's ``/etc/hosts`` and a private 512 MB ``/tmp`` (Lambda's default
   ephemeral storage); the mounts go with the process. A bound path outside ``/tmp`` leaves an empty
   directory (its mount point) in ``DIR``;
4. ``pythonX.Y`` on ``PATH`` (a pyenv shim counts when it runs: it is followed to its interpreter);
5. pyenv's newest ``X.Y.*`` (``$PYENV_ROOT``, default ``~/.pyenv``).

Otherwise the function runs on the stand-in's own interpreter, and ``sandbox start``, ``sandbox
status`` and the demo's report say so in a line naming the function, its runtime, the interpreter
and why (:meth:`RuntimeChoice.line`)::

    function Orders-Consumer (python3.14) runs on python3.11 (/usr/bin/python3.11): no python3.14 found

The SDK is the one installed beside the stand-in, copied once per state directory
(:func:`build_sdk`): boto3 and what it requires, nothing else of the stand-in's environment, as
Lambda's runtime provides it. Those distributions are pure Python, so they import on any version;
so are the layers the stand-in publishes (Powertools). A distribution with compiled modules would
not: then a function of another version runs on the stand-in's own interpreter, and its line says why.
"""

from __future__ import annotations

import hashlib
import importlib.machinery
import os
import re
import shutil
import subprocess
import sys
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from importlib.metadata import Distribution, PackageNotFoundError, distribution
from pathlib import Path, PurePosixPath
from typing import Any

#: The Python runtimes Lambda offers (https://docs.aws.amazon.com/lambda/latest/dg/lambda-python.html):
#: ``sandbox start`` says which interpreter runs the functions of each.
LAMBDA_PYTHON_RUNTIMES = ("python3.10", "python3.11", "python3.12", "python3.13", "python3.14")
#: ``ORDER_PIPELINE_SANDBOX_PYTHON_3_14``: the interpreter for ``python3.14`` functions (see :func:`python_variable`).
PYTHON_VARIABLE_PREFIX = "ORDER_PIPELINE_SANDBOX_PYTHON_"
#: A Linux root whose ``/usr/bin/pythonX.Y`` run the functions of ``pythonX.Y`` (as root).
CHROOT_VARIABLE = "ORDER_PIPELINE_SANDBOX_CHROOT"
#: The SDK Lambda's Python runtimes provide: this distribution and every one it requires.
SDK_DISTRIBUTION = "boto3"
#: How long an interpreter may take to say its version (a cold pyenv shim, a chroot's first start).
PROBE_TIMEOUT_SECONDS = 30.0
#: The size of the private ``/tmp`` a function gets in a chroot: Lambda's default ephemeral storage (MB).
LAMBDA_TMP_MB = 512
#: The host files a chroot's function reads as the host's (the endpoint is ``localhost``).
CHROOT_HOST_FILES = ("/etc/hosts",)

_RUNTIME = re.compile(r"python(\d+)\.(\d+)")
_PROBE = "import sys; print(sys.version_info[0], sys.version_info[1], sys.executable)"
#: Run by ``sh -c`` in a private mount namespace: ``root count dir... -- command...``.
_CHROOT_SCRIPT = r"""
root="$1"; tmp_size="$2"; count="$3"; shift 3
mount -t proc proc "$root/proc" && mount --rbind /dev "$root/dev" || exit 125
mount -t tmpfs -o size="$tmp_size" tmpfs "$root/tmp" || exit 125
while [ "$count" -gt 0 ]; do
  if [ -d "$1" ]; then mkdir -p "$root$1"; else mkdir -p "$root$(dirname "$1")" && touch "$root$1"; fi
  mount --bind -o ro "$1" "$root$1" || exit 125
  shift; count=$((count - 1))
done
exec chroot "$root" "$@"
"""


def python_variable(runtime: str) -> str:
    """The variable naming the interpreter of ``runtime``: ``python3.14`` -> ``ORDER_PIPELINE_SANDBOX_PYTHON_3_14``."""
    return PYTHON_VARIABLE_PREFIX + runtime.removeprefix("python").replace(".", "_")


def runtime_version(runtime: str) -> tuple[int, int] | None:
    """``(3, 14)`` for ``python3.14``; None for a runtime that is not CPython's (``nodejs22.x``)."""
    match = _RUNTIME.fullmatch(runtime)
    return None if match is None else (int(match[1]), int(match[2]))


def _name(version: tuple[int, int]) -> str:
    return f"python{version[0]}.{version[1]}"


@dataclass(frozen=True)
class Interpreter:
    """A CPython this machine can run: its version and its executable (as it sees itself)."""

    version: tuple[int, int]
    executable: str
    #: The root it runs in (``executable`` is a path inside it), None: the host's.
    chroot: str | None = None

    @property
    def name(self) -> str:
        return _name(self.version)

    @property
    def where(self) -> str:
        """Where it is, as the status lines say it."""
        return self.executable if self.chroot is None else f"{self.executable} in the chroot {self.chroot}"

    def command(self, visible: Sequence[Path] = (), cwd: Path | None = None) -> list[str]:
        """The argv prefix that runs it; in a chroot, with ``visible`` bound at their paths and ``cwd`` set."""
        if self.chroot is None:
            return [self.executable]
        paths = _outermost([*map(str, visible), *(path for path in CHROOT_HOST_FILES if Path(path).exists())])
        chdir = [] if cwd is None else ["env", f"--chdir={cwd}"]
        return [
            "unshare",
            "--mount",
            "--propagation",
            "private",
            "sh",
            "-c",
            _CHROOT_SCRIPT,
            "sh",
            self.chroot,
            f"{LAMBDA_TMP_MB}m",
            str(len(paths)),
            *paths,
            *chdir,
            self.executable,
        ]


def _outermost(paths: Sequence[str]) -> list[str]:
    """``paths`` made absolute, without any that lies inside another (one bind covers it)."""
    unique = sorted({os.path.abspath(path) for path in paths})
    return [path for path in unique if not any(path.startswith(other.rstrip("/") + "/") for other in unique)]


def own_interpreter() -> Interpreter:
    """The stand-in's own interpreter."""
    return Interpreter((sys.version_info[0], sys.version_info[1]), sys.executable)


def probe(command: Sequence[str], *, chroot: str | None = None) -> Interpreter | None:
    """The interpreter ``command`` runs, asked itself; None when it does not run."""
    try:
        done = subprocess.run(  # noqa: S603 - an interpreter the operator named or this machine has
            [*command, "-c", _PROBE],
            capture_output=True,
            text=True,
            check=True,
            timeout=PROBE_TIMEOUT_SECONDS,
            stdin=subprocess.DEVNULL,
        )
    except (OSError, subprocess.SubprocessError):
        return None
    parts = done.stdout.split()
    if len(parts) != 3 or not (parts[0].isdigit() and parts[1].isdigit()):
        return None
    return Interpreter((int(parts[0]), int(parts[1])), parts[2], chroot)


@dataclass(frozen=True)
class RuntimeChoice:
    """The interpreter that runs the functions of one runtime, how it was found, and why it differs if it does."""

    runtime: str
    interpreter: Interpreter
    #: How it was found: the variable, ``the stand-in's own``, the chroot, ``PATH`` or ``pyenv``.
    found_by: str
    #: None when it runs the runtime's version; else why it runs another (the status lines say it).
    reason: str | None = None

    @property
    def matches(self) -> bool:
        return self.reason is None

    def line(self, function_name: str) -> str:
        """``function NAME (python3.14) runs on python3.14 (/usr/bin/python3.14)``, with ``: why`` when it differs."""
        line = f"function {function_name} ({self.runtime}) runs on {self.interpreter.name} ({self.interpreter.where})"
        return line if self.reason is None else f"{line}: {self.reason}"

    def summary(self) -> str:
        """What ``sandbox start`` says of the runtime, before any function is deployed."""
        if self.reason is None:
            return f"runtime {self.runtime}: {self.interpreter.name} ({self.interpreter.where}, {self.found_by})"
        return (
            f"runtime {self.runtime}: its functions run on {self.interpreter.name} ({self.interpreter.where}): "
            f"{self.reason}"
        )

    def as_dict(self, function_name: str | None = None) -> dict[str, Any]:
        """The status document's form (``sandbox status --json``)."""
        document: dict[str, Any] = {
            "runtime": self.runtime,
            "python": ".".join(map(str, self.interpreter.version)),
            "executable": self.interpreter.executable,
            "chroot": self.interpreter.chroot,
            "found_by": self.found_by,
            "matches": self.matches,
            "reason": self.reason,
            "summary": self.summary(),
        }
        if function_name is not None:
            document["line"] = self.line(function_name)
        return document


@dataclass
class Interpreters:
    """Finds, once per runtime, the interpreter that runs its functions (the module docstring's order)."""

    environ: Mapping[str, str] = field(default_factory=lambda: dict(os.environ))
    own: Interpreter = field(default_factory=own_interpreter)
    #: Why no interpreter of another version can run the functions (the SDK is not pure Python); None: any can.
    foreign_refused: str | None = None
    #: Asks a command which interpreter it runs (:func:`probe`; tests give their own).
    prober: Callable[..., Interpreter | None] = field(default=probe, repr=False)
    _chosen: dict[str, RuntimeChoice] = field(default_factory=dict, repr=False)

    def choose(self, runtime: str) -> RuntimeChoice:
        """The interpreter for ``runtime``'s functions: a matching one when found, else the stand-in's own."""
        if runtime not in self._chosen:
            self._chosen[runtime] = self._choose(runtime)
        return self._chosen[runtime]

    def _choose(self, runtime: str) -> RuntimeChoice:
        version = runtime_version(runtime)
        if version is None:
            return RuntimeChoice(runtime, self.own, "the stand-in's own", f"{runtime} is not a Python runtime")
        if version == self.own.version and not self.environ.get(python_variable(runtime)):
            return RuntimeChoice(runtime, self.own, "the stand-in's own")
        notes: list[str] = []
        for found_by, candidate in self._candidates(runtime, version, notes):
            if candidate.version == version:
                if candidate.version != self.own.version and self.foreign_refused is not None:
                    notes.append(f"{candidate.name} ({candidate.where}) found, but {self.foreign_refused}")
                    break
                return RuntimeChoice(runtime, candidate, found_by)
        why = "; ".join(notes) if notes else f"no {runtime} found"
        return RuntimeChoice(runtime, self.own, "the stand-in's own", why)

    def _candidates(
        self, runtime: str, version: tuple[int, int], notes: list[str]
    ) -> Iterator[tuple[str, Interpreter]]:
        """Each place of the module docstring's order, lazily: (how found, interpreter)."""
        variable = python_variable(runtime)
        given = self.environ.get(variable)
        if given:
            found = self.prober([given])
            if found is None or found.version != version:
                ran = "does not run" if found is None else f"runs {found.name}"
                notes.append(f"{variable}={given} {ran}")
            else:
                yield variable, found
        if version == self.own.version:
            yield "the stand-in's own", self.own
        chroot = self.environ.get(CHROOT_VARIABLE)
        if chroot:
            found = self._in_chroot(chroot, version, notes)
            if found is not None:
                yield CHROOT_VARIABLE, found
        on_path = shutil.which(runtime, path=self.environ.get("PATH"))
        if on_path:
            found = self.prober([on_path])
            if found is not None:
                yield "PATH", found
        pyenv = Path(self.environ.get("PYENV_ROOT") or Path.home() / ".pyenv") / "versions"
        for candidate in _pyenv_versions(pyenv, version):
            found = self.prober([str(candidate)])
            if found is not None:
                yield "pyenv", found
                break
        if not notes:
            notes.append(f"no {runtime} found")

    def _in_chroot(self, root: str, version: tuple[int, int], notes: list[str]) -> Interpreter | None:
        executable = f"/usr/bin/{_name(version)}"
        if not (Path(root) / executable.lstrip("/")).exists():
            return None
        if os.geteuid() != 0 or not (shutil.which("unshare") and shutil.which("chroot")):
            needs = "root, unshare and chroot"
            notes.append(f"{CHROOT_VARIABLE}={root} has {_name(version)}, but running it needs {needs}")
            return None
        interpreter = Interpreter(version, executable, root)
        found = self.prober(interpreter.command(), chroot=root)
        if found is None:
            notes.append(f"{CHROOT_VARIABLE}={root}: {executable} does not run in it")
        return found

    def summaries(self, runtimes: Sequence[str] = LAMBDA_PYTHON_RUNTIMES) -> list[dict[str, Any]]:
        """The choice for each runtime (for ``state.json`` and ``sandbox start``)."""
        return [self.choose(runtime).as_dict() for runtime in runtimes]


def _pyenv_versions(versions_dir: Path, version: tuple[int, int]) -> list[Path]:
    """pyenv's ``X.Y.*`` interpreters, newest first."""
    if not versions_dir.is_dir():
        return []
    prefix = f"{version[0]}.{version[1]}."
    found = []
    for path in versions_dir.iterdir():
        patch = path.name.removeprefix(prefix)
        if path.name.startswith(prefix) and patch.isdigit():
            executable = path / "bin" / _name(version)
            if executable.exists():
                found.append((int(patch), executable))
    return [executable for _, executable in sorted(found, reverse=True)]


# --- the SDK ---------------------------------------------------------------------------------------


def sdk_distributions(root: str = SDK_DISTRIBUTION) -> list[Distribution]:
    """``root`` and every installed distribution it requires (not its extras), each once, by name."""
    found: dict[str, Distribution] = {}
    pending = [root]
    while pending:
        name = _normalized(pending.pop())
        if name in found:
            continue
        try:
            dist = distribution(name)
        except PackageNotFoundError:
            continue  # a requirement of another Python version (a marker not met here)
        found[name] = dist
        for requirement in dist.requires or ():
            if "extra" not in requirement.partition(";")[2]:
                pending.append(re.split(r"[\s;<>=!~\[(]", requirement.strip(), maxsplit=1)[0])
    return [found[name] for name in sorted(found)]


def _normalized(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def _files(dist: Distribution) -> list[PurePosixPath]:
    """The distribution's files inside its site directory (not scripts in ``bin/``)."""
    return [PurePosixPath(str(file)) for file in dist.files or () if ".." not in PurePosixPath(str(file)).parts]


def compiled_modules(distributions: Sequence[Distribution]) -> list[str]:
    """The extension modules among the distributions' files (they import on one Python version only)."""
    suffixes = tuple({*importlib.machinery.EXTENSION_SUFFIXES, ".so", ".pyd"})
    return sorted(str(file) for dist in distributions for file in _files(dist) if file.name.endswith(suffixes))


def sdk_refusal(distributions: Sequence[Distribution] | None = None) -> str | None:
    """Why the SDK cannot serve an interpreter of another version (its compiled modules); None: it can."""
    compiled = compiled_modules(sdk_distributions() if distributions is None else distributions)
    if not compiled:
        return None
    return f"the SDK beside the stand-in has compiled modules for {_name(own_interpreter().version)} ({compiled[0]})"


def build_sdk(work_dir: Path) -> Path:
    """The SDK directory (``work_dir/sdk/<digest>``): boto3 and its requirements, copied from this environment.

    Made once per set of versions (the directory's name is their digest); files are hard-linked when
    ``work_dir`` is on the same filesystem, else copied.
    """
    distributions = sdk_distributions()
    pins = "\n".join(f"{dist.metadata['Name']}=={dist.version}" for dist in distributions)
    target = work_dir / "sdk" / hashlib.sha256(pins.encode()).hexdigest()[:16]
    if target.is_dir():
        return target
    partial = target.with_name(f"{target.name}.{os.getpid()}.partial")
    shutil.rmtree(partial, ignore_errors=True)
    for dist in distributions:
        for relative in _files(dist):
            source = Path(str(dist.locate_file(str(relative))))
            if not source.is_file():
                continue
            destination = partial / relative
            destination.parent.mkdir(parents=True, exist_ok=True)
            try:
                os.link(source, destination)
            except OSError:
                shutil.copyfile(source, destination)
    partial.mkdir(parents=True, exist_ok=True)
    (partial / "SDK.txt").write_text(pins + "\n")
    partial.replace(target)
    return target


@dataclass(frozen=True)
class FunctionRuntime:
    """What a function's execution environments start with: its runtime's interpreter and the SDK."""

    choice: RuntimeChoice
    sdk_dir: Path


class Runtimes:
    """The interpreters and the SDK of one stand-in (its state directory holds the SDK's copy)."""

    def __init__(self, work_dir: Path, interpreters: Interpreters | None = None) -> None:
        self._work_dir = work_dir
        self.interpreters = interpreters or Interpreters(foreign_refused=sdk_refusal())
        self._sdk_dir: Path | None = None

    def sdk_dir(self) -> Path:
        if self._sdk_dir is None:
            self._sdk_dir = build_sdk(self._work_dir)
        return self._sdk_dir

    def for_runtime(self, runtime: str) -> FunctionRuntime:
        """How the functions of ``runtime`` run here."""
        return FunctionRuntime(self.interpreters.choose(runtime), self.sdk_dir())
