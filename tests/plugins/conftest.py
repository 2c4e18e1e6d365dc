"""Plugins registered from outside the package (modules beside these tests), each for the tests
that use it: registered on entry, unregistered on exit, so the rest of the suite sees only the
built-ins."""

from __future__ import annotations

import importlib
import sys

import numpy as np
import pytest

from cascade import plugins
from cascade.artifacts import Image

REGISTRIES = (
    plugins.stages,
    plugins.families,
    plugins.backends,
    plugins.reductions,
    plugins.tiny_recipes,
)


def _registered(module: str):
    """Import (or re-import) `module`, which registers its plugins; afterwards remove exactly
    what it added."""
    before = [set(r.names()) for r in REGISTRIES]
    mod = (
        importlib.reload(sys.modules[module])
        if module in sys.modules
        else importlib.import_module(module)
    )
    added = [set(r.names()) - b for r, b in zip(REGISTRIES, before, strict=True)]
    assert any(added), f"{module} registered nothing"
    yield mod
    for registry, names in zip(REGISTRIES, added, strict=True):
        for name in names:
            registry.unregister(name)


@pytest.fixture
def stride():
    yield from _registered("tests.plugins.stride_reduction")


@pytest.fixture
def recorded():
    yield from _registered("tests.plugins.recorded_backend")


@pytest.fixture
def llava():
    yield from _registered("tests.plugins.llava_family")


@pytest.fixture(scope="session")
def tiny_qwen(tmp_path_factory):
    from cascade.vlm import build_tiny_vlm

    return build_tiny_vlm(tmp_path_factory.mktemp("tiny"), family="qwen2_vl", size="test")


@pytest.fixture
def make_image():
    def make(seed: int, h: int = 90, w: int = 120) -> Image:
        rng = np.random.default_rng(seed)
        return Image((rng.random((h, w, 3)) * 255).astype(np.uint8), source=f"img{seed}")

    return make
