"""Route on a cheap statistic of the pixels (edge density): busy images go to the fine path."""

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
