import numpy as np
import pytest
import torch
from transformers import Qwen2VLImageProcessor

from cascade.kernels.preprocess import patchify_normalize, reference

from ._kernel_helpers import DEVICE, assert_close_first_mismatch, gpu, needs_gpu, poisoned

MEAN, STD = (0.48145466, 0.4578275, 0.40821073), (0.26862954, 0.26130258, 0.27577711)


def _image(h, w, seed=0):
    return torch.from_numpy(np.random.default_rng(seed).integers(0, 256, (h, w, 3), dtype=np.uint8))


@pytest.mark.parametrize("h, w, ps, tps, ms", [(56, 84, 14, 2, 2), (24, 12, 4, 3, 3)])
def test_reference_matches_transformers(h, w, ps, tps, ms):
    img = _image(h, w)
    proc = Qwen2VLImageProcessor(
        do_resize=False,
        patch_size=ps,
        temporal_patch_size=tps,
        merge_size=ms,
        image_mean=list(MEAN),
        image_std=list(STD),
    )
    hf = proc(images=img.numpy(), return_tensors="pt")
    patches, grid = patchify_normalize(img, MEAN, STD, ps, tps, ms, impl="torch")
    assert_close_first_mismatch(patches, hf["pixel_values"], what="pixel_values")
    assert list(grid) == hf["image_grid_thw"][0].tolist()


# (28, 28): a single merge group; 56x84: several groups and a non-square grid; merge 1 and a
# temporal size of 3 change the index arithmetic; widths 30 and 24 leave masked lanes in a row's
# block; max_block_w 32 splits an 84-pixel row over three programs (the last a tail).
@pytest.mark.slow
@pytest.mark.parametrize(
    "h, w, ps, tps, ms, max_block_w",
    [
        (28, 28, 14, 2, 2, 512),
        (56, 84, 14, 2, 2, 512),
        (56, 84, 14, 2, 2, 32),
        (20, 30, 5, 3, 1, 512),
        (16, 24, 4, 1, 2, 512),
    ],
)
def test_triton_matches_reference(h, w, ps, tps, ms, max_block_w, monkeypatch):
    from cascade.kernels.preprocess import triton as kernel

    monkeypatch.setattr(kernel, "MAX_BLOCK_W", max_block_w)
    img = _image(h, w, seed=h + w).to(DEVICE)
    mean_t, std_t = reference.fused_mean_std(MEAN, STD, 1 / 255, DEVICE)
    expected = reference.patchify_normalize(img, mean_t, std_t, ps, tps, ms)
    out = poisoned(expected.shape, torch.float32)
    got = kernel.patchify_normalize(img, mean_t, std_t, ps, tps, ms, out=out)
    assert got is out
    assert_close_first_mismatch(got, expected, what="patches")


def test_triton_reads_strided_crop():
    big = _image(64, 100, seed=3).to(DEVICE)
    crop = big[4:60, 8:92]  # a tile view: strided rows, no copy
    got, grid = patchify_normalize(crop, MEAN, STD, impl="triton")
    expected, _ = patchify_normalize(crop.contiguous(), MEAN, STD, impl="torch")
    assert grid == (1, 4, 6)
    assert_close_first_mismatch(got, expected, what="crop patches")


@pytest.mark.parametrize(
    "pixels, error",
    [
        (torch.zeros(28, 28, 3), TypeError),
        (torch.zeros(28, 28, 4, dtype=torch.uint8), ValueError),
        (torch.zeros(3, 28, 28, dtype=torch.uint8), ValueError),
        (torch.zeros(28, 42, 3, dtype=torch.uint8), ValueError),
    ],
)
def test_bad_input_is_a_clear_error(pixels, error):
    with pytest.raises(error):
        patchify_normalize(pixels, MEAN, STD)


@gpu
def test_gpu_large_image():
    needs_gpu()
    img = _image(1344, 2016).cuda()
    got, _ = patchify_normalize(img, MEAN, STD, impl="triton")
    expected, _ = patchify_normalize(img, MEAN, STD, impl="torch")
    assert_close_first_mismatch(got, expected, what="patches")
