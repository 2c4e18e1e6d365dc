"""Fixtures for the first-run tests: a user's environment with the hub switched back on (the
suite's conftest sets HF_HUB_OFFLINE), pointed at a local hub that refuses, hangs or mirrors."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import pytest

from cascade.eval.video import make_sign_video

CASCADE = shutil.which("cascade", path=str(Path(sys.executable).parent)) or "cascade"
HUB_OFF_SWITCHES = ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE")


def user_env(endpoint: str, hf_home: Path, **extra: str) -> dict[str, str]:
    """This process's environment with the hub switches a user would not have set removed,
    `HF_ENDPOINT` at `endpoint` and an own hub cache (so nothing cached elsewhere counts)."""
    env = {k: v for k, v in os.environ.items() if k not in HUB_OFF_SWITCHES}
    env.update(HF_ENDPOINT=endpoint, HF_HOME=str(hf_home), **extra)
    return env


@dataclass
class Ran:
    returncode: int
    stdout: str
    stderr: str
    seconds: float


def run_cascade(args: list[str], env: dict[str, str], timeout: float = 600) -> Ran:
    start = time.monotonic()
    p = subprocess.run(
        [CASCADE, *map(str, args)], env=env, capture_output=True, text=True, timeout=timeout
    )
    return Ran(p.returncode, p.stdout, p.stderr, time.monotonic() - start)


@pytest.fixture(scope="session")
def sign_clip(tmp_path_factory) -> Path:
    return make_sign_video(tmp_path_factory.mktemp("media") / "clip.mp4")


@pytest.fixture(scope="session")
def mirror_root(tmp_path_factory) -> Path:
    """A hub mirror's content: the tiny random-weight Qwen2-VL as repo tiny-org/tiny-vlm."""
    from cascade.vlm import build_tiny_vlm

    root = tmp_path_factory.mktemp("mirror")
    shutil.copytree(build_tiny_vlm(size="test"), root / "tiny-org" / "tiny-vlm")
    return root
