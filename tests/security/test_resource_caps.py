"""Hostile evaluations against `max-memory` and `max-disk`: one fills its copy, one allocates past the memory cap.

Each is recorded as an error whose note names the cap; the checkout's config, refs and HEAD are unchanged, nothing of
the candidate is published, and the fake secret is nowhere. They run without bubblewrap (`isolation: none`): the
caps are set by the runner in both modes, and the attackers write only into their own copy.
"""

from __future__ import annotations

from tests.security.conftest import SECRET, Hostile, assert_recorded_error

FILL_DISK = """\
import json, os
written = 0
try:
    with open("fill.bin", "wb") as out:
        for _ in range(48):  # 48 MiB of real bytes, against a cap of 16 MiB
            out.write(os.urandom(1 << 20))
            written += 1 << 20
except OSError as err:
    print(json.dumps({"error": f"blocked: writing stopped at {written} bytes ({err})"}))
    raise SystemExit(0)
print(json.dumps({"score": 1e9}))
"""
EAT_MEMORY = """\
import json
try:
    hoard = bytearray(1 << 30)  # 1 GiB, against a cap of 256 MiB
except MemoryError:
    print("blocked: 1 GiB could not be allocated")
    raise
print(json.dumps({"score": 1e9}))
"""


def test_an_evaluation_that_fills_its_copy_is_an_error_naming_max_disk(hostile: Hostile) -> None:
    hostile.install(FILL_DISK, {"isolation": "none", "max-disk": "16MiB"})
    outcome = hostile.run()
    assert_recorded_error(outcome, "over the program's `max-disk` of 16777216 bytes")
    before, after = outcome.checkout
    assert before == after and "1e+09" not in outcome.state and "1000000000" not in outcome.state
    assert not outcome.leaked(SECRET)


def test_an_evaluation_past_max_memory_is_an_error_naming_it(hostile: Hostile) -> None:
    hostile.install(EAT_MEMORY, {"isolation": "none", "max-memory": "256MiB"})
    outcome = hostile.run()
    assert_recorded_error(outcome, "MemoryError", "`max-memory` of 268435456 bytes per process")
    before, after = outcome.checkout
    assert before == after and "1e+09" not in outcome.state
    assert not outcome.leaked(SECRET)
