"""Attacks on the candidate's world through `autoloop run --proposer agent`, with a real hostile agent shell script.

The agent (and, in one test, the evaluated candidate code) goes after every git directory it can reach from
where it runs: it plants hooks, an fsmonitor, an include and a hooksPath; it repoints a `.git` file; it hides
a change with `--skip-worktree` and a shadow module with `.git/info/exclude`; it moves `main` and the memory
branch to forged commits and writes into the checkout it finds. Each test asserts that no payload ran, that
the user's checkout (files, HEAD, its own refs, `.git/config`, hooks, info/exclude) is byte-identical, that
the origin holds only what the runner made, and how the iteration was recorded.
"""

from __future__ import annotations

import hashlib
import os
import subprocess
from pathlib import Path

import pytest

from autoloop_py.cli import main
from autoloop_py.state import file as statefile
from tests.security.counter_checkout import EVALUATE, PROG, VALUE, counter_checkout

# Autoloop's own refs, which a run legitimately creates or moves in the user's repository.
OWN_REFS = ("refs/heads/autoloop/", "refs/heads/memory/", "refs/remotes/origin/autoloop/",
            "refs/remotes/origin/memory/", "refs/autoloop/")
HOOKS = ("pre-commit", "post-commit", "commit-msg", "pre-push", "post-checkout", "post-merge", "reference-transaction",
         "pre-auto-gc", "post-index-change", "post-rewrite", "pre-receive", "update", "post-receive", "post-update")

# The planting kit: every git directory reachable from the working directory, and what it does to each.
PLANT = r"""
set -u
PAYLOAD='{payload}'
gitdirs() {{
  d=$PWD
  while :; do
    if [ -d "$d/.git" ]; then echo "$d/.git"; fi
    if [ -f "$d/.git" ]; then
      g=$(sed -n 's/^gitdir: //p' "$d/.git")
      echo "$g"
      if [ -f "$g/commondir" ]; then (cd "$g" && cd "$(cat commondir)" && pwd); fi
    fi
    [ "$d" = / ] && break
    d=$(dirname "$d")
  done | sort -u
}}
origins() {{
  for g in $(gitdirs); do
    u=$(git --git-dir="$g" config remote.origin.url 2>/dev/null) && [ -d "$u" ] && echo "$u"
  done | sort -u
}}
plant_hooks() {{
  mkdir -p "$1/hooks"
  for h in {hooks}; do printf '#!/bin/sh\n%s "$@"\n' "$PAYLOAD" > "$1/hooks/$h"; chmod +x "$1/hooks/$h"; done
}}
plant_config() {{
  printf '[core]\n\tfsmonitor = %s\n\thooksPath = %s\n' "$PAYLOAD" "$1/hooks" > "$1/evil.cfg"
  git --git-dir="$1" config include.path "$1/evil.cfg"
  git --git-dir="$1" config core.fsmonitor "$PAYLOAD"
  git --git-dir="$1" config core.hooksPath "$1/hooks"
  git --git-dir="$1" config diff.external "$PAYLOAD"
}}
forge_refs() {{
  tree=$(git --git-dir="$1" mktree < /dev/null)
  c=$(git --git-dir="$1" -c user.name=evil -c user.email=evil@example.invalid commit-tree "$tree" -m forged)
  for r in refs/heads/main refs/heads/memory/autoloop refs/heads/autoloop/counter \
           refs/remotes/origin/main refs/remotes/origin/memory/autoloop refs/remotes/origin/autoloop/counter; do
    git --git-dir="$1" update-ref "$r" "$c"
  done
}}
write_checkout() {{
  case "$1" in */.git) top=$(dirname "$1"); echo pwned > "$top/PLANTED.txt"; echo pwned >> "$top/README.md";; esac
}}
"""

