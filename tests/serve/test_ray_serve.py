"""The Ray Serve application on a real local Ray cluster (started here, shut down after).

One module-scoped cluster (`ray.init(num_cpus=4)` on any box: Ray's CPUs are scheduling units,
every replica runs 1 torch thread) and one application over the small test pipelines: an
ingress, two `vlm_answer` replicas (the real tiny Qwen2-VL) and one `test_fault` replica: the
fault stage is a plugin from outside the package (`fault_stage.py`) that declares itself heavy
(`Serving(heavy=True)`), so it gets a deployment of its own like the built-in heavy stages, and a
replica can be killed while a request is surely in it.
Nothing is mocked: HTTP to Serve's proxy on 127.0.0.1, handles, object refs, replicas.
"""

from __future__ import annotations

import concurrent.futures as cf
import json
import os
import re
import threading
import time
from pathlib import Path

import numpy as np
import pytest

ray = pytest.importorskip(
    "ray", reason="ray[serve] is not installed (pip install 'vlm-cascade[ray]')"
)
serve = pytest.importorskip("ray.serve")
httpx = pytest.importorskip("httpx")

from cascade.serve.ray.app import build_app  # noqa: E402
from cascade.serve.ray.executor import RemoteStages  # noqa: E402
from cascade.serve.ray.options import APP_NAME, RayOptions, app_args  # noqa: E402

from .conftest import (  # noqa: E402
    IMAGES,
    PIPELINES,
    chat,
    data_url,
    image_part,
    png_bytes,
    small_config,
    stream_spread,
)

pytestmark = [pytest.mark.slow, pytest.mark.ray, pytest.mark.timeout(300)]


@pytest.fixture(scope="module")
def server(cluster, tiny_vlm):
    # `test_fault` (tests/serve/fault_stage.py, a stage from outside the package) declares itself
    # heavy: it gets a deployment of its own, like the built-in heavy stages.
    options = RayOptions(
        replicas=2,
        threads=1,
        imports=("tests.serve.fault_stage",),
        batch_wait_timeout_s=0.2,
        num_cpus={"vlm_answer": 0.5, "ingress": 0.5},
        health_check_period_s=1.0,
    )
    config = small_config(tiny_vlm, max_concurrent=8)
    t0 = time.perf_counter()
    serve.run(build_app(app_args(config, options)), name=APP_NAME, route_prefix="/")
    print(f"application started in {time.perf_counter() - t0:.1f} s")
    return cluster


def _image(seed: int) -> dict:
    rng = np.random.default_rng(seed)
    return image_part(
        data_url(png_bytes(rng.integers(0, 255, (48, 64, 3), dtype=np.uint8)), "image/png")
    )


def _post(url: str, body: dict, timeout: float = 120) -> httpx.Response:
    return httpx.post(f"{url}/v1/chat/completions", json=body, timeout=timeout)


def _vlm_counters(resp: httpx.Response) -> dict:
    stages = {s["name"]: s for s in resp.json()["cascade"]["trace"]["stages"]}
    return stages["vlm"]["counters"]


def _metric(text: str, name: str, **labels: str) -> float:
    """The sum of `name`'s samples whose labels include `labels`."""
    total = 0.0
    for m in re.finditer(rf"^{name}(?:{{(.*)}})? (\S+)$", text, re.M):
        if all(f'{k}="{v}"' in (m.group(1) or "") for k, v in labels.items()):
            total += float(m.group(2))
    return total


def _replica_calls(url: str, deployment: str) -> dict[str, float]:
    text = httpx.get(f"{url}/metrics").text
    pat = rf'cascade_replica_calls_total{{deployment="{deployment}",replica="([^"]+)"}} (\S+)'
    return {m.group(1): float(m.group(2)) for m in re.finditer(pat, text)}


def _wait_running(url: str, deployment: str, n: int, timeout: float = 60) -> dict:
    deadline = time.monotonic() + timeout
    while True:
        health = httpx.get(f"{url}/health", timeout=10).json()
        if health["replicas"].get(deployment, 0) >= n or time.monotonic() > deadline:
            return health
        time.sleep(0.25)


