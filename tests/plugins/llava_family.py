"""A model family from outside the package, in one file: LLaVA-1.5 (a CLIP ViT tower, a two-layer
MLP projector, a Llama decoder with plain 1-D RoPE).

Three parts, as every family: the weightless `Family` (what an image costs, the tower's shape),
its `FamilyRuntime` (preprocessing, the prefix, the tower) and a tiny-checkpoint recipe. An image
is resized and centre-cropped to the tower's square input, so every image costs the same:
(side / patch)^2 tokens (the CLS token's feature is dropped, `vision_feature_select_strategy:
default`). One image is one visual block; a pruned prefix is renumbered 0..L'-1, as pre-LLM
pruning feeds a 1-D RoPE decoder (`keep_ratio: 1.0` is the unmodified model).
"""

from __future__ import annotations

from typing import Any

import torch

from cascade.cost import EncoderShape, encoder_flops
from cascade.errors import InputError
from cascade.vlm.families import (
    Family,
    FamilyRuntime,
    ImageCost,
    ImageInputs,
    PrefixInputs,
    matmul_weights,
    register_family,
)
from cascade.vlm.tiny import register_tiny_recipe


class LlavaRuntime(FamilyRuntime):
    """A loaded LLaVA: the image processor's pixels, the processor's placeholder expansion, the
    model's own `get_image_features`."""

    family: LlavaFamily

    def preprocess(self, images: list[Any]) -> list[ImageInputs]:
        try:
            pixels = self.family.processor.image_processor(images=images, return_tensors="pt")[
                "pixel_values"
            ]
        except (ValueError, OSError, TypeError) as e:
            raise InputError(f"the image processor rejected the input: {e}") from e
        side = self.family.grid_side
        return [
            ImageInputs({"pixel_values": pixels[i : i + 1]}, [(1, side, side)])
            for i in range(len(images))
        ]

    def collate(self, images: list[ImageInputs]) -> dict[str, Any]:
        return {
            "pixel_values": torch.cat([im.tensors["pixel_values"] for im in images]).to(self.device)
        }

    def build_prefix(self, prefix_text: str, images: list[ImageInputs]) -> PrefixInputs:
        processor = self.family.processor
        parts = prefix_text.split(processor.image_token)
        if len(parts) - 1 != len(images):
            raise InputError(f"{len(parts) - 1} image placeholders for {len(images)} images")
        pixels = {"pixel_values": [im.tensors["pixel_values"][0] for im in images]}
        text = parts[0] + "".join(
            processor.replace_image_token(pixels, i) + rest for i, rest in enumerate(parts[1:])
        )
        ids = self.tokenizer(text, return_tensors="pt")["input_ids"][0].to(self.device)
        is_img = (ids == self.image_token_id).int()
        edges = torch.diff(is_img, prepend=is_img.new_zeros(1), append=is_img.new_zeros(1))
        spans = list(
            zip(
                (edges == 1).nonzero().squeeze(1).tolist(),
                (edges == -1).nonzero().squeeze(1).tolist(),
                strict=False,
            )
        )
        grids = [g for im in images for g in im.blocks]
        positions = torch.arange(ids.numel(), device=self.device).unsqueeze(0)
        return PrefixInputs(ids, positions, spans, grids, self.collate(images), list(images))

    def encode(self, vision_inputs: dict[str, Any]) -> list[torch.Tensor]:
        cfg = self.family.config
        out = self.model.model.get_image_features(
            vision_inputs["pixel_values"],
            vision_feature_layer=cfg.vision_feature_layer,
            vision_feature_select_strategy=cfg.vision_feature_select_strategy,
        )
        return list(out.pooler_output)

    def reduced_positions(
        self, positions: torch.Tensor, keep: torch.Tensor
    ) -> tuple[torch.Tensor, int]:
        n = int(keep.sum())
        return torch.arange(n, device=positions.device).unsqueeze(0), n


