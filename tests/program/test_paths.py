"""The one rule for a candidate's paths: what git stores as plain files, each named once."""

from __future__ import annotations

import pytest

from autoloop_py.program.paths import MAX_CHANGED_PATHS, is_dotgit, path_problem, path_problems


@pytest.mark.parametrize("name", [".git", ".GIT", ".Git", ".git.", ".git ", "git~1", "GIT~1", ".g\u200cit",
                                  ".git::$INDEX_ALLOCATION"])  # fmt: skip
def test_every_spelling_of_the_git_directory_is_refused(name: str) -> None:
    assert is_dotgit(name)
    assert "git's own directory" in (path_problem(f"code/{name}") or "")
    assert "git's own directory" in (path_problem(f"code/{name}/config") or "")


@pytest.mark.parametrize("name", [".gitignore", ".github", "git", "my.git", ".gitx"])
def test_names_that_only_look_like_it_are_files(name: str) -> None:
    assert not is_dotgit(name) and path_problem(f"code/{name}") is None


@pytest.mark.parametrize("path", ["", "/etc/passwd", "C:/x", "a//b", "a/./b", "a/../b", "a/", "a\\b", "a\nb", "a\x1bb",
                                  "x" * 256])  # fmt: skip
def test_paths_git_refuses_or_misstores(path: str) -> None:
    assert path_problem(path) is not None


def test_case_collisions_with_each_other_and_with_the_tree() -> None:
    assert path_problems(["code/sol.py"], ["code/sol.py"]) == []
    assert path_problems(["code/SOL.py"], ["code/sol.py"]) == [
        "'code/SOL.py' and 'code/sol.py' differ only in case: one file on a case-insensitive checkout"
    ]
    assert path_problems(["a.py", "A.py"]) == ["'A.py' and 'a.py' differ only in case: one file on a case-insensitive checkout"]


def test_a_path_cannot_be_a_file_and_a_folder() -> None:
    assert path_problems(["code"], ["code/sol.py"]) == [
        "'code' is also a folder of another path; it cannot be both a file and a folder"
    ]
    assert path_problems(["code/sol.py/x"], ["code/sol.py"]) == [
        "'code/sol.py/x' puts a file under 'code/sol.py', which is a file"
    ]
    assert path_problems(["a", "a/b"]) == ["'a' is also a folder of another path; it cannot be both a file and a folder"]


def test_too_many_files_at_once() -> None:
    many = [f"code/f{i}.py" for i in range(MAX_CHANGED_PATHS + 1)]
    assert path_problems(many) == [f"the candidate changes {len(many)} files; at most {MAX_CHANGED_PATHS} may change at once"]
    assert path_problems(many[:-1]) == []
