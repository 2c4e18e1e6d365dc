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
from cascade.errors import CascadeError
from cascade.serve.config import ServeConfig, from_args

from .conftest import child_env, free_port


def test_flags_become_the_config(tmp_path):
    args = build_parser().parse_args(
        [
            "serve",
            "--tiny",
            "--pipeline",
            f"mine={tmp_path / 'p.yaml'}",
            "--media-root",
            str(tmp_path),
            "--max-upload-mb",
            "2",
            "--max-frames",
            "10",
            "--max-pixels",
            "1000",
            "--timeout",
            "5",
            "--max-concurrent",
            "3",
            "--workers",
            "1",
            "--no-shipped",
            "--max-total-pixels",
            "5000",
            "--upload-timeout",
            "7",
            "--send-timeout",
            "2",
        ]
    )
    cfg = from_args(args)
    assert (cfg.max_total_pixels, cfg.upload_timeout_s, cfg.send_timeout_s) == (5000, 7, 2)
    assert (
        cfg.random_weights
        and not cfg.shipped
        and cfg.pipelines == {"mine": str(tmp_path / "p.yaml")}
    )
    assert cfg.max_upload_bytes == 2 << 20 and cfg.max_frames == 10 and cfg.max_pixels == 1000
    assert cfg.request_timeout_s == 5 and cfg.max_concurrent == 3 and cfg.media_root == tmp_path
    assert build_parser().parse_args(["demo"]).demo is True


def test_the_environment_sets_what_flags_leave_out_and_flags_win(monkeypatch):
    monkeypatch.setenv("CASCADE_MAX_CONCURRENT", "9")
    monkeypatch.setenv("CASCADE_PIPELINES", '{"mine": "p.yaml"}')
    monkeypatch.setenv("CASCADE_WORKERS", "3")
    cfg = from_args(build_parser().parse_args(["serve", "--workers", "1"]))
    assert (cfg.max_concurrent, cfg.pipelines, cfg.workers) == (9, {"mine": "p.yaml"}, 1)
    assert cfg.max_queue == ServeConfig.model_fields["max_queue"].default == 64
    assert ServeConfig().max_concurrent == 9  # in Python too
    monkeypatch.setenv("CASCADE_MAX_QUEUE", "lots")
    with pytest.raises(CascadeError, match="max_queue: Input should be a valid integer"):
        from_args(build_parser().parse_args(["serve"]))


def test_help_shows_each_setting_s_default_and_variable(capsys):
    with pytest.raises(SystemExit):
        build_parser().parse_args(["serve", "--help"])
    text = " ".join(capsys.readouterr().out.split())
    assert "--max-upload-mb MIB" in text
    assert "(default 64.0; env CASCADE_MAX_UPLOAD_BYTES, in bytes)" in text
    assert "--timeout TIMEOUT" in text and "(default 300.0; env CASCADE_REQUEST_TIMEOUT_S)" in text


def test_model_and_tiny_are_exclusive(capsys):
    with pytest.raises(SystemExit):
        build_parser().parse_args(["serve", "--tiny", "--model", "x"])


def test_bad_pipeline_flag_is_one_line(capsys):
    assert main(["serve", "--pipeline", "nonsense", "--no-shipped"]) != 0
    assert capsys.readouterr().err.startswith("error: --pipeline 'nonsense'")


@pytest.mark.slow
def test_cascade_serve_is_live_at_once_and_ready_when_its_models_are(tmp_path, child_dir):
    """Polled from launch: /health/live answers as soon as HTTP does, /health answers 503 naming
    what is loading until every served pipeline's models are loaded, then 200."""
    port = free_port()
    env = child_env(
        child_dir,
        VLM_CASCADE_CACHE=os.environ.get(
            "VLM_CASCADE_CACHE", str(Path.home() / ".cache" / "vlm-cascade")
        ),
    )
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "cascade.cli",
            "serve",
            "--tiny",
            "--port",
            str(port),
            "--no-shipped",
            "--pipeline",
            "doc_qa=doc_qa",
            "--pipeline",
            "multi_image_qa=multi_image_qa",
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        cwd=child_dir,
        env=env,
    )
    url, seen = f"http://127.0.0.1:{port}", []
    try:
        deadline = time.monotonic() + 300
        while True:
            assert proc.poll() is None, proc.stdout.read()
            assert time.monotonic() < deadline, f"cascade serve did not become ready: {seen[-3:]}"
            try:
                live = httpx.get(f"{url}/health/live", timeout=5)
                health = httpx.get(f"{url}/health", timeout=5)
            except httpx.TransportError:
                time.sleep(0.1)
                continue
            seen.append((live.status_code, health.status_code, health.json()))
            if health.status_code == 200:
                break
            time.sleep(0.1)
        starting = [body for live_status, status, body in seen if status == 503]
        assert all(live_status == 200 for live_status, _, _ in seen)
        assert starting, "never saw the server starting: readiness answered 200 at once"
        first = starting[0]
        assert first["status"] == "starting" and first["waiting_for"], first
        assert any(s == "loading" for s in first["models"].values())
        assert all(w.endswith("models loading") for w in first["waiting_for"])
        ready = seen[-1][2]
        assert ready["status"] == "ok" and ready["waiting_for"] == [] and ready["random_weights"]
        assert set(ready["models"].values()) == {"ready"}
        ids = {m["id"] for m in httpx.get(f"{url}/v1/models").json()["data"]}
        assert ids == set(ready["models"]) == {"cascade/doc_qa", "cascade/multi_image_qa"}
        metrics = httpx.get(f"{url}/metrics").text
        assert "cascade_requests_in_flight 0.0" in metrics and "cascade_ready 1.0" in metrics
    finally:
        proc.terminate()
        out, _ = proc.communicate(timeout=30)
    assert "random-weight" in out  # the tiny-model note is printed
