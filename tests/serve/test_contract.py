"""The published contract (/openapi.json) against the live server, by Schemathesis.

`st run --checks all` on a real uvicorn: every status, content type, header and body the server
answers must be the one the schema documents for it; schema-invalid requests must be refused
(4xx); schema-valid ones accepted, or refused only for what a schema cannot say (hooks:
schemathesis_hooks.py, settings: schemathesis.toml); 405 with `Allow` for other methods. Over
1,000 generated cases across the operations, seeded (reproducible). The served pipelines are
cheap ones (`*_fuzz.yaml`: the real tiny VLM, two new tokens), so the cases that get through
(the documented examples and their variants) are answered in milliseconds.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import httpx
import pytest

from .conftest import PIPELINES, running_server, warm

pytestmark = pytest.mark.slow
HERE = Path(__file__).resolve().parent
ST = Path(sys.executable).with_name("st")


@pytest.fixture(scope="module")
def server(tiny_vlm):
    from cascade.serve.app import create_app
    from cascade.serve.config import ServeConfig

    app = create_app(
        ServeConfig(
            model=tiny_vlm,
            shipped=False,
            max_queue=512,
            workers=2,
            pipelines={n: str(PIPELINES / f"{n}.yaml") for n in ("images_fuzz", "video_fuzz")},
        )
    )
    warm(app)
    with running_server(app) as url:
        yield url


def test_the_schema_documents_every_route_status_and_model(server):
    schema = httpx.get(f"{server}/openapi.json").json()
    chat = schema["paths"]["/v1/chat/completions"]["post"]
    assert set(chat["responses"]) == {
        "200",
        "400",
        "404",
        "408",
        "413",
        "415",
        "429",
        "499",
        "500",
        "503",
        "504",
        "507",
    }
    assert set(chat["responses"]["200"]["content"]) == {"application/json", "text/event-stream"}
    assert chat["requestBody"]["content"]["application/json"]["schema"]["$ref"].endswith(
        "/ChatCompletionRequest"
    )
    request = schema["components"]["schemas"]["ChatCompletionRequest"]
    assert request["properties"]["model"]["enum"] == ["cascade/images_fuzz", "cascade/video_fuzz"]
    assert request["additionalProperties"] is False
    metrics = schema["paths"]["/metrics"]["get"]["responses"]["200"]["content"]
    assert list(metrics) == ["text/plain"]
    assert set(schema["paths"]["/health"]["get"]["responses"]) == {"200", "503"}
    r = httpx.delete(f"{server}/v1/models")
    assert r.status_code == 405 and r.headers["allow"] == "GET"
    assert r.json()["error"]["code"] == "405"


def test_schemathesis_finds_no_failure_in_1000_cases(server, tmp_path):
    if not ST.exists():
        pytest.skip("schemathesis is not installed (pip install -e '.[dev]')")
    report = tmp_path / "report.json"
    env = {**os.environ, "SCHEMATHESIS_HOOKS": str(HERE / "schemathesis_hooks.py")}
    run = subprocess.run(
        [
            str(ST),
            "--config-file",
            str(HERE / "schemathesis.toml"),
            "run",
            f"{server}/openapi.json",
            "--checks",
            "all",
            "--max-examples",
            "300",
            "--seed",
            "1",
            "--workers",
            "2",
            "--request-timeout",
            "120",
            "--no-color",
            "--report",
            "json",
            "--report-json-path",
            str(report),
        ],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=900,
    )  # its cache: tmp
    assert run.returncode == 0, run.stdout[-6000:] + run.stderr[-2000:]
    result = json.loads(report.read_text())
    assert result["failures"] == [] and result["errors"] == []
    assert result["operations"]["tested"] == 5
    assert result["test_cases"]["generated"] >= 1000, result["test_cases"]
    chat = result["valid_rates"]["POST /v1/chat/completions"]
    # Not vacuous: schema-valid requests were answered (200), not only refused.
    assert sum(phase["accepted"] for phase in chat.values()) >= 20, chat
