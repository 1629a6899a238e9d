"""CPU caps: Lambda's share of a memory size as a CFS quota, and cgroups created and removed."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from bench import cgroups
from bench.cgroups import CgroupCaps, Hierarchy, Quota


@pytest.mark.parametrize(
    ("memory_mb", "quota_us", "period_us"),
    [
        pytest.param(512, 2894, 10_000, id="512-mb-is-28.9-percent"),
        pytest.param(1024, 5789, 10_000, id="1024-mb"),
        pytest.param(1769, 10_000, 10_000, id="one-vcpu"),
        pytest.param(3008, 10_000, 10_000, id="more-than-one-vcpu-is-the-pinned-core"),
        # the kernel refuses quotas under 1 ms: the period doubles, the share stays
        pytest.param(128, 1447, 20_000, id="128-mb-longer-period"),
    ],
)
def test_quota_is_the_memory_share_of_one_core(memory_mb: int, quota_us: int, period_us: int) -> None:
    quota = Quota.for_memory(memory_mb)
    assert (quota.quota_us, quota.period_us) == (quota_us, period_us)
    assert quota.quota_us >= cgroups.MIN_QUOTA_US
    assert quota.share == pytest.approx(min(1.0, memory_mb / 1769), abs=0.001)


def _fake_v1(root: Path) -> Path:
    cpu = root / "cpu"
    cpu.mkdir(parents=True)
    (cpu / "cpu.cfs_quota_us").write_text("-1\n")
    return cpu


def test_finds_a_v2_hierarchy_with_the_cpu_controller(tmp_path: Path) -> None:
    # GIVEN a hybrid layout: v2 at root/unified with the cpu controller enabled
    unified = tmp_path / "unified"
    unified.mkdir()
    (unified / "cgroup.controllers").write_text("cpuset cpu io memory\n")
    (unified / "cgroup.subtree_control").write_text("cpu\n")
    hierarchy, note = cgroups.find_hierarchy(tmp_path)
    assert hierarchy == Hierarchy(unified, 2)
    assert "cgroup v2" in note


def test_finds_a_v1_cpu_hierarchy(tmp_path: Path) -> None:
    cpu = _fake_v1(tmp_path)
    hierarchy, note = cgroups.find_hierarchy(tmp_path)
    assert hierarchy == Hierarchy(cpu, 1)
    assert "cgroup v1" in note


def test_says_why_when_there_is_no_hierarchy(tmp_path: Path) -> None:
    # GIVEN a v2 mount without the cpu controller and no v1 cpu hierarchy
    (tmp_path / "cgroup.controllers").write_text("memory pids\n")
    hierarchy, note = cgroups.find_hierarchy(tmp_path)
    assert hierarchy is None
    assert "no cgroup hierarchy with the cpu controller" in note
    caps, reason = cgroups.open_caps(tmp_path)
    assert caps is None
    assert reason == note


def test_v1_quota_is_written_period_first_and_read_back(tmp_path: Path) -> None:
    # GIVEN a v1 hierarchy (a plain directory tree standing in for the kernel's files)
    caps = CgroupCaps(Hierarchy(_fake_v1(tmp_path), 1))
    group = caps.create("ours")
    # WHEN the 128 MB quota is set
    caps.set_quota("ours", Quota.for_memory(128))
    # THEN the files hold the quota, and reading them back gives it
    assert (group / "cpu.cfs_period_us").read_text() == "20000"
    assert (group / "cpu.cfs_quota_us").read_text() == "1447"
    assert caps.quota("ours") == Quota(1447, 20_000)
    # THEN the cgroup is first in line for its core within that quota
    assert (group / "cpu.shares").read_text() == "262144"


def test_v2_quota_is_one_cpu_max_line(tmp_path: Path) -> None:
    caps = CgroupCaps(Hierarchy(tmp_path, 2))
    group = caps.create("seed")
    caps.set_quota("seed", Quota.for_memory(512))
    assert (group / "cpu.max").read_text() == "2894 10000"
    assert (group / "cpu.weight").read_text() == "10000"
    assert caps.quota("seed") == Quota(2894, 10_000)


def test_close_removes_every_cgroup_it_made(tmp_path: Path) -> None:
    caps = CgroupCaps(Hierarchy(tmp_path, 2))
    groups = [caps.create(name) for name in ("seed", "ours")]
    for group in groups:  # the kernel's interface files are virtual and never block rmdir; these are real
        (group / "cpu.weight").unlink()
    caps.close()
    assert not any(group.exists() for group in groups)


@pytest.mark.slow
def test_on_this_machine_a_process_is_capped_and_the_cgroup_removed() -> None:
    """The real kernel: a capped cgroup holds a process and is gone after close (or the reason is stated)."""
    caps, note = cgroups.open_caps()
    if caps is None:
        # THEN the run would be labelled uncapped, with the reason
        assert note
        return
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])
    try:
        group = caps.create("test")
        caps.add("test", child.pid)
        caps.set_quota("test", Quota.for_memory(512))
        # THEN the kernel holds the quota and the process is in the cgroup
        assert caps.quota("test") == Quota(2894, 10_000)
        assert str(child.pid) in (group / "cgroup.procs").read_text().split()
    finally:
        caps.close()
        child.kill()
        child.wait()
    assert not group.exists()
