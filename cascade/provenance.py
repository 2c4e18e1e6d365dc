"""Where a results file came from, and how one is written: every benchmark and `cascade bench` go
through `write_results`.

A results JSON carries a `provenance` stamp (the git commit and whether the tree had uncommitted
changes, the date, the command, the versions of the packages that set the figures, the hardware,
torch's thread count) and keeps its summary; its bulky per-item entries (each question's row, each
sample) go beside it into `<name>.rows.json.gz`, so the committed JSON stays small and the rows
are still there to read.
"""

from __future__ import annotations

import gzip
import json
import os
import platform
import subprocess
import sys
from datetime import datetime, timezone
from importlib import metadata
from pathlib import Path
from typing import Any

# The packages whose versions can move a figure: the project, its runtimes, its models' runtimes.
PACKAGES = (
    "vlm-cascade",
    "torch",
    "transformers",
    "triton",
    "numpy",
    "faiss-cpu",
    "open_clip_torch",
    "onnxruntime",
    "rapidocr",
    "rapid-layout",
    "ultralytics",
    "av",
    "pillow",
    "xgrammar",
    "fastapi",
    "uvicorn",
    "ray",
)
ROWS_SUFFIX = ".rows.json.gz"


def _git(*args: str) -> str | None:
    try:
        proc = subprocess.run(
            ["git", *args],
            cwd=Path(__file__).resolve().parent,
            capture_output=True,
            text=True,
            timeout=10,
        )
    except (OSError, subprocess.SubprocessError):
        return None
    return proc.stdout.strip() if proc.returncode == 0 else None


def _cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def _torch_facts() -> dict[str, Any]:
    torch = sys.modules.get("torch")  # only what this process set up; never import it here
    if torch is None:
        return {"torch_threads": None, "gpu": None}
    gpu = torch.cuda.get_device_name(0) if torch.cuda.is_available() else None
    return {"torch_threads": torch.get_num_threads(), "gpu": gpu}


def stamp() -> dict[str, Any]:
    """The provenance of a result written now, by this process."""
    versions = {}
    for name in PACKAGES:
        try:
            versions[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            continue
    status = _git("status", "--porcelain", "--untracked-files=no")
    torch_facts = _torch_facts()
    return {
        "commit": _git("rev-parse", "HEAD"),
        "uncommitted_changes": bool(status) if status is not None else None,
        "date": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        "command": " ".join([Path(sys.argv[0]).name, *sys.argv[1:]]),
        "python": platform.python_version(),
        "packages": versions,
        "hardware": {
            "cpu": _cpu_model(),
            "cores": os.cpu_count(),
            "machine": platform.machine(),
            "gpu": torch_facts["gpu"],
        },
        "threads": {
            "torch": torch_facts["torch_threads"],
            "OMP_NUM_THREADS": os.environ.get("OMP_NUM_THREADS"),
        },
    }


def write_results(path: str | Path, result: dict[str, Any], bulky: tuple[str, ...] = ()) -> Path:
    """Write `result` to `path` (a .json) stamped with `stamp()`; the keys named in `bulky` go
    to `<stem>.rows.json.gz` beside it, named in the JSON's `rows_file`. Returns the JSON path."""
    path = Path(path).with_suffix(".json")
    path.parent.mkdir(parents=True, exist_ok=True)
    summary = {"provenance": stamp(), **{k: v for k, v in result.items() if k not in bulky}}
    rows = {k: result[k] for k in bulky if k in result}
    if rows:
        rows_path = path.with_name(path.stem + ROWS_SUFFIX)
        # mtime=0: the same rows give the same bytes, so an unchanged re-run leaves git clean.
        with gzip.GzipFile(rows_path, "wb", mtime=0) as f:
            f.write(json.dumps(rows, ensure_ascii=False, default=str).encode())
        summary["rows_file"] = rows_path.name
    text = json.dumps(summary, indent=1, ensure_ascii=False, default=str)
    path.write_text(text + "\n", encoding="utf-8")
    return path


def read_rows(path: str | Path) -> dict[str, Any]:
    """The bulky entries `write_results` put beside the JSON at `path` (empty when none)."""
    path = Path(path)
    rows_file = json.loads(path.read_text(encoding="utf-8")).get("rows_file")
    if not rows_file:
        return {}
    with gzip.open(path.with_name(rows_file), "rt", encoding="utf-8") as f:
        return json.load(f)
