"""A printed page as a phone photographs it: lying at an angle on a real photo, in perspective,
with less contrast than the print, uneven light, a little blur, saved as a JPEG."""

from __future__ import annotations

import random
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from ..artifacts import Box
from .photos import photo


@dataclass(frozen=True)
class Photographed:
    path: Path
    width: int
    height: int
    to_photo: Any  # skimage ProjectiveTransform: page pixels -> photo pixels

    def box(self, page_box: Box) -> tuple[int, int, int, int]:
        """The bounding box in photo pixels of a box in page pixels."""
        corners = np.array(
            [
                [page_box.x0, page_box.y0],
                [page_box.x1, page_box.y0],
                [page_box.x1, page_box.y1],
                [page_box.x0, page_box.y1],
            ],
            float,
        )
        mapped = self.to_photo(corners)
        x0, y0 = np.floor(mapped.min(0)).astype(int)
        x1, y1 = np.ceil(mapped.max(0)).astype(int)
        return int(max(0, x0)), int(max(0, y0)), int(min(self.width, x1)), int(min(self.height, y1))


def _homography(src: np.ndarray, dst: np.ndarray) -> np.ndarray:
    """The 3x3 projective matrix taking the 4 points `src` onto `dst` (exact: 8 equations)."""
    rows, rhs = [], []
    for (x, y), (u, v) in zip(src, dst, strict=True):
        rows += [[x, y, 1, 0, 0, 0, -u * x, -u * y], [0, 0, 0, x, y, 1, -v * x, -v * y]]
        rhs += [u, v]
    return np.append(np.linalg.solve(np.array(rows), np.array(rhs)), 1.0).reshape(3, 3)


def photograph(
    page: np.ndarray,
    background: str,
    path: str | Path,
    rng: random.Random,
    photo_width: int,
    page_fraction: float,
) -> Photographed:
    """Lay `page` (uint8 HxWx3) on the photo `background` resized to `photo_width`: the page takes
    about `page_fraction` of the photo's width, turned up to ~10 degrees, with its corners moved
    in perspective; ink and paper pulled together (lower contrast), a light gradient and a slight
    blur; written as a JPEG of quality 55-80 to `path`."""
    from PIL import Image as PILImage
    from PIL import ImageFilter
    from skimage.transform import ProjectiveTransform, warp

    bg = PILImage.fromarray(photo(background))
    scale = photo_width / bg.width
    bg = bg.resize(
        (photo_width, max(int(bg.height * scale), int(photo_width * 0.62))),
        PILImage.Resampling.BICUBIC,
    )
    W, H = bg.size
    ph, pw = page.shape[:2]
    target_w = page_fraction * W
    s = min(target_w / pw, 0.8 * H / ph)
    w, h = pw * s, ph * s
    cx = rng.uniform(w / 2 + 0.04 * W, W - w / 2 - 0.04 * W)
    cy = rng.uniform(h / 2 + 0.03 * H, H - h / 2 - 0.03 * H)
    angle = np.deg2rad(rng.uniform(-10, 10))
    rot = np.array([[np.cos(angle), -np.sin(angle)], [np.sin(angle), np.cos(angle)]])
    quad = np.array([[-w / 2, -h / 2], [w / 2, -h / 2], [w / 2, h / 2], [-w / 2, h / 2]])
    # perspective: the far edge (top or bottom) a little narrower, then every corner nudged
    far = rng.uniform(0.0, 0.04) * w
    left, right = (0, 1) if rng.random() < 0.5 else (3, 2)
    quad[left, 0] += far
    quad[right, 0] -= far
    quad += np.array(
        [[rng.uniform(-0.02, 0.02) * w, rng.uniform(-0.02, 0.02) * h] for _ in range(4)]
    )
    quad = quad @ rot.T + np.array([cx, cy])
    src = np.array([[0, 0], [pw, 0], [pw, ph], [0, ph]], float)
    tform = ProjectiveTransform(matrix=_homography(src, quad))

    # lower contrast: paper greyer, ink lighter; a light falloff across the page
    lo, hi = rng.uniform(45, 85), rng.uniform(190, 228)
    flat = lo + (hi - lo) * (page.astype(np.float32) / 255.0)
    ramp = np.linspace(rng.uniform(0.82, 0.95), 1.0, pw, dtype=np.float32)
    flat *= (ramp if rng.random() < 0.5 else ramp[::-1])[None, :, None]
    rgba = np.dstack([flat / 255.0, np.ones((ph, pw), np.float32)])
    warped = warp(rgba, tform.inverse, output_shape=(H, W), order=1, mode="constant", cval=0.0)
    alpha = warped[..., 3:4]
    out = (np.asarray(bg, np.float32) / 255.0) * (1 - alpha) + warped[..., :3] * alpha
    img = PILImage.fromarray(np.clip(out * 255, 0, 255).astype(np.uint8))
    img = img.filter(ImageFilter.GaussianBlur(rng.uniform(0.3, 0.7)))
    path = Path(path)
    img.save(path, "JPEG", quality=rng.randint(55, 80))
    return Photographed(path, W, H, tform)
