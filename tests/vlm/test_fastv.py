"""FastV equals a full run in which, from layer K on, the dropped tokens are attention-masked."""

import pytest
import torch

from cascade.vlm import ReductionConfig
from cascade.vlm.fastv import _call_layer, fastv_prefill


def _layer_by_layer(fam, emb, pos, masks, vis, extra, cache):
    """The decoder run one layer at a time with explicit masks, adding what the family's forward
    adds between layers (Qwen3-VL's DeepStack) to every visual token."""
    cos_sin = fam.rotary(emb, pos)
    h = emb
    for i, layer in enumerate(fam.text_model.layers):
        h = _call_layer(fam, layer, h, cos_sin, cache, masks[i][None, None])
        h = fam.after_layer(i, h, vis, extra)
    return fam.text_model.norm(h[:, -1:])


@pytest.mark.parametrize("fixture", ["vlm", "vlm_qwen3"])
def test_fastv_matches_masked_reference(request, fixture, make_image):
    b = request.getfixturevalue(fixture).backend
    fam = b.runtime
    img = make_image(5)
    prefix, suffix = b.layout.first_turn(1, None, "Where is the cat?")
    a = b.engine.assemble([img], prefix, ReductionConfig())
    sfx = b.layout.tokenize(suffix)
    with torch.inference_mode():
        emb = torch.cat([a.embeds, fam.embed(torch.tensor(sfx))])[None]
    pos = torch.cat([a.positions, fam.text_positions(a.next_pos, len(sfx))], dim=1)
    vis = (a.ids == fam.image_token_id).nonzero().squeeze(1)
    keep, k = a.unreduced // 3, 1
    with torch.inference_mode():
        got, kept = fastv_prefill(fam, emb, pos, vis, keep, k, b.engine.new_cache(), a.extra)
    assert kept.numel() == emb.shape[1] - a.unreduced + keep

    # reference: every layer sees every token, with explicit additive masks; layers >= K
    # additionally hide the dropped columns. Positions are the original ones throughout.
    L = emb.shape[1]
    causal = torch.full((L, L), float("-inf")).triu(1)
    dropped = torch.ones(L, dtype=torch.bool)
    dropped[kept] = False
    pruned = causal.clone()
    pruned[:, dropped] = float("-inf")
    pruned[dropped, dropped] = 0.0  # dropped rows attend to themselves (avoids NaN; unused)
    layers = len(fam.text_model.layers)
    with torch.inference_mode():
        ref = _layer_by_layer(
            fam,
            emb,
            pos,
            [causal if i < k else pruned for i in range(layers)],
            vis,
            a.extra,
            b.engine.new_cache(),
        )
        # The same loop without pruning is the family's own forward (DeepStack included).
        unpruned = _layer_by_layer(
            fam, emb, pos, [causal] * layers, vis, a.extra, b.engine.new_cache()
        )
        visual = (
            {}
            if a.extra is None
            else fam.visual_kwargs(
                torch.cat([a.ids == fam.image_token_id, torch.zeros(len(sfx), dtype=torch.bool)])[
                    None
                ],
                a.extra,
            )
        )
        full = fam.forward(emb, pos, b.engine.new_cache(), **visual)[:, -1:]
    torch.testing.assert_close(got, ref, rtol=1e-4, atol=1e-5)
    torch.testing.assert_close(unpruned, full, rtol=1e-4, atol=1e-5)
    # and pruning mattered: the unmasked model's last hidden state differs
    assert not torch.allclose(got, full, rtol=1e-3, atol=1e-4)


def test_fastv_generate_reports_kept_tokens(vlm, image):
    r = vlm.generate(
        [image],
        "What colour?",
        max_new_tokens=4,
        reduction=ReductionConfig("fastv", 0.5, fastv_layer=1),
    )
    assert (
        r.bill.visual_tokens == round(r.bill.unreduced_visual_tokens * 0.5)
        and r.bill.cache == "off"
    )
    assert r.bill.prefill_flops < r.bill.unreduced_prefill_flops
