"""benchmarks/manifest.py names every committed results file, and the benchmark scripts cannot
shadow a package: `python benchmarks/x.py` puts benchmarks/ first on sys.path."""

from __future__ import annotations

import importlib
import importlib.util
import json
import sys
import types
from pathlib import Path

from cascade.provenance import ROWS_SUFFIX

BENCH = Path(__file__).resolve().parents[2] / "benchmarks"
sys.path.insert(0, str(BENCH))  # the manifest is plain data; nothing else of benchmarks/ imports
try:
    from manifest import MANIFEST, at
finally:
    sys.path.remove(str(BENCH))


def test_every_results_file_has_one_manifest_entry_and_a_stamp():
    files = sorted(p.name for p in (BENCH / "results").glob("*.json"))
    assert sorted(b.file for b in MANIFEST) == files
    for name in files:
        data = json.loads((BENCH / "results" / name).read_text(encoding="utf-8"))
        assert {"commit", "date", "packages", "hardware", "threads"} <= set(data["provenance"])
        rows = data.get("rows_file")
        assert rows is None or (rows.endswith(ROWS_SUFFIX) and (BENCH / "results" / rows).is_file())


def test_every_manifest_script_exists_and_each_run_writes_where_the_runner_looks():
    for b in MANIFEST:
        assert (BENCH / b.script).is_file(), b.script
        if b.frozen:
            continue
        for args in (b.args, b.quick):
            assert args and any("{dir}" in a for a in args), (b.file, args)


def test_no_benchmark_script_shadows_an_installed_package():
    for script in BENCH.glob("*.py"):
        if script.stem.startswith("_"):
            continue
        spec = importlib.util.find_spec(script.stem)
        origin = Path(spec.origin).resolve() if spec and spec.origin else None
        assert spec is None or origin == script.resolve(), (
            f"benchmarks/{script.name} shadows the installed '{script.stem}' ({spec.origin})"
        )


def test_every_headline_names_a_figure_of_its_committed_file():
    for b in MANIFEST:
        data = json.loads((BENCH / "results" / b.file).read_text(encoding="utf-8"))
        for path in b.headline:
            assert isinstance(at(data, path), (int, float)), (b.file, path)


def test_the_runner_says_what_moved_largest_first_and_from_zero_without_a_percentage():
    # benchmarks/ as the namespace package `python -m benchmarks` runs (its runner imports the
    # manifest relatively): the repository root is not on sys.path in the tests
    package = types.ModuleType("benchmarks")
    package.__path__ = [str(BENCH)]
    sys.modules["benchmarks"] = package
    try:
        diff = importlib.import_module("benchmarks.__main__").diff
    finally:
        for name in [m for m in sys.modules if m == "benchmarks" or m.startswith("benchmarks.")]:
            del sys.modules[name]
    before = {"a": 10.0, "b": 0.0, "c": 1.0, "gone": 2.0}
    lines = diff(before, {"a": 12.0, "b": 3.0, "c": 1.0, "new": 1.0})
    assert lines[:3] == [
        "  1 figure(s) unchanged, 2 moved",
        "  b: 0 -> 3 (from 0)",
        "  a: 10 -> 12 (+20.0%)",
    ]
    assert "not in this run" in lines[3] and "new in this run" in lines[4]
