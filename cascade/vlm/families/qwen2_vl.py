"""Qwen2-VL and Qwen2.5-VL: ViT tower + 2x2 patch merger, M-RoPE decoder (3 position rows).

Positions come from the model's own `get_rope_index`, computed on the full unpruned prefix; the
runtime then drops the columns of removed tokens, so kept tokens keep their original (t, h, w)
positions and text after the images continues at max(position) + 1 exactly as unpruned.
"""
from __future__ import annotations

from typing import Any

import numpy as np
import torch

from ...errors import InputError
from .base import Family, ImageInputs, PrefixInputs


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

    def preprocess(self, images: list[Any]) -> list[ImageInputs]:
        try:
            pixel_values, grid_thw = self.image_inputs(images)
        except (ValueError, OSError, TypeError) as e:  # e.g. an extreme aspect ratio
            raise InputError(f"the image processor rejected the input: {e}") from e
        merge = self.model.config.vision_config.spatial_merge_size
        out, start = [], 0
        for t, h, w in grid_thw.tolist():  # pixel_values rows: t*h*w patches per image, in order
            n = t * h * w
            out.append(ImageInputs({"pixel_values": pixel_values[start:start + n],
                                    "image_grid_thw": torch.tensor([[t, h, w]])},
                                   [(t, h // merge, w // merge)]))
            start += n
        return out

    def collate(self, images: list[ImageInputs]) -> dict[str, Any]:
        return {"pixel_values": torch.cat([im.tensors["pixel_values"] for im in images]),
                "image_grid_thw": torch.cat([im.tensors["image_grid_thw"] for im in images])}

    def build_prefix(self, prefix_text: str, images: list[ImageInputs]) -> PrefixInputs:
        vision_inputs = self.collate(images)
        grid_thw = vision_inputs["image_grid_thw"]
        try:
            text = self.expand_placeholders(prefix_text, grid_thw)
        except ValueError as e:
            raise InputError(str(e)) from e
        # Tokenized as the processor tokenizes its expanded text (tokenizer defaults).
        ids = self.tokenizer(text, return_tensors="pt")["input_ids"][0].to(self.device)
        grid_thw = grid_thw.to(self.device)
        vision_inputs["image_grid_thw"] = grid_thw
        types = (ids == self.image_token_id).int()  # the processor's mm_token_type_ids (images: 1)
        pos, _ = self.model.model.get_rope_index(ids[None], mm_token_type_ids=types[None],
                                                  image_grid_thw=grid_thw)
        grids = [g for im in images for g in im.blocks]
        starts = ((types[1:] - types[:-1]) == 1).nonzero().squeeze(1) + 1
        if bool(types[0]):
            starts = torch.cat([starts.new_zeros(1), starts])
        spans = [(int(s), int(s) + g[0] * g[1] * g[2]) for s, g in zip(starts.tolist(), grids)]
        return PrefixInputs(ids, pos[:, 0], spans, grids, vision_inputs, list(images))

    def expand_placeholders(self, text: str, grid_thw: torch.Tensor) -> str:
        """Repeat each image placeholder once per merged visual token, as the processor does."""
        tok = self.processor.image_token
        parts = text.split(tok)
        if len(parts) - 1 != len(grid_thw):
            raise ValueError(f"{len(parts) - 1} image placeholders for {len(grid_thw)} images")
        merge = self.processor.image_processor.merge_size
        counts = [int(g.prod()) // merge**2 for g in grid_thw]
        return parts[0] + "".join(tok * n + rest for n, rest in zip(counts, parts[1:]))

    @property
    def kernel_preprocessing(self) -> bool:
        """True when `patchify_normalize` reproduces this image processor exactly: it resizes with
        torchvision (as transformers' torchvision backend does), then rescales and normalizes."""
        try:
            from transformers.image_processing_backends import TorchvisionBackend as Fast
        except ImportError:  # transformers 4.x
            from transformers.image_processing_utils_fast import BaseImageProcessorFast as Fast
        ip = self.processor.image_processor
        return isinstance(ip, Fast) and bool(ip.do_resize and ip.do_rescale and ip.do_normalize)

    def image_inputs(self, images: list[Any]) -> tuple[torch.Tensor, torch.Tensor]:
        """(pixel_values [N, 3*T*ps*ps] on the device, image_grid_thw [n_images, 3]) of PIL images.

        The fused cascade.kernels op (impl = the backend's `kernels` option) when it reproduces
        the processor; the image processor itself otherwise (another resize backend, a non-RGB
        image). Either way the result equals the processor's."""
        ip = self.processor.image_processor
        if not (self.kernel_preprocessing and all(im.mode == "RGB" for im in images)):
            extra = {"size": dict(self._size)} if self._size else {}
            enc = ip(images=images, return_tensors="pt", **extra)
            return enc["pixel_values"].to(self.device), enc["image_grid_thw"]
        from torchvision.transforms.v2 import functional as tvF
        from transformers.image_utils import pil_torch_interpolation_mapping
        from transformers.models.qwen2_vl.image_processing_qwen2_vl import smart_resize

        from ...kernels.preprocess import patchify_normalize

        lo, hi = self.pixel_budget()
        factor = ip.patch_size * ip.merge_size
        patches, grids = [], []
        for im in images:
            chw = torch.from_numpy(np.array(im)).permute(2, 0, 1)
            h, w = smart_resize(chw.shape[1], chw.shape[2], factor=factor, min_pixels=lo, max_pixels=hi)
            # Resized on the CPU as the processor resizes; only uint8 pixels go to the device.
            chw = tvF.resize(chw, [h, w], interpolation=pil_torch_interpolation_mapping[ip.resample],
                             antialias=True)
            p, grid = patchify_normalize(chw.to(self.device).permute(1, 2, 0), ip.image_mean,
                                         ip.image_std, ip.patch_size, ip.temporal_patch_size,
                                         ip.merge_size, ip.rescale_factor, impl=self.kernels)
            patches.append(p)
            grids.append(grid)
        return torch.cat(patches), torch.tensor(grids, dtype=torch.long)

    def encode(self, vision_inputs: dict[str, Any]) -> list[torch.Tensor]:
        vi = vision_inputs
        out = self.model.model.get_image_features(vi["pixel_values"], vi["image_grid_thw"].to(self.device))
        feats = out.pooler_output if hasattr(out, "pooler_output") else out
        return list(feats)