# The hostile agent: cheats and forges first, then plants (so that none of its own git commands runs a payload).
AGENT = PLANT + r"""
{extra}
for g in $(gitdirs); do forge_refs "$g"; write_checkout "$g"; done
if [ -f .git ]; then
  common=$(cd "$(sed -n 's/^gitdir: //p' .git)" && cd "$(cat commondir)" && pwd)
  echo "gitdir: $common" > .git
fi
for g in $(gitdirs) $(origins); do plant_hooks "$g"; plant_config "$g"; done
cat > {prog}/code/value.py <<'VALUE_EOF'
{value}VALUE_EOF
echo "SUMMARY: set x to 5" > "$AUTOLOOP_REPLY_FILE"
"""


@pytest.fixture
def world(tmp_path: Path, isolated_git_config: None, run_git) -> dict[str, Path]:  # type: ignore[no-untyped-def]
    """Returns the user's checkout (`work`), its bare `origin`, the payload and the marker it would write."""
    work, origin = counter_checkout(tmp_path, run_git, {"README.md": "# the user's project\n"})
    marker = tmp_path / "PAYLOAD-RAN"
    payload = tmp_path / "payload.sh"
    payload.write_text(f'#!/bin/sh\necho "$0 $*" >> {marker}\nexit 0\n')
    payload.chmod(0o755)
    return {"work": work, "origin": origin, "marker": marker, "payload": payload, "tmp": tmp_path}


def _agent(world: dict[str, Path], extra: str = "") -> str:
    """Writes the hostile agent script and returns the command that runs it."""
    kit = PLANT.format(payload=world["payload"], hooks=" ".join(HOOKS))
    body = AGENT.format(payload=world["payload"], hooks=" ".join(HOOKS), extra=extra,
                        value=VALUE.format(x=5.0), prog=PROG)
    (world["tmp"] / "plant.sh").write_text(kit + "\nfor g in $(gitdirs) $(origins); do forge_refs \"$g\"; "
                                           "write_checkout \"$g\"; plant_hooks \"$g\"; plant_config \"$g\"; done\n")
    script = world["tmp"] / "agent.sh"
    script.write_text(body)
    return f"bash {script}"


def _fingerprint(repo: Path) -> dict[str, object]:
    """Returns what must not change in the user's checkout: files, HEAD, their refs, config, hooks, exclude."""
    files = {}
    for folder, dirs, names in os.walk(repo):
        dirs[:] = [d for d in dirs if not (Path(folder) == repo and d == ".git")]
        for name in names:
            path = Path(folder) / name
            files[path.relative_to(repo).as_posix()] = hashlib.sha256(path.read_bytes()).hexdigest()
    git_dir = repo / ".git"
    hooks = {p.name: p.read_bytes() for p in sorted((git_dir / "hooks").iterdir())}
    refs = subprocess.run(["git", "for-each-ref", "--format=%(refname) %(objectname)"], cwd=repo,
                          capture_output=True, text=True, check=True).stdout.splitlines()
    return {
        "files": files, "head": (git_dir / "HEAD").read_bytes(), "config": (git_dir / "config").read_bytes(),
        "hooks": hooks, "exclude": (git_dir / "info" / "exclude").read_bytes(),
        "refs": [line for line in refs if not line.startswith(OWN_REFS)],
        "worktrees": sorted(p.name for p in (git_dir / "worktrees").iterdir()) if (git_dir / "worktrees").is_dir() else [],
    }


def _run(world: dict[str, Path], command: str, monkeypatch: pytest.MonkeyPatch) -> dict[str, object]:
    """Runs one iteration with the hostile agent; returns the checkout's fingerprint from before."""
    before = _fingerprint(world["work"])
    monkeypatch.setenv("AUTOLOOP_AGENT_COMMAND", command)
    assert main(["run", "--repo", str(world["work"]), "--program", "counter", "--proposer", "agent",
                 "--iterations", "1"]) == 0
    return before


