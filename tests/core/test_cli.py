"""The `cascade` command, run as a user runs it: a subprocess of the installed entry point."""

import json
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from PIL import Image as PILImage

from cascade.pipelines import shipped

CASCADE = shutil.which("cascade", path=str(Path(sys.executable).parent)) or "cascade"


def cascade(*args, timeout=180):
    return subprocess.run(
        [CASCADE, *map(str, args)], capture_output=True, text=True, timeout=timeout
    )


@pytest.fixture(scope="module")
def busy_image(tmp_path_factory):
    # Random noise has a high edge density: the router must take the fine branch.
    px = np.random.default_rng(0).integers(0, 255, (600, 900, 3), dtype=np.uint8)
    path = tmp_path_factory.mktemp("img") / "busy.png"
    PILImage.fromarray(px).save(path)
    return path


@pytest.fixture(scope="module")
def flat_image(tmp_path_factory):
    path = tmp_path_factory.mktemp("img") / "flat.png"
    PILImage.new("RGB", (640, 480), (90, 140, 200)).save(path)
    return path


def test_help_lists_commands():
    out = cascade("--help")
    assert out.returncode == 0
    for cmd in ("stages", "validate", "graph", "run"):
        assert cmd in out.stdout


def test_stages_json_lists_ports_and_params():
    out = cascade("stages", "--json")
    assert out.returncode == 0, out.stderr
    stages = {s["type"]: s for s in json.loads(out.stdout)}
    assert stages["thumbnail"]["params"]["size"]["default"] == 448
    assert stages["edge_density_router"]["branches"] == ["coarse", "fine"]
    assert stages["load_image"]["inputs"]["path"]["type"] == "Path"


@pytest.mark.slow
def test_validate_every_shipped_pipeline():
    out = cascade("validate", *shipped().values())
    assert out.returncode == 0, out.stderr
    assert out.stdout.count("ok: ") == len(shipped())


@pytest.mark.slow
def test_validate_broken_file_one_line_with_path_and_suggestion(tmp_path):
    text = (
        Path(shipped()["route_demo"])
        .read_text()
        .replace("type: thumbnail, params: {size: 224}", "type: thumbnail, params: {sise: 224}")
    )
    broken = tmp_path / "broken.yaml"
    broken.write_text(text)
    out = cascade("validate", broken)
    assert out.returncode != 0
    lines = out.stderr.strip().splitlines()
    assert len(lines) == 1, out.stderr
    assert str(broken) in lines[0] and "stages.thumb.params.sise" in lines[0]
    assert "did you mean 'size'?" in lines[0]
    assert "Traceback" not in out.stderr


@pytest.mark.slow
def test_graph_prints_mermaid_and_dot():
    out = cascade("graph", "route_demo")
    assert out.returncode == 0 and out.stdout.startswith("flowchart TD")
    assert "route -.->|fine| fine" in out.stdout
    dot = cascade("graph", "route_demo", "--format", "dot")
    assert dot.stdout.startswith('digraph "route_demo"')


@pytest.mark.slow
@pytest.mark.parametrize(
    "image_fixture, taken, skipped",
    [("busy_image", "fine", None), ("flat_image", "coarse", "fine")],
)
def test_run_json_shows_outputs_and_skipped_branch(request, image_fixture, taken, skipped):
    image = request.getfixturevalue(image_fixture)
    out = cascade("run", "route_demo", "--input", f"image={image}", "--json")
    assert out.returncode == 0, out.stderr
    result = json.loads(out.stdout)
    assert result["outputs"]["route"]["branch"] == taken
    status = {s["name"]: s["status"] for s in result["trace"]["stages"]}
    if skipped:
        assert status[skipped] == "skipped"
        assert result["outputs"]["image"]["width"] == 224
    else:
        assert set(status.values()) == {"ran"}
        assert result["outputs"]["image"]["width"] == 900


@pytest.mark.slow
def test_run_with_param_override(flat_image):
    out = cascade(
        "run", "route_demo", "-i", f"image={flat_image}", "--set", "route.threshold=0", "--json"
    )
    assert json.loads(out.stdout)["outputs"]["route"]["branch"] == "fine"


@pytest.mark.parametrize(
    "args, message",
    [
        (["run", "route_dem"], "did you mean 'route_demo'?"),
        (["run", "route_demo", "-i", "imag=x.png"], "did you mean 'image'?"),
        (["run", "route_demo", "-i", "image=/no/such.png"], "file not found: '/no/such.png'"),
        (["run", "route_demo", "-i", "image"], "expected NAME=VALUE"),
        (
            ["run", "route_demo", "-i", "image=x.png", "--set", "route.treshold=1"],
            "did you mean 'threshold'?",
        ),
        (["graph", "/no/such.yaml"], "pipeline file not found"),
    ],
)
@pytest.mark.slow
def test_errors_are_one_line_without_traceback(args, message):
    out = cascade(*args)
    assert out.returncode != 0
    assert message in out.stderr
    assert "Traceback" not in out.stderr and len(out.stderr.strip().splitlines()) == 1


@pytest.mark.slow
def test_stage_failure_reports_stage(tmp_path):
    bad = tmp_path / "corrupt.png"
    bad.write_bytes(b"\x89PNG but not really")
    out = cascade("run", "route_demo", "-i", f"image={bad}")
    assert out.returncode == 1
    assert "stage 'load' (load_image) failed" in out.stderr and "cannot decode image" in out.stderr
    debug = cascade("--debug", "run", "route_demo", "-i", f"image={bad}")
    assert "Traceback" in debug.stderr
