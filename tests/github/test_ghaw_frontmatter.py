"""The frontmatter of the agentic workflow against gh-aw's own rules: its published schema, its PR branch handling.

The schema is an excerpt of github/gh-aw `pkg/parser/schemas/main_workflow_schema.json` at commit
00c16a5c08a741790acf79927c90fc7962fd1f57, kept in tests/fixtures/gh-aw/ (its `$comment` says what was copied).
The branch rule is gh-aw's as its maintainers describe it (github/gh-aw PR #32770, "Prevent create-pull-request
fallback when branch already exists"): with `preserve-branch-name: true`, creating the PR pushes the branch under
its own name; when that branch still exists on the remote the push is rejected and the safe output falls back to
an issue, unless `recreate-ref: true` lets gh-aw replace the existing ref.
"""

from __future__ import annotations

import copy
import json
import re
import subprocess
from pathlib import Path
from typing import Any

import jsonschema
import pytest
import yaml

from autoloop_py.commands.init import AGENTIC_WORKFLOW, DEFAULT_PIP_SPEC, InitOptions, render_workflows

SCHEMA = Path(__file__).parents[1] / "fixtures" / "gh-aw" / "main_workflow_schema.excerpt.json"


class Yaml12Loader(yaml.SafeLoader):
    """PyYAML's safe loader with YAML 1.2 booleans, as gh-aw's parser reads frontmatter: `on` is a key, not True."""


Yaml12Loader.yaml_implicit_resolvers = {
    first: [(tag, regex) for tag, regex in resolvers if tag != "tag:yaml.org,2002:bool"]
    for first, resolvers in yaml.SafeLoader.yaml_implicit_resolvers.items()
}
Yaml12Loader.add_implicit_resolver("tag:yaml.org,2002:bool", re.compile(r"^(?:true|True|TRUE|false|False|FALSE)$"),
                                   list("tTfF"))


def frontmatter() -> dict[str, Any]:
    text = render_workflows(InitOptions(pip_spec=DEFAULT_PIP_SPEC))[AGENTIC_WORKFLOW]
    return yaml.load(text[4:].split("\n---\n", 1)[0], Loader=Yaml12Loader)


def errors(meta: dict[str, Any]) -> list[str]:
    schema = json.loads(SCHEMA.read_text())
    validator = jsonschema.Draft7Validator(schema)
    return [error.message for error in validator.iter_errors(meta)]


def test_the_schema_excerpt_names_its_gh_aw_version() -> None:
    schema = json.loads(SCHEMA.read_text())
    jsonschema.Draft7Validator.check_schema(schema)
    assert "00c16a5c08a741790acf79927c90fc7962fd1f57" in schema["$comment"]


def test_the_generated_frontmatter_validates() -> None:
    meta = frontmatter()
    assert errors(meta) == []
    (entry,) = meta["tools"]["repo-memory"]
    assert entry["max-patch-size"] <= 1048576 and entry["max-file-count"] <= 1000  # the schema's bounds


@pytest.mark.parametrize("where", ["tools", "repo-memory", "root"])
def test_an_unknown_key_does_not_validate(where: str) -> None:
    meta = copy.deepcopy(frontmatter())
    target = {"tools": meta["tools"], "repo-memory": meta["tools"]["repo-memory"][0], "root": meta}[where]
    target["max-patch-bytes"] = 102400
    assert any("max-patch-bytes" in message for message in errors(meta))


@pytest.mark.parametrize("key", ["max-file-count", "max-patch-size", "max-file-size"])
def test_a_string_where_an_integer_belongs_does_not_validate(key: str) -> None:
    meta = copy.deepcopy(frontmatter())
    entry = meta["tools"]["repo-memory"][0]
    entry[key] = str(entry[key])
    assert errors(meta)


def test_a_value_over_the_schemas_bound_does_not_validate() -> None:
    meta = copy.deepcopy(frontmatter())
    meta["tools"]["repo-memory"][0]["max-file-count"] = 1001
    assert errors(meta)


def _git(cwd: Path, *args: str) -> str:
    done = subprocess.run(["git", *args], cwd=cwd, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    return done.stdout


def create_pull_request_push(work: Path, remote: str, branch: str, options: dict[str, Any]) -> bool:
    """Pushes HEAD as gh-aw's create-pull-request does with preserve-branch-name; returns False when refused.

    The branch keeps its name; an existing remote branch of that name refuses the push unless recreate-ref is set,
    in which case the ref is replaced.
    """
    assert options.get("preserve-branch-name") is True
    if _git(work, "ls-remote", "--heads", remote, branch).strip() and not options.get("recreate-ref"):
        return False
    done = subprocess.run(["git", "push", "-q", "--force", remote, f"HEAD:refs/heads/{branch}"], cwd=work,
                          capture_output=True, text=True, timeout=60)
    return done.returncode == 0


def test_a_branch_left_by_a_merged_pr_is_recreated(tmp_path: Path) -> None:
    server = tmp_path / "server.git"
    _git(tmp_path, "init", "-q", "--bare", "-b", "main", str(server))
    work = tmp_path / "work"
    _git(tmp_path, "init", "-q", "-b", "main", str(work))
    for key, value in (("user.name", "agent"), ("user.email", "agent@example.invalid")):
        _git(work, "config", key, value)
    (work / "value.py").write_text("x = 1\n")
    _git(work, "add", "-A")
    _git(work, "commit", "-qm", "first iteration")
    _git(work, "push", "-q", str(server), "HEAD:refs/heads/autoloop/alpha")  # the earlier PR's branch, merged
    _git(work, "push", "-q", str(server), "HEAD:refs/heads/main")
    (work / "value.py").write_text("x = 2\n")
    _git(work, "commit", "-qam", "next iteration")
    options = frontmatter()["safe-outputs"]["create-pull-request"]
    assert not create_pull_request_push(work, str(server), "autoloop/alpha", {**options, "recreate-ref": False})
    assert create_pull_request_push(work, str(server), "autoloop/alpha", options)
    assert _git(work, "ls-remote", str(server), "refs/heads/autoloop/alpha").split()[0] == _git(work, "rev-parse", "HEAD").strip()