def _assert_nothing_escaped(world: dict[str, Path], before: dict[str, object], run_git) -> None:  # type: ignore[no-untyped-def]
    """Asserts no payload ran, the checkout is byte-identical and the origin holds only the runner's commits."""
    marker = world["marker"]
    assert not marker.exists(), f"a planted payload ran: {marker.read_text()}"
    assert _fingerprint(world["work"]) == before
    origin = world["origin"]
    refs = run_git(origin, "for-each-ref", "--format=%(refname)").splitlines()
    assert set(refs) <= {"refs/heads/main", "refs/heads/memory/autoloop", "refs/heads/autoloop/counter"}
    initial = run_git(world["work"], "rev-parse", "main")
    assert run_git(origin, "rev-parse", "refs/heads/main") == initial
    for ref in refs:
        assert "forged" not in run_git(origin, "log", "--format=%s%n%b", ref), f"{ref} holds a forged commit"
    if "refs/heads/autoloop/counter" in refs:
        subjects = run_git(origin, "log", "--format=%s", f"{initial}..refs/heads/autoloop/counter").splitlines()
        assert all(s.startswith("[Autoloop: counter]") for s in subjects), subjects
    memory = run_git(origin, "log", "--format=%an %s", "refs/heads/memory/autoloop").splitlines()
    assert memory and all(line.startswith("Test ") or line.startswith("autoloop ") for line in memory), memory
    for hook in HOOKS:
        assert not (origin / "hooks" / hook).exists()


def _state(world: dict[str, Path], run_git) -> statefile.StateFile:  # type: ignore[no-untyped-def]
    text = run_git(world["origin"], "show", "refs/heads/memory/autoloop:counter.md")
    return statefile.parse_state(text + "\n", "counter.md")


def test_hooks_fsmonitor_and_forged_refs_reach_nothing(
    world: dict[str, Path], monkeypatch: pytest.MonkeyPatch, run_git  # type: ignore[no-untyped-def]
) -> None:
    before = _run(world, _agent(world), monkeypatch)
    _assert_nothing_escaped(world, before, run_git)
    state = _state(world, run_git)
    # The only checkout the agent found is its own copy: what it wrote there is outside the Target.
    note = state.history[0].text
    assert state.machine.recent_statuses == ("rejected",) and state.machine.best_metric == 1.0
    assert "Rejected before evaluation" in note
    assert "PLANTED.txt is not in the program's Target" in note and "README.md is not in" in note


def test_skip_worktree_on_the_evaluator_is_a_violation(
    world: dict[str, Path], monkeypatch: pytest.MonkeyPatch, run_git  # type: ignore[no-untyped-def]
) -> None:
    cheat = (f"git update-index --skip-worktree {PROG}/code/evaluate.py\n"
             f"""echo 'print("{{\\"score\\": 1e9}}")' > {PROG}/code/evaluate.py\n""")
    before = _run(world, _agent(world, extra=cheat), monkeypatch)
    _assert_nothing_escaped(world, before, run_git)
    state = _state(world, run_git)
    assert state.machine.recent_statuses == ("rejected",)
    assert state.machine.best_metric == 1.0
    note = state.history[0].text
    assert "Rejected before evaluation" in note and f"{PROG}/code/evaluate.py is not in the program's Target" in note


def test_shadow_module_hidden_by_info_exclude_is_a_violation(
    world: dict[str, Path], monkeypatch: pytest.MonkeyPatch, run_git  # type: ignore[no-untyped-def]
) -> None:
    # code/json.py would shadow the evaluator's `import json` (the script's folder comes first on sys.path).
    shadow = (f"printf 'import os\\nos.system(\"{world['payload']}\")\\n"
              f"dumps = lambda o: chr(123) + chr(34) + \"score\" + chr(34) + \": 1e9\" + chr(125)\\n' "
              f"> {PROG}/code/json.py\n"
              f"for g in $(gitdirs); do echo json.py >> \"$g/info/exclude\"; done\n")
    before = _run(world, _agent(world, extra=shadow), monkeypatch)
    _assert_nothing_escaped(world, before, run_git)
    state = _state(world, run_git)
    assert state.machine.recent_statuses == ("rejected",) and state.machine.best_metric == 1.0
    assert f"{PROG}/code/json.py is not in the program's Target" in (state.history[0].text)