def test_health_reports_running_replicas_and_the_api_is_the_same(server):
    health = httpx.get(f"{server}/health").json()
    assert health["status"] == "ok" and health["waiting_for"] == []
    assert health["models"] == {"cascade/video_small": "ready", "cascade/images_small": "ready"}
    assert health["replicas"] == {"ingress": 1, "vlm_answer": 2, "test_fault": 1}
    models = httpx.get(f"{server}/v1/models").json()
    assert [m["id"] for m in models["data"]] == ["cascade/video_small", "cascade/images_small"]
    # Same errors, same shapes, decided in the ingress.
    r = _post(server, chat("cascade/nope", "hi", _image(0)))
    assert r.status_code == 404 and r.json()["error"]["code"] == "model_not_found"
    r = _post(server, chat(IMAGES, "hi"))
    assert r.status_code == 400 and r.json()["error"]["code"] == "missing_media"
    # A stage failing in a replica fails the request the way it fails in-process.
    r = _post(server, chat(IMAGES, "CRASH please", _image(0)))
    assert r.status_code == 500 and r.json()["error"]["code"] == "pipeline_error"
    assert "crash injected" in r.json()["error"]["message"]


# -- parity with the in-process server ------------------------------------------------------------
PARITY = [  # requests whose every field the Ray path must honour as the in-process one does
    {"mm_processor_kwargs": {"max_pixels": 28 * 28 * 4}, "max_tokens": 4},
    {"mm_processor_kwargs": {"min_pixels": 28 * 28 * 48, "max_pixels": 28 * 28 * 64}},
    {"n": 2, "logprobs": True, "top_logprobs": 2, "max_tokens": 4},
    {"stop": ["the", "a"], "max_tokens": 8, "seed": 3},
    {
        "response_format": {
            "type": "json_schema",
            "json_schema": {
                "name": "n",
                "schema": {"type": "object", "properties": {"n": {"type": "integer"}}},
            },
        },
        "max_tokens": 12,
    },
]


def _shape(body: dict) -> dict:
    """What a request field decides in an answer: the choices (text, finish, logprobs' shape)
    and the visual tokens the VLM saw."""
    return {
        "choices": [
            (
                c["message"]["content"],
                c["finish_reason"],
                None
                if c.get("logprobs") is None
                else [len(t["top_logprobs"]) for t in c["logprobs"]["content"]],
            )
            for c in body["choices"]
        ],
        "visual": body["cascade"]["bill"]["visual_tokens"],
    }


def test_per_request_fields_reach_the_replicas_as_they_reach_in_process_stages(server, tiny_vlm):
    """mm_processor_kwargs, n, logprobs, stop, seed and a response schema: the Ray app answers
    each (greedy, so comparable) exactly as the in-process server with the same model does."""
    from cascade.serve.app import create_app

    from .conftest import running_server, warm

    app = create_app(small_config(tiny_vlm))
    warm(app)
    image = _image(21)
    with running_server(app) as local:
        # One contract: the Ray app publishes the schema the in-process server publishes.
        assert (
            httpx.get(f"{server}/openapi.json").json() == httpx.get(f"{local}/openapi.json").json()
        )
        for extra in PARITY:
            body = chat(IMAGES, "What is it?", image, **extra)
            ours, theirs = _post(server, body), _post(local, body)
            assert ours.status_code == theirs.status_code == 200, (extra, ours.text)
            assert _shape(ours.json()) == _shape(theirs.json()), extra
    small, large = (_shape(_post(server, chat(IMAGES, "?", image, **p)).json()) for p in PARITY[:2])
    assert small["visual"] < large["visual"]  # the replica ran with the request's pixel limits


def test_schemathesis_finds_no_failure_against_the_ray_app(server, tmp_path):
    """`st run --checks all` against the Ray application's published contract (a modest case
    count: the cases that get through run the tiny VLM in a replica)."""
    import subprocess
    import sys

    here = Path(__file__).resolve().parent
    st = Path(sys.executable).with_name("st")
    if not st.exists():
        pytest.skip("schemathesis is not installed (pip install -e '.[dev]')")
    report = tmp_path / "report.json"
    run = subprocess.run(
        [
            str(st),
            "--config-file",
            str(here / "schemathesis.toml"),
            "run",
            f"{server}/openapi.json",
            "--checks",
            "all",
            "--max-examples",
            "25",
            "--seed",
            "1",
            "--workers",
            "1",
            "--request-timeout",
            "120",
            "--no-color",
            "--report",
            "json",
            "--report-json-path",
            str(report),
        ],
        cwd=tmp_path,
        env={**os.environ, "SCHEMATHESIS_HOOKS": str(here / "schemathesis_hooks.py")},
        capture_output=True,
        text=True,
        timeout=900,
    )
    assert run.returncode == 0, run.stdout[-6000:] + run.stderr[-2000:]
    result = json.loads(report.read_text())
    assert result["failures"] == [] and result["errors"] == []
    assert result["operations"]["tested"] == 5
    chat_rates = result["valid_rates"]["POST /v1/chat/completions"]
    assert sum(phase["accepted"] for phase in chat_rates.values()) >= 5, chat_rates


