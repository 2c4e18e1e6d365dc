"""Load still images from disk."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from cascade.artifacts import Image
from cascade.stage import Stage, StageParams, stage


@stage("load_image")
class LoadImage(Stage):
    """Read an image file (any format Pillow decodes) as RGB pixels."""

    Params = StageParams

    @dataclass(frozen=True)
    class Outputs:
        image: Image

    def run(self, path: Path) -> Outputs:
        return self.Outputs(Image.open(path))
