"""Cheap statistics of the pixels: edge density (busy images go to the fine path) and how much
text a page holds (what the path route prices OCR by)."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from pydantic import Field

from cascade.artifacts import Image, Route
from cascade.stage import Router, StageParams, stage


def edge_density(image: Image) -> float:
    """Mean absolute luminance gradient in [0, 1]: text and fine detail score high, sky scores
    low."""
    gray = image.pixels.astype(np.float32) @ np.array([0.299, 0.587, 0.114], np.float32) / 255.0
    gx = np.abs(np.diff(gray, axis=1)).mean() if gray.shape[1] > 1 else 0.0
    gy = np.abs(np.diff(gray, axis=0)).mean() if gray.shape[0] > 1 else 0.0
    return float((gx + gy) / 2)


TEXT_VIEW = 1024  # long side (px) of the view text is counted in: a scan at twice the dpi holds
# the same text, and counts the same
STRONG_EDGE = 0.15  # a luminance step (of 1.0) that ink on paper makes and paper grain does not


def text_edges(image: Image) -> float:
    """Millions of strong luminance steps in a view of `image` TEXT_VIEW px on its long side: how
    much text (or fine detail) OCR will find and read. OCR's recognizer runs once per text line,
    so a page's OCR cost follows this more than its megapixels (a dense scanned page of 3 MP
    costs three times a receipt photo of 1.7 MP)."""
    from PIL import Image as PILImage

    gray = image.to_pil().convert("L")
    scale = TEXT_VIEW / max(gray.size)
    if scale < 1:
        size = (max(1, round(gray.width * scale)), max(1, round(gray.height * scale)))
        gray = gray.resize(size, PILImage.Resampling.BILINEAR)
    g = np.asarray(gray, np.float32) / 255.0
    steps = (np.abs(np.diff(g, axis=1)) > STRONG_EDGE).sum()
    steps += (np.abs(np.diff(g, axis=0)) > STRONG_EDGE).sum()
    return float(steps) / 1e6


@stage("edge_density_router")
class EdgeDensityRouter(Router):
    """Send an image to the `fine` branch when its edge density reaches `threshold`, else
    `coarse`."""

    branches = ("coarse", "fine")

    class Params(StageParams):
        threshold: float = Field(0.04, ge=0, le=1, description="edge density at which to go fine")

    params: Params  # what the base class's `params` property returns here

    @dataclass(frozen=True)
    class Outputs:
        route: Route

    def run(self, image: Image) -> Outputs:
        score = edge_density(image)
        fine = score >= self.params.threshold
        cmp = ">=" if fine else "<"
        return self.Outputs(
            Route(
                "fine" if fine else "coarse",
                f"edge density {score:.4f} {cmp} threshold {self.params.threshold}",
                {"edge_density": score},
            )
        )