def test_openai_client_chat_with_an_image(server):
    openai = pytest.importorskip("openai")
    client = openai.OpenAI(base_url=f"{server}/v1", api_key="unused", max_retries=0)
    out = client.chat.completions.create(
        model=IMAGES,
        messages=[
            {"role": "user", "content": [_image(1), {"type": "text", "text": "What colour is it?"}]}
        ],
    )
    assert out.choices[0].message.role == "assistant" and isinstance(
        out.choices[0].message.content, str
    )
    assert out.usage.prompt_tokens > 0 and out.model_extra["cascade"]["produced_by"] == "vlm"


def test_tokens_stream_from_the_vlm_replica_as_they_are_generated(server):
    openai = pytest.importorskip("openai")
    client = openai.OpenAI(base_url=f"{server}/v1", api_key="unused", max_retries=0)
    for question in ("Tell me a long story about it.", "Describe it.", "What is it?"):
        messages = [{"role": "user", "content": [_image(7), {"type": "text", "text": question}]}]
        plain = client.chat.completions.create(model=IMAGES, messages=messages, max_tokens=64)
        if plain.choices[0].finish_reason == "length":
            break
    assert plain.choices[0].finish_reason == "length", "no question got a long answer"
    texts, arrivals, decode_s = stream_spread(client, IMAGES, messages, 64)
    assert "".join(texts) == plain.choices[0].message.content
    # one chunk per token, spread over the replica's decode: not the finished answer at the end
    assert 1 < len(texts) <= plain.usage.completion_tokens
    assert arrivals[-1] - arrivals[0] > 0.5 * decode_s > 0


def test_two_vlm_replicas_answer_concurrent_requests(server):
    before = _replica_calls(server, "vlm_answer")
    with cf.ThreadPoolExecutor(8) as pool:
        resps = list(
            pool.map(
                lambda i: _post(server, chat(IMAGES, f"Question {i}?", _image(100 + i))), range(8)
            )
        )
    assert [r.status_code for r in resps] == [200] * 8
    assert all(r.json()["choices"][0]["message"]["content"] is not None for r in resps)
    after = _replica_calls(server, "vlm_answer")
    served = {rid for rid, n in after.items() if n > before.get(rid, 0)}
    assert len(served) == 2, after  # new conversations spread over both replicas
    # Concurrent calls in one replica were batched: one generate_batch prefill for several.
    batched = [_vlm_counters(r) for r in resps if _vlm_counters(r).get("vlm_batch_size", 1) > 1]
    assert batched, "no request was answered in a batch"
    assert batched[0]["kv_cache_hits"] == 0 and batched[0]["kv_cache_misses"] == 0  # bypassed
    # A batch bypasses the KV prefix cache: a batched conversation's next turn, alone, takes the
    # single path and fills the cache (a miss), the turn after hits.
    part = _image(
        100 + next(i for i, r in enumerate(resps) if _vlm_counters(r).get("vlm_batch_size", 1) > 1)
    )
    fill = _vlm_counters(_post(server, chat(IMAGES, "Once more?", part)))
    hit = _vlm_counters(_post(server, chat(IMAGES, "And again?", part)))
    assert (
        fill["kv_cache_misses"] == 1 and hit["kv_cache_hits"] == 1 and "vlm_batch_size" not in hit
    )
    assert set(batched[0]) - {"vlm_batch_size"} == set(hit)  # the batch path bills the same way


def test_affinity_sends_turn_two_to_the_replica_with_the_kv_prefix(server):
    convs = [_image(200 + i) for i in range(4)]
    for part in convs:  # one at a time: each first turn goes the single path and fills the cache
        first = _post(server, chat(IMAGES, "Describe it.", part))
        assert first.status_code == 200 and _vlm_counters(first)["kv_cache_misses"] == 1
    time.sleep(0.5)  # the replicas' media ids reach the router (Serve pushes them every 0.1 s)
    for part in convs:  # without affinity each follow-up would hit only half the time
        second = _post(server, chat(IMAGES, "And what else?", part))
        c = _vlm_counters(second)
        assert second.status_code == 200 and c["kv_cache_hits"] == 1, c
        assert c["vision_tower_calls"] == 0


def _health_down_then_ready(url: str, timeout: float = 120) -> list[tuple[int, dict]]:
    """Poll /health until it has answered 503 and then 200 again (Serve's status sees a dead
    replica within its health-check period); every (status, body) seen, in order."""
    seen, deadline = [], time.monotonic() + timeout
    while not any(s == 503 for s, _ in seen) or seen[-1][0] != 200:
        assert time.monotonic() < deadline, seen[-3:]
        r = httpx.get(f"{url}/health", timeout=10)
        seen.append((r.status_code, r.json()))
        time.sleep(0.1)
    return seen


