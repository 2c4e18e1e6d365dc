"""A built wheel installs stages/, routers/, kernels/ as cascade.* subpackages, with the YAML
files."""

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.slow
def test_wheel_imports_mapped_subpackages(tmp_path):
    # Build from a copy of the tracked files: setuptools writes build/ next to the sources.
    src, wheel_dir, target = tmp_path / "src", tmp_path / "wheel", tmp_path / "site"
    tracked = subprocess.run(
        ["git", "ls-files"], capture_output=True, text=True, cwd=ROOT, check=True
    )
    for rel in tracked.stdout.splitlines():
        if (ROOT / rel).is_file():
            (src / rel).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(ROOT / rel, src / rel)
    build = subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "wheel",
            str(src),
            "--no-deps",
            "--no-build-isolation",
            "-q",
            "-w",
            str(wheel_dir),
        ],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=tmp_path,
    )
    assert build.returncode == 0, build.stderr
    wheel = next(wheel_dir.glob("vlm_cascade-*.whl"))
    install = subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "install",
            "-q",
            "--no-deps",
            "--target",
            str(target),
            str(wheel),
        ],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert install.returncode == 0, install.stderr
    code = """
import cascade, cascade.stages, cascade.routers, cascade.kernels
from cascade.pipelines import shipped
from cascade.registry import stage_types
print(cascade.__file__); print(cascade.stages.__file__); print(cascade.kernels.__file__)
print(sorted(shipped())); print(len(stage_types()))
"""
    env = {**os.environ, "PYTHONPATH": str(target)}
    out = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=tmp_path,
        env=env,
    )
    assert out.returncode == 0, out.stderr
    lines = out.stdout.splitlines()
    for line in lines[:3]:
        assert line.startswith(str(target)), lines
    assert "route_demo" in lines[3]
    assert int(lines[4]) >= 3
    assert not (target / "stages").exists() and not (target / "kernels").exists()
