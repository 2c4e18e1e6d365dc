"""Fixtures for the VLM runtime tests: tiny random-weight models built once per test session."""

from __future__ import annotations

import os

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

import numpy as np
import pytest
import torch

from cascade.artifacts import Image


@pytest.fixture(scope="session")
def tiny_root(tmp_path_factory):
    return tmp_path_factory.mktemp("tiny_vlm")


@pytest.fixture(scope="session")
def tiny_path(tiny_root):
    from cascade.vlm import build_tiny_vlm

    return build_tiny_vlm(tiny_root, family="qwen2_vl", size="test")


@pytest.fixture(scope="session")
def tiny_path_25(tiny_root):
    from cascade.vlm import build_tiny_vlm

    return build_tiny_vlm(tiny_root, family="qwen2_5_vl", size="test")


@pytest.fixture(scope="session")
def tiny_path_idefics3(tiny_root):
    from cascade.vlm import build_tiny_vlm

    return build_tiny_vlm(tiny_root, family="idefics3", size="test")


@pytest.fixture(scope="session")
def tiny_path_qwen3(tiny_root):
    from cascade.vlm import build_tiny_vlm

    return build_tiny_vlm(tiny_root, family="qwen3_vl", size="test")


@pytest.fixture(scope="session")
def vlm_qwen3(tiny_path_qwen3):
    """A shared tiny Qwen3-VL (DeepStack) without a prefix or encoder cache."""
    from cascade.vlm import VLM

    torch.set_num_threads(1)
    return VLM.load(str(tiny_path_qwen3), device="cpu", encoder_cache_bytes=0)


@pytest.fixture(scope="session")
def vlm_idefics3(tiny_path_idefics3):
    """A shared tiny Idefics3 VLM without a prefix or encoder cache."""
    from cascade.vlm import VLM

    torch.set_num_threads(1)
    return VLM.load(str(tiny_path_idefics3), device="cpu", encoder_cache_bytes=0)


@pytest.fixture(scope="session")
def vlm(tiny_path):
    """A shared VLM without a prefix or encoder cache: every call runs cold (tests that need a
    cache make their own)."""
    from cascade.vlm import VLM

    torch.set_num_threads(1)
    return VLM.load(str(tiny_path), device="cpu", encoder_cache_bytes=0)


def random_image(seed: int = 0, h: int = 150, w: int = 200) -> Image:
    rng = np.random.default_rng(seed)
    return Image((rng.random((h, w, 3)) * 255).astype(np.uint8), source=f"random{seed}")


@pytest.fixture
def image():
    return random_image(0)


@pytest.fixture(scope="session")
def make_image():
    """random_image(seed, h, w) for tests that need several distinct images."""
    return random_image


@pytest.fixture
def one_thread():
    """Bit-for-bit claims hold where the kernels are batch-invariant: on one CPU thread here (with
    more, a matmul may split rows otherwise for another batch: ~1e-7 apart, tokens unchanged)."""
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)
