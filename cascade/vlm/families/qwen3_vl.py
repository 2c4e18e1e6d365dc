"""Qwen3-VL: Qwen2-VL's preprocessing and M-RoPE prefix with 16-px patches, a ViT with learned
position embeddings, and DeepStack: features of a few tower blocks, each through its own merger,
are added to the decoder's hidden states at the visual tokens after its first layers.

The runtime's block/positions/prefix machinery is Qwen2-VL's (a subclass). What differs:

- `encode` returns, per visual token, its input embedding and its DeepStack features concatenated
  ([n, D * (1 + levels)]), so token reduction keeps, drops or averages a token's features together
  (pool averages every level exactly as it averages the embedding; the selection methods rank
  tokens on the whole concatenated vector). keep_ratio 1.0 is the unmodified model.
- a prefix chunk passes `visual_pos_masks` / `deepstack_visual_embeds` to the decoder; later
  chunks (question, decoded tokens) hold no visual token and pass nothing, as `model.generate`.
- FastV runs the decoder layer by layer: `Qwen3VLRuntime.after_layer` adds the DeepStack features
there, to the
  visual tokens still kept, and `query_states` applies Qwen3's per-head query norm.

All reductions (`tower` too: the kept patches take their rows of the interpolated position
embeddings), the KV prefix cache, sessions, batching and FastV apply.
"""

from __future__ import annotations

from typing import Any

import torch

from .base import register_family
from .qwen2_vl import Qwen2VLFamily, Qwen2VLRuntime


class Qwen3VLRuntime(Qwen2VLRuntime):
    """A loaded Qwen3-VL: Qwen2-VL's runtime with DeepStack features carried per visual token."""

    family: Qwen3VLFamily

    # -- tower output: embedding and DeepStack features per token ---------------------------------
    def encode(
        self, vision_inputs: dict[str, Any], keep: list[torch.Tensor] | None = None
    ) -> list[torch.Tensor]:
        vi = vision_inputs
        if keep is not None:
            out, sizes = self.encode_kept(vi, keep)
            main = out.pooler_output.split(sizes)
            levels = list(zip(*[d.split(sizes) for d in out.deepstack_features], strict=True))
        else:
            out = self.model.model.get_image_features(
                vi["pixel_values"], vi["image_grid_thw"].to(self.device)
            )
            main, levels = out.pooler_output, list(zip(*out.deepstack_features, strict=True))
        # per image: its embedding and its feature at every DeepStack level
        return [torch.cat([m, *deep], dim=-1) for m, deep in zip(main, levels, strict=True)]

    def _tower_inputs(
        self, grid: torch.Tensor, rows: torch.Tensor, keep: list[torch.Tensor], units: torch.Tensor
    ) -> dict[str, Any]:
        from transformers.vision_utils import get_vision_interpolation_indices_and_weights

        kw = super()._tower_inputs(grid, rows, keep, units)
        visual = self.model.model.visual
        idx, weights = get_vision_interpolation_indices_and_weights(
            grid,
            num_grid_per_side=visual.num_grid_per_side,
            mode=visual.interpolation_mode,
            align_corners=visual.interpolation_align_corners,
            spatial_merge_size=self.family.merge,
        )
        kw["interp_indices"], kw["interp_weights"] = idx[rows], weights[rows]
        return kw

    @property
    def embeds_dim(self) -> int:
        """The embedding and each DeepStack level's feature, per visual token."""
        return int(self.text_config.hidden_size) * (1 + self.family.levels)

    def split_features(self, feats: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor | None]:
        d = self.text_config.hidden_size
        return feats[:, :d], feats[:, d:].reshape(feats.shape[0], self.family.levels, d)

    def visual_kwargs(
        self, visual_mask: torch.Tensor, extra: torch.Tensor | None
    ) -> dict[str, Any]:
        assert extra is not None  # split_features always gives Qwen3-VL's DeepStack features
        return {
            "visual_pos_masks": visual_mask,
            "deepstack_visual_embeds": [extra[:, i] for i in range(self.family.levels)],
        }

    # -- layer-by-layer runs (FastV) ---------------------------------------------------------------
    def query_states(self, layer: torch.nn.Module, normed: torch.Tensor) -> torch.Tensor:
        attn: Any = layer.self_attn  # a transformers attention module: q_proj, q_norm, head_dim
        q = attn.q_proj(normed)
        return attn.q_norm(q.view(*q.shape[:-1], -1, attn.head_dim)).transpose(1, 2)

    def after_layer(
        self,
        index: int,
        hidden: torch.Tensor,
        visual_rows: torch.Tensor,
        extra: torch.Tensor | None,
    ) -> torch.Tensor:
        if extra is None or index >= self.family.levels or visual_rows.numel() == 0:
            return hidden
        hidden = hidden.clone()
        hidden[0, visual_rows] += extra[:, index].to(hidden.dtype)
        return hidden


@register_family
class Qwen3VLFamily(Qwen2VLFamily):
    model_types = ("qwen3_vl",)
    runtime = Qwen3VLRuntime

    @property
    def levels(self) -> int:
        """DeepStack levels: decoder layers 0..levels-1 get a visual feature added."""
        return len(self.config.vision_config.deepstack_visual_indexes)

    def _mergers(self, tower: Any) -> list[torch.nn.Module]:
        return [tower.merger, tower.deepstack_merger_list]
