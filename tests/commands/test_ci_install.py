"""What the workflows install autoloop from: pip's record of the running install, and the wheel of a local source."""

from __future__ import annotations

import json
import shutil
import sys
import zipfile
from pathlib import Path
from typing import Any

import pytest

from autoloop_py.commands.ci_install import (
    BUILD_REQUIREMENTS,
    InstallSource,
    build_wheel,
    check_spec,
    source_from_install,
    stale_wheels,
    wheel_path,
)
from autoloop_py.errors import AutoloopError

REPO = Path(__file__).resolve().parents[2]


def test_an_index_install_is_pinned_to_its_version() -> None:
    assert source_from_install("1.2.3", None, installed=True) == InstallSource("1.2.3", spec="autoloop-py==1.2.3")


def test_a_vcs_install_is_pinned_to_the_commit_pip_recorded() -> None:
    record = {"url": "https://github.com/me/autoloop_py.git",
              "vcs_info": {"vcs": "git", "requested_revision": "main", "commit_id": "0123abcd"}}
    found = source_from_install("0.1.0", json.dumps(record), installed=True)
    assert found == InstallSource("0.1.0", spec="git+https://github.com/me/autoloop_py.git@0123abcd")


def test_an_archive_url_install_is_installed_from_that_url() -> None:
    record = {"url": "https://example.org/autoloop_py-0.1.0.tar.gz", "archive_info": {}}
    assert source_from_install("0.1.0", json.dumps(record), installed=True).spec == record["url"]


@pytest.mark.parametrize(
    ("record", "build_from"),
    [
        ({"url": "file:///home/me/autoloop_py", "dir_info": {"editable": True}}, "/home/me/autoloop_py"),
        ({"url": "file:///home/me/auto%20loop", "dir_info": {}}, "/home/me/auto loop"),
        ({"url": "file:///tmp/autoloop_py-0.1.0.whl", "archive_info": {}}, "/tmp/autoloop_py-0.1.0.whl"),
        ({"url": "file:///srv/git/autoloop", "vcs_info": {"vcs": "git", "commit_id": "ab"}},
         "git+file:///srv/git/autoloop@ab"),
    ],
)
def test_a_local_install_builds_a_wheel_from_where_pip_found_it(record: dict[str, Any], build_from: str) -> None:
    found = source_from_install("0.1.0", json.dumps(record), installed=True)
    assert found == InstallSource("0.1.0", build_from=build_from)


def test_an_uninstalled_checkout_builds_from_the_folder_it_runs_from(tmp_path: Path) -> None:
    (tmp_path / "pyproject.toml").write_text("[project]\nname = 'autoloop-py'\n")
    found = source_from_install("0.1.0", None, installed=False, running_from=tmp_path)
    assert found == InstallSource("0.1.0", build_from=str(tmp_path))


@pytest.mark.parametrize(
    ("record", "installed", "says"),
    [
        (None, False, "is not installed as a package"),
        ("not json", True, "unreadable"),
        (json.dumps({"url": "ftp://mirror/autoloop_py-0.1.0.tar.gz", "archive_info": {}}), True, "ftp://mirror"),
    ],
)
def test_an_unreachable_install_asks_for_a_pip_spec(
    record: str | None, installed: bool, says: str, tmp_path: Path
) -> None:
    with pytest.raises(AutoloopError) as raised:
        source_from_install("0.1.0", record, installed=installed, running_from=tmp_path)
    assert says in str(raised.value) and "--pip-spec" in str(raised.value)


@pytest.mark.parametrize("spec", ["autoloop-py rich", "-e.", "--index-url=x", ""])
def test_check_spec_refuses_anything_but_one_requirement(spec: str) -> None:
    with pytest.raises(AutoloopError, match="--pip-spec"):
        check_spec(spec)


def test_the_wheel_is_named_as_pip_names_a_pure_python_wheel() -> None:
    assert wheel_path("1.2.3").as_posix() == ".autoloop/wheels/autoloop_py-1.2.3-py3-none-any.whl"


def test_stale_wheels_are_the_other_autoloop_wheels(tmp_path: Path) -> None:
    folder = tmp_path / ".autoloop/wheels"
    folder.mkdir(parents=True)
    names = ("autoloop_py-0.1.0-py3-none-any.whl", "autoloop_py-0.2.0-py3-none-any.whl", "other-1.0-py3-none-any.whl")
    for name in names:
        (folder / name).write_bytes(b"")
    assert stale_wheels(tmp_path, wheel_path("0.2.0")) == [wheel_path("0.1.0")]
    assert stale_wheels(tmp_path, None) == [wheel_path("0.1.0"), wheel_path("0.2.0")]


def test_build_requirements_are_pyprojects() -> None:
    tomllib = pytest.importorskip("tomllib")
    declared = tomllib.loads((REPO / "pyproject.toml").read_text())["build-system"]["requires"]
    assert tuple(req.split(">")[0].split("=")[0].strip() for req in declared) == BUILD_REQUIREMENTS


def source_copy(tmp_path: Path) -> Path:
    """Returns a copy of this package's source with a stale build/ folder, as a used checkout has."""
    work = tmp_path / "source"
    work.mkdir()
    for name in ("pyproject.toml", "README.md"):
        shutil.copy2(REPO / name, work / name)
    shutil.copytree(REPO / "autoloop_py", work / "autoloop_py", ignore=shutil.ignore_patterns("__pycache__"))
    stale = work / "build/lib/autoloop_py/removed_module.py"
    stale.parent.mkdir(parents=True)
    stale.write_text("MARK = 'a module deleted since the last build'\n")
    return work


def test_a_folder_builds_a_wheel_with_the_package_and_its_templates_and_is_left_as_it_was(tmp_path: Path) -> None:
    pytest.importorskip("wheel", reason="pip install wheel (in the `test` extra)")
    source = source_copy(tmp_path)
    before = sorted(p.relative_to(source).as_posix() for p in source.rglob("*"))
    wheel = build_wheel(str(source), tmp_path / "out")
    assert wheel.parent == tmp_path / "out" and wheel.name.startswith("autoloop_py-")
    names = set(zipfile.ZipFile(wheel).namelist())
    assert {"autoloop_py/cli.py", "autoloop_py/templates/workflows/autoloop.yml.j2"} <= names
    assert "autoloop_py/removed_module.py" not in names  # the stale build/ was not copied
    assert not any(name.endswith(".pth") or "__editable__" in name for name in names)
    assert sorted(p.relative_to(source).as_posix() for p in source.rglob("*")) == before


def test_a_failing_build_names_the_source_and_pips_words(tmp_path: Path) -> None:
    broken = tmp_path / "broken"
    broken.mkdir()
    (broken / "pyproject.toml").write_text("[project\n")
    with pytest.raises(AutoloopError) as raised:
        build_wheel(str(broken), tmp_path / "out")
    message = str(raised.value)
    assert f"building a wheel of autoloop from {broken} failed" in message
    assert sys.executable in message and "--pip-spec" in message
    assert not (tmp_path / "out").exists()


def test_a_vanished_source_is_named(tmp_path: Path) -> None:
    with pytest.raises(AutoloopError, match="no longer exists"):
        build_wheel(str(tmp_path / "autoloop_py-0.1.0.tar.gz"), tmp_path / "out")
