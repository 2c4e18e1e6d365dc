"""The typed result of `cascade doctor` (`cascade doctor --json` prints `DoctorReport`).

`version` is the schema's version: it changes when a field is removed or changes meaning (new
fields may appear without a bump). `checks` holds the verdicts, one per topic, each `ok`, `warn`
(works, with a limit worth knowing) or `fail` (something a checked pipeline needs is missing);
the other fields hold the facts behind them.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

__all__ = [
    "SCHEMA_VERSION",
    "Status",
    "Check",
    "Package",
    "GpuDevice",
    "Kernels",
    "Codec",
    "Video",
    "ModelState",
    "PipelineModels",
    "HubInfo",
    "Fonts",
    "Disk",
    "DoctorReport",
]

SCHEMA_VERSION = 1
Status = Literal["ok", "warn", "fail"]


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid")


class Check(_Model):
    """One verdict: topic, status, what was found (one line), and the fix when not ok."""

    topic: str
    status: Status
    detail: str
    fix: str | None = None


class Package(_Model):
    """An installed distribution against this package's requirement on it."""

    name: str
    version: str | None = Field(description="installed version; null: not installed")
    wanted: str = Field("", description="the version specifier required, e.g. '>=2.14'")
    extra: str | None = Field(None, description="the optional extra that needs it; null: core")
    satisfied: bool
    detail: str | None = None


class GpuDevice(_Model):
    index: int
    name: str
    memory_gib: float
    capability: str


class Kernels(_Model):
    """A Triton kernel from `kernels/` launched for real: compiled on CUDA, or under the
    interpreter (`TRITON_INTERPRET=1`) on CPU."""

    mode: Literal["cuda", "interpreter", "none"]
    triton: str | None = None
    launched: bool
    max_abs_error: float | None = None
    seconds: float | None = None
    detail: str


class Codec(_Model):
    name: str
    mode: Literal["decode", "encode"]
    available: bool


class Video(_Model):
    pyav: str | None
    ffmpeg: dict[str, str] = Field(default_factory=dict, description="FFmpeg library versions")
    codecs: list[Codec] = Field(default_factory=list)
    h264_roundtrip: bool = False
    detail: str = ""


class ModelState(_Model):
    """Where one model is (`cascade.preflight.Found`)."""

    kind: str
    name: str = Field(description="hub repo id, local path or URL")
    what: str | None = None
    source: Literal["hub", "path", "url"]
    bundled: str | None = Field(None, description="the wheel the file ships in")
    state: Literal["local", "cached", "download", "missing"]
    where: str
    why: str | None = None
    users: list[str] = Field(default_factory=list)


class PipelineModels(_Model):
    name: str
    ready: bool = Field(description="every model is here or downloadable")
    models: list[ModelState]
    ways_out: list[str] = Field(default_factory=list, description="for missing models: the fixes")
    error: str | None = Field(None, description="the pipeline could not be loaded")


class HubInfo(_Model):
    endpoint: str
    offline: bool = Field(description="HF_HUB_OFFLINE (or TRANSFORMERS_OFFLINE) is set")
    reachable: bool | None = Field(description="answered one probe; null: not asked (offline)")
    seconds: float | None = None
    detail: str
    cache_dir: str
    proxies: list[str] = Field(default_factory=list, description="proxy variables that are set")


class Fonts(_Model):
    cjk: list[str] = Field(description="font files that draw Chinese text")
    source: str


class Disk(_Model):
    purpose: str
    path: str
    free_gib: float


class DoctorReport(_Model):
    """Everything `cascade doctor` found; `ok` is false when any check failed."""

    version: int = SCHEMA_VERSION
    cascade_version: str
    ok: bool
    offline: bool = Field(description="pipelines were checked as `--offline` runs them")
    python: str
    packages: list[Package]
    torch_cuda: str | None = Field(description="the CUDA version torch was built for")
    gpus: list[GpuDevice]
    kernels: Kernels
    video: Video
    bundled_models: list[ModelState]
    hub: HubInfo
    pipelines: list[PipelineModels]
    ray: Package
    fonts: Fonts
    disk: list[Disk]
    checks: list[Check]
