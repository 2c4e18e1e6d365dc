"""Every result in one command: run the benchmarks of `benchmarks/manifest.py` and say what moved.

    python -m benchmarks --quick             # every smoke run, into a scratch folder; diff each
                                             # summary against the committed file
    python -m benchmarks                     # the full runs, into benchmarks/results/ (hours)
    python -m benchmarks --only vlm --only reuse --quick   # some scripts only
    python -m benchmarks --list              # the manifest
    python -m benchmarks table               # regenerate benchmarks/results/README.md

Each benchmark runs as its own process, `python benchmarks/<script> ...`, so this runner imports
nothing but the standard library (run from the repository root, `-m` puts the root on sys.path,
where the top-level kernels/ folder would shadow the `kernels` package transformers imports). The
diff compares every number of the summary (the JSON less its `provenance`): what changed, by how
much, largest first.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from .manifest import MANIFEST, Bench, at

HERE = Path(__file__).resolve().parent
RESULTS = HERE / "results"
SHOWN = 12  # moved figures printed per file


def flatten(value: object, prefix: str = "") -> dict[str, float]:
    """Every number in a JSON value by dotted path (list items by index; booleans left out)."""
    out: dict[str, float] = {}
    if isinstance(value, dict):
        for k, v in value.items():
            out.update(flatten(v, f"{prefix}.{k}" if prefix else str(k)))
    elif isinstance(value, list):
        for i, v in enumerate(value):
            out.update(flatten(v, f"{prefix}[{i}]"))
    elif isinstance(value, (int, float)) and not isinstance(value, bool):
        out[prefix] = float(value)
    return out


def summary_of(path: Path) -> dict[str, float]:
    """The numbers of a results file, its provenance aside."""
    data = json.loads(path.read_text(encoding="utf-8"))
    data.pop("provenance", None)
    return flatten(data)


def diff(before: dict[str, float], after: dict[str, float]) -> list[str]:
    """Lines saying which figures moved (largest relative change first), appeared or went."""
    moved = []
    for key in before.keys() & after.keys():
        a, b = before[key], after[key]
        if a != b:
            if a == 0:  # no percentage of nothing: ranked first, said as "from 0"
                moved.append((float("inf"), f"  {key}: 0 -> {b:g} (from 0)"))
                continue
            rel = abs(b - a) / abs(a)
            moved.append((rel, f"  {key}: {a:g} -> {b:g} ({(b - a) / abs(a):+.1%})"))
    moved.sort(reverse=True)
    lines = [line for _, line in moved[:SHOWN]]
    if len(moved) > SHOWN:
        lines.append(f"  ... and {len(moved) - SHOWN} more moved")
    gone, new = sorted(before.keys() - after.keys()), sorted(after.keys() - before.keys())
    if gone:
        lines.append(f"  {len(gone)} figure(s) not in this run, e.g. {', '.join(gone[:3])}")
    if new:
        lines.append(f"  {len(new)} figure(s) new in this run, e.g. {', '.join(new[:3])}")
    same = len(before.keys() & after.keys()) - len(moved)
    lines.insert(0, f"  {same} figure(s) unchanged, {len(moved)} moved")
    return lines


def committed(file: str) -> dict[str, float] | None:
    """The committed version's numbers (git HEAD), or None when the file is not committed."""
    proc = subprocess.run(
        ["git", "show", f"HEAD:benchmarks/results/{file}"],
        cwd=HERE,
        capture_output=True,
        text=True,
    )
    if proc.returncode != 0:
        return None
    data = json.loads(proc.stdout)
    data.pop("provenance", None)
    return flatten(data)


def run_one(bench: Bench, quick: bool, out_dir: Path) -> tuple[int, float]:
    """Run one benchmark process; its exit status and wall seconds."""
    args = bench.quick if quick else bench.args
    assert args is not None
    cmd = [
        sys.executable,
        str(HERE / bench.script),
        *(a.replace("{dir}", str(out_dir)) for a in args),
    ]
    print(f"$ {' '.join(cmd[1:])}", flush=True)
    t0 = time.monotonic()
    # An empty working folder: a script that starts `python -m cascade.cli serve` (or Ray
    # workers) puts its working folder on sys.path, and the repository root there would shadow
    # the `kernels` package with the top-level kernels/ folder.
    with tempfile.TemporaryDirectory(prefix="cascade-bench-cwd-") as cwd:
        code = subprocess.run(cmd, cwd=cwd).returncode
    return code, time.monotonic() - t0


