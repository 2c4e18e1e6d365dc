"""Qwen2-VL and Qwen2.5-VL: ViT tower + 2x2 patch merger, M-RoPE decoder (3 position rows).

Positions come from the model's own `get_rope_index`, computed on the full unpruned prefix; the
runtime then drops the columns of removed tokens, so kept tokens keep their original (t, h, w)
positions and text after the images continues at max(position) + 1 exactly as unpruned.
"""
from __future__ import annotations

from typing import Any

import torch

from ...errors import InputError
from .base import Family, PrefixInputs


class Qwen2VLFamily(Family):
    model_types = ("qwen2_vl", "qwen2_5_vl")
    position_rows = 3

    @property
    def text_model(self) -> torch.nn.Module:
        return self.model.model.language_model

    @property
    def lm_head(self) -> torch.nn.Module:
        return self.model.lm_head

    _size: dict[str, int] | None = None

    def pixel_budget(self) -> tuple[int, int]:
        """(min_pixels, max_pixels) each image is resized into (keeping its aspect ratio)."""
        if self._size:
            return self._size["shortest_edge"], self._size["longest_edge"]
        ip = self.processor.image_processor
        size = ip.size
        get = size.get if isinstance(size, dict) else lambda k: getattr(size, k, None)
        return (getattr(ip, "min_pixels", None) or get("shortest_edge"),
                getattr(ip, "max_pixels", None) or get("longest_edge"))

    def set_pixel_budget(self, min_pixels: int | None = None, max_pixels: int | None = None) -> None:
        lo, hi = self.pixel_budget()
        lo, hi = int(min_pixels or lo), int(max_pixels or hi)
        if not 0 < lo <= hi:
            raise InputError(f"need 0 < min_pixels <= max_pixels, got {lo} and {hi}")
        self._size = {"shortest_edge": lo, "longest_edge": hi}

    def preprocessing_key(self) -> tuple:
        ip = self.processor.image_processor
        return ("qwen2_vl", *self.pixel_budget(), ip.patch_size, ip.merge_size,
                ip.temporal_patch_size, tuple(ip.image_mean), tuple(ip.image_std))

    def prepare_prefix(self, prefix_text: str, images: list[Any]) -> PrefixInputs:
        extra = {"size": dict(self._size)} if self._size else {}
        try:
            enc = self.processor(text=[prefix_text], images=images, return_tensors="pt", **extra)
        except (ValueError, OSError, TypeError) as e:  # e.g. an image smaller than one patch
            raise InputError(f"the image processor rejected the input: {e}") from e
        ids = enc["input_ids"][0].to(self.device)
        grid_thw = enc["image_grid_thw"].to(self.device)
        types = enc.get("mm_token_type_ids")
        if types is None:  # older processors do not return it; images are token type 1
            types = (enc["input_ids"] == self.image_token_id).int()
        pos, _ = self.model.model.get_rope_index(ids[None], mm_token_type_ids=types.to(self.device),
                                                  image_grid_thw=grid_thw)
        merge = self.model.config.vision_config.spatial_merge_size
        grids = [(int(t), int(h) // merge, int(w) // merge) for t, h, w in grid_thw.tolist()]
        is_img = (ids == self.image_token_id).int()
        starts = ((is_img[1:] - is_img[:-1]) == 1).nonzero().squeeze(1) + 1
        if bool(is_img[0]):
            starts = torch.cat([starts.new_zeros(1), starts])
        spans = [(int(s), int(s) + g[0] * g[1] * g[2]) for s, g in zip(starts.tolist(), grids)]
        vision_inputs = {"pixel_values": enc["pixel_values"].to(self.device),
                         "image_grid_thw": grid_thw}
        return PrefixInputs(ids, pos[:, 0], spans, grids, vision_inputs)

    def encode_images(self, prefix: PrefixInputs) -> list[torch.Tensor]:
        vi = prefix.vision_inputs
        out = self.model.model.get_image_features(vi["pixel_values"], vi["image_grid_thw"])
        feats = out.pooler_output if hasattr(out, "pooler_output") else out
        return list(feats)
