"""`cascade serve` / `cascade demo` from the command line."""
from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest

from cascade.cli import build_parser, main
from cascade.serve.cli import config_from_args

from .conftest import free_port


def test_flags_become_the_config(tmp_path):
    args = build_parser().parse_args([
        "serve", "--tiny", "--pipeline", f"mine={tmp_path / 'p.yaml'}", "--media-root", str(tmp_path),
        "--max-upload-mb", "2", "--max-frames", "10", "--max-pixels", "1000", "--timeout", "5",
        "--max-concurrent", "3", "--workers", "1", "--no-shipped"])
    cfg = config_from_args(args)
    assert cfg.random_weights and not cfg.shipped and cfg.pipelines == {"mine": str(tmp_path / "p.yaml")}
    assert cfg.max_upload_bytes == 2 << 20 and cfg.max_frames == 10 and cfg.max_pixels == 1000
    assert cfg.request_timeout_s == 5 and cfg.max_concurrent == 3 and cfg.media_root == tmp_path
    assert build_parser().parse_args(["demo"]).demo is True


def test_model_and_tiny_are_exclusive(capsys):
    with pytest.raises(SystemExit):
        build_parser().parse_args(["serve", "--tiny", "--model", "x"])


def test_bad_pipeline_flag_is_one_line(capsys):
    assert main(["serve", "--pipeline", "nonsense", "--no-shipped"]) != 0
    assert capsys.readouterr().err.startswith("error: --pipeline 'nonsense'")


@pytest.mark.slow
def test_cascade_serve_process_answers_health_and_models(tmp_path):
    port = free_port()
    env = {**os.environ, "VLM_CASCADE_CACHE": os.environ.get("VLM_CASCADE_CACHE", str(Path.home() / ".cache" / "vlm-cascade"))}
    proc = subprocess.Popen([sys.executable, "-m", "cascade.cli", "serve", "--tiny", "--port", str(port)],
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env)
    try:
        deadline = time.monotonic() + 120
        while True:
            assert proc.poll() is None, proc.stdout.read()
            try:
                health = httpx.get(f"http://127.0.0.1:{port}/health", timeout=2).json()
                break
            except httpx.TransportError:
                assert time.monotonic() < deadline, "cascade serve did not come up"
                time.sleep(0.3)
        assert health["status"] == "ok" and health["random_weights"] is True
        ids = {m["id"] for m in httpx.get(f"http://127.0.0.1:{port}/v1/models").json()["data"]}
        assert ids and all(i.startswith("cascade/") for i in ids)
        assert "cascade_requests_in_flight 0" in httpx.get(f"http://127.0.0.1:{port}/metrics").text
    finally:
        proc.terminate()
        out, _ = proc.communicate(timeout=30)
    assert "random-weight" in out  # the tiny-model note is printed
