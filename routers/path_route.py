"""Before any specialist runs: is looking at the whole media cheaper than the cascade?

Two paths are priced in seconds on this device (and in FLOPs):

- `full`: every image (or every frame the cascade would sample from a video, 1 fps) sent whole to
  the VLM at native resolution within its processor's limits. Its visual tokens, tower and prefill
  FLOPs come from the family of the declared model (`DeclaredModel.pricing_family`: the real
  checkpoint's shapes, not a random-weight stand-in's) and the cost model (`cascade.cost`); the
  device's measured VLM throughput (`cascade.calibration.VLMThroughput`) turns them into seconds,
  plus the measured cost of loading what it sends.
- `cascade`: what this pipeline's specialists (OCR, layout, detection, CLIP, frame sampling,
  retrieval) cost on this device per megapixel, per frame and per unit of text the images hold
  (`image_stats.text_edges`: OCR reads line by line), measured by
  `cascade doctor --calibrate`, plus its expected crops: at most `crop_tokens` visual tokens
  priced like the full path, times the share of runs that reach the VLM.

The policy (`cost` | `cascade` | `full`; the param, overridden per request by the `policy` input)
picks: `cost` the cheaper, `cascade` or `full` that path. A request's `max_visual_tokens` is a
limit: a whole image over it is cascaded whatever the policy or the prices say; so is media whose
whole does not fit the model's context (a long video at 1 fps). Without a
calibration for this device, `cost` keeps the cascade (the route says why) rather than guess.
The route names the path, both estimates and why; `compose_answer` puts the chosen path's
estimate into the bill, and `QA.ask` the seconds actually spent beside it.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path
from typing import Literal, get_args

from pydantic import Field

from cascade.artifacts import Image, ImageEmbeds, Route
from cascade.calibration import Calibration, device_label, load_calibration
from cascade.cost import decode_flops, prefill_flops
from cascade.errors import InputError
from cascade.models import ModelName
from cascade.stage import Router, StageParams, stage

from .image_stats import text_edges

RoutePolicy = Literal["cost", "cascade", "full"]
ROUTE_POLICIES: tuple[str, ...] = get_args(RoutePolicy)


def check_policy(value: object, where: str = "route_policy") -> str:
    """`value` as a route policy, or an error naming `where` and the policies."""
    if value not in ROUTE_POLICIES:
        raise InputError(
            f"{where}: unknown route policy {value!r}; expected one of {', '.join(ROUTE_POLICIES)}"
        )
    return str(value)


@dataclass(frozen=True)
class Media:
    """What the route knows of the media before any specialist looks: the sizes the full path
    sends, and the megapixels / frames the cascade's specialists will look at."""

    full_sizes: list[tuple[int, int]]
    megapixels: float
    frames: int
    text: float = 0.0  # images: millions of strong edges (`text_edges`); videos: not looked at


def video_media(
    path: Path | str,
    full_fps: float,
    full_max_frames: int,
    cascade_fps: float,
    cascade_max_frames: int,
    cascade_size: int,
) -> Media:
    """A video's two looks, from its header: the full path's frames at native size (`full_res`
    samples `full_fps` up to `full_max_frames`), the cascade's at `cascade_size` on the long side
    (`cascade_fps` up to `cascade_max_frames`)."""
    from cascade.media import VideoSource

    info = VideoSource(path).info
    full_n = max(1, min(full_max_frames, math.ceil(info.duration * full_fps), info.frames))
    n = max(1, min(cascade_max_frames, math.ceil(info.duration * cascade_fps), info.frames))
    scale = min(1.0, cascade_size / max(info.width, info.height))
    mp = n * info.width * info.height * scale * scale / 1e6
    return Media([(info.width, info.height)] * full_n, mp, n)