def test_a_killed_replica_is_replaced_and_its_request_retried(server):
    name = next(
        n
        for n in ray.util.list_named_actors(all_namespaces=True)
        if isinstance(n, dict) and "#test_fault#" in n["name"]
    )
    victim = ray.get_actor(name["name"], namespace=name["namespace"])
    result: dict = {}

    def ask() -> None:
        result["resp"] = _post(server, chat(IMAGES, "SLEEP 3 what is it?", _image(300)))

    t = threading.Thread(target=ask)
    t.start()
    time.sleep(1.0)  # the request is sleeping inside the test_fault replica now
    ray.kill(victim, no_restart=True)
    # Readiness follows the replica: not ready (503, naming the deployment) while the only
    # test_fault replica is dead, ready again once Serve has replaced it. Never "ok" without it.
    seen = _health_down_then_ready(server)
    t.join(timeout=120)
    resp = result["resp"]
    assert resp.status_code == 200, resp.text
    assert resp.json()["cascade"]["trace"]["counters"].get("remote_retries", 0) >= 1
    down = [body for status, body in seen if status == 503]
    assert down and all(
        "deployment 'test_fault': no running replica" in b["waiting_for"]
        and b["replicas"].get("test_fault", 0) == 0
        for b in down
    ), seen[:3]
    assert all(b["replicas"]["test_fault"] >= 1 for status, b in seen if status == 200)
    assert seen[-1][1]["status"] == "ok" and seen[-1][1]["replicas"]["test_fault"] == 1
    names = {
        n["name"]
        for n in ray.util.list_named_actors(all_namespaces=True)
        if isinstance(n, dict) and "#test_fault#" in n["name"]
    }
    assert name["name"] not in names and names  # a new replica, not the dead one
    text = httpx.get(f"{server}/metrics").text
    assert _metric(text, "cascade_remote_retries_total", deployment="test_fault") >= 1


def _stream(url: str, body: dict) -> list[str]:
    with httpx.stream(
        "POST", f"{url}/v1/chat/completions", json={**body, "stream": True}, timeout=120
    ) as r:
        assert r.status_code == 200, r.read()
        return [ln[len("data: ") :] for ln in r.iter_lines() if ln]


def test_killing_a_vlm_replica_under_load_ends_every_request_clearly(server):
    """Plain and streamed requests in flight when a VLM replica dies: a plain call is sent again
    (200); a stream whose tokens had left cannot be, and ends with an error event and [DONE];
    Serve replaces the replica; the next request is answered."""
    name = next(
        n
        for n in ray.util.list_named_actors(all_namespaces=True)
        if isinstance(n, dict) and "#vlm_answer#" in n["name"]
    )
    with cf.ThreadPoolExecutor(8) as pool:
        plain = [
            pool.submit(_post, server, chat(IMAGES, f"Q{i}?", _image(400 + i))) for i in range(6)
        ]
        streamed = [
            pool.submit(
                _stream,
                server,
                chat(IMAGES, f"Tell me about it ({i}).", _image(410 + i), max_tokens=48),
            )
            for i in range(2)
        ]
        time.sleep(0.2)
        ray.kill(ray.get_actor(name["name"], namespace=name["namespace"]), no_restart=True)
        resps = [f.result() for f in plain]
        streams = [f.result() for f in streamed]
    assert [r.status_code for r in resps] == [200] * 6, [r.text[:200] for r in resps]
    for events in streams:
        assert events[-1] == "[DONE]"
        last = json.loads(events[-2])
        if "error" in last:  # the dead replica was decoding it: a clear error, not a hang
            assert last["error"]["code"] == "pipeline_error", last
        else:
            finished = [json.loads(e) for e in events[:-1] if "choices" in json.loads(e)]
            assert finished[-1]["choices"][0]["finish_reason"] in ("stop", "length")
    assert _wait_running(server, "vlm_answer", 2)["replicas"]["vlm_answer"] == 2
    assert _post(server, chat(IMAGES, "And now?", _image(420))).status_code == 200


def test_video_frames_travel_as_object_refs(server, media_dir):
    from .conftest import VIDEO, video_part

    d, _ = media_dir
    before = _metric(httpx.get(f"{server}/metrics").text, "cascade_object_puts_total")
    part = video_part(data_url((d / "sign.mp4").read_bytes(), "video/mp4"))
    r = _post(server, chat(VIDEO, "What does the sign say?", part))
    assert r.status_code == 200 and _vlm_counters(r)["visual_tokens"] > 0
    # six 224-px thumbnails (over 64 KiB) went to the VLM replica as one ObjectRef
    assert _metric(httpx.get(f"{server}/metrics").text, "cascade_object_puts_total") == before + 1


