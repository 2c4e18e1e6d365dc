"""A model's encoder, prefill and decode apart on a real local Ray cluster
(`serve.disaggregate: epd`, tests/serve/pipelines/images_epd.yaml): its own encode and prefill
deployments beside the decode side (the VLM stage's), each with readiness and replica counts on
/health and /metrics; an answer equal, token for token and logprob for logprob, to the colocated
in-process server's; only the prefix blocks the decode replica lacks travel."""

from __future__ import annotations

import time

import httpx
import numpy as np
import pytest

pytest.importorskip("ray", reason="ray[serve] is not installed (pip install 'vlm-cascade[ray]')")
serve = pytest.importorskip("ray.serve")

from cascade.serve.config import ServeConfig  # noqa: E402
from cascade.serve.ray.app import build_app  # noqa: E402
from cascade.serve.ray.options import APP_NAME, RayOptions, app_args  # noqa: E402

from .conftest import PIPELINES, chat, data_url, image_part, png_bytes  # noqa: E402

pytestmark = [pytest.mark.slow, pytest.mark.ray, pytest.mark.timeout(300)]
EPD = "cascade/epd"
IMAGE = image_part(
    data_url(
        png_bytes(np.random.default_rng(5).integers(0, 255, (48, 64, 3), dtype=np.uint8)),
        "image/png",
    )
)


def _config(tiny_vlm: str) -> ServeConfig:
    return ServeConfig(
        model=tiny_vlm, shipped=False, pipelines={"epd": str(PIPELINES / "images_epd.yaml")}
    )


@pytest.fixture(scope="module")
def server(cluster, tiny_vlm):
    options = RayOptions(
        threads=1,
        num_cpus={"ingress": 0.5, "vlm_answer": 0.5, "vlm_encode": 0.5, "vlm_prefill": 0.5},
        health_check_period_s=1.0,
    )
    serve.run(build_app(app_args(_config(tiny_vlm), options)), name=APP_NAME, route_prefix="/")
    return cluster


def _ask(url: str, question: str) -> dict:
    body = chat(EPD, question, IMAGE, logprobs=True, max_tokens=6)
    r = httpx.post(f"{url}/v1/chat/completions", json=body, timeout=120)
    assert r.status_code == 200, r.text
    return r.json()


def _vlm(body: dict) -> dict:
    return next(s for s in body["cascade"]["trace"]["stages"] if s["name"] == "vlm")["counters"]


def test_each_role_is_a_deployment_with_readiness_and_replica_counts(server):
    health = httpx.get(f"{server}/health").json()
    assert health["status"] == "ok" and health["waiting_for"] == []
    assert health["replicas"] == {"ingress": 1, "vlm_answer": 1, "vlm_encode": 1, "vlm_prefill": 1}
    metrics = httpx.get(f"{server}/metrics").text
    for role in ("vlm_encode", "vlm_prefill", "vlm_answer"):
        assert f'cascade_deployment_replicas{{deployment="{role}"}} 1.0' in metrics


def test_disaggregated_answers_equal_colocated_ones_and_ship_only_what_is_lacking(server, tiny_vlm):
    from cascade.serve.app import create_app

    from .conftest import running_server, warm

    app = create_app(_config(tiny_vlm))
    warm(app)
    with running_server(app) as local:
        body = chat(EPD, "What is written here?", IMAGE, logprobs=True, max_tokens=6)
        r = httpx.post(f"{local}/v1/chat/completions", json=body, timeout=120)
        assert r.status_code == 200, r.text
        colocated = r.json()
    first = _ask(server, "What is written here?")
    assert (
        first["choices"][0]["message"]["content"] == colocated["choices"][0]["message"]["content"]
    )
    got, want = (
        [(t["token"], t["logprob"]) for t in b["choices"][0]["logprobs"]["content"]]
        for b in (first, colocated)
    )
    assert [t for t, _ in got] == [t for t, _ in want]
    assert np.allclose([lp for _, lp in got], [lp for _, lp in want], atol=1e-5)
    shipped = _vlm(first)
    assert shipped["kv_blocks_lacked"] == 2 and shipped["kv_shipped_bytes"] > 0
    assert shipped["embeds_bytes"] > 0 and shipped["prefill_call_overhead_s"] >= 0
    # Another question on the same image: the decode replica holds the prefix already.
    again = _vlm(_ask(server, "And what colour is it?"))
    assert again["kv_blocks_lacked"] == 0 and "kv_shipped_bytes" not in again
    assert again["kv_cache_hits"] == 1


def test_a_killed_prefill_replica_costs_no_answer_and_is_replaced(server):
    import ray

    name = next(
        n
        for n in ray.util.list_named_actors(all_namespaces=True)
        if isinstance(n, dict) and "#vlm_prefill#" in n["name"]
    )
    ray.kill(ray.get_actor(name["name"], namespace=name["namespace"]), no_restart=True)
    # Asked at once (a new question: the decode replica holds the image's prefix already, so
    # a new image): routed to the dead replica it falls back to the decode replica's own
    # prefill; routed after Serve noticed, it waits for the replacement. Answered either way.
    other = image_part(data_url(png_bytes(np.full((48, 64, 3), 90, dtype=np.uint8)), "image/png"))
    body = chat(EPD, "What is written here?", other, max_tokens=4)
    r = httpx.post(f"{server}/v1/chat/completions", json=body, timeout=120)
    assert r.status_code == 200, r.text
    counters = _vlm(r.json())
    assert counters.get("role_fallbacks", 0) == 1 or counters["kv_blocks_lacked"] == 2
    seen, deadline = [], time.monotonic() + 120  # readiness names the role until it is back
    while not seen or seen[-1][0] != 200 or seen[-1][1]["replicas"].get("vlm_prefill") != 1:
        assert time.monotonic() < deadline, seen[-3:]
        h = httpx.get(f"{server}/health", timeout=10)
        seen.append((h.status_code, h.json()))
        time.sleep(0.2)
    for status, health in seen:
        assert (status == 503) == (
            "deployment 'vlm_prefill': no running replica" in health["waiting_for"]
        )
