"""`cascade serve --kv-dtype/--kv-press/--kv-keep`: what they set on every in-process VLM."""

import argparse

import pytest

from cascade.errors import CascadeError
from cascade.serve.config import ServeConfig, add_flags, from_args


def _config(*argv: str) -> ServeConfig:
    parser = argparse.ArgumentParser()
    add_flags(parser)
    return from_args(parser.parse_args(list(argv)))


def test_kv_flags_become_the_models_kv_block():
    c = _config("--kv-press", "snapkv", "--kv-keep", "0.2", "--kv-dtype", "int4")
    assert c.model_options() == {"kv": {"dtype": "int4", "press": "snapkv", "keep": 0.2}}
    assert _config().model_options() == {}
    assert _config("--max-num-seqs", "4", "--kv-keep", "0.5").model_options() == {
        "max_num_seqs": 4,
        "kv": {"keep": 0.5},
    }


@pytest.mark.parametrize("argv", [("--kv-keep", "0"), ("--kv-keep", "1.5"), ("--kv-dtype", "int3")])
def test_bad_kv_flags_are_refused(argv):
    with pytest.raises((CascadeError, SystemExit)):
        _config(*argv)


def test_a_kv_block_reaches_the_model_declaration():
    from cascade.vlm.options import ModelSpec

    spec = ModelSpec.model_validate(
        {"id": "m", **_config("--kv-press", "snapkv_visual", "--kv-keep", "0.2").model_options()}
    )
    assert spec.kv.press == "snapkv_visual" and spec.kv.keep == 0.2
    with pytest.raises(ValueError, match="kv_position_independent"):
        ModelSpec.model_validate(
            {"id": "m", "kv": {"press": "snapkv", "keep": 0.5}, "kv_position_independent": True}
        )
