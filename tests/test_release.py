"""Release hygiene: one version, a LICENSE, a changelog, an sdist and a wheel that twine accepts."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
import tarfile
import tomllib
import zipfile
from pathlib import Path

import pytest

import idempotent_order_pipeline

REPO = Path(__file__).resolve().parents[1]
#: What the distribution is built from.
SOURCES = ("pyproject.toml", "README.md", "LICENSE", "CHANGELOG.md", "MANIFEST.in", "infra")
#: Keep a Changelog's kinds of change.
CHANGE_KINDS = {"Added", "Changed", "Deprecated", "Removed", "Fixed", "Security"}


@pytest.fixture(scope="module")
def dist(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """``python -m build`` (sdist, then the wheel from it) on a copy of the sources, offline."""
    source = tmp_path_factory.mktemp("source")
    for name in SOURCES:
        if (REPO / name).is_dir():
            ignore = shutil.ignore_patterns("__pycache__", "*.pyc", "*.egg-info")
            shutil.copytree(REPO / name, source / name, ignore=ignore)
        else:
            shutil.copy2(REPO / name, source / name)
    out = tmp_path_factory.mktemp("dist")
    completed = subprocess.run(  # noqa: S603  (our interpreter, our temporary paths)
        [sys.executable, "-m", "build", "--no-isolation", "--outdir", str(out), str(source)],
        capture_output=True,
        text=True,
    )
    assert completed.returncode == 0, completed.stdout[-2000:] + completed.stderr[-2000:]
    return out


@pytest.mark.slow
def test_build_makes_an_sdist_and_a_wheel_that_twine_accepts(dist: Path) -> None:
    # GIVEN the built distributions
    version = idempotent_order_pipeline.__version__
    built = sorted(path.name for path in dist.iterdir())
    # THEN there are one sdist and one wheel of this version
    assert built == [
        f"idempotent_order_pipeline-{version}-py3-none-any.whl",
        f"idempotent_order_pipeline-{version}.tar.gz",
    ]
    # WHEN twine checks them strictly (metadata, README rendering)
    completed = subprocess.run(  # noqa: S603
        [sys.executable, "-m", "twine", "check", "--strict", *sorted(map(str, dist.iterdir()))],
        capture_output=True,
        text=True,
    )
    # THEN both pass
    assert completed.returncode == 0, completed.stdout + completed.stderr
    assert completed.stdout.count("PASSED") == 2


@pytest.mark.slow
def test_the_version_is_defined_once_and_reaches_the_metadata(dist: Path) -> None:
    # GIVEN pyproject.toml, which must not repeat the version
    project = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
    assert "version" not in project
    assert "version" in project["dynamic"]
    # WHEN the wheel's metadata is read
    [wheel] = dist.glob("*.whl")
    with zipfile.ZipFile(wheel) as archive:
        metadata = archive.read(next(n for n in archive.namelist() if n.endswith(".dist-info/METADATA"))).decode()
        names = archive.namelist()
    # THEN it carries __version__, the SPDX license and the LICENSE file
    version = re.search(r"^Version: (.+)$", metadata, re.M)
    assert version is not None
    assert version[1] == idempotent_order_pipeline.__version__
    assert "License-Expression: Apache-2.0" in metadata
    assert any(name.endswith(".dist-info/licenses/LICENSE") for name in names)
    # AND the sdist carries the LICENSE and the changelog
    [sdist] = dist.glob("*.tar.gz")
    with tarfile.open(sdist) as archive:
        members = {Path(name).name for name in archive.getnames() if name.count("/") == 1}
    assert {"LICENSE", "CHANGELOG.md", "README.md", "pyproject.toml"} <= members


def test_license_is_the_apache_2_0_text() -> None:
    text = (REPO / "LICENSE").read_text()
    assert "Apache License" in text
    assert "Version 2.0, January 2004" in text
    assert "TERMS AND CONDITIONS FOR USE, REPRODUCTION, AND DISTRIBUTION" in text
    assert "END OF TERMS AND CONDITIONS" in text
    assert tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["license"] == "Apache-2.0"


def test_changelog_follows_keep_a_changelog_and_starts_with_this_version() -> None:
    # GIVEN the changelog
    text = (REPO / "CHANGELOG.md").read_text()
    releases = re.findall(r"^## \[([^\]]+)\](?: - (\d{4}-\d{2}-\d{2}))?$", text, re.M)
    kinds = set(re.findall(r"^### (.+)$", text, re.M))
    # THEN it says its format, has an Unreleased section, then this version with a date, first
    assert text.startswith("# Changelog\n")
    assert "https://keepachangelog.com/" in text
    assert releases[0] == ("Unreleased", "")
    assert releases[1][0] == idempotent_order_pipeline.__version__
    assert releases[1][1]
    # AND only Keep a Changelog's kinds of change
    assert kinds <= CHANGE_KINDS
