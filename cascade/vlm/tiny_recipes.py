"""The recipes of the tiny random-weight checkpoints (`cascade.vlm.tiny.build_tiny_vlm`), one per
family: a config with `shape`'s sizes and a processor whose tokenizer `tokenizer_for(special
tokens, eos token, chat template)` trains (a byte-level BPE with the family's special tokens).

A recipe registers for the model types it builds (`@register_tiny_recipe`); a family added from
outside registers its own next to it.
"""

from __future__ import annotations

from typing import Any

from .tiny import register_tiny_recipe

# Qwen2-VL's own chat template (images as <|vision_start|><|image_pad|><|vision_end|> parts, a
# default system prompt), trimmed of tool calling, which the tiny models never need.
QWEN_CHAT_TEMPLATE = (
    "{% set image_count = namespace(value=0) %}{% set video_count = namespace(value=0) %}"
    "{% for message in messages %}"
    "{% if loop.first and message['role'] != 'system' %}"
    "<|im_start|>system\nYou are a helpful assistant.<|im_end|>\n{% endif %}"
    "<|im_start|>{{ message['role'] }}\n"
    "{% if message['content'] is string %}{{ message['content'] }}<|im_end|>\n"
    "{% else %}{% for content in message['content'] %}"
    "{% if content['type'] == 'image' or 'image' in content or 'image_url' in content %}"
    "{% set image_count.value = image_count.value + 1 %}"
    "{% if add_vision_id %}Picture {{ image_count.value }}: {% endif %}"
    "<|vision_start|><|image_pad|><|vision_end|>"
    "{% elif content['type'] == 'video' or 'video' in content %}"
    "{% set video_count.value = video_count.value + 1 %}"
    "{% if add_vision_id %}Video {{ video_count.value }}: {% endif %}"
    "<|vision_start|><|video_pad|><|vision_end|>"
    "{% elif 'text' in content %}{{ content['text'] }}{% endif %}"
    "{% endfor %}<|im_end|>\n{% endif %}{% endfor %}"
    "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
)
QWEN_SPECIAL_TOKENS = [
    "<|endoftext|>",
    "<|im_start|>",
    "<|im_end|>",
    "<|vision_start|>",
    "<|vision_end|>",
    "<|image_pad|>",
    "<|video_pad|>",
]


def qwen_text_config(s: dict, tok, **extra: Any) -> dict:
    """The decoder part of a tiny Qwen-family config (`s`: the tiny shape, `tok`: its tokenizer)."""
    ids = {t: tok.convert_tokens_to_ids(t) for t in QWEN_SPECIAL_TOKENS}
    return dict(
        vocab_size=len(tok),
        hidden_size=s["hidden"],
        intermediate_size=s["inter"],
        num_hidden_layers=s["layers"],
        num_attention_heads=s["heads"],
        num_key_value_heads=s["kv_heads"],
        max_position_embeddings=32768,
        bos_token_id=ids["<|endoftext|>"],
        eos_token_id=ids["<|im_end|>"],
        pad_token_id=ids["<|endoftext|>"],
        **extra,
    )


def qwen_token_ids(tok) -> dict:
    """The image/video token ids every Qwen-family config names."""
    ids = {t: tok.convert_tokens_to_ids(t) for t in QWEN_SPECIAL_TOKENS}
    return dict(
        image_token_id=ids["<|image_pad|>"],
        video_token_id=ids["<|video_pad|>"],
        vision_start_token_id=ids["<|vision_start|>"],
        vision_end_token_id=ids["<|vision_end|>"],
        tie_word_embeddings=False,
    )


