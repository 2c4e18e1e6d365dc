"""Real photos and footage that install with packages: scikit-image's sample photos, ultralytics'
`bus.jpg` / `zidane.jpg`, gradio's sample images and clips. Tests, the evaluation splits and the
demos all make their media from these, offline."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import numpy as np


def _package_file(package: str, *parts: str) -> Path:
    spec = importlib.util.find_spec(package)
    if spec is None or not spec.origin:
        raise FileNotFoundError(f"{package} is not installed; {'/'.join(parts)} ships inside it")
    return Path(spec.origin).parent.joinpath(*parts)


def bus_image_path() -> str:
    """Ultralytics' own `assets/bus.jpg` (1080x810: a bus and four people)."""
    return str(_package_file("ultralytics", "assets", "bus.jpg"))


def footage_path(name: str) -> str:
    """A real video clip that ships with gradio: 'a.mp4' (1920x1080, 7 s, a caption animation),
    'world.mp4' (480x270, 30 s, a turning globe), 'b.mp4' (480x270, 5 s)."""
    path = _package_file("gradio", "media_assets", "videos", name)
    if not path.is_file():
        raise FileNotFoundError(f"gradio does not ship the video '{name}'")
    return str(path)


def photo(name: str) -> np.ndarray:
    """A real photo (uint8 RGB) by name: scikit-image's bundled samples ('astronaut', 'coffee',
    'rocket', 'chelsea', 'stereo_motorcycle', 'camera', 'brick', ...), gradio's ('gradio:tower.jpg',
    'gradio:groot.jpeg', 'gradio:cheetah.jpg', 'gradio:lion.jpg', ...) and ultralytics' ('bus',
    'zidane'). Grey photos come back as three equal channels."""
    from PIL import Image as PILImage

    if name in ("bus", "zidane"):
        path = _package_file("ultralytics", "assets", f"{name}.jpg")
    elif name.startswith("gradio:"):
        path = _package_file("gradio", "media_assets", "images", name.split(":", 1)[1])
    else:
        from skimage import data

        arr = getattr(data, name)()
        arr = arr[0] if isinstance(arr, tuple) else arr
        return np.ascontiguousarray(arr[..., :3] if arr.ndim == 3 else np.stack([arr] * 3, -1))
    with PILImage.open(path) as im:
        return np.asarray(im.convert("RGB"))


def scene_images() -> dict[str, np.ndarray]:
    """Four real photos: astronaut, coffee, chelsea (a cat) and the ultralytics bus."""
    return {name: photo(name) for name in ("astronaut", "coffee", "chelsea", "bus")}
