"""`cascade`: list stages, validate and draw pipelines, run them.

Every error a user can cause prints one line on stderr and exits non-zero; `--debug` shows the
traceback as well.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import sys
import textwrap
import traceback
from typing import Any

from .errors import CascadeError

EXIT_USAGE, EXIT_INVALID, EXIT_FAILED = 2, 3, 1


def _parse_assignments(items: list[str], flag: str) -> dict[str, Any]:
    """`k=v` pairs; a repeated key collects a list (`--input images=a.jpg --input images=b.jpg`)."""
    out: dict[str, Any] = {}
    for item in items:
        key, eq, value = item.partition("=")
        if not eq or not key:
            raise CascadeError(f"{flag} '{item}': expected NAME=VALUE")
        if key in out:
            out[key] = (out[key] if isinstance(out[key], list) else [out[key]]) + [value]
        else:
            out[key] = value
    return out


def _yaml_values(assignments: dict[str, Any]) -> dict[str, Any]:
    import yaml

    return {k: yaml.safe_load(v) if isinstance(v, str) else v for k, v in assignments.items()}


@contextlib.contextmanager
def _stdout_to_stderr():
    """Point file descriptor 1 at stderr (catches prints from C extensions and cached handlers)."""
    sys.stdout.flush()
    saved = os.dup(1)
    os.dup2(2, 1)
    try:
        yield
    finally:
        sys.stdout.flush()
        os.dup2(saved, 1)
        os.close(saved)


def cmd_stages(args: argparse.Namespace) -> int:
    from .registry import stage_types

    described = [cls.describe() for cls in stage_types().values()]
    if args.json:
        print(json.dumps(described, indent=2, default=str))
        return 0
    for d in described:
        kind = f"router -> {', '.join(d['branches'])}" if "branches" in d else "stage"
        print(f"{d['type']}  ({kind})\n    {d['description']}")
        ins = ", ".join(
            f"{k}: {v['type']}" + ("" if v["required"] else "?") for k, v in d["inputs"].items()
        )
        outs = ", ".join(f"{k}: {v['type']}" for k, v in d["outputs"].items())
        print(f"    in:  {ins or '-'}\n    out: {outs}")
        if "serving" in d:  # how it is served on Ray
            s = d["serving"]
            print(
                f"    serving: heavy, {s['num_cpus']:g} CPU, {s['num_gpus']:g} GPU, "
                f"{s['pool']} pool"
                + (", batches" if s["batch"] else "")
                + (f", affinity: {s['affinity']}" if s["affinity"] else "")
            )
        for name, p in d["params"].items():
            print(f"    param {name}: {p['type']} = {p['default']!r}  {p['description']}")
        print()
    return 0


def cmd_validate(args: argparse.Namespace) -> int:
    from .pipeline import Pipeline

    failed = 0
    for f in args.files:
        try:
            p = Pipeline.load(f)
        except CascadeError as e:
            print(f"error: {e}", file=sys.stderr)
            failed += 1
        else:
            print(f"ok: {f} ({p.name}: {len(p.stages)} stages)")
    return EXIT_INVALID if failed else 0


def cmd_graph(args: argparse.Namespace) -> int:
    from .pipeline import Pipeline

    p = Pipeline.load(args.file)
    print(p.to_dot() if args.format == "dot" else p.to_mermaid())
    return 0


def _run_worded_for_cli(pipeline, inputs: dict[str, Any]):
    from .preflight import ModelsUnavailable

    try:
        return pipeline.run(**inputs)
    except ModelsUnavailable as e:  # say the ways out as flags of this command
        raise e.worded_for("cli") from None


def cmd_run(args: argparse.Namespace) -> int:
    from .pipeline import Pipeline

    overrides = _yaml_values(_parse_assignments(args.set, "--set"))
    offline: dict[str, Any] = {}
    if args.offline:
        from .api import offline_params

        offline = offline_params()
    pipeline = Pipeline.load(args.pipeline, overrides=overrides, **offline)
    inputs = _parse_assignments(args.input, "--input")
    if args.json:
        with _stdout_to_stderr():  # model libraries print progress to stdout; keep it pure JSON
            result = _run_worded_for_cli(pipeline, inputs)
        print(json.dumps(result.to_dict(), default=str))
        return 0
    result = _run_worded_for_cli(pipeline, inputs)
    from .serialize import to_jsonable

    for name, value in result.outputs.items():
        print(f"{name}: {json.dumps(to_jsonable(value), default=str)}")
    print(f"\n{'stage':<20}{'type':<24}{'status':<9}{'seconds':>9}  detail")
    for rec in result.trace.stages:
        print(f"{rec.name:<20}{rec.type:<24}{rec.status:<9}{rec.seconds:>9.3f}  {rec.detail}")
    return 0


def cmd_bench(args: argparse.Namespace) -> int:
    from .eval.bench import run_bench

    result = run_bench(
        args.out,
        args.media_dir,
        split=args.split,
        quick=args.quick,
        size="test" if args.quick else args.size,
        limit=args.limit,
        max_new_tokens=args.max_new_tokens,
        full_res=args.full_res,
        progress=not args.quiet,
        genres=args.genre,
        route_policy=args.route_policy,
    )
    print(
        json.dumps(
            {
                "split": result["split"],
                "device": result["device"],
                "by_genre": {g: v["headline"] for g, v in result["by_genre"].items()},
                "ratios": result["ratios"],
            },
            indent=2,
            ensure_ascii=False,
        )
    )
    return 0


def cmd_calibrate(args: argparse.Namespace) -> int:
    from .calibrate import calibrate
    from .calibration import save_calibration

    cal, _ = calibrate(
        args.calibrate_model,
        args.device,
        quick=args.quick,
        progress=lambda s: print(s, file=sys.stderr),
    )
    path = save_calibration(cal)
    print(
        json.dumps(cal.to_dict(), indent=1) if args.json else f"calibration of {cal.device}: {path}"
    )
    return 0


def cmd_doctor(args: argparse.Namespace) -> int:
    from .doctor import render, run_doctor

    if args.calibrate:
        return cmd_calibrate(args)
    with _stdout_to_stderr():  # libraries that print while loading: keep stdout the report
        report = run_doctor(args.pipeline or None, offline=args.offline, timeout=args.timeout)
    print(json.dumps(report.model_dump(mode="json"), indent=2) if args.json else render(report))
    return 0 if report.ok else 1


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="cascade",
        description="vlm-cascade: coarse-to-fine pipelines that send a VLM only "
        "the pixels a question needs.",
    )
    parser.add_argument("--debug", action="store_true", help="show tracebacks on errors")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    p = sub.add_parser("stages", help="list registered stage types with ports and params")
    p.add_argument("--json", action="store_true", help="machine-readable output")
    p.set_defaults(func=cmd_stages)

    p = sub.add_parser("validate", help="check pipeline files without loading any model")
    p.add_argument("files", nargs="+", metavar="FILE")
    p.set_defaults(func=cmd_validate)

    p = sub.add_parser("graph", help="draw a pipeline's DAG")
    p.add_argument("file", metavar="PIPELINE", help="YAML path or shipped pipeline name")
    p.add_argument("--format", choices=["mermaid", "dot"], default="mermaid")
    p.set_defaults(func=cmd_graph)

    p = sub.add_parser(
        "run",
        help="run a pipeline on inputs",
        description="Run a pipeline. PIPELINE is a YAML path or the name of a "
        "shipped pipeline (e.g. route_demo).",
    )
    p.add_argument("pipeline", metavar="PIPELINE")
    p.add_argument(
        "--input",
        "-i",
        action="append",
        default=[],
        metavar="NAME=VALUE",
        help="a pipeline input; repeat a name to pass a list",
    )
    p.add_argument(
        "--set",
        action="append",
        default=[],
        metavar="STAGE.PARAM=VALUE",
        help="override a stage param, or a declared model's field as "
        "models.NAME.FIELD=VALUE (value parsed as YAML)",
    )
    p.add_argument(
        "--json", action="store_true", help='print one JSON object {"outputs": ..., "trace": ...}'
    )
    p.add_argument(
        "--offline",
        action="store_true",
        help="no model hub: random-weight tiny VLM and CLIP (costs real, VLM answers "
        "noise), bundled YOLO11n ONNX and RapidOCR (real)",
    )
    p.set_defaults(func=cmd_run)

    from .eval.items import GENRES

    p = sub.add_parser(
        "bench",
        help="cascade vs full_res vs thumbnail_only on the built-in eval set",
        description="Generate one split of the evaluation set (videos, image sets "
        "and documents with text and objects at known places, in genres: "
        f"{', '.join(GENRES)}), run every pipeline on it with random-weight "
        "VLM/CLIP and real OCR/YOLO, and write JSON + a per-genre PNG plot: "
        "evidence recall, visual tokens vs full_res, tool answers given / exact, "
        "router agreement, per genre. Tune on --split dev; report --split test.",
    )
    p.add_argument(
        "--split",
        choices=["dev", "test"],
        default="test",
        help="which split to run (default: test, the one to report)",
    )
    p.add_argument(
        "--quick", action="store_true", help="1-3 questions per genre and the tiny VLM shape"
    )
    p.add_argument(
        "--genre",
        action="append",
        choices=list(GENRES),
        default=None,
        metavar="GENRE",
        help=f"run this genre only (repeat for several); one of: {', '.join(GENRES)}",
    )
    p.add_argument(
        "--out",
        default="benchmarks/results",
        help="folder for cascade_<split>[_quick][_<genres>]_<device>.json/.png",
    )
    p.add_argument("--media-dir", default=None, help="where to generate/reuse the eval media")
    p.add_argument(
        "--size",
        choices=["test", "bench"],
        default="bench",
        help="random-weight VLM shape: test (tiny) or bench (~200M-param LM)",
    )
    p.add_argument(
        "--limit", type=int, default=None, help="only the first N questions of each genre"
    )
    p.add_argument(
        "--full-res",
        choices=["run", "estimate"],
        default="run",
        help="run the full_res baseline through the VLM, or only count its tokens and "
        "read its evidence (no VLM call, no time: minutes per video saved on a CPU)",
    )
    p.add_argument("--max-new-tokens", type=int, default=8)
    p.add_argument(
        "--route-policy",
        choices=["cascade", "cost", "full"],
        default="cascade",
        help="the cascades' path route: cascade (forced: what the evidence targets measure, the "
        "default), cost (what users get), full",
    )
    p.add_argument("--quiet", action="store_true", help="no progress bars")
    p.set_defaults(func=cmd_bench)

    p = sub.add_parser(
        "doctor",
        help="check this environment: packages, GPU, kernels, codecs, models, hub",
        formatter_class=argparse.RawDescriptionHelpFormatter,
        description="\n\n".join(
            textwrap.fill(par, 78)
            for par in (
                "Check that this environment can run the pipelines, and say how to fix what "
                "cannot.",
                "Reports: Python and package versions against vlm-cascade's requirements; CUDA "
                "devices; a Triton kernel launched for real (compiled on a GPU, the interpreter on "
                "CPU); PyAV's codecs and an H.264 round trip; the bundled OCR, detector, "
                "text-embedder and layout model files; whether the model hub answers (HF_ENDPOINT, "
                "HF_HUB_OFFLINE and proxies honoured; one probe of a few seconds); for each "
                "pipeline, where each of its models is (local, cached, downloadable or missing); "
                "Ray; fonts for Chinese text; free disk for the caches.",
                "Exit status: 0 when every check is ok or warn, 1 when any fails (a checked "
                "pipeline cannot run here, or a core package is missing).",
            )
        ),
        epilog="examples:\n  cascade doctor\n  cascade doctor --offline --json\n"
        "  cascade doctor --pipeline video_qa --pipeline my_pipeline.yaml",
    )
    p.add_argument(
        "--json",
        action="store_true",
        help="print the report as JSON (schema: cascade.doctor_report.DoctorReport)",
    )
    p.add_argument(
        "--offline",
        action="store_true",
        help="check the pipelines as `cascade run --offline` runs them (random-weight "
        "VLM and CLIP) rather than with their declared models",
    )
    p.add_argument(
        "--pipeline",
        action="append",
        default=[],
        metavar="NAME_OR_YAML",
        help="check these pipelines instead of every shipped one (repeatable)",
    )
    p.add_argument(
        "--timeout",
        type=float,
        default=3.0,
        metavar="SECONDS",
        help="longest wait for each model-hub probe (default 3)",
    )
    p.add_argument(
        "--calibrate",
        action="store_true",
        help="instead of the checks: measure this device's VLM throughput and each cascade's "
        "specialists (per megapixel / frame) for the path route, and cache them "
        "(~/.cache/vlm-cascade/calibration/); minutes on a CPU",
    )
    p.add_argument(
        "--calibrate-model",
        default=None,
        metavar="MODEL",
        help="checkpoint the VLM throughput is measured on (default: the random-weight "
        "'bench' Qwen2-VL, built offline)",
    )
    p.add_argument("--device", default="cpu", help="device to calibrate (cpu, cuda, cuda:N)")
    p.add_argument("--quick", action="store_true", help="calibrate on fewer media")
    p.set_defaults(func=cmd_doctor)

    from .serve.cli import add_serve_commands  # argparse only; FastAPI/Gradio load on use

    add_serve_commands(sub)
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.debug:  # the debug log: the hub client's retries and probes (`cascade.hub`) among it
        import logging

        handler = logging.StreamHandler()
        handler.setFormatter(logging.Formatter("debug: %(name)s: %(message)s"))
        logging.getLogger("cascade").addHandler(handler)
        logging.getLogger("cascade").setLevel(logging.DEBUG)
    try:
        return args.func(args)
    except CascadeError as e:
        if args.debug:
            traceback.print_exc()
        print(f"error: {e}", file=sys.stderr)
        return EXIT_INVALID if type(e).__name__ in ("SpecError", "ConnectError") else EXIT_FAILED
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130
    except Exception as e:  # a bug, not a user error: still one line unless --debug
        if args.debug:
            traceback.print_exc()
        print(
            f"error: unexpected {type(e).__name__}: {e} (rerun with --debug for the traceback)",
            file=sys.stderr,
        )
        return EXIT_FAILED


if __name__ == "__main__":
    sys.exit(main())
