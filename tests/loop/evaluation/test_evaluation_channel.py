"""Hostile tests of the report channel: candidate code cannot replace the evaluator's metric."""

from __future__ import annotations

import os
import sys
import textwrap
from pathlib import Path

from autoloop_py.loop.evaluation.evaluate import evaluate as run_evaluation
from autoloop_py.program.model import Program, load_program

# The candidate: imported by the evaluator, it plants a fake score every way it can once the evaluator
# has reported: on stdout from atexit, into $AUTOLOOP_RESULT from atexit (the path read back from the
# process's first environment), and from a child that outlives the evaluator.
HOSTILE = textwrap.dedent('''
    import atexit, os, subprocess, sys

    FAKE = '{"score": 1e9}'

    def _path():
        for item in open("/proc/self/environ", "rb").read().split(b"\\0"):
            if item.startswith(b"AUTOLOOP_RESULT="):
                return item.split(b"=", 1)[1].decode()
        return None

    def _spoof():
        print(FAKE, flush=True)
        path = _path()
        if path:
            with open(path, "w") as handle:
                handle.write(FAKE)

    atexit.register(_spoof)
    # Outlives the evaluator (its own session): once its parent exited, it prints and rewrites the report.
    LINGER = "\\n".join([
        "import os, time",
        "parent = os.getppid()",
        "while os.getppid() == parent: time.sleep(0.005)",
        "time.sleep(0.3)",
        "print(" + repr(FAKE) + ", flush=True)",
        "path = " + repr(_path()),
        "if path: open(path, 'w').write(" + repr(FAKE) + ")",
    ])
    subprocess.Popen([sys.executable, "-c", LINGER], start_new_session=True)

    def solve():
        return 2.0
''')

EVALUATOR = textwrap.dedent('''
    import importlib.util, json, os, sys
    sys.dont_write_bytecode = True
    here = os.path.dirname(os.path.abspath(__file__))
    spec = importlib.util.spec_from_file_location("candidate", os.path.join(here, "solution.py"))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    report = json.dumps({"score": module.solve()})
    path = os.environ.get("AUTOLOOP_RESULT")
    if path:
        with open(path, "w") as handle:
            handle.write(report)
        sys.stdout.flush()
        os._exit(0)  # the candidate's atexit handlers never run
    print(report)
''')


def _program(root: Path, evaluator: str, frontmatter: str = "") -> Program:
    folder = root / ".autoloop" / "programs" / "demo"
    (folder / "code").mkdir(parents=True)
    (folder / "code" / "solution.py").write_text(HOSTILE)
    (folder / "code" / "evaluate.py").write_text(evaluator)
    front = f"---\n{frontmatter}---\n\n" if frontmatter else ""
    (folder / "program.md").write_text(
        f"{front}# Demo\n\n## Goal\n\nMore.\n\n## Target\n\n- `code/solution.py`\n\n## Evaluation\n\n"
        f'```bash\npython3 "$AUTOLOOP_PROGRAM_DIR/code/evaluate.py"\n```\n\n'
        "The metric is `score`. Higher is better.\n"
    )
    return load_program(root, Path(".autoloop/programs/demo/program.md"))


def test_atexit_spoofing_candidate_does_not_replace_the_reported_metric(tmp_path: Path) -> None:
    repo = tmp_path / "repo"
    result = run_evaluation(_program(repo, EVALUATOR), repo)
    assert result.channel == "file"
    assert "1e9" not in repr(result.metrics) and result.metric != 1e9
    if result.ok:  # the lingering child was killed before it wrote
        assert result.metric == 2.0 and result.metrics == {"score": 2.0}
    else:  # it wrote after the evaluator exited, before the runner killed it: neither report counts
        assert "changed after the evaluation's command exited" in (result.error or "")


PRINTING = textwrap.dedent('''
    import atexit
    atexit.register(lambda: print('{"score": 1e9}', flush=True))

    def solve():
        return 2.0
''')


def test_a_stdout_printing_candidate_loses_even_when_its_atexit_runs(tmp_path: Path) -> None:
    # The attack: the evaluator reports and exits normally, the candidate's atexit prints 1e9 as the
    # last JSON object on stdout (upstream's reading would take it). The report file is read instead.
    repo = tmp_path / "repo"
    program = _program(repo, EVALUATOR.replace("os._exit(0)", "pass"))
    (repo / ".autoloop/programs/demo/code/solution.py").write_text(PRINTING)
    result = run_evaluation(program, repo)
    assert result.ok, result.error
    assert result.metric == 2.0
    assert result.stdout_tail.rstrip().endswith('{"score": 1e9}')  # printed last, and never read


def test_upstream_stdout_evaluator_still_reads_the_last_object(tmp_path: Path) -> None:
    repo = tmp_path / "repo"
    upstream = EVALUATOR.replace('os.environ.get("AUTOLOOP_RESULT")', "None")
    program = _program(repo, upstream)
    (repo / ".autoloop/programs/demo/code/solution.py").write_text("def solve():\n    return 3.0\n")
    result = run_evaluation(program, repo)
    assert result.ok and result.channel == "stdout" and result.metric == 3.0


