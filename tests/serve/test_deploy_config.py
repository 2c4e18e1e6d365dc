"""`cascade deploy` without Ray: every server setting reaches the application's args through one
settings model (flags, `CASCADE_*` variables, defaults), and bad values are named."""

from __future__ import annotations

import yaml

from cascade.cli import main
from cascade.serve.ray.options import split_args

from .conftest import PIPELINES


def _deploy(tmp_path, *flags: str) -> dict:
    out = tmp_path / "serve_config.yaml"
    assert main(["deploy", str(PIPELINES / "images_plain.yaml"), "--out", str(out), *flags]) == 0
    return yaml.safe_load(out.read_text())


def _refused(tmp_path, capsys, *flags: str) -> str:
    out = tmp_path / "refused.yaml"
    assert main(["deploy", str(PIPELINES / "images_plain.yaml"), "--out", str(out), *flags]) != 0
    assert not out.exists()
    return capsys.readouterr().err


def test_flags_and_environment_reach_the_args_and_the_deployments(tmp_path, monkeypatch):
    monkeypatch.setenv("CASCADE_DEPLOY_MAX_REPLICAS", "6")
    monkeypatch.setenv("CASCADE_MAX_QUEUE", "7")
    raw = _deploy(
        tmp_path,
        "--tiny",
        "--timeout",
        "12",
        "--vlm-gpus",
        "0.5",
        "--vlm-cpus",
        "2",
        "--max-batch-size",
        "3",
        "--name",
        "docs",
        "--port",
        "9000",
    )
    app = raw["applications"][0]
    config, options = split_args(app["args"])  # what build_app will be given
    assert config.tiny and config.request_timeout_s == 12 and config.max_queue == 7
    assert config.shipped is False and list(config.pipelines) == ["images_plain"]
    assert options.model_gpus == 0.5 and options.max_batch_size == 3
    assert options.num_cpus == {"ingress": 0.5, "vlm_answer": 2.0}
    assert (app["name"], raw["http_options"]["port"]) == ("docs", 9000)
    vlm = {d["name"]: d for d in app["deployments"]}["vlm_answer"]
    assert vlm["autoscaling_config"]["max_replicas"] == 6
    assert vlm["ray_actor_options"] == {"num_cpus": 2.0, "num_gpus": 0.5}
    assert vlm["max_ongoing_requests"] == 8


def test_a_bad_setting_is_named_and_nothing_is_written(tmp_path, monkeypatch, capsys):
    assert "max_replicas" in _refused(tmp_path, capsys, "--max-replicas", "0")
    monkeypatch.setenv("CASCADE_DEPLOY_TARGET_ONGOING", "lots")
    assert "target_ongoing" in _refused(tmp_path, capsys)
