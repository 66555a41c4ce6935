"""Where and as whom evaluations and agents run: the one line `run`, `check` and `status` print about it.

Three cases, decided elsewhere (run.resolve_mode, slot_user.wanted): bubblewrap; no bubblewrap as a non-root
runner (the commands run as the runner); no bubblewrap as root (a uid of their own per command, else root itself).
"""

from __future__ import annotations

from autoloop_py.sandbox.slot_user import FIRST_UID


def describe(*, sandboxed: bool, reason: str = "", root: bool = False, why_no_uid: str = "", whose: str = "") -> str:
    """Returns one line saying where and as whom evaluations and agents run.

    reason: why bubblewrap is not used (when not sandboxed). root: the runner is root. why_no_uid: why a root
    runner's commands do not get a uid of their own ('' when they do; slot_user.wanted). whose: the programs
    named after "evaluations" (" of a, b"), or "".
    """
    if sandboxed:
        return f"sandbox: evaluations{whose} and agents run in bubblewrap (only the candidate's copy is writable)"
    because = f" ({reason})" if reason else ""
    head = f"NOT SANDBOXED{because}: evaluations{whose} and agents run"
    if not root:
        return f"{head} as you, with your files and network"
    if not why_no_uid:
        return (f"{head} as a uid of their own (from {FIRST_UID}), with the network: they cannot write cgroups, "
                "another slot's copy or root's files, and read only what every user may read")
    return (f"{head} as root ({why_no_uid}), with your files and network: they can leave their cgroups and reach "
            "other slots' copies")
