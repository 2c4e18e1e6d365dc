"""The soak benchmark's quick mode runs (2 minutes of mixed traffic on the in-process server):
every kind of request ends as it should, nothing answers 5xx, and the samples and their fits are
written. The growth figures come from the 30-minute run (docs/serving.md, "Soak"); two minutes
only prove the instrument works."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from cascade.provenance import read_rows

pytestmark = pytest.mark.slow
REPO = Path(__file__).resolve().parents[2]


def test_soak_quick_runs_clean(tmp_path):
    out = tmp_path / "soak"
    run = subprocess.run(
        [sys.executable, str(REPO / "benchmarks" / "soak.py"), "--quick", "--out", str(out)],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=1200,
    )
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
    result = json.loads(out.with_suffix(".json").read_text())
    assert out.with_suffix(".png").stat().st_size > 10_000
    assert result["server_5xx"] == 0, result["server_statuses"]
    outcomes = result["outcomes"]
    for kind in ("image", "video", "doc", "streamed"):
        assert set(outcomes[kind]) == {"200"}, (kind, outcomes[kind])
    assert set(outcomes["cancelled"]) == {"cancelled"} and set(outcomes["bad"]) == {"400"}
    assert result["server_statuses"].get("499", 0) == sum(outcomes["cancelled"].values())
    assert len(read_rows(out.with_suffix(".json"))["samples"]) >= 20
    for key in ("rss_mib", "open_files", "threads"):
        assert result["slopes"][key]["per_hour"] == result["slopes"][key]["per_hour"]  # a number
