"""Qwen2-VL and Qwen2.5-VL: ViT tower + 2x2 patch merger, M-RoPE decoder (3 position rows).

Images are resized into a pixel budget (`smart_resize`: each side a multiple of patch x merge, the
area within [min_pixels, max_pixels]) and cut into patch x patch patches; the merger turns each
2x2 group into one LLM token. Qwen2-VL's tower attends over the whole image in every block;
Qwen2.5-VL's only in `fullatt_block_indexes` and within windows of `window_size` pixels elsewhere.

Positions come from the model's own `get_rope_index`, computed on the full unpruned prefix; the
runtime then drops the columns of removed tokens, so kept tokens keep their original (t, h, w)
positions and text after the images continues at max(position) + 1 exactly as unpruned.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, ClassVar

import numpy as np
import torch

from ...cost import EncoderShape
from ...errors import InputError
from ..reduction import KeepRegions, tower_select
from .base import Family, ImageCost, matmul_weights, register_family
from .runtime import FamilyRuntime, ImageInputs, PrefixInputs

# Tokens a full-resolution image may spend: 16384 (12.8 MP for Qwen2-VL's 28-px tokens), i.e.
# native resolution for any photo or video frame.
FULL_RESOLUTION_TOKENS = 16384


class Qwen2VLRuntime(FamilyRuntime):
    """A loaded Qwen2-VL / Qwen2.5-VL: preprocessing (fused kernel or the processor), M-RoPE
    prefix, tower (whole, or the kept merge units of a `tower` reduction)."""

    family: Qwen2VLFamily

    def preprocess(self, images: list[Any]) -> list[ImageInputs]:
        try:
            pixel_values, grid_thw = self.image_inputs(images)
        except (ValueError, OSError, TypeError) as e:  # e.g. an extreme aspect ratio
            raise InputError(f"the image processor rejected the input: {e}") from e
        out, start = [], 0
        for t, h, w in grid_thw.tolist():  # pixel_values rows: t*h*w patches per image, in order
            n = t * h * w
            out.append(
                ImageInputs(
                    {
                        "pixel_values": pixel_values[start : start + n],
                        "image_grid_thw": torch.tensor([[t, h, w]]),
                    },
                    [(t, h // self.family.merge, w // self.family.merge)],
                )
            )
            start += n
        return out

    @property
    def embeds_dim(self) -> int:
        """Features per visual token of the tower's output (what `encode` returns per row)."""
        return int(self.text_config.hidden_size)

    def embedded_inputs(self, image: Any) -> ImageInputs:
        t, h, w = image.grid
        m, e, what = self.family.merge, image.embeds, image.source
        if t != 1 or h % m or w % m:
            raise InputError(
                f"{what}: image_grid_thw {list(image.grid)} is not an image grid of this model "
                f"(t = 1; h and w multiples of {m})"
            )
        tokens = h * w // m**2
        if (
            not isinstance(e, torch.Tensor)
            or e.ndim != 2
            or tuple(e.shape)
            != (
                tokens,
                self.embeds_dim,
            )
        ):
            got = list(e.shape) if isinstance(e, torch.Tensor) else type(e).__name__
            raise InputError(
                f"{what}: image_embeds is {got}; this model takes a tensor of shape "
                f"[{tokens}, {self.embeds_dim}] for image_grid_thw {list(image.grid)} (visual "
                "tokens x features)"
            )
        if not e.is_floating_point():
            raise InputError(
                f"{what}: image_embeds has dtype {e.dtype}; expected a floating type (this "
                f"model computes in {self.model.dtype})"
            )
        ip = self.family.processor.image_processor
        rows = torch.zeros(0, 3 * ip.temporal_patch_size * ip.patch_size**2, device=self.device)
        return ImageInputs(
            {"pixel_values": rows, "image_grid_thw": torch.tensor([[t, h, w]])},
            [(t, h // m, w // m)],
        )

    def collate(self, images: list[ImageInputs]) -> dict[str, Any]:
        return {
            "pixel_values": torch.cat([im.tensors["pixel_values"] for im in images]),
            "image_grid_thw": torch.cat([im.tensors["image_grid_thw"] for im in images]),
        }

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
        pos, _ = self.model.model.get_rope_index(
            ids[None], mm_token_type_ids=types[None], image_grid_thw=grid_thw
        )
        grids = [g for im in images for g in im.blocks]
        starts = ((types[1:] - types[:-1]) == 1).nonzero().squeeze(1) + 1
        if bool(types[0]):
            starts = torch.cat([starts.new_zeros(1), starts])
        spans = [
            (int(s), int(s) + g[0] * g[1] * g[2])
            for s, g in zip(starts.tolist(), grids, strict=False)
        ]
        return PrefixInputs(ids, pos[:, 0], spans, grids, vision_inputs, list(images))

    def expand_placeholders(self, text: str, grid_thw: torch.Tensor) -> str:
        """Repeat each image placeholder once per merged visual token, as the processor does."""
        tok = self.family.processor.image_token
        parts = text.split(tok)
        if len(parts) - 1 != len(grid_thw):
            raise ValueError(f"{len(parts) - 1} image placeholders for {len(grid_thw)} images")
        counts = [int(g.prod()) // self.family.merge**2 for g in grid_thw]
        return parts[0] + "".join(tok * n + rest for n, rest in zip(counts, parts[1:], strict=True))

    def image_inputs(self, images: list[Any]) -> tuple[torch.Tensor, torch.Tensor]:
        """(pixel_values [N, 3*T*ps*ps] on the device, image_grid_thw [n_images, 3]) of PIL images.

        The fused cascade.kernels op (through `ops`, the backend's `kernels` choice) when it
        reproduces the processor; the image processor itself otherwise (another resize backend, a
        non-RGB image). Either way the result equals the processor's."""
        ip = self.family.processor.image_processor
        if not (self.family.kernel_preprocessing and all(im.mode == "RGB" for im in images)):
            lo, hi = self.family.pixel_budget
            enc = ip(
                images=images, return_tensors="pt", size={"shortest_edge": lo, "longest_edge": hi}
            )
            return enc["pixel_values"].to(self.device), enc["image_grid_thw"]
        from torchvision.transforms.v2 import functional as tvF
        from transformers.image_utils import pil_torch_interpolation_mapping

        patches, grids = [], []
        for im in images:
            chw = torch.from_numpy(np.array(im)).permute(2, 0, 1)
            h, w = self.family.resized(chw.shape[2], chw.shape[1])
            # Resized on the CPU as the processor resizes; only uint8 pixels go to the device.
            chw = tvF.resize(
                chw,
                [h, w],
                interpolation=pil_torch_interpolation_mapping[ip.resample],
                antialias=True,
            )
            p, grid = self.ops.patchify_normalize(
                chw.to(self.device).permute(1, 2, 0),
                ip.image_mean,
                ip.image_std,
                ip.patch_size,
                ip.temporal_patch_size,
                ip.merge_size,
                ip.rescale_factor,
            )
            patches.append(p)
            grids.append(grid)
        return torch.cat(patches), torch.tensor(grids, dtype=torch.long)

    def encode(
        self, vision_inputs: dict[str, Any], keep: list[torch.Tensor] | None = None
    ) -> list[torch.Tensor]:
        vi = vision_inputs
        if keep is not None:
            out, sizes = self.encode_kept(vi, keep)
            return list(out.pooler_output.split(sizes))
        out = self.model.model.get_image_features(
            vi["pixel_values"], vi["image_grid_thw"].to(self.device)
        )
        feats = out.pooler_output if hasattr(out, "pooler_output") else out
        return list(feats)

    # -- the `tower` reduction: merge units dropped before the vision blocks --------------------
    # Each merge unit (merge x merge patches, one LLM token) is `merge**2` consecutive rows of
    # pixel_values (the processor lays patches out unit by unit, units row-major), and the merger
    # merges consecutive groups of `merge**2` rows. Dropping units is therefore slicing rows: the
    # tower is called with the kept rows and, through transformers' precomputed-input kwargs
    # (`transformers.vision_utils`), the kept rows of every per-patch tensor it would compute from
    # the full grid (rotary position ids; Qwen3-VL's interpolated position-embedding taps),
    # attention segments of the kept lengths (`cu_seqlens`, one per frame) and, for Qwen2.5-VL,
    # the window order and window boundaries restricted to the kept units. Every kept patch thus
    # gets exactly the positions it has in the full image. Keeping every unit computes what the
    # unreduced call computes (tested bit for bit).

    def unit_pixels(self, vision_inputs: dict[str, Any]) -> list[torch.Tensor]:
        pv, m2 = vision_inputs["pixel_values"], self.family.merge**2
        out, start = [], 0
        for t, h, w in vision_inputs["image_grid_thw"].tolist():
            n = t * h * w
            out.append(pv[start : start + n].reshape(n // m2, -1))
            start += n
        return out

    def tower_keep(
        self,
        vision_inputs: dict[str, Any],
        keep_ratio: float,
        regions: tuple[KeepRegions | None, ...] | None = None,
    ) -> list[torch.Tensor]:
        grids = vision_inputs["image_grid_thw"].tolist()
        if regions is not None and len(regions) != len(grids):
            raise InputError(f"keep_regions has {len(regions)} entries for {len(grids)} images")
        m = self.family.merge
        return [
            tower_select(units, (t, h // m, w // m), keep_ratio, None if regions is None else r)
            for units, (t, h, w), r in zip(
                self.unit_pixels(vision_inputs), grids, regions or (None,) * len(grids), strict=True
            )
        ]

    def _frame_lengths(self, grid: tuple[int, int, int], keep: torch.Tensor) -> list[int]:
        """Kept patches in each frame of one image (kept merge units x merge**2)."""
        t, h, w = grid
        per_frame = h * w // self.family.merge**2
        return (torch.bincount(keep // per_frame, minlength=t) * self.family.merge**2).tolist()

    def _window_lengths(
        self, grid: torch.Tensor, keep: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """Qwen2.5-VL windows of images `grid` [n, 3] restricted to the kept units `keep`
        (global unit indices, ascending): (window_index over the kept units, cu_window_seqlens)."""
        from transformers.vision_utils import get_vision_window_index

        v, m2 = self.family.config.vision_config, self.family.merge**2
        window_index, cu = get_vision_window_index(
            grid, self.family.merge, v.window_size, v.patch_size
        )
        window_index, cu = window_index.to(keep.device), cu.to(keep.device)
        mask = torch.zeros(window_index.numel(), dtype=torch.bool, device=keep.device)
        mask[keep] = True
        rank = torch.cumsum(mask, 0) - 1  # unit index -> its index among the kept units
        kept_in_order = mask[window_index]
        window_of = torch.bucketize(
            torch.arange(window_index.numel(), device=keep.device) * m2, cu[1:], right=True
        )
        counts = torch.bincount(window_of[kept_in_order], minlength=cu.numel() - 1) * m2
        cu_kept = torch.nn.functional.pad(counts.cumsum(0), (1, 0)).to(torch.int32)
        return rank[window_index[kept_in_order]], torch.unique_consecutive(cu_kept)

    def _tower_inputs(
        self, grid: torch.Tensor, rows: torch.Tensor, keep: list[torch.Tensor], units: torch.Tensor
    ) -> dict[str, Any]:
        """The tower's precomputed per-patch inputs restricted to the kept patch `rows`."""
        from transformers.vision_utils import get_vision_position_ids

        lengths = [
            n for g, k in zip(grid.tolist(), keep, strict=False) for n in self._frame_lengths(g, k)
        ]
        cu = torch.nn.functional.pad(torch.tensor(lengths, device=rows.device).cumsum(0), (1, 0))
        kw = {
            "position_ids": get_vision_position_ids(grid, self.family.merge)[rows],
            "cu_seqlens": cu.to(torch.int32),
        }
        if self.family.name == "qwen2_5_vl":
            kw["window_index"], kw["cu_window_seqlens"] = self._window_lengths(grid, units)
        return kw

    def encode_kept(
        self, vision_inputs: dict[str, Any], keep: list[torch.Tensor]
    ) -> tuple[Any, list[int]]:
        """The tower's output (transformers' own) on the kept merge units of each image, and the
        kept token count per image."""
        try:
            import transformers.vision_utils  # noqa: F401  (precomputed tower inputs, transformers 5)
        except ImportError as e:
            raise InputError(
                "the 'tower' reduction needs transformers >= 5 (transformers."
                "vision_utils' precomputed vision inputs)"
            ) from e
        visual, m2 = self.model.model.visual, self.family.merge**2
        grid = vision_inputs["image_grid_thw"].to(self.device)
        offsets = torch.nn.functional.pad((grid.prod(-1) // m2).cumsum(0), (1, 0))[:-1].tolist()
        units = torch.cat([k.to(self.device) + o for k, o in zip(keep, offsets, strict=False)])
        rows = (units[:, None] * m2 + torch.arange(m2, device=self.device)).reshape(-1)
        kw = self._tower_inputs(grid, rows, keep, units)
        pixels = vision_inputs["pixel_values"][rows].type(visual.dtype)
        return visual(pixels, grid_thw=grid, **kw), [int(k.numel()) for k in keep]

    def tower_cost(self, image: ImageInputs, keep: list[torch.Tensor]) -> ImageCost:
        grid = image.tensors["image_grid_thw"]
        k, m2 = keep[0].cpu(), self.family.merge**2
        frames = self._frame_lengths(tuple(grid[0].tolist()), k)
        v = self.family.config.vision_config
        pairs = float(sum(n * n for n in frames))
        if self.family.name != "qwen2_5_vl":
            pairs *= v.depth
        else:
            _, cu = self._window_lengths(grid.cpu(), k)
            windows = float(((cu[1:] - cu[:-1]).double() ** 2).sum())
            full = len(v.fullatt_block_indexes)
            pairs = full * pairs + (v.depth - full) * windows
        return ImageCost(int(k.numel()), int(k.numel()) * m2, pairs)


@register_family
class Qwen2VLFamily(Family):
    model_types: ClassVar[tuple[str, ...]] = ("qwen2_vl", "qwen2_5_vl")
    limit_names = ("min_pixels", "max_pixels")
    position_rows = 3
    runtime = Qwen2VLRuntime
    tower_reduction = True  # the tower can encode a subset of merge units

    @staticmethod
    def text_model_of(model: Any) -> torch.nn.Module:
        return model.model.language_model

    # -- limits and costs -----------------------------------------------------------------------
    @property
    def merge(self) -> int:
        return int(self.config.vision_config.spatial_merge_size)

    @property
    def patch(self) -> int:
        return int(self.config.vision_config.patch_size)

    def _apply_limits(self) -> None:
        ip = self.processor.image_processor
        size = ip.size
        # the image processor's size settings: a dict or an object (untyped either way)
        get: Callable[[str], Any] = (
            size.get if isinstance(size, dict) else lambda k: getattr(size, k, None)
        )
        lo = getattr(ip, "min_pixels", None) or get("shortest_edge")
        hi = getattr(ip, "max_pixels", None) or get("longest_edge")
        if self.limits.resolution == "full":
            hi = max(hi, (self.patch * self.merge) ** 2 * FULL_RESOLUTION_TOKENS)
        lo, hi = int(self.limits.min_pixels or lo), int(self.limits.max_pixels or hi)
        if not 0 < lo <= hi:
            raise InputError(f"need 0 < min_pixels <= max_pixels, got {lo} and {hi}")
        self.pixel_budget = (lo, hi)

    def resized(self, width: int, height: int) -> tuple[int, int]:
        """(height, width) the processor resizes a width x height image to."""
        from transformers.models.qwen2_vl.image_processing_qwen2_vl import smart_resize

        lo, hi = self.pixel_budget
        try:
            return smart_resize(
                height, width, factor=self.patch * self.merge, min_pixels=lo, max_pixels=hi
            )
        except ValueError as e:  # an extreme aspect ratio
            raise InputError(f"the image processor rejects a {width}x{height} image: {e}") from e

    def native_size(self, width: int, height: int) -> tuple[int, int]:
        f = self.patch * self.merge  # the processor rounds each side to a multiple of this
        w, h = -(-int(width) // f) * f, -(-int(height) // f) * f
        return (w, h) if self.resized(w, h) == (h, w) else (int(width), int(height))

    def image_cost(self, width: int, height: int) -> ImageCost:
        h, w = self.resized(width, height)
        gh, gw = h // self.patch, w // self.patch
        patches = gh * gw  # one temporal patch: a still image is its own frame pair
        return ImageCost(patches // self.merge**2, patches, self.attention_pairs(gh, gw))

    def attention_pairs(self, gh: int, gw: int) -> float:
        """Tower (query, key) pairs for one gh x gw patch grid, summed over blocks."""
        v = self.config.vision_config
        n = gh * gw
        if self.name != "qwen2_5_vl":
            return float(v.depth * n * n)
        # Qwen2.5-VL: full attention in fullatt_block_indexes, windows of `window_size` pixels
        # (whole merged tokens, edge windows cut short) in the other blocks.
        side = v.window_size // self.merge // self.patch
        mh, mw = gh // self.merge, gw // self.merge
        windows = sum(
            (min(side, mh - i) * min(side, mw - j) * self.merge**2) ** 2
            for i in range(0, mh, side)
            for j in range(0, mw, side)
        )
        full = len(v.fullatt_block_indexes)
        return float(full * n * n + (v.depth - full) * windows)

    def _vision_shape(self, model: Any) -> EncoderShape:
        tower = model.model.visual
        return EncoderShape(
            layers=len(tower.blocks),
            hidden=tower.blocks[0].attn.proj.in_features,
            attention_width=tower.blocks[0].attn.proj.in_features,
            linear_params=matmul_weights(tower.patch_embed, tower.blocks),
            merger_params=matmul_weights(*self._mergers(tower)),
        )

    def _mergers(self, tower: Any) -> list[torch.nn.Module]:
        return [tower.merger]

    # -- preprocessing -------------------------------------------------------------------------
    def preprocessing_key(self) -> tuple:
        ip = self.processor.image_processor
        return (
            self.name,
            *self.pixel_budget,
            ip.patch_size,
            ip.merge_size,
            ip.temporal_patch_size,
            tuple(ip.image_mean),
            tuple(ip.image_std),
        )

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