@register_tiny_recipe("qwen2_vl", "qwen2_5_vl")
def qwen2_vl(model_type: str, s: dict[str, Any], tokenizer_for) -> tuple[Any, Any]:
    """Qwen2-VL and Qwen2.5-VL: ViT + 2x2 merger, M-RoPE decoder."""
    from transformers import (
        Qwen2_5_VLConfig,
        Qwen2_5_VLProcessor,
        Qwen2VLConfig,
        Qwen2VLImageProcessor,
        Qwen2VLProcessor,
        Qwen2VLVideoProcessor,
    )

    tok = tokenizer_for(QWEN_SPECIAL_TOKENS, "<|im_end|>", QWEN_CHAT_TEMPLATE)
    text = qwen_text_config(
        s,
        tok,
        rope_parameters={
            "rope_type": "default",
            "rope_theta": 1_000_000.0,
            "mrope_section": s["mrope"],
        },
    )
    if model_type == "qwen2_vl":
        vision = dict(
            depth=s["v_depth"],
            embed_dim=s["v_embed"],
            hidden_size=s["hidden"],
            num_heads=s["v_heads"],
            mlp_ratio=s["v_inter"] // s["v_embed"],
        )
        config = Qwen2VLConfig(text_config=text, vision_config=vision, **qwen_token_ids(tok))
    else:
        depth = s["v_depth"]
        vision = dict(
            depth=depth,
            hidden_size=s["v_embed"],
            out_hidden_size=s["hidden"],
            num_heads=s["v_heads"],
            intermediate_size=s["v_inter"],
            window_size=112,
            fullatt_block_indexes=[i for i in range(depth) if i % 4 == 3] or [depth - 1],
        )
        config = Qwen2_5_VLConfig(text_config=text, vision_config=vision, **qwen_token_ids(tok))
    lo, hi = 28 * 28 * s["min_tokens"], 28 * 28 * s["max_tokens"]
    image_processor = Qwen2VLImageProcessor(min_pixels=lo, max_pixels=hi)
    # The processor insists on a video processor; videos reach the runtime as frames (images).
    video_processor = Qwen2VLVideoProcessor(min_pixels=lo, max_pixels=hi)
    processor_cls = Qwen2VLProcessor if model_type == "qwen2_vl" else Qwen2_5_VLProcessor
    return config, processor_cls(
        image_processor=image_processor,
        tokenizer=tok,
        video_processor=video_processor,
        chat_template=QWEN_CHAT_TEMPLATE,
    )