def test_symlink_out_of_the_copy_is_a_violation(
    world: dict[str, Path], monkeypatch: pytest.MonkeyPatch, run_git  # type: ignore[no-untyped-def]
) -> None:
    secret = world["tmp"] / "secret.txt"
    secret.write_text("the user's secret\n")
    link = f"ln -s {secret} {PROG}/code/helper.py\n"
    before = _run(world, _agent(world, extra=link), monkeypatch)
    _assert_nothing_escaped(world, before, run_git)
    state = _state(world, run_git)
    note = state.history[0].text
    assert state.machine.recent_statuses == ("rejected",) and "is a symbolic link" in note
    assert "the user's secret" not in run_git(world["origin"], "log", "-p", "--all")


def test_hostile_evaluation_reaches_no_git(
    world: dict[str, Path], monkeypatch: pytest.MonkeyPatch, run_git  # type: ignore[no-untyped-def]
) -> None:
    # The candidate's code itself, run by the evaluation, plants and forges in every git it can reach.
    _agent(world)  # writes plant.sh, the same kit as a script of its own
    plant = world["tmp"] / "plant.sh"
    code = VALUE.format(x=f"6.0\nimport subprocess\nsubprocess.run(['bash', '{plant}'])")
    agent = world["tmp"] / "quiet_agent.sh"
    agent.write_text(f"cat > {PROG}/code/value.py <<'EOF'\n{code}EOF\necho 'SUMMARY: x = 6' > \"$AUTOLOOP_REPLY_FILE\"\n")
    before = _run(world, f"bash {agent}", monkeypatch)
    _assert_nothing_escaped(world, before, run_git)
    state = _state(world, run_git)
    assert state.machine.recent_statuses == ("accepted",) and state.machine.best_metric == 6.0


def test_a_leftover_process_cannot_change_what_is_evaluated(
    world: dict[str, Path], monkeypatch: pytest.MonkeyPatch, run_git  # type: ignore[no-untyped-def]
) -> None:
    # Two writers outlive the agent's shell: one in its process group, one that left it and its environment.
    # They start writing the evaluator a moment after the agent exits (after the snapshot, or while it is read).
    # (One that also searched the disk for the evaluation's fresh copy is the sandbox's to stop: SECURITY.md, Limits.)
    writer = f"sleep 0.5; for i in $(seq 40); do cp {world['tmp']}/cheat.py {PROG}/code/evaluate.py; sleep 0.1; done"
    (world["tmp"] / "cheat.py").write_text('print(\'{"score": 1e9}\')\n')
    (world["tmp"] / "writer.sh").write_text(writer + "\n")
    agent = world["tmp"] / "lingering_agent.sh"
    agent.write_text(
        f"( bash {world['tmp'] / 'writer.sh'} ) &\n"
        f"setsid env -i PATH=\"$PATH\" bash {world['tmp'] / 'writer.sh'} < /dev/null > /dev/null 2>&1 &\n"
        f"cat > {PROG}/code/value.py <<'EOF'\n{VALUE.format(x=5.0)}EOF\n"
        "echo 'SUMMARY: x = 5' > \"$AUTOLOOP_REPLY_FILE\"\n"
    )
    before = _run(world, f"bash {agent}", monkeypatch)
    _assert_nothing_escaped(world, before, run_git)
    state = _state(world, run_git)
    # Accepted with x = 5, or (on a slow machine, when a write beat the snapshot) rejected as a change outside the Target.
    assert (state.machine.recent_statuses, state.machine.best_metric) in ((("accepted",), 5.0), (("rejected",), 1.0))
    if state.machine.best_metric == 1.0:
        assert f"{PROG}/code/evaluate.py is not in the program's Target" in state.history[0].text
    else:
        shown = run_git(world["origin"], "show", f"refs/heads/autoloop/counter:{PROG}/code/evaluate.py")
        assert shown == EVALUATE.strip()