@register_family
class LlavaFamily(Family):
    """LLaVA-1.5 checkpoints (`model_type: llava`)."""

    model_types = ("llava",)
    runtime = LlavaRuntime

    @staticmethod
    def text_model_of(model: Any) -> torch.nn.Module:
        return model.model.language_model

    @property
    def grid_side(self) -> int:
        """Patches per side of the tower's square input."""
        v = self.config.vision_config
        return v.image_size // v.patch_size

    def _apply_limits(self) -> None:
        pass  # a fixed input size: nothing to limit

    def image_cost(self, width: int, height: int) -> ImageCost:
        # Every image becomes the same crop; the tower sees its patches and the CLS token.
        n = self.grid_side**2 + 1
        layers = self.config.vision_config.num_hidden_layers
        return ImageCost(self.grid_side**2, n, float(layers * n * n))

    def vision_flops(self, costs: list[ImageCost]) -> float:
        """The blocks run on every patch and the CLS token; the patch embedding and the
        projector on the patches only."""
        v = self.config.vision_config
        embed = 3 * v.patch_size**2 * v.hidden_size  # the patchifying convolution's weights
        return sum(
            encoder_flops(self.shapes.vision, c.patches, c.attention_pairs, c.tokens)
            + 2.0 * embed * c.tokens
            for c in costs
        )

    def _vision_shape(self, model: Any) -> EncoderShape:
        tower = model.model.vision_tower
        width = int(self.config.vision_config.hidden_size)
        return EncoderShape(
            layers=len(tower.encoder.layers),
            hidden=width,
            attention_width=width,
            linear_params=matmul_weights(tower.encoder.layers),
            merger_params=matmul_weights(model.model.multi_modal_projector),
        )

    def preprocessing_key(self) -> tuple:
        ip = self.processor.image_processor
        return ("llava", str(ip.size), str(ip.crop_size), tuple(ip.image_mean), tuple(ip.image_std))


# LLaVA-1.5's conversation layout ("USER: <image>\nquestion ASSISTANT: answer</s>").
LLAVA_CHAT_TEMPLATE = (
    "{% for message in messages %}"
    "{% if message['role'] == 'system' %}{{ message['content'][0]['text'] + ' ' }}"
    "{% elif message['role'] == 'user' %}{{ 'USER: ' }}"
    "{% for c in message['content'] %}{% if c['type'] == 'image' %}{{ '<image>\\n' }}"
    "{% else %}{{ c['text'] }}{% endif %}{% endfor %}{{ ' ' }}"
    "{% else %}{{ 'ASSISTANT: ' + message['content'][0]['text'] + '</s>' }}{% endif %}"
    "{% endfor %}{% if add_generation_prompt %}{{ 'ASSISTANT:' }}{% endif %}"
)


@register_tiny_recipe("llava")
def tiny_llava(model_type: str, s: dict[str, Any], tokenizer_for) -> tuple[Any, Any]:
    """A tiny LLaVA-1.5: CLIP tower on `tile`-px crops of `patch`-px patches, Llama decoder."""
    from transformers import CLIPImageProcessor, LlavaConfig, LlavaProcessor

    tok = tokenizer_for(["<|endoftext|>", "</s>", "<image>"], "</s>", LLAVA_CHAT_TEMPLATE)
    ids = {t: tok.convert_tokens_to_ids(t) for t in ("<|endoftext|>", "</s>", "<image>")}
    text = dict(
        model_type="llama",
        vocab_size=len(tok),
        hidden_size=s["hidden"],
        intermediate_size=s["inter"],
        num_hidden_layers=s["layers"],
        num_attention_heads=s["heads"],
        num_key_value_heads=s["kv_heads"],
        max_position_embeddings=4096,
        bos_token_id=ids["<|endoftext|>"],
        eos_token_id=ids["</s>"],
        pad_token_id=ids["<|endoftext|>"],
        tie_word_embeddings=False,
    )
    vision = dict(
        model_type="clip_vision_model",
        hidden_size=s["v_embed"],
        intermediate_size=s["v_inter"],
        num_hidden_layers=s["v_depth"],
        num_attention_heads=s["v_heads"],
        image_size=s["tile"],
        patch_size=s["patch"],
    )
    config = LlavaConfig(
        vision_config=vision,
        text_config=text,
        image_token_id=ids["<image>"],
        vision_feature_select_strategy="default",
        vision_feature_layer=-1,
        image_seq_length=(s["tile"] // s["patch"]) ** 2,
        tie_word_embeddings=False,
    )
    image_processor = CLIPImageProcessor(
        size={"shortest_edge": s["tile"]}, crop_size={"height": s["tile"], "width": s["tile"]}
    )
    return config, LlavaProcessor(
        image_processor=image_processor,
        tokenizer=tok,
        patch_size=s["patch"],
        vision_feature_select_strategy="default",
        num_additional_image_tokens=1,
        chat_template=LLAVA_CHAT_TEMPLATE,
    )