def run_all(quick: bool, only: list[str], out_dir: Path) -> int:
    """Run the selected benchmarks (each distinct command once) and print each file's diff."""
    selected = [
        b for b in MANIFEST if not only or b.script.removesuffix(".py") in only or b.file in only
    ]
    done: dict[tuple[str, tuple[str, ...]], tuple[int, float]] = {}
    report = []
    for bench in selected:
        if bench.frozen or (quick and bench.quick is None):
            report.append(f"{bench.file}: not run ({bench.frozen or 'no quick mode'})")
            continue
        args = bench.quick if quick else bench.args
        key = (bench.script, tuple(args or ()))
        before = committed(bench.file)  # read before a full run overwrites it
        if key not in done:
            done[key] = run_one(bench, quick, out_dir)
        code, seconds = done[key]
        written = out_dir / ((bench.quick_file or bench.file) if quick else bench.file)
        head = f"{bench.file}: {'quick ' if quick else ''}run {seconds:.0f} s"
        if code != 0 or not written.is_file():
            lines = [f"{head}: FAILED (exit {code}; {written.name} not written)"]
        else:
            against = "committed" if not quick or not bench.quick_file else "committed (full run)"
            lines = [f"{head} -> {written.name}, vs the {against} {bench.file}:"]
            lines += diff(before, summary_of(written)) if before else ["  (not committed yet)"]
        print("\n".join(lines), flush=True)  # as it happens: a run of hours may be cut short
        report += lines
    print("\n".join(["", "== what moved since the committed run =="] + report))
    return 1 if any("FAILED" in line for line in report) else 0


def _shown(value: object) -> str:
    return f"{value:.3g}" if isinstance(value, float) else str(value)


def table() -> str:
    """benchmarks/results/README.md: one row per results file, from the files themselves."""
    by_file = {b.file: b for b in MANIFEST}
    lines = [
        "# Results",
        "",
        "Generated by `python -m benchmarks table` from the JSON files here and",
        "`benchmarks/manifest.py`; do not edit by hand. Each file's `provenance` says which",
        "commit, packages, hardware and threads produced it; bulky per-item rows are in the",
        "`.rows.json.gz` beside it. `python -m benchmarks --quick` re-runs every smoke run and",
        "prints what moved.",
        "",
        "| file | command | commit | date | hardware | headline |",
        "|---|---|---|---|---|---|",
    ]
    for path in sorted(RESULTS.glob("*.json")):
        data = json.loads(path.read_text(encoding="utf-8"))
        prov = data.get("provenance", {})
        bench = by_file.get(path.name)
        if bench is None:
            command = "(not in the manifest)"
        elif bench.frozen:
            command = f"not re-run: {bench.frozen}"
        else:
            command = f"`python benchmarks/{bench.script} {' '.join(bench.args)}`".replace(
                "{dir}", "benchmarks/results"
            )
        hw = prov.get("hardware", {})
        hardware = f"{hw.get('cores', '?')} cores" + (f", {hw['gpu']}" if hw.get("gpu") else "")
        threads = (prov.get("threads") or {}).get("torch")
        hardware += f", {threads} torch thread(s)" if threads else ""
        headline = "; ".join(
            f"`{p}` = {_shown(at(data, p))}" for p in (bench.headline if bench else ())
        )
        commit = (prov.get("commit") or "?")[:10]
        if prov.get("stamped_after_the_fact"):
            commit += " (stamped after the fact)"
        lines.append(
            f"| [{path.name}]({path.name}) | {command} | {commit} | "
            f"{(prov.get('date') or '?')[:10]} | {hardware} | {headline} |"
        )
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    """The command line above."""
    ap = argparse.ArgumentParser(prog="python -m benchmarks", description=__doc__.split("\n\n")[0])
    ap.add_argument("what", nargs="?", choices=["run", "table"], default="run")
    ap.add_argument("--quick", action="store_true", help="smoke runs into a scratch folder")
    ap.add_argument("--only", action="append", default=[], metavar="SCRIPT_OR_FILE")
    ap.add_argument("--out", type=Path, default=None, help="scratch folder for --quick")
    ap.add_argument("--list", action="store_true", help="print the manifest and stop")
    args = ap.parse_args(argv)
    if args.list:
        for b in MANIFEST:
            state = b.frozen and f"frozen: {b.frozen}" or f"~{b.minutes:g} min full"
            print(f"{b.file:42s} {b.script:22s} {state}")
        return 0
    if args.what == "table":
        (RESULTS / "README.md").write_text(table(), encoding="utf-8")
        print(RESULTS / "README.md")
        return 0
    out_dir = RESULTS
    if args.quick:
        out_dir = args.out or Path(tempfile.mkdtemp(prefix="cascade-bench-quick-"))
        out_dir.mkdir(parents=True, exist_ok=True)
    return run_all(args.quick, args.only, out_dir)


if __name__ == "__main__":
    sys.exit(main())
