"""CPU caps by cgroup: Lambda's CPU share of a memory size, for one benchmark process.

Lambda gives a function CPU in proportion to its memory: one vCPU at 1,769 MB. A consumer modelled
at ``memory_mb`` runs in its own process, pinned to one core (``sched_setaffinity``) and in its own
cgroup with a CFS bandwidth quota of ``memory_mb / 1769`` of that core per period:

* cgroup v2 (a ``cgroup2`` mount with the ``cpu`` controller): ``cpu.max`` = ``"<quota> <period>"``;
* cgroup v1 (a ``cpu`` hierarchy): ``cpu.cfs_period_us`` and ``cpu.cfs_quota_us``.

The period is 10 ms. The kernel refuses quotas under 1 ms, so a share below 10 % (128 MB: 7.2 %)
gets the shortest period that allows it (20 ms for 128 MB: 1.45 ms); the share is the same. A share
above one core (3,008 MB: 1.7 vCPU) is one core: the process is pinned to one, as a GIL-bound
Python process barely uses a second one.

:class:`CgroupCaps` creates one cgroup per process under the root of the hierarchy, named after the
benchmark's pid, and removes them in :meth:`CgroupCaps.close`. Each cgroup also gets the highest
scheduling weight (``cpu.shares`` on v1, ``cpu.weight`` on v2): on a machine shared with other work,
"29 % of one core" means something only if the process gets the core whenever it is runnable and
has quota left; the quota still bounds what it takes, so the weight only changes who waits for
whom within that bound. When no writable hierarchy exists
(no root, a read-only mount, no ``cpu`` controller), :func:`open_caps` says why and returns ``None``:
the run goes on uncapped and is labelled ``capped: false``.
"""

from __future__ import annotations

import contextlib
import os
from dataclasses import dataclass
from pathlib import Path

#: Memory at which Lambda gives one full vCPU.
FULL_VCPU_MB = 1769
#: The CFS period the issue asks for.
PERIOD_US = 10_000
#: The kernel's smallest CFS quota.
MIN_QUOTA_US = 1_000
#: The highest scheduling weights: cgroup v1 ``cpu.shares``, v2 ``cpu.weight``.
TOP_SHARES_V1 = 262_144
TOP_WEIGHT_V2 = 10_000
CGROUP_ROOT = Path("/sys/fs/cgroup")


def cpu_share(memory_mb: int) -> float:
    """Lambda's CPU share of one core at this memory size (above 1: more than one vCPU)."""
    return memory_mb / FULL_VCPU_MB


@dataclass(frozen=True)
class Quota:
    """A CFS bandwidth limit: ``quota_us`` of CPU per ``period_us``, capped at one core."""

    quota_us: int
    period_us: int

    @classmethod
    def for_memory(cls, memory_mb: int) -> Quota:
        share = min(cpu_share(memory_mb), 1.0)
        period = PERIOD_US
        while round(share * period) < MIN_QUOTA_US:
            period *= 2
        return cls(quota_us=round(share * period), period_us=period)

    @property
    def share(self) -> float:
        return self.quota_us / self.period_us


@dataclass(frozen=True)
class Hierarchy:
    """Where the cgroups go, and which interface files they have."""

    path: Path
    version: int


def find_hierarchy(root: Path = CGROUP_ROOT) -> tuple[Hierarchy | None, str]:
    """The writable cgroup hierarchy with the ``cpu`` controller, or None and why not."""
    # v2: the unified hierarchy at the root, or at root/unified (hybrid set-ups).
    for candidate in (root, root / "unified"):
        controllers = candidate / "cgroup.controllers"
        if controllers.is_file() and "cpu" in controllers.read_text().split():
            return _writable(Hierarchy(candidate, 2))
    v1 = root / "cpu"
    if (v1 / "cpu.cfs_quota_us").is_file():
        return _writable(Hierarchy(v1, 1))
    return None, f"no cgroup hierarchy with the cpu controller under {root}"


