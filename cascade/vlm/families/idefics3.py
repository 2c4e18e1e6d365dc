"""Idefics3 and SmolVLM: SigLIP-style tower on fixed-size tiles + pixel-shuffle connector,
Llama-style decoder with ordinary 1-D RoPE positions.

The image processor resizes an image (longest edge to `size["longest_edge"]`), splits it into
rows x cols square tiles of `max_image_size` plus one downscaled global image (a small image is
just the global one), and the processor writes, per image::

    <fake_token_around_image><row_1_col_1><image>*S ...
    <fake_token_around_image><row_r_col_c><image>*S\\n
    \\n<fake_token_around_image><global-img><image>*S<fake_token_around_image>

with S = image_seq_len = (tile / patch / scale_factor)^2 tokens per tile. Each tile is one visual
*block* with a square (1, sqrt(S), sqrt(S)) grid (the connector's pixel shuffle keeps row-major
order), so every reduction method works tile by tile: `pool` averages within a tile, `divprune` &
co. keep round(S * keep_ratio) tokens of each tile.

Positions are plain 1-D, so a pruned prefix is exactly the prompt the model would see with fewer
`<image>` placeholders: dropped visual tokens are removed with their placeholders and the kept
sequence is renumbered 0..L'-1 (`reduced_positions`), the way LLaVA-style pre-LLM pruning
(VisionZip, DivPrune) feeds a 1-D RoPE decoder. keep_ratio 1.0 is the unmodified model. FastV,
which acts inside the decoder, keeps original positions (as in the FastV paper).

Placeholder expansion is the processor's own `replace_image_token` (both processors implement it),
so the text the runtime tokenizes is byte for byte what `processor(text, images)` tokenizes.

Limits: `longest_edge`, the side every image is resized to (up or down) before tiling; there is
no pixel budget. The processor's configured edge is the model's native resolution, so
`resolution: full` keeps it.
"""

from __future__ import annotations

from typing import Any

import torch
import torch.nn.functional as F

from ...cost import EncoderShape
from ...errors import InputError
from .base import Family, ImageCost, matmul_weights, register_family
from .runtime import FamilyRuntime, ImageInputs, PrefixInputs


def _edge(size: Any) -> Any:
    return (
        size.get("longest_edge") if isinstance(size, dict) else getattr(size, "longest_edge", size)
    )


