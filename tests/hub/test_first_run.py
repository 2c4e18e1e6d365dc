"""The README's main command on a machine that cannot reach a model hub, run as a user runs it.

Without `--offline` it must fail in seconds (not after the hub client's minute of retries) with
every missing model and the ways out, and without retry noise; with `--offline` it answers. The
hub is a local address that refuses connections, or one that accepts them and never answers.
"""

from __future__ import annotations

import json

import pytest

from cascade.hub import PROBE_TIMEOUT_S

from .conftest import run_cascade, user_env
from .servers import black_hole, refusing_endpoint

QUESTION = "question=What does the sign say?"
# A bound on a hang, not a speed figure: on a quiet machine the command fails in ~3 s (start-up,
# then one probe of at most PROBE_TIMEOUT_S); the hub client's own retries take over a minute.
# On a machine shared with other jobs, start-up alone can take longer than the whole bound, so
# the bound is also allowed to stretch to the same command's time with no probe at all
# (HF_HUB_OFFLINE=1, measured just before) plus the probe and a margin.
FAIL_FAST_S = 10.0
MARGIN_S = 5.0
RETRY_NOISE = (
    "Retrying in",
    "thrown while requesting",
    "WARNING:huggingface_hub",
    "couldn't connect",
    "Traceback",
)


def fail_fast_bound(args: list[str], tmp_path) -> float:
    """FAIL_FAST_S, or more when the machine is busy: the same command with the hub switched off
    (it never asks the network) times start-up, and the probe and a margin come on top."""
    no_probe = run_cascade(args, user_env(refusing_endpoint(), tmp_path, HF_HUB_OFFLINE="1"))
    assert no_probe.returncode == 1 and "HF_HUB_OFFLINE is set" in no_probe.stderr, no_probe.stderr
    return max(FAIL_FAST_S, no_probe.seconds + PROBE_TIMEOUT_S + MARGIN_S)


def assert_remedy(stderr: str, offline_flag: str, local_copy: list[str]) -> None:
    assert "error: 2 model(s) are not here and cannot be downloaded" in stderr
    assert "Qwen/Qwen2-VL-2B-Instruct" in stderr
    assert "timm/vit_base_patch32_clip_224.openai" in stderr  # open_clip's hub repo for 'openai'
    assert "cannot be reached" in stderr
    assert offline_flag in stderr and "random" in stderr
    for item in local_copy:
        assert item in stderr
    assert "HF_ENDPOINT" in stderr
    for noise in RETRY_NOISE:
        assert noise not in stderr, stderr


@pytest.mark.parametrize("hub", ["refuses", "never answers"])
def test_main_command_without_hub_fails_fast_with_the_ways_out(hub, sign_clip, tmp_path):
    args = ["run", "video_qa", "--input", f"video={sign_clip.path}", "--input", QUESTION, "--json"]
    bound = fail_fast_bound(args, tmp_path)
    if hub == "refuses":
        ran = run_cascade(args, user_env(refusing_endpoint(), tmp_path))
    else:
        with black_hole() as endpoint:
            ran = run_cascade(args, user_env(endpoint, tmp_path))
    assert ran.returncode == 1, ran.stderr
    assert ran.seconds < bound, f"took {ran.seconds:.1f} s (bound {bound:.1f} s)"
    assert ran.stdout == ""
    assert_remedy(
        ran.stderr,
        "--offline",
        [
            "--set models.vlm.id=<checkpoint folder>",
            "--set clip.pretrained=<open_clip .safetensors/.pt file>",
        ],
    )
    if hub == "never answers":
        assert "no answer within" in ran.stderr


def test_main_command_with_offline_answers(sign_clip, tmp_path):
    ran = run_cascade(
        [
            "run",
            "video_qa",
            "--input",
            f"video={sign_clip.path}",
            "--input",
            QUESTION,
            "--input",
            "max_new_tokens=2",
            "--json",
            "--offline",
        ],
        user_env(refusing_endpoint(), tmp_path),
    )
    assert ran.returncode == 0, ran.stderr
    answer = json.loads(ran.stdout)["outputs"]["answer"]
    assert answer["produced_by"] in ("vlm", "tool") and answer["text"] is not None
    for noise in RETRY_NOISE:
        assert noise not in ran.stderr


def test_server_start_without_hub_fails_fast_with_the_ways_out(tmp_path):
    args = ["serve", "--port", "0"]
    bound = fail_fast_bound(args, tmp_path)
    ran = run_cascade(args, user_env(refusing_endpoint(), tmp_path), timeout=120)
    assert ran.returncode == 1, ran.stderr
    assert ran.seconds < bound, f"took {ran.seconds:.1f} s (bound {bound:.1f} s)"
    assert_remedy(ran.stderr, "--tiny", ["--model <checkpoint folder>", "--pipeline NAME="])