def image_media(images: list[Image], count_text: bool = True) -> Media:
    """Images (pages, photos): the full path sends each whole; the specialists see each, and
    read the text they hold (images given as embeddings have no pixels: no text counted; nor
    any with `count_text` off)."""
    sizes = [
        (int(w), int(h)) for w, h in (im.source_size or (im.width, im.height) for im in images)
    ]
    text = sum(text_edges(im) for im in images if count_text and not isinstance(im, ImageEmbeds))
    return Media(sizes, sum(w * h for w, h in sizes) / 1e6, len(sizes), text)


@stage("path_route")
class PathRoute(Router):
    """Send the whole media to the VLM (`full`) when that is cheaper on this device than the
    cascade's specialists plus its crops, and within the request's visual-token limit; else
    `cascade`."""

    branches = ("full", "cascade")

    class Params(StageParams):
        policy: RoutePolicy = Field(
            "cost", description="cost: the cheaper path; cascade / full: that path always"
        )
        cascade: str = Field(
            description="this pipeline's cascade, by its calibration key (`cascade doctor "
            "--calibrate` measures doc_qa, multi_image_qa, video_qa)"
        )
        model: ModelName = Field("vlm", description="the VLM both paths feed")
        crop_tokens: int = Field(
            1024,
            gt=0,
            description="visual tokens the cascade's crops cost at most (its tile budget)",
        )
        prompt_tokens: int = Field(
            96, ge=0, description="text tokens of a prompt (template, question, tools' hint)"
        )
        answer_tokens: int = Field(8, ge=1, description="answer tokens both paths decode")
        max_visual_tokens: int | None = Field(
            None, gt=0, description="whole media over this many visual tokens is cascaded"
        )
        full_fps: float = Field(
            1.0, gt=0, description="video: frames per second the full path sends"
        )
        full_max_frames: int = Field(
            900, gt=0, description="video: most frames the full path sends"
        )
        cascade_fps: float = Field(
            1.0, gt=0, description="video: frames per second the cascade samples"
        )
        cascade_max_frames: int = Field(
            900, gt=0, description="video: most frames the cascade samples"
        )
        cascade_size: int = Field(640, gt=0, description="video: long side the cascade samples at")

    @dataclass(frozen=True)
    class Outputs:
        route: Route

    params: Params  # what the base class's `params` property returns here

    def setup(self) -> None:
        # The declared model's shapes are read once (its architecture on the meta device), timed
        # as setup rather than in the first request.
        self.model(self.params.model).pricing_family.shapes  # noqa: B018

    def run(
        self,
        images: list[Image] | None = None,
        video: Path | None = None,
        policy: str | None = None,
        max_visual_tokens: int | None = None,
    ) -> Outputs:
        p = self.params
        chosen = check_policy(policy if policy is not None else p.policy, "route_policy")
        limit = max_visual_tokens if max_visual_tokens is not None else p.max_visual_tokens
        if limit is not None and limit < 1:
            raise InputError(f"max_visual_tokens must be >= 1, got {limit}")
        declared = self.model(p.model)
        cal = load_calibration(device_label(_device_of(declared)))
        costs_known = cal is not None and p.cascade in cal.pipelines
        if video is not None:
            media = video_media(
                video,
                p.full_fps,
                p.full_max_frames,
                p.cascade_fps,
                p.cascade_max_frames,
                p.cascade_size,
            )
        elif images:
            # the text is counted only where a calibration will price it (milliseconds a page)
            media = image_media(list(images), count_text=costs_known)
        else:
            raise InputError("path_route needs `images` or a `video`")
        family = declared.pricing_family
        # a video's frames share one size: each size priced once, whatever the video's length
        by_size = {size: family.image_cost(*size) for size in set(media.full_sizes)}
        costs = [by_size[size] for size in media.full_sizes]
        tokens = sum(c.tokens for c in costs)
        full_flops = self._vlm_flops(family.vision_flops(costs), tokens)
        crop = min(p.crop_tokens, tokens)
        side = round(math.sqrt(crop)) * family_unit(family)  # a square crop of `crop` tokens
        crop_flops = self._vlm_flops(family.vision_flops([family.image_cost(side, side)]), crop)
        scores = {
            "full_visual_tokens": float(tokens),
            "crop_visual_tokens": float(crop),
            "megapixels": media.megapixels,
            "frames": float(media.frames),
            "text_edges": media.text,
            "full_flops": full_flops,
        }
        priced = f"priced as {declared.spec.priced_as or declared.spec.id}"
        if cal is not None and costs_known:
            full_s, cascade_s, cascade_flops = self._seconds(
                cal, media, (full_flops, tokens), (crop_flops, crop)
            )
            scores |= {"full_s": full_s, "cascade_s": cascade_s, "cascade_flops": cascade_flops}
            prices = (
                f"full {full_s:.2f} s ({tokens} visual tokens, {full_flops / 1e12:.2f} TFLOP); "
                f"cascade {cascade_s:.2f} s ({media.megapixels:.2f} MP, {media.frames} frame(s), "
                f"{media.text:.2f} M text edges to the specialists, crops <= {crop} tokens, "
                f"{cascade_flops / 1e12:.2f} TFLOP); "
                f"{priced} on {cal.device} ({cal.clock} seconds)"
            )
        else:
            why = (
                f"no calibration for {device_label(_device_of(declared))}"
                if cal is None
                else f"the calibration has no '{p.cascade}' costs"
            )
            prices = (
                f"full {tokens} visual tokens ({priced}); {why}: run cascade doctor --calibrate"
            )
        context = int(getattr(family.text_config, "max_position_embeddings", 0) or 0)
        if limit is not None and tokens > limit:
            branch, why = "cascade", f"{tokens} visual tokens whole > max_visual_tokens {limit}"
        elif context and tokens + p.prompt_tokens > context:
            branch, why = (
                "cascade",
                f"{tokens} visual tokens whole do not fit the {context}-token context",
            )
        elif chosen != "cost":
            branch, why = chosen, f"policy {chosen}"
        elif not costs_known:
            branch, why = "cascade", "policy cost, unpriced: the cascade"
        else:
            cheaper = scores["full_s"] <= scores["cascade_s"]
            branch, why = (
                ("full", "full is cheaper") if cheaper else ("cascade", "cascade is cheaper")
            )
        return self.Outputs(Route(branch, f"{why}; {prices}", scores))

    def _vlm_flops(self, vision: float, visual_tokens: int) -> float:
        """Tower + prefill + decode FLOPs of one call with `visual_tokens` visual tokens."""
        p = self.params
        llm = self.model(p.model).pricing_family.shapes.llm
        n = visual_tokens + p.prompt_tokens
        return vision + prefill_flops(llm, n) + decode_flops(llm, n, p.answer_tokens)

    def _seconds(
        self,
        cal: Calibration,
        media: Media,
        full: tuple[float, int],
        crops: tuple[float, int],
    ) -> tuple[float, float, float]:
        """(full seconds, cascade seconds, cascade FLOPs) on the calibrated device, from each
        path's VLM (FLOPs, visual tokens)."""
        p, costs = self.params, cal.pipelines[self.params.cascade]
        full_s = cal.vlm.seconds(full[0], p.answer_tokens, full[1]) + costs.full.seconds(
            0.0, len(media.full_sizes)
        )
        crop_flops = crops[0]
        crops_s = cal.vlm.seconds(crop_flops, p.answer_tokens, crops[1])
        cascade_s = (
            costs.cascade.seconds(media.megapixels, media.frames, media.text)
            + costs.vlm_share * crops_s
        )
        return full_s, cascade_s, costs.vlm_share * crop_flops


def family_unit(family: object) -> int:
    """Pixels per visual token along one side (Qwen: patch x merge), 28 when the family does not
    say."""
    patch, merge = getattr(family, "patch", None), getattr(family, "merge", None)
    return int(patch * merge) if patch and merge else 28


def _device_of(declared: object) -> str:
    from cascade.devices import pick_device

    return pick_device(str(getattr(declared.spec, "device", "auto")))  # type: ignore[attr-defined]
