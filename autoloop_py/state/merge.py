"""State merge: a person's edit of a state file re-applied onto the newer file an iteration committed meanwhile.

The Machine State table is merged field by field (an iteration rewrites several of its adjacent rows, so a
line merge would call any edit of the table a conflict); the rest of the file is merged as text, three
ways: the person's change since the file they read, applied onto the newer file.
"""

from __future__ import annotations

from dataclasses import fields, replace

from autoloop_py.errors import StateError
from autoloop_py.state import file as statefile
from autoloop_py.state.machine import MachineState
from autoloop_py.state.textmerge import merge3


def merge_machine(base: MachineState, edited: MachineState, current: MachineState, path: str) -> MachineState:
    """Returns current with the fields the person changed since base; raises StateError when both changed one."""
    merged = current
    clashes = []
    for field in fields(MachineState):
        was, mine, now = (getattr(m, field.name) for m in (base, edited, current))
        if mine == was or mine == now:
            continue
        if now != was:
            clashes.append(field.name.replace("_", " "))
            continue
        merged = replace(merged, **{field.name: mine})
    if clashes:
        raise StateError(
            f"your edit and a newer iteration both changed the Machine State's {', '.join(clashes)}; "
            "edit the file again from its new version",
            path,
        )
    return merged


def merge_edit(base_text: str, edited_text: str, current_text: str, path: str) -> str:
    """Returns current_text with the edit (edited_text against base_text) applied; raises StateError on a conflict."""
    if current_text == base_text:
        return edited_text
    base, edited, current = (statefile.parse_state(text, path) for text in (base_text, edited_text, current_text))
    machine = merge_machine(base.machine, edited.machine, current.machine, path)
    # The same table in all three, so that the text merge sees no change there.
    texts = [statefile.render_state(statefile.with_machine(s, machine)) for s in (base, edited, current)]
    merged = merge3(texts[0], texts[1], texts[2], ("your edit", "the file you read", "the newer file"))
    if not merged.clean:
        raise StateError(
            f"your edit and a newer iteration changed the same lines ({merged.conflicts} conflict(s)); "
            "edit the file again from its new version",
            path,
        )
    statefile.parse_state(merged.text, path)
    return merged.text
