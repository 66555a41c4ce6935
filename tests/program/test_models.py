"""Tests for program/models.py and the `models:` / `model-selection:` frontmatter keys."""

from __future__ import annotations

from pathlib import Path

import pytest

from autoloop_py.errors import ProgramError
from autoloop_py.program.frontmatter import ProgramConfig, parse_frontmatter
from autoloop_py.program.models import GUIDE, ModelSpec, parse_models, proposers, with_role


def _parse(head: str) -> tuple[ProgramConfig, list[str]]:
    problems: list[ProgramError] = []
    config = parse_frontmatter(f"---\n{head}---\n\n# P\n", Path("program.md"), problems, [])
    return config, [str(problem) for problem in problems]


def test_bare_strings_and_mappings_with_every_setting() -> None:
    config, problems = _parse(
        "model-selection: Thompson\n"
        "models:\n"
        "  - openai/cheap\n"
        "  - model: anthropic/strong\n"
        "    weight: 3\n    temperature: 0.2\n    max-tokens: 1024\n    top-p: 0.95\n"
        "    api-base: http://127.0.0.1:9/v1\n    api-key-env: STRONG_KEY\n    timeout: 30\n"
        "    input_cost_per_token: 0.000003\n    output-cost-per-token: 0.000015\n"
        "  - model: openai/meta\n    role: guide\n"
    )
    assert problems == []
    assert config.model_selection == "thompson"
    cheap, strong, meta = config.models
    assert cheap == ModelSpec("openai/cheap")
    assert strong == ModelSpec(
        "anthropic/strong", 3.0, 0.2, 1024, 0.95, "http://127.0.0.1:9/v1", "STRONG_KEY", 30.0, "propose",
        0.000003, 0.000015,
    )
    assert strong.params() == {"temperature": 0.2, "max_tokens": 1024, "top_p": 0.95, "api_base": "http://127.0.0.1:9/v1"}
    assert strong.priced(1000, 100) == pytest.approx(0.003 + 0.0015)
    assert cheap.priced(1000, 100) is None
    assert proposers(config.models) == (cheap, strong) and with_role(config.models, GUIDE) == meta and meta.role == GUIDE


def test_one_model_keeps_working_and_the_default_selection_is_weighted() -> None:
    config, problems = _parse("model: openai/gpt-4o-mini\n")
    assert problems == [] and config.model == "openai/gpt-4o-mini" and config.models == ()
    assert config.model_selection == "weighted"
    assert parse_models("openai/x") == (ModelSpec("openai/x"),)


@pytest.mark.parametrize(
    ("head", "message"),
    [
        ("models:\n  - openai/a\n  - model: openai/b\n    temperature: hot\n",
         "program.md:5: frontmatter `models`: item 2 (openai/b): `temperature` must be a finite number >= 0, got 'hot'"),
        ("models:\n  - openai/a\n  - model: openai/b\n    top-p: 2\n",
         "program.md:5: frontmatter `models`: item 2 (openai/b): `top-p` must be a share from 0 to 1, got 2"),
        ("models:\n  - model: openai/a\n    max-tokens: 0\n",
         "program.md:4: frontmatter `models`: item 1 (openai/a): `max-tokens` must be a whole number >= 1, got 0"),
        ("models:\n  - model: openai/a\n    colour: red\n",
         "program.md:4: frontmatter `models`: item 1 (openai/a): unknown setting `colour`; use one of model, weight,"),
        ("models:\n  - model: ollama/llama3:8b\n    api-base: http://127.0.0.1:9\n    top-p: x\n",
         "program.md:5: frontmatter `models`: item 1 (ollama/llama3:8b): `top-p` must be a finite number >= 0"),
        ("models:\n  - weight: 2\n",
         "program.md:3: frontmatter `models`: item 1 has no `model:`"),
        ("models:\n  - model: openai/a\n    api-key-env: not a name\n",
         "program.md:4: frontmatter `models`: item 1 (openai/a): `api-key-env` must name an environment variable ending in _KEY"),
        ("models:\n  - model: openai/a\n    api-key-env: GITHUB_TOKEN\n",
         "program.md:4: frontmatter `models`: item 1 (openai/a): `api-key-env` must name an environment variable ending in _KEY"),
        ("models:\n  - model: openai/a\n    role: boss\n",
         "program.md:4: frontmatter `models`: item 1 (openai/a): `role` must be one of propose, guide, embedding, judge, got 'boss'"),
        ("models:\n  - model: openai/a\n    role: guide\n",
         "program.md:2: frontmatter `models`: every entry has `role: guide`"),
        ("models:\n  - openai/a\n  - openai/a\n", "program.md:2: frontmatter `models`: openai/a is listed twice"),
        ("models: []\n", "program.md:2: frontmatter `models`: must be a list of litellm model strings"),
        ("model-selection: greedy\n",
         "program.md:2: frontmatter `model-selection`: must be one of weighted, ucb, thompson, got 'greedy'"),
        ("model: openai/a\nmodels: [openai/b]\n", "program.md:2: set `model:` or `models:`, not both"),
    ],
)
def test_a_bad_entry_is_an_error_naming_its_line(head: str, message: str) -> None:
    _, problems = _parse(head)
    assert len(problems) == 1 and problems[0].startswith(message), problems


def test_model_selection_reads_any_case() -> None:
    assert _parse("model-selection: ' UCB '\n") == (ProgramConfig(model_selection="ucb"), [])
    _, problems = _parse("model-selection: best\n")
    assert problems == [
        "program.md:2: frontmatter `model-selection`: must be one of weighted, ucb, thompson, got 'best'"
    ]


def test_numbers_in_scientific_notation_are_numbers() -> None:
    # PyYAML (YAML 1.1) reads `5e-07` as the string '5e-07': only `5.0e-07` is a float to it.
    config, problems = _parse(
        "models:\n"
        "  - model: openai/a\n"
        "    input-cost-per-token: 5e-07\n    output-cost-per-token: 1.5E-6\n"
        "    weight: 2e0\n    timeout: 3e+1\n    max-tokens: 1e3\n    top-p: 9e-1\n    temperature: '2e-1'\n"
    )
    assert problems == []
    (spec,) = config.models
    assert (spec.input_cost, spec.output_cost, spec.weight, spec.timeout) == (5e-07, 1.5e-06, 2.0, 30.0)
    assert (spec.max_tokens, spec.top_p, spec.temperature) == (1000, 0.9, 0.2)
    assert isinstance(spec.max_tokens, int)


@pytest.mark.parametrize(("setting", "message"), [
    ("input-cost-per-token: 5e-07 dollars", "`input-cost-per-token` must be a finite number >= 0, got '5e-07 dollars'"),
    ("output-cost-per-token: e-07", "`output-cost-per-token` must be a finite number >= 0, got 'e-07'"),
    ("weight: 1e999", "`weight` must be a finite number >= 0, got '1e999'"),
    ("input-cost-per-token: -5e-07", "`input-cost-per-token` must be a finite number >= 0, got '-5e-07'"),
    ("max-tokens: 1.5e0", "`max-tokens` must be a whole number >= 1, got '1.5e0'"),
    ("top-p: 2e0", "`top-p` must be a share from 0 to 1, got '2e0'"),
])
def test_what_is_not_a_number_in_scientific_notation_is_still_refused(setting: str, message: str) -> None:
    _, problems = _parse(f"models:\n  - openai/a\n  - model: openai/b\n    {setting}\n")
    assert problems == [f"program.md:5: frontmatter `models`: item 2 (openai/b): {message}"]
