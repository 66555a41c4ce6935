"""Where a program's propose job runs in GitHub Actions: its runner labels (`runs-on:`) and container (`container:`)."""

from __future__ import annotations

from typing import Any

# The keys of a job container mapping GitHub Actions accepts (jobs.<id>.container).
CONTAINER_KEYS = ("image", "credentials", "env", "ports", "volumes", "options")
DEFAULT_RUNS_ON = ("ubuntu-latest",)


def parse_runs_on(value: Any) -> tuple[str, ...]:
    """Returns the runner labels of `runs-on:` (a label, or a list of labels a runner must all carry).

    Raises ValueError naming what is wrong.
    """
    labels = [value] if isinstance(value, str) else value
    if not isinstance(labels, list) or not labels:
        raise ValueError(f"must be a runner label or a list of labels (e.g. [self-hosted, gpu]), got {value!r}")
    for label in labels:
        if not isinstance(label, str) or not label.strip() or "${{" in label:
            raise ValueError(f"each label must be a non-empty string without an expression, got {label!r}")
    return tuple(label.strip() for label in labels)


def parse_container(value: Any) -> str | dict[str, Any]:
    """Returns the job container of `container:`: an image name, or a mapping with `image:` (and GitHub's keys).

    Raises ValueError naming what is wrong.
    """
    if isinstance(value, str):
        if not value.strip() or "${{" in value:
            raise ValueError(f"must name an image (e.g. pytorch/pytorch:2.4.0-cuda12.1-cudnn9-runtime), got {value!r}")
        return value.strip()
    if not isinstance(value, dict):
        raise ValueError(f"must be an image name or a mapping with `image:`, got {value!r}")
    unknown = [str(k) for k in value if k not in CONTAINER_KEYS]
    if unknown:
        raise ValueError(f"unknown key `{unknown[0]}` (a container takes {', '.join(CONTAINER_KEYS)})")
    image = value.get("image")
    if not isinstance(image, str) or not image.strip():
        raise ValueError(f"a container mapping needs `image:` naming an image, got {image!r}")
    return {**value, "image": image.strip()}
