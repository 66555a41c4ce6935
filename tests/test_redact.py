"""Tests for autoloop_py.redact: which variables are secrets, and masking in text, bytes, JSON and logs."""

from __future__ import annotations

import json
import logging

from hypothesis import given
from hypothesis import strategies as st

from autoloop_py.redact import MASK, RedactingFilter, Redactor, from_environment, looks_secret, secret_names


def test_secret_like_names_and_the_extra_list() -> None:
    env = {
        "GITHUB_TOKEN": "ghs_abcdefgh", "OPENAI_API_KEY": "sk-123456", "DB_PASSWORD_FILE": "hunter22",
        "APP_SECRET": "zzzzzzzz", "HOME": "/root", "MY_THING": "opaque-value", "AUTOLOOP_SECRET_NAMES": "MY_THING, ",
    }  # fmt: skip
    assert secret_names(env) == ["APP_SECRET", "DB_PASSWORD_FILE", "GITHUB_TOKEN", "MY_THING", "OPENAI_API_KEY"]
    assert not looks_secret("PATH") and looks_secret("gh_token")


def test_short_values_are_not_masked() -> None:
    redactor = from_environment({"X_TOKEN": "main", "Y_KEY": "true", "Z_TOKEN": "long-enough"})
    assert redactor.text("main true long-enough") == f"main true {MASK}"


def test_longest_secret_wins_and_lines_of_a_multiline_secret_are_masked() -> None:
    redactor = from_environment({"A_TOKEN": "abcdefgh", "B_TOKEN": "abcdefgh-ijkl", "PEM_KEY": "line-one-x\nline-two-y\n"})
    assert redactor.text("abcdefgh-ijkl abcdefgh") == f"{MASK} {MASK}"
    assert redactor.text("...line-two-y...") == f"...{MASK}..."


def test_json_escaped_form_is_masked_too() -> None:
    secret = 'quo"te\\back'
    redactor = from_environment({"Q_SECRET": secret})
    row = json.dumps({"error": f"leaked {secret}"})
    assert secret not in json.loads(redactor.text(row)).get("error", "")
    assert redactor.data(row.encode()) == redactor.text(row).encode()


@given(st.text(min_size=6, max_size=30).filter(lambda s: s.strip() == s and "\n" not in s), st.text(max_size=50))
def test_a_secret_never_survives_masking(secret: str, around: str) -> None:
    redactor = from_environment({"S_TOKEN": secret})
    assert secret not in redactor.text(around + secret + around)


def test_structure_masks_nested_strings() -> None:
    redactor = Redactor(("s3cr3t-value",))
    assert redactor.structure({"a": ["x s3cr3t-value"], "s3cr3t-value": 1}) == {"a": [f"x {MASK}"], MASK: 1}


def test_log_filter_masks_arguments() -> None:
    record = logging.LogRecord("autoloop_py", logging.WARNING, __file__, 1, "got %s", ("s3cr3t-value",), None)
    assert RedactingFilter(Redactor(("s3cr3t-value",))).filter(record)
    assert record.getMessage() == f"got {MASK}"