def test_large_inputs_are_put_once_for_every_hop(server):
    from cascade.artifacts import Image

    frames = [Image(np.full((240, 320, 3), i, np.uint8)) for i in range(4)]  # 900 KiB
    remote = RemoteStages({}, ())
    a = remote._payload({"images": frames, "question": "q"})
    b = remote._payload({"frames": frames})  # another stage reading the same frames
    assert a["images"][0] == "ref" and a["question"] == ("value", "q")
    assert b["frames"][1] is a["images"][1] and remote.puts == 1
    got = ray.get(a["images"][1])
    assert np.array_equal(got[3].pixels, frames[3].pixels)


def test_cascade_deploy_writes_a_config_serve_accepts_and_runs(server, tmp_path):
    import yaml
    from ray.serve._private import api as serve_api
    from ray.serve.schema import ServeDeploySchema

    from cascade.cli import main

    out = tmp_path / "serve_config.yaml"
    assert (
        main(
            [
                "deploy",
                str(PIPELINES / "images_plain.yaml"),
                "--tiny",
                "--out",
                str(out),
                "--min-replicas",
                "1",
                "--max-replicas",
                "2",
                "--vlm-cpus",
                "0.5",
                "--name",
                "deployed",
                "--route-prefix",
                "/deployed",
            ]
        )
        == 0
    )
    raw = yaml.safe_load(out.read_text())
    config = ServeDeploySchema.model_validate(raw)
    app = config.applications[0]
    assert app.import_path == "cascade.serve.ray.app:build_app"
    assert [d.name for d in app.deployments] == ["ingress", "vlm_answer"]
    vlm = raw["applications"][0]["deployments"][1]
    assert vlm["autoscaling_config"] == {
        "min_replicas": 1,
        "max_replicas": 2,
        "target_ongoing_requests": 2.0,
    }
    assert vlm["ray_actor_options"] == {"num_cpus": 0.5}
    serve.delete(APP_NAME)  # free the CPUs; this test runs last
    # What `serve run serve_config.yaml` does: hand the config to the controller, which imports
    # the builder, calls it with `args` and applies the deployments' settings.
    serve_api.serve_start(http_options={"host": "127.0.0.1"}).deploy_apps(config)
    deadline = time.monotonic() + 120
    while True:
        status = serve.status().applications.get("deployed")
        if status is not None and status.status == "RUNNING":
            break
        assert time.monotonic() < deadline and (
            status is None or status.status != "DEPLOY_FAILED"
        ), status and status.message
        time.sleep(0.5)
    assert status.deployments["vlm_answer"].replica_states.get("RUNNING") >= 1
    r = httpx.post(
        f"{server}/deployed/v1/chat/completions",
        json=chat("cascade/images_plain", "What is it?", _image(500)),
        timeout=120,
    )
    assert r.status_code == 200 and r.json()["cascade"]["produced_by"] == "vlm"
    health = httpx.get(f"{server}/deployed/health").json()
    assert health["replicas"]["vlm_answer"] >= 1
    serve.delete("deployed")


def test_cli_flags_become_the_layout_and_args_round_trip(tmp_path):
    from cascade.cli import build_parser
    from cascade.errors import CascadeError
    from cascade.serve.config import from_args
    from cascade.serve.ray.cli import ray_options
    from cascade.serve.ray.deploy import local_cluster_cpus
    from cascade.serve.ray.options import split_args

    args = build_parser().parse_args(
        [
            "serve",
            "--ray",
            "--replicas",
            "3",
            "--vlm-gpus",
            "0.5",
            "--threads",
            "1",
            "--max-batch-size",
            "8",
            "--tiny",
            "--media-root",
            str(tmp_path),
        ]
    )
    assert args.ray and args.address is None
    options, config = ray_options(args), from_args(args)
    assert (options.replicas, options.gpus("vlm_answer"), options.threads) == (3, 0.5, 1)
    assert options.max_batch_size == 8 and options.cpus("vlm_answer") == 1.0
    assert local_cluster_cpus(options) >= 3 * 1.0 + 4 * 0.5 + 0.5
    back_config, back_options = split_args(app_args(config, options))  # YAML-able and back
    assert back_config == config and back_options == options
    with pytest.raises(CascadeError, match="did you mean 'replicas'"):
        split_args({"replica": 2})
