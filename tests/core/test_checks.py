"""The checks every change passes (pyproject.toml; docs/architecture.md, "Checks"): `ruff check`,
`ruff format --check` and mypy on the `cascade` package, run as the pre-commit hooks run them. A
finding fails here with the tool's own report. The tools come with the `dev` extra; a test skips,
saying so, only where its tool is not installed."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def _tool(name: str) -> str:
    """The tool installed next to this interpreter (the venv's), else the one on PATH."""
    found = shutil.which(name, path=str(Path(sys.executable).parent)) or shutil.which(name)
    if found is None:
        pytest.skip(f"{name} is not installed (it comes with: pip install -e '.[dev]')")
    return found


def _run(args: list[str], timeout: float, env: dict[str, str] | None = None) -> str:
    """Run a check from the repository root; fail with its report unless it exits 0."""
    out = subprocess.run(args, cwd=ROOT, capture_output=True, text=True, timeout=timeout, env=env)
    report = (out.stdout + out.stderr)[-6000:]
    assert out.returncode == 0, f"{' '.join(args)} exited {out.returncode}:\n{report}"
    return report


def test_ruff_check_is_clean():
    _run([_tool("ruff"), "check", "--no-cache", "."], timeout=300)


def test_ruff_format_leaves_every_file_as_it_is():
    _run([_tool("ruff"), "format", "--check", "--no-cache", "."], timeout=300)


@pytest.mark.timeout(900)  # a first run, with no cache yet, reads torch's and transformers' types
def test_mypy_is_clean_on_the_cascade_package():
    """`.ci/mypy` (the pre-commit hook): the whole package, incremental cache in .mypy_cache/."""
    env = {**os.environ, "MYPY": _tool("mypy")}
    report = _run(["bash", str(ROOT / ".ci" / "mypy")], timeout=880, env=env)
    assert "Success: no issues found" in report, report
