"""The README stays a five-minute read that still holds what CI runs, and its links resolve."""

from __future__ import annotations

import re

from ._load import ROOT

README = (ROOT / "README.md").read_text(encoding="utf-8")


def test_readme_is_at_most_250_lines():
    assert len(README.splitlines()) <= 250


def test_readme_holds_the_two_commands_ci_runs():
    ci = (ROOT / ".ci" / "run").read_text()
    for command in (
        'python3 -m venv .venv && .venv/bin/pip install -e ".[dev]"',
        ".venv/bin/pytest -q",
    ):
        assert command in ci and command in README, command


def test_every_relative_link_and_image_of_the_readme_exists():
    targets = re.findall(r"\]\(([^)#\s]+)(?:#[^)]*)?\)", README)
    local = [t for t in targets if not re.match(r"[a-z]+://", t)]
    assert local, "the README links to its docs"
    for target in local:
        assert (ROOT / target).exists(), target
