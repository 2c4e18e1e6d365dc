"""FastV equals a full run in which, from layer K on, the dropped tokens are attention-masked."""
import torch

from cascade.vlm import ReductionConfig
from cascade.vlm.fastv import _call_layer, fastv_prefill


def test_fastv_matches_masked_reference(vlm, make_image):
    b = vlm.backend
    fam = b.family
    img = make_image(5)
    prefix, suffix = b.first_turn_texts(1, None, "Where is the cat?")
    ids, pos, emb, n_before, next_pos, _ = b.assemble([img], prefix, ReductionConfig())
    sfx = b.tokenize(suffix)
    with torch.inference_mode():
        emb = torch.cat([emb, fam.embed(torch.tensor(sfx))])[None]
    pos = torch.cat([pos, fam.text_positions(next_pos, len(sfx))], dim=1)
    vis = (ids == fam.image_token_id).nonzero().squeeze(1)
    keep, k = n_before // 3, 1
    with torch.inference_mode():
        got, kept = fastv_prefill(fam, emb, pos, vis, keep, k, b.new_cache())
    assert kept.numel() == emb.shape[1] - n_before + keep

    # reference: every layer sees every token, with explicit additive masks; layers >= K
    # additionally hide the dropped columns. Positions are the original ones throughout.
    L = emb.shape[1]
    causal = torch.full((L, L), float("-inf")).triu(1)
    dropped = torch.ones(L, dtype=torch.bool)
    dropped[kept] = False
    pruned = causal.clone()
    pruned[:, dropped] = float("-inf")
    pruned[dropped, dropped] = 0.0  # dropped rows attend to themselves (avoids NaN; unused)
    with torch.inference_mode():
        cos_sin = fam.rotary(emb, pos)
        h = emb
        cache = b.new_cache()
        for i, layer in enumerate(fam.text_model.layers):
            mask = (causal if i < k else pruned)[None, None]
            h = _call_layer(fam, layer, h, cos_sin, cache, mask)
        ref = fam.text_model.norm(h[:, -1:])
    torch.testing.assert_close(got, ref, rtol=1e-4, atol=1e-5)

    # and pruning mattered: the unmasked model's last hidden state differs
    with torch.inference_mode():
        full = fam.forward(emb, pos, b.new_cache())[:, -1:]
    assert not torch.allclose(got, full, rtol=1e-3, atol=1e-4)


def test_fastv_generate_reports_kept_tokens(vlm, image):
    r = vlm.generate([image], "What colour?", max_new_tokens=4,
                     reduction=ReductionConfig("fastv", 0.5, fastv_layer=1))
    assert r.visual_tokens == round(r.visual_tokens_before * 0.5) and r.cache == "off"
    assert r.prefill_flops < r.baseline_prefill_flops