@register_tiny_recipe("qwen3_vl")
def qwen3_vl(model_type: str, s: dict[str, Any], tokenizer_for) -> tuple[Any, Any]:
    """Qwen3-VL: 16-px patches, learned position grid, DeepStack from evenly spaced blocks."""
    from transformers import (
        Qwen2VLImageProcessor,
        Qwen3VLConfig,
        Qwen3VLProcessor,
        Qwen3VLVideoProcessor,
    )

    tok = tokenizer_for(QWEN_SPECIAL_TOKENS, "<|im_end|>", QWEN_CHAT_TEMPLATE)
    head_dim = s["hidden"] // s["heads"]
    text = qwen_text_config(
        s,
        tok,
        head_dim=head_dim,
        rope_parameters={
            "rope_type": "default",
            "rope_theta": 5_000_000.0,
            "mrope_section": s["mrope"],
        },
    )
    depth = s["v_depth"]
    vision = dict(
        depth=depth,
        hidden_size=s["v_embed"],
        intermediate_size=s["v_inter"],
        num_heads=s["v_heads"],
        out_hidden_size=s["hidden"],
        patch_size=16,
        num_position_embeddings=s["v_pos"],
        # DeepStack from evenly spaced blocks, at most one per decoder layer.
        deepstack_visual_indexes=list(range(depth))[:: max(1, depth // 3)][: s["layers"]],
    )
    config = Qwen3VLConfig(text_config=text, vision_config=vision, **qwen_token_ids(tok))
    lo, hi = 32 * 32 * s["min_tokens"], 32 * 32 * s["max_tokens"]
    image_processor = Qwen2VLImageProcessor(
        min_pixels=lo, max_pixels=hi, patch_size=16, image_mean=[0.5] * 3, image_std=[0.5] * 3
    )
    video_processor = Qwen3VLVideoProcessor()  # required; videos reach us as frames
    return config, Qwen3VLProcessor(
        image_processor=image_processor,
        tokenizer=tok,
        video_processor=video_processor,
        chat_template=QWEN_CHAT_TEMPLATE,
    )


# Idefics3 / SmolVLM: `<image>` placeholders inside `<fake_token_around_image>`, one `<row_i_col_j>`
# tag per tile of a split image and `<global-img>` before the downscaled whole image (the processor
# looks up all 36 row/col tags), `<end_of_utterance>` ends every turn.
IDEFICS3_SPECIAL_TOKENS = [
    "<|endoftext|>",
    "<|im_start|>",
    "<end_of_utterance>",
    "<image>",
    "<fake_token_around_image>",
    "<global-img>",
] + [f"<row_{i}_col_{j}>" for i in range(1, 7) for j in range(1, 7)]

# SmolVLM-Instruct's own chat template ("User:<image>question<end_of_utterance>\nAssistant:").
IDEFICS3_CHAT_TEMPLATE = (
    "<|im_start|>{% for message in messages %}{{message['role'] | capitalize}}"
    "{% if message['content'][0]['type'] == 'image' %}{{':'}}{% else %}{{': '}}{% endif %}"
    "{% for line in message['content'] %}{% if line['type'] == 'text' %}{{line['text']}}"
    "{% elif line['type'] == 'image' %}{{ '<image>' }}{% endif %}{% endfor %}"
    "<end_of_utterance>\n{% endfor %}{% if add_generation_prompt %}{{ 'Assistant:' }}{% endif %}"
)


@register_tiny_recipe("idefics3")
def idefics3(model_type: str, s: dict[str, Any], tokenizer_for) -> tuple[Any, Any]:
    """Idefics3: SigLIP-style tiles + pixel shuffle, Llama decoder (SmolVLM's processor needs
    `num2words`; its model is this one)."""
    from transformers import Idefics3Config, Idefics3ImageProcessor, Idefics3Processor

    tok = tokenizer_for(IDEFICS3_SPECIAL_TOKENS, "<end_of_utterance>", IDEFICS3_CHAT_TEMPLATE)
    ids = {t: tok.convert_tokens_to_ids(t) for t in IDEFICS3_SPECIAL_TOKENS}
    text = dict(
        model_type="llama",
        vocab_size=len(tok),
        hidden_size=s["hidden"],
        intermediate_size=s["inter"],
        num_hidden_layers=s["layers"],
        num_attention_heads=s["heads"],
        num_key_value_heads=s["kv_heads"],
        max_position_embeddings=16384,
        rms_norm_eps=1e-5,
        rope_parameters={"rope_type": "default", "rope_theta": 100_000.0},
        bos_token_id=ids["<|im_start|>"],
        eos_token_id=ids["<end_of_utterance>"],
        pad_token_id=ids["<|endoftext|>"],
        tie_word_embeddings=False,
    )
    vision = dict(
        hidden_size=s["v_embed"],
        intermediate_size=s["v_inter"],
        num_hidden_layers=s["v_depth"],
        num_attention_heads=s["v_heads"],
        image_size=s["tile"],
        patch_size=s["patch"],
    )
    config = Idefics3Config(
        text_config=text,
        vision_config=vision,
        scale_factor=s["scale"],
        image_token_id=ids["<image>"],
        pad_token_id=ids["<|endoftext|>"],
        tie_word_embeddings=False,
    )
    image_processor = Idefics3ImageProcessor(
        size={"longest_edge": s["longest_edge"]}, max_image_size={"longest_edge": s["tile"]}
    )
    seq_len = (s["tile"] // s["patch"] // s["scale"]) ** 2
    return config, Idefics3Processor(
        image_processor=image_processor,
        tokenizer=tok,
        image_seq_len=seq_len,
        chat_template=IDEFICS3_CHAT_TEMPLATE,
    )
