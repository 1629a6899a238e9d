"""Release hygiene: one version, a LICENSE, a changelog, an sdist and a wheel that twine accepts."""

from __future__ import annotations

import re
import subprocess
import sys
import tarfile
import tomllib
import zipfile
from pathlib import Path

import pytest
from packaging.version import Version

import idempotent_order_pipeline
from tests.compat.released import RELEASE_COMMITS

REPO = Path(__file__).resolve().parents[1]
#: What the distribution is built from.
#: Keep a Changelog's kinds of change.
CHANGE_KINDS = {"Added", "Changed", "Deprecated", "Removed", "Fixed", "Security"}


@pytest.fixture(scope="module")
def dist(distributions: Path) -> Path:
    """``python -m build`` (sdist, then the wheel from it) on a copy of the sources, offline: the run's one build."""
    return distributions


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
    assert all(date for _, date in releases[1:])
    # AND the version is the latest release's, or (on main between releases) past it
    version, latest = Version(idempotent_order_pipeline.__version__), Version(releases[1][0])
    assert version == latest or (version.is_devrelease and version > latest), (version, latest)
    # AND only Keep a Changelog's kinds of change
    assert kinds <= CHANGE_KINDS


def test_main_carries_a_development_version_past_the_last_release() -> None:
    # GIVEN the releases the changelog and tests/compat name
    version = Version(idempotent_order_pipeline.__version__)
    # THEN main's version is past 0.2.0, a PEP 440 development version until it is released
    assert version > Version(max(RELEASE_COMMITS, key=Version))
    assert version.is_devrelease
    assert str(version) == idempotent_order_pipeline.__version__  # normalized as pip prints it


@pytest.mark.slow
def test_each_release_names_its_commit_and_that_commit_is_the_release() -> None:
    # GIVEN the changelog's release sections
    text = (REPO / "CHANGELOG.md").read_text()
    named = dict(re.findall(r"^## \[(\d[^\]]*)\] - \d{4}-\d{2}-\d{2}\n\nCommit `([0-9a-f]{40})`", text, re.M))
    # THEN every release names its commit, the one tests/compat runs
    assert named == RELEASE_COMMITS
    for release, commit in named.items():
        # AND where the history is in this clone, that commit's __version__ is the release
        shown = subprocess.run(  # noqa: S603
            ["git", "show", f"{commit}:infra/idempotent_order_pipeline/__init__.py"],  # noqa: S607
            cwd=REPO,
            capture_output=True,
            text=True,
        )
        assert shown.returncode == 0, shown.stderr  # the release's commit is in the history
        if "__version__" in shown.stdout:  # 0.1.0 had no __version__ yet
            assert f'__version__ = "{release}"' in shown.stdout, release


def test_every_install_reference_in_the_docs_names_the_next_release() -> None:
    # GIVEN the docs' install references: git URLs at a tag and wheel file names
    release = Version(idempotent_order_pipeline.__version__).base_version
    pages = [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]
    found = [
        (page.name, match)
        for page in pages
        for match in re.findall(
            r"idempotent-order-pipeline@v([0-9][^'\"\s)]*)|idempotent_order_pipeline-([0-9][^-]*)-py3", page.read_text()
        )
    ]
    # THEN there are some, and each names the release this version becomes
    assert len(found) >= 3
    assert {(page, next(filter(None, versions))) for page, versions in found} == {(page, release) for page, _ in found}