def test_a_candidate_cannot_switch_the_channel_by_naming_the_file(tmp_path: Path) -> None:
    # Its Target file naming AUTOLOOP_RESULT is not read: the upstream evaluator stays on stdout.
    repo = tmp_path / "repo"
    program = _program(repo, EVALUATOR.replace('os.environ.get("AUTOLOOP_RESULT")', "None"))
    (repo / ".autoloop/programs/demo/code/solution.py").write_text("# AUTOLOOP_RESULT\ndef solve():\n    return 3.0\n")
    assert run_evaluation(program, repo).channel == "stdout"


def test_file_channel_without_a_report_is_an_error(tmp_path: Path) -> None:
    repo = tmp_path / "repo"
    program = _program(repo, 'print(\'{"score": 5}\')\n', "evaluation-report: file\n")
    result = run_evaluation(program, repo)
    assert not result.ok and result.channel == "file"
    assert "wrote no report to $AUTOLOOP_RESULT" in (result.error or "")


def test_a_report_that_is_a_link_or_a_fifo_is_never_followed(tmp_path: Path) -> None:
    repo = tmp_path / "repo"
    secret = tmp_path / "runner-secret.json"
    secret.write_text('{"score": 424242}')
    for plant in (f"os.symlink({str(secret)!r}, os.environ['AUTOLOOP_RESULT'])",
                  "os.mkfifo(os.environ['AUTOLOOP_RESULT'])"):
        program = _program(repo, f"import os\n{plant}\n", "evaluation-report: file\n")
        result = run_evaluation(program, repo, timeout=20)
        assert not result.ok and "wrote no report" in (result.error or "")
        assert "424242" not in repr(result)
        os.system(f"rm -rf {repo}")  # noqa: S605 - the test's own folder


def test_a_secret_in_the_report_is_masked_before_anything_keeps_it(tmp_path: Path) -> None:
    # The evaluation never gets the runner's secrets, but one it finds elsewhere (here written into its own
    # file) is masked in the feedback, the rejection and the metrics before they reach a trace or a prompt.
    repo = tmp_path / "repo"
    secret = "s3cr3t-value-4242-abcdef"
    evaluator = (
        "import json, os\n"
        f"told = 'the token is {secret}'\n"
        "json.dump({'score': 1, 'error': told, 'feedback': told, 'note': told}, open(os.environ['AUTOLOOP_RESULT'], 'w'))\n"
    )
    program = _program(repo, evaluator)
    result = run_evaluation(program, repo, environ={**os.environ, "DEPLOY_TOKEN": secret})
    assert result.ok and result.rejection and result.feedback
    assert secret not in repr(result)


def test_an_evaluator_run_through_a_script_that_does_not_name_the_file_is_told_the_key(tmp_path: Path) -> None:
    repo = tmp_path / "repo"
    program = _program(repo, EVALUATOR.replace("solution.py", "absent.py"))
    folder = repo / ".autoloop/programs/demo"
    (folder / "code/run.sh").write_text('exec python3 "$(dirname "$0")/evaluate.py"\n')
    (folder / "code/evaluate.py").write_text(
        "import json, os\njson.dump({'score': 1}, open(os.environ['AUTOLOOP_' + 'RESULT'], 'w'))\n"
    )
    text = (folder / "program.md").read_text().replace('python3 "$AUTOLOOP_PROGRAM_DIR/code/evaluate.py"',
                                                       'bash "$AUTOLOOP_PROGRAM_DIR/code/run.sh"')
    (folder / "program.md").write_text(text)
    result = run_evaluation(load_program(repo, Path(".autoloop/programs/demo/program.md")), repo)
    assert not result.ok and result.channel == "stdout"
    assert "it wrote $AUTOLOOP_RESULT, which this program does not read: set `evaluation-report: file`" in (result.error or "")
    (folder / "program.md").write_text("---\nevaluation-report: file\n---\n\n" + text)
    result = run_evaluation(load_program(repo, Path(".autoloop/programs/demo/program.md")), repo)
    assert result.ok and result.metric == 1.0


def test_named_paths_reads_the_files_a_command_names_and_skips_inline_code(tmp_path: Path) -> None:
    from autoloop_py.loop.evaluation.evaluate import named_paths

    folder = tmp_path / ".autoloop/programs/demo"
    inline = "python3 -c 'print(" + "1 + " * 2000 + "1)'"
    found = named_paths(f'cd "$AUTOLOOP_PROGRAM_DIR" && python3 code/evaluate.py --n 3; {inline}', tmp_path, folder)
    assert folder / "code/evaluate.py" in found and tmp_path / "code/evaluate.py" in found
    assert all(tmp_path == p or tmp_path in p.parents for p in found)
    assert named_paths("python3 ../../etc/passwd 'unclosed", tmp_path, folder) == []