def _writable(hierarchy: Hierarchy) -> tuple[Hierarchy | None, str]:
    if not os.access(hierarchy.path, os.W_OK):
        return None, f"cgroup v{hierarchy.version} hierarchy {hierarchy.path} is not writable (not root?)"
    if hierarchy.version == 2:
        subtree = hierarchy.path / "cgroup.subtree_control"
        if "cpu" not in subtree.read_text().split():
            try:
                subtree.write_text("+cpu")
            except OSError as exc:
                return None, f"cannot enable the cpu controller in {subtree}: {exc}"
    return hierarchy, f"cgroup v{hierarchy.version} at {hierarchy.path}"


class CgroupCaps:
    """One cgroup per capped process, created here and removed by :meth:`close`."""

    def __init__(self, hierarchy: Hierarchy) -> None:
        self.hierarchy = hierarchy
        self._groups: dict[str, Path] = {}

    @property
    def description(self) -> str:
        files = (
            "cpu.max, cpu.weight 10000"
            if self.hierarchy.version == 2
            else "cpu.cfs_period_us + cpu.cfs_quota_us, cpu.shares 262144"
        )
        return f"cgroup v{self.hierarchy.version} ({files}) under {self.hierarchy.path}"

    def create(self, name: str) -> Path:
        """A new cgroup for the process called ``name`` (uncapped until :meth:`set_quota`)."""
        path = self.hierarchy.path / f"order-bench-{os.getpid()}-{name}"
        path.mkdir()
        self._groups[name] = path
        if self.hierarchy.version == 2:
            (path / "cpu.weight").write_text(str(TOP_WEIGHT_V2))
        else:
            (path / "cpu.shares").write_text(str(TOP_SHARES_V1))
        return path

    def add(self, name: str, pid: int) -> None:
        """Move the process ``pid`` (all its threads) into the cgroup ``name``."""
        (self._groups[name] / "cgroup.procs").write_text(str(pid))

    def set_quota(self, name: str, quota: Quota) -> None:
        path = self._groups[name]
        if self.hierarchy.version == 2:
            (path / "cpu.max").write_text(f"{quota.quota_us} {quota.period_us}")
        else:
            # Lower the quota before changing the period, so that no intermediate value is refused.
            (path / "cpu.cfs_quota_us").write_text("-1")
            (path / "cpu.cfs_period_us").write_text(str(quota.period_us))
            (path / "cpu.cfs_quota_us").write_text(str(quota.quota_us))

    def quota(self, name: str) -> Quota:
        """The quota the kernel holds for the cgroup (read back, to state what was applied)."""
        path = self._groups[name]
        if self.hierarchy.version == 2:
            quota, period = (path / "cpu.max").read_text().split()
            return Quota(quota_us=-1 if quota == "max" else int(quota), period_us=int(period))
        return Quota(
            quota_us=int((path / "cpu.cfs_quota_us").read_text()),
            period_us=int((path / "cpu.cfs_period_us").read_text()),
        )

    def throttled_us(self, name: str) -> int:
        """Time the cgroup's processes spent throttled so far (µs)."""
        stat = dict(line.split() for line in (self._groups[name] / "cpu.stat").read_text().splitlines())
        if self.hierarchy.version == 2:
            return int(stat.get("throttled_usec", 0))
        return int(stat.get("throttled_time", 0)) // 1000

    def close(self) -> None:
        """Move what is left back to the root and remove every cgroup made here."""
        for path in self._groups.values():
            with contextlib.suppress(OSError):
                for pid in (path / "cgroup.procs").read_text().split():
                    with contextlib.suppress(OSError):
                        (self.hierarchy.path / "cgroup.procs").write_text(pid)
            with contextlib.suppress(OSError):
                path.rmdir()
        self._groups.clear()


def open_caps(root: Path = CGROUP_ROOT) -> tuple[CgroupCaps | None, str]:
    """Caps on this machine, or None and the reason the run is uncapped."""
    hierarchy, note = find_hierarchy(root)
    if hierarchy is None:
        return None, note
    caps = CgroupCaps(hierarchy)
    try:  # a probe: create, cap and remove one cgroup before the run relies on it
        caps.create("probe")
        caps.set_quota("probe", Quota.for_memory(512))
    except OSError as exc:
        return None, f"cannot create a capped cgroup in {hierarchy.path}: {exc}"
    finally:
        caps.close()
    return caps, note
