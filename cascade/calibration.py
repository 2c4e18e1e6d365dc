"""This device's measured costs, which the route decision (`cascade.routers.path_route`) prices
its two paths with. Measured once by `cascade doctor --calibrate` (`cascade.calibrate`) and cached
per device under `$VLM_CASCADE_CACHE/calibration/` (default `~/.cache/vlm-cascade/calibration/`;
`$CASCADE_CALIBRATION_DIR` names another folder).

Three fits, each from real runs on the device named in the file:

- the VLM: seconds = overhead + FLOPs / throughput + (generated - 1) x step + visual tokens x
  per-token work, fitted on real calls
  of a real architecture against the cost model's FLOPs (`cascade.cost`), so the FLOPs of any
  declared model (its tower, prefill and decode) turn into seconds on this device;
- per cascade pipeline, what the cascade spends outside the VLM (OCR, layout, detection, CLIP,
  frame sampling, retrieval): a + b x megapixels + c x frames + d x text (the images' strong
  edges, which OCR's per-line cost follows), fitted on forced-cascade runs, and
  the share of those runs that reached the VLM at all (the others a tool answered);
- per pipeline, what the full path spends outside the VLM (loading / decoding the media it sends):
  a + c x frames.

Seconds are read on the device's clock (`device_clock`): on a CPU with one compute thread, this
process's CPU seconds, which equal wall seconds on an idle machine and, unlike them, do not grow
when other jobs share the cores (a calibration measured under load would otherwise price every
path as slow as that load made it); wall seconds elsewhere (a GPU's work is not the host's CPU
time; several threads' CPU seconds add up past the wall).

Nothing here is assumed: a device without a calibration file has no prices, and the router says
so (and keeps the cascade) rather than guessing.
"""

from __future__ import annotations

import json
import os
import platform
import re
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Literal

from .cache import cache_dir
from .errors import InputError

__all__ = [
    "LinearCost",
    "VLMThroughput",
    "PathCosts",
    "Calibration",
    "device_label",
    "calibration_dir",
    "calibration_file",
    "load_calibration",
    "save_calibration",
    "Clock",
    "device_clock",
    "clock_seconds",
]

Clock = Literal["cpu", "wall"]
FORMAT = 2  # bump when a field changes meaning: files of another format are not trusted


@dataclass(frozen=True)
class LinearCost:
    """Seconds = fixed_s + per_megapixel_s x megapixels + per_frame_s x frames + per_text_s x
    text (millions of strong edges the images hold: `routers.image_stats.text_edges`)."""

    fixed_s: float
    per_megapixel_s: float = 0.0
    per_frame_s: float = 0.0
    per_text_s: float = 0.0

    def seconds(self, megapixels: float, frames: int, text: float = 0.0) -> float:
        return (
            self.fixed_s
            + self.per_megapixel_s * megapixels
            + self.per_frame_s * frames
            + self.per_text_s * text
        )


@dataclass(frozen=True)
class VLMThroughput:
    """The VLM's seconds on this device from cost-model FLOPs: a call's fixed overhead
    (preprocessing, prompt, Python), the device's achieved FLOP/s on the model's matmuls and
    attention, each decode step's overhead beyond its FLOPs, and each visual token's work beyond
    its FLOPs (resizing and normalising its pixels, patchifying, rotary tables, element-wise
    layers: memory-bound work that grows with the tokens, not with their FLOPs; without it a
    FLOPs-only fit missed mid-sized calls by 18 %). `measured_on` names the model the fit was
    measured with."""

    flops_per_s: float
    overhead_s: float
    step_s: float
    measured_on: str
    per_token_s: float = 0.0

    def seconds(self, flops: float, generated: int = 1, visual_tokens: float = 0.0) -> float:
        return (
            self.overhead_s
            + flops / self.flops_per_s
            + max(generated - 1, 0) * self.step_s
            + visual_tokens * self.per_token_s
        )


@dataclass(frozen=True)
class PathCosts:
    """One cascade pipeline's measured costs outside the VLM, on both paths, and how often its
    cascade reached the VLM (`vlm_share`: 1 - the share of tool answers), from `runs` runs."""

    cascade: LinearCost
    full: LinearCost
    vlm_share: float
    runs: int


@dataclass(frozen=True)
class Calibration:
    """Everything measured on one device (`device`: `device_label`), `threads` torch threads,
    in seconds of `clock` (`device_clock`)."""

    device: str
    threads: int
    created: str
    vlm: VLMThroughput
    pipelines: dict[str, PathCosts] = field(default_factory=dict)
    clock: Clock = "wall"

    def to_dict(self) -> dict[str, Any]:
        return {"format": FORMAT, **asdict(self)}

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> Calibration:
        return cls(
            device=d["device"],
            threads=int(d["threads"]),
            created=d["created"],
            clock=d["clock"],
            vlm=VLMThroughput(**d["vlm"]),
            pipelines={
                name: PathCosts(
                    LinearCost(**p["cascade"]), LinearCost(**p["full"]), p["vlm_share"], p["runs"]
                )
                for name, p in d.get("pipelines", {}).items()
            },
        )


def _cpu_name() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def device_label(device: str = "cpu") -> str:
    """The device a calibration belongs to: the GPU's name, or the CPU's model and the torch
    threads a process uses (seconds on a CPU scale with them)."""
    import torch

    if str(device).startswith("cuda"):
        index = torch.device(device).index or 0
        return f"cuda {torch.cuda.get_device_name(index)}"
    return f"cpu {_cpu_name()} x{torch.get_num_threads()}"


def device_clock(device: str = "cpu") -> Clock:
    """The clock seconds are measured on for `device`: "cpu" (this process's CPU seconds) on a
    CPU with one torch thread, "wall" otherwise."""
    import torch

    return "cpu" if str(device) == "cpu" and torch.get_num_threads() == 1 else "wall"


def clock_seconds(clock: Clock) -> float:
    """Now, on `clock`: `time.process_time()` or `time.perf_counter()`."""
    return time.process_time() if clock == "cpu" else time.perf_counter()


def calibration_dir() -> Path:
    """$CASCADE_CALIBRATION_DIR, else $VLM_CASCADE_CACHE/calibration, else
    ~/.cache/vlm-cascade/calibration."""
    if os.environ.get("CASCADE_CALIBRATION_DIR"):
        return Path(os.environ["CASCADE_CALIBRATION_DIR"])
    return cache_dir("calibration")


def calibration_file(label: str) -> Path:
    slug = re.sub(r"[^A-Za-z0-9]+", "-", label).strip("-").lower()
    return calibration_dir() / f"{slug}.json"


def load_calibration(label: str) -> Calibration | None:
    """The cached calibration of the device `label`, or None when it was never measured (or was
    measured by another format of this file)."""
    path = calibration_file(label)
    if not path.is_file():
        return None
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError) as e:
        raise InputError(
            f"{path}: not a readable calibration ({e}); rerun cascade doctor --calibrate"
        ) from e
    if data.get("format") != FORMAT or data.get("device") != label:
        return None
    try:
        return Calibration.from_dict(data)
    except (KeyError, TypeError) as e:
        raise InputError(
            f"{path}: calibration field {e} missing or wrong; rerun cascade doctor --calibrate"
        ) from e


def save_calibration(cal: Calibration) -> Path:
    path = calibration_file(cal.device)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(cal.to_dict(), indent=1))
    return path
