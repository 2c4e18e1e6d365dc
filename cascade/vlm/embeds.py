"""Image embeddings on the wire, as vLLM takes them: `{"image_embeds": B64, "image_grid_thw": B64}`,
each value the base64 of a `torch.save`d tensor (embeddings [tokens, dim]; the grid [1, 3] or [3]).

`cascade embed` writes them (`dump_embeds`); the server's `image_embeds` content part and
`QA.ask` read them back (`load_embeds`) as a `cascade.artifacts.ImageEmbeds`. Reading never runs
pickled code: `torch.load(weights_only=True)` takes tensors and plain containers only.
"""

from __future__ import annotations

import base64
import binascii
import io
from typing import Any

from ..artifacts import ImageEmbeds
from ..errors import InputError

__all__ = ["dump_embeds", "load_embeds", "FIELDS"]

FIELDS = ("image_embeds", "image_grid_thw")


def _b64_tensor(t: Any) -> str:
    import torch

    buf = io.BytesIO()
    torch.save(t.detach().cpu().contiguous(), buf)
    return base64.b64encode(buf.getvalue()).decode()


def dump_embeds(image: ImageEmbeds) -> dict[str, str]:
    """An `ImageEmbeds` as the wire mapping (base64 `torch.save` of each tensor)."""
    import torch

    return {
        "image_embeds": _b64_tensor(image.embeds),
        "image_grid_thw": _b64_tensor(torch.tensor([list(image.grid)])),
    }


def _tensor(text: Any, field: str, max_bytes: int) -> Any:
    import torch

    if not isinstance(text, str):
        raise InputError(f"{field}: expected a base64 string (a torch.save'd tensor)")
    if len(text) * 3 // 4 > max_bytes:
        raise InputError(f"{field}: over {max_bytes:,} bytes")
    try:
        raw = base64.b64decode(text, validate=True)
    except (binascii.Error, ValueError):
        raise InputError(f"{field}: not valid base64") from None
    try:
        value = torch.load(io.BytesIO(raw), weights_only=True, map_location="cpu")
    except Exception as e:  # noqa: BLE001  any malformed file: the loader's own types vary
        raise InputError(
            f"{field}: not a torch.save'd tensor ({type(e).__name__}); write it with "
            "`cascade embed` or torch.save(tensor, buffer)"
        ) from None
    if not isinstance(value, torch.Tensor):
        raise InputError(f"{field}: expected a tensor, got {type(value).__name__}")
    return value


def load_embeds(
    fields: dict[str, Any], source: str, media_index: int = 0, max_bytes: int = 64 << 20
) -> ImageEmbeds:
    """The wire mapping as an `ImageEmbeds` (InputError naming `source`.<field> when a field is
    missing or is not a tensor). Shape and dtype are checked against the model when it runs."""
    missing = [f for f in FIELDS if f not in fields]
    if missing:
        raise InputError(
            f"{source}: image_embeds needs {' and '.join(FIELDS)} (base64 torch.save'd "
            f"tensors); missing {', '.join(missing)}"
        )
    embeds = _tensor(fields["image_embeds"], f"{source}.image_embeds", max_bytes)
    grid = _tensor(fields["image_grid_thw"], f"{source}.image_grid_thw", 64 << 10)
    if grid.numel() != 3 or grid.is_floating_point():
        raise InputError(
            f"{source}.image_grid_thw: expected 3 integers (t, h, w), got a {grid.dtype} tensor "
            f"of shape {list(grid.shape)}"
        )
    return ImageEmbeds.of(embeds, grid.tolist(), source=source, media_index=media_index)
