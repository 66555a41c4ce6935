"""The autoloop a repository's workflows install: the wheel `autoloop init` writes, and `init --upgrade`.

`--upgrade` switches the existing workflows to the installed autoloop (a new wheel replaces the old one)
or to --pip-spec, editing only the install spec, so every other setting and hand edit stays.
"""

from __future__ import annotations

import json
import re
import shlex
import tempfile
from pathlib import Path

import yaml
from rich.console import Console

from autoloop_py.commands.ci_install import WHEELS_DIR, InstallSource, build_wheel, check_spec, stale_wheels
from autoloop_py.errors import AutoloopError

INSTALL_STEP = "Install autoloop"
SPEC_VARIABLE = "AUTOLOOP_PIP_SPEC"


def wheel_from(source: InstallSource, scratch: Path, console: Console) -> Path:
    """Builds the wheel of the running autoloop into scratch, saying so (it takes a few seconds)."""
    say(console, f"building a wheel of autoloop {source.version} from {source.build_from} …")
    built = build_wheel(str(source.build_from), scratch)
    if not built.name.startswith(f"autoloop_py-{source.version}-"):
        say(console, f"note: {source.build_from} now holds another version than the installed "
                     f"{source.version}: {built.name}")
    return built


def place_wheel(root: Path, built: Path, console: Console) -> None:
    """Moves the built wheel into the repository's wheels folder and removes the other autoloop wheels there."""
    wheel = WHEELS_DIR / built.name
    (root / wheel).parent.mkdir(parents=True, exist_ok=True)
    overwrote = (root / wheel).exists()
    built.replace(root / wheel)
    say(console, f"{'overwrote' if overwrote else 'wrote'} {wheel.as_posix()}")
    remove_stale(root, wheel, console)


def remove_stale(root: Path, keep: Path | None, console: Console) -> None:
    """Removes the autoloop wheels of the repository other than keep, saying which."""
    for rel in stale_wheels(root, keep):
        (root / rel).unlink()
        say(console, f"removed {rel.as_posix()}")


def upgrade(
    root: Path, workflows: tuple[Path, ...], pip_spec: str | None, source: InstallSource | None, console: Console
) -> int:
    """Switches the existing workflows to pip_spec, else to the running autoloop (building its wheel)."""
    present = {rel: (root / rel).read_text(encoding="utf-8") for rel in workflows if (root / rel).is_file()}
    if not present:
        named = " or ".join(rel.as_posix() for rel in workflows)
        raise AutoloopError(f"nothing to upgrade: no {named} here; run `autoloop init` first")
    old = {rel: installed_spec(rel, text) for rel, text in present.items()}
    with tempfile.TemporaryDirectory(prefix="autoloop-upgrade-") as scratch:
        built = None
        if pip_spec is not None:
            new = check_spec(pip_spec)
        elif source is not None and source.spec is not None:
            new = source.spec
        elif source is not None:
            built = wheel_from(source, Path(scratch), console)
            new = (WHEELS_DIR / built.name).as_posix()
        else:
            raise AutoloopError("init --upgrade needs --pip-spec or an installed autoloop")
        texts = {rel: respec(rel, text, old[rel], new) for rel, text in present.items()}
        for rel, text in texts.items():
            if text != present[rel]:
                (root / rel).write_text(text, encoding="utf-8")
                say(console, f"updated {rel.as_posix()}: installs {new} (was {old[rel]})")
            else:
                say(console, f"{rel.as_posix()} installs {new} already")
        if built is not None:
            place_wheel(root, built, console)
        else:
            remove_stale(root, Path(new) if Path(new).parent == WHEELS_DIR else None, console)
    return 0


def installed_spec(rel: Path, text: str) -> str:
    """Returns the pip spec a workflow installs autoloop from; raises AutoloopError when it has none."""
    try:
        if rel.suffix == ".md":
            meta = yaml.safe_load(text.split("\n---", 1)[0].removeprefix("---\n"))
            run = next(s["run"] for s in meta["steps"] if isinstance(s, dict) and s.get("name") == INSTALL_STEP)
            return shlex.split(run)[-1]
        return str(yaml.safe_load(text)["env"][SPEC_VARIABLE])
    except (yaml.YAMLError, KeyError, TypeError, IndexError, StopIteration, ValueError):
        raise AutoloopError(f"finds no `{INSTALL_STEP}` spec to switch (the file was changed by hand); "
                            "run `autoloop init --force` to write it again", rel) from None


def respec(rel: Path, text: str, old: str, new: str) -> str:
    """Returns the workflow text with its install spec old replaced by new, and nothing else changed."""
    if rel.suffix == ".md":
        line = re.compile(rf"^(\s*run: .*pip install\b.*\s){re.escape(shlex.quote(old))}[ \t]*$", re.MULTILINE)
        changed = line.sub(lambda m: m.group(1) + shlex.quote(new), text)
    else:
        line = re.compile(rf"^(\s*{SPEC_VARIABLE}:[ \t]*).*$", re.MULTILINE)
        changed = line.sub(lambda m: m.group(1) + json.dumps(new), text, count=1)
        changed = changed.replace(f"--pip-spec {shlex.quote(old)} ", f"--pip-spec {shlex.quote(new)} ", 1)
    if installed_spec(rel, changed) != new:
        raise AutoloopError(f"could not switch its install spec from {old} to {new}; run `autoloop init --force` "
                            "to write it again", rel)
    return changed


def say(console: Console, text: str) -> None:
    """Prints one line of progress as it is (paths and specs hold brackets rich would read as markup)."""
    console.print(text, markup=False, highlight=False)
