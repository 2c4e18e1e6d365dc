"""The notebooks run top to bottom, offline, on CPU, and show what they promise.

Each notebook is executed by nbclient in a fresh kernel whose working directory is a temporary
folder (so nothing is written into the repository), running this interpreter (a kernelspec written
for the test; a probe cell checks it) with the offline switches conftest.py put in os.environ.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import nbformat
import pytest

NOTEBOOKS = Path(__file__).resolve().parent.parent / "notebooks"
NAMES = ["01_quickstart", "02_custom_pipeline", "03_costs"]

# What a reader must see in each notebook's outputs.
EXPECTED = {
    "01_quickstart": [
        "answer:      'OPEN 24 HOURS'",
        "produced_by: tool",
        "visual tokens",
        "no VLM call",
        "branch 'thumbnail' not taken",
        "turn 2 KV prefix: hit",
    ],
    "02_custom_pipeline": [
        "'nb_autocontrast'",
        "Route(branch='read'",
        "SpecError at stages.thumbs.params.sise (line 12)",
        "(did you mean 'size'?)",
        "ConnectError at stages.ocr.inputs.images",
        "type mismatch: 'route.route' is Route",
        "has no branch 'reading' (did you mean 'read'?)",
        "flowchart",
        "OCR text: 'PRICE 3.50'",
        "branch 'read' not taken (router 'route' chose 'glance')",
    ],
    "03_costs": [
        "prefill share of tokens:  96.7%",
        "16 runs",
        "video/video_qa",
        "video/full_res",
        "images/thumbnail_only",
        "token_reduction_vs_full_res",
    ],
}
MIN_FIGURES = {"01_quickstart": 4, "02_custom_pipeline": 2, "03_costs": 3}


def _kernel_manager(tmp_path: Path):
    """A KernelManager that starts ipykernel with this interpreter (the venv), whatever other
    `python3` kernelspecs the machine has."""
    from jupyter_client.kernelspec import KernelSpecManager
    from jupyter_client.manager import KernelManager

    spec_dir = tmp_path / "kernels" / "python3"
    spec_dir.mkdir(parents=True)
    (spec_dir / "kernel.json").write_text(
        json.dumps(
            {
                "argv": [sys.executable, "-m", "ipykernel_launcher", "-f", "{connection_file}"],
                "display_name": "Python 3 (test)",
                "language": "python",
            }
        )
    )
    ksm = KernelSpecManager(kernel_dirs=[str(tmp_path / "kernels")])
    return KernelManager(kernel_name="python3", kernel_spec_manager=ksm)


def _text(nb) -> str:
    parts = []
    for cell in nb.cells:
        for out in cell.get("outputs", []):
            if out.output_type == "stream":
                parts.append(out.text)
            elif out.output_type in ("execute_result", "display_data"):
                parts.extend(out.data.get(k, "") for k in ("text/plain", "text/markdown"))
    return "\n".join(parts)


def _figures(nb) -> int:
    return sum(
        "image/png" in out.get("data", {}) for cell in nb.cells for out in cell.get("outputs", [])
    )


@pytest.mark.parametrize("name", NAMES)
def test_committed_without_outputs(name):
    """Committed clean: valid nbformat, no outputs or execution counts (diffs stay readable)."""
    nb = nbformat.read(NOTEBOOKS / f"{name}.ipynb", as_version=4)
    nbformat.validate(nb)
    code = [c for c in nb.cells if c.cell_type == "code"]
    assert code, "a notebook without code"
    assert all(not c.outputs and c.execution_count is None for c in code), (
        f"{name}.ipynb is committed with outputs; clear them"
    )
    assert nb.metadata.get("kernelspec", {}).get("name") == "python3"


@pytest.mark.slow
@pytest.mark.parametrize("name", NAMES)
def test_notebook_runs(name, tmp_path, monkeypatch):
    import nbclient

    for key, value in (
        ("HF_HUB_OFFLINE", "1"),
        ("YOLO_OFFLINE", "1"),
        ("YOLO_AUTOINSTALL", "False"),
        ("YOLO_CONFIG_DIR", str(tmp_path / "yolo")),
        ("TOKENIZERS_PARALLELISM", "false"),
    ):
        monkeypatch.setenv(key, os.environ.get(key, value))  # the kernel inherits these
    nb = nbformat.read(NOTEBOOKS / f"{name}.ipynb", as_version=4)
    probe = nbformat.v4.new_code_cell(
        "import os, sys; print('KERNEL', sys.executable, os.getcwd())"
    )
    nb.cells.insert(0, probe)
    workdir = tmp_path / "cwd"
    workdir.mkdir()
    client = nbclient.NotebookClient(
        nb,
        timeout=600,
        kernel_name="python3",
        km=_kernel_manager(tmp_path),
        resources={"metadata": {"path": str(workdir)}},
    )
    client.execute()  # raises CellExecutionError, naming the cell, if any cell fails

    assert probe.outputs[0].text.split() == ["KERNEL", sys.executable, str(workdir)]
    text = _text(nb)
    missing = [s for s in EXPECTED[name] if s not in text]
    assert not missing, f"{name}: outputs lack {missing}"
    assert _figures(nb) >= MIN_FIGURES[name]
