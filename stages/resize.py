"""Cheap resolution changes: thumbnails for the coarse look, capped sizes for the fine one."""

from __future__ import annotations

from dataclasses import dataclass

from pydantic import Field

from cascade.artifacts import Image
from cascade.stage import Stage, StageParams, stage


def fit_longest_side(image: Image, size: int, upscale: bool = False) -> Image:
    """Resize so the longest side is `size` pixels, aspect kept (never upscales unless asked)."""
    longest = max(image.width, image.height)
    if longest <= size and not upscale:
        return image
    factor = size / longest
    return image.resized(max(1, round(image.width * factor)), max(1, round(image.height * factor)))


@stage("thumbnail")
class Thumbnail(Stage):
    """Downscale an image so its longest side is `size` pixels (aspect kept); boxes stay
    mappable."""

    class Params(StageParams):
        size: int = Field(448, gt=0, le=8192, description="longest side of the thumbnail, pixels")

    params: Params  # what the base class's `params` property returns here

    @dataclass(frozen=True)
    class Outputs:
        image: Image

    def run(self, image: Image) -> Outputs:
        return self.Outputs(fit_longest_side(image, self.params.size))


@stage("thumbnails")
class Thumbnails(Stage):
    """`thumbnail` for a list (video frames, multi-image input): each image's longest side ->
    `size`."""

    class Params(StageParams):
        size: int = Field(224, gt=0, le=8192, description="longest side of each thumbnail, pixels")

    params: Params  # what the base class's `params` property returns here

    @dataclass(frozen=True)
    class Outputs:
        images: list[Image]

    def run(self, images: list[Image]) -> Outputs:
        return self.Outputs([fit_longest_side(im, self.params.size) for im in images])