class Idefics3Runtime(FamilyRuntime):
    """A loaded Idefics3 / SmolVLM: tiles as visual blocks, 1-D positions renumbered after
    pruning."""

    family: Idefics3Family

    # -- inputs ---------------------------------------------------------------------------------
    def preprocess(self, images: list[Any]) -> list[ImageInputs]:
        if not images:
            return []
        ip = self.family.processor.image_processor
        try:  # one call for all images, as the processor makes it for one prompt
            enc = ip(
                images=[list(images)],
                return_tensors="pt",
                return_row_col_info=True,
                size=self.family.size,
            )
        except (ValueError, OSError, TypeError) as e:
            raise InputError(f"the image processor rejected the input: {e}") from e
        pixels, mask = enc["pixel_values"], enc.get("pixel_attention_mask")
        side = self.family.tile_side
        out, start = [], 0
        for rows, cols in zip(enc["rows"][0], enc["cols"][0], strict=True):
            n = rows * cols + 1 if rows or cols else 1  # tiles + the global image
            tensors = {"pixel_values": pixels[:, start : start + n]}
            if mask is not None:
                tensors["pixel_attention_mask"] = mask[:, start : start + n]
            out.append(ImageInputs(tensors, [(1, side, side)] * n, {"rows": rows, "cols": cols}))
            start += n
        return out

    def collate(self, images: list[ImageInputs]) -> dict[str, Any]:
        """Tiles of all images side by side in one sample ([1, tiles, 3, H, W]), zero-padded to the
        largest tile as the image processor pads (tiles are normally all the same size)."""
        h = max(im.tensors["pixel_values"].shape[-2] for im in images)
        w = max(im.tensors["pixel_values"].shape[-1] for im in images)
        pv, pm = [], []
        for im in images:
            x = im.tensors["pixel_values"]
            m = im.tensors.get("pixel_attention_mask")
            if m is None:
                m = torch.ones(*x.shape[:2], *x.shape[-2:], dtype=torch.long)
            pad = (0, w - x.shape[-1], 0, h - x.shape[-2])
            pv.append(F.pad(x, pad))
            pm.append(F.pad(m, pad))
        return {
            "pixel_values": torch.cat(pv, dim=1).to(self.device),
            "pixel_attention_mask": torch.cat(pm, dim=1).to(self.device),
        }

    def build_prefix(self, prefix_text: str, images: list[ImageInputs]) -> PrefixInputs:
        tok = self.family.processor.image_token
        parts = prefix_text.split(tok)
        if len(parts) - 1 != len(images):
            raise InputError(f"{len(parts) - 1} image placeholders for {len(images)} images")
        rows = {
            "rows": [[im.meta["rows"] for im in images]],
            "cols": [[im.meta["cols"] for im in images]],
        }
        text = parts[0] + "".join(
            self.family.processor.replace_image_token(rows, image_idx=i) + rest
            for i, rest in enumerate(parts[1:])
        )
        # Tokenized as the processor tokenizes its expanded text (tokenizer defaults).
        ids = self.tokenizer(text, return_tensors="pt")["input_ids"][0].to(self.device)
        is_img = (ids == self.image_token_id).int()
        edges = torch.diff(is_img, prepend=is_img.new_zeros(1), append=is_img.new_zeros(1))
        starts, ends = (edges == 1).nonzero().squeeze(1), (edges == -1).nonzero().squeeze(1)
        spans = list(zip(starts.tolist(), ends.tolist(), strict=True))
        grids = [g for im in images for g in im.blocks]
        if len(spans) != len(grids) or any(
            e - s != t * h * w for (s, e), (t, h, w) in zip(spans, grids, strict=False)
        ):
            raise InputError(
                f"the processor wrote {len(spans)} runs of {tok} for {len(grids)} image "
                "tiles; its image_seq_len does not match the model's vision config"
            )
        positions = torch.arange(ids.numel(), device=self.device).unsqueeze(0)
        return PrefixInputs(ids, positions, spans, grids, self.collate(images), list(images))

    def encode(
        self, vision_inputs: dict[str, Any], keep: list[torch.Tensor] | None = None
    ) -> list[torch.Tensor]:
        # `keep` is never given: Idefics3 has no tower reduction (its tower_keep raises)
        out = self.model.model.get_image_features(
            vision_inputs["pixel_values"], vision_inputs["pixel_attention_mask"]
        )
        feats = out.pooler_output if hasattr(out, "pooler_output") else out
        feats = (
            torch.cat(list(feats))
            if isinstance(feats, (list, tuple))
            else feats.reshape(-1, feats.shape[-1])
        )
        return list(feats.split(self.family.tile_side**2))

    def reduced_positions(
        self, positions: torch.Tensor, keep: torch.Tensor
    ) -> tuple[torch.Tensor, int]:
        """1-D RoPE: the kept sequence is renumbered as if the dropped placeholders were never
        written (module docstring)."""
        n = int(keep.sum())
        return torch.arange(n, device=positions.device).unsqueeze(0), n


@register_family
class Idefics3Family(Family):
    model_types = ("idefics3", "smolvlm")
    limit_names = ("longest_edge",)
    position_rows = 1
    runtime = Idefics3Runtime

    @staticmethod
    def text_model_of(model: Any) -> torch.nn.Module:
        return model.model.text_model

    @property
    def tile_side(self) -> int:
        """Tokens per side of one tile's square grid: sqrt(image_seq_len)."""
        v = self.config.vision_config
        return v.image_size // v.patch_size // self.config.scale_factor

    # -- limits and costs -----------------------------------------------------------------------
    def _apply_limits(self) -> None:
        edge = self.limits.longest_edge or _edge(self.processor.image_processor.size)
        self.size = {"longest_edge": int(edge)}

    def image_cost(self, width: int, height: int) -> ImageCost:
        tiles, _, _ = self.processor.image_processor.get_number_of_image_patches(
            height, width, {"size": self.size}
        )
        tiles = max(tiles, 1)  # an image that needs no split is its global image alone
        v = self.config.vision_config
        patches = (v.image_size // v.patch_size) ** 2  # SigLIP attends within each tile
        pairs = float(tiles * v.num_hidden_layers * patches * patches)
        return ImageCost(tiles * self.tile_side**2, tiles * patches, pairs)

    def _vision_shape(self, model: Any) -> EncoderShape:
        tower = model.model.vision_model
        width = int(self.config.vision_config.hidden_size)
        return EncoderShape(
            layers=len(tower.encoder.layers),
            hidden=width,
            attention_width=width,
            linear_params=matmul_weights(tower.embeddings.patch_embedding, tower.encoder.layers),
            merger_params=matmul_weights(model.model.connector),
        )

    def preprocessing_key(self) -> tuple:
        ip = self.processor.image_processor
        return (
            "idefics3",
            self.size["longest_edge"],
            _edge(ip.max_image_size),
            bool(ip.do_image_splitting),
            int(self.processor.image_seq_len),
            str(ip.resample),
            tuple(ip.image_mean),
            tuple(ip.image_std),
        )
