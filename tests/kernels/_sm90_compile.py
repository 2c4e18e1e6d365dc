"""Compile every Triton kernel for sm_90 (H100/H200) on a machine without a GPU.

The CPU interpreter runs kernels through numpy and forgives type and shape errors the compiler
rejects; this runs the real front end down to ptxas. Run in a fresh process without
TRITON_INTERPRET: test_compile.py does that.
"""

import os
import sys

os.environ.pop("TRITON_INTERPRET", None)
import triton
from triton.backends.compiler import GPUTarget
from triton.compiler import ASTSource

from cascade.kernels.kv_quant import triton as kv
from cascade.kernels.preprocess import triton as pre
from cascade.kernels.prune import triton as pr
from cascade.kernels.rmsnorm import triton as rms
from cascade.kernels.topk import triton as tk


def sig(fn, types, consts):
    s = {}
    for name in fn.arg_names:
        s[name] = "constexpr" if name in consts else types.get(name, "i32")
    return s


jobs = [
    (
        pre._patchify_normalize,
        dict(pix_ptr="*u8", mean_ptr="*fp32", std_ptr="*fp32", out_ptr="*fp32"),
        dict(PS=14, T=2, M=2, C=3, BLOCK_W=512),
    ),
    (
        pr._column_partials,
        dict(x_ptr="*bf16", p_ptr="*fp32"),
        dict(ROWS=256, BLOCK_N=16, BLOCK_D=128),
    ),
    (pr._column_finish, dict(p_ptr="*fp32", s_ptr="*fp32"), dict(BLOCK_R=16, BLOCK_D=128)),
    (
        pr._keep_scores,
        dict(x_ptr="*bf16", s_ptr="*fp32", out_ptr="*fp32"),
        dict(DOMINANT=True, EPS=1e-8, BLOCK_N=16, BLOCK_D=128),
    ),
    (
        pr._keep_scores,
        dict(x_ptr="*fp16", s_ptr="*fp32", out_ptr="*fp32"),
        dict(DOMINANT=False, EPS=1e-8, BLOCK_N=16, BLOCK_D=128),
    ),
    (pr._gather_rows, dict(x_ptr="*bf16", idx_ptr="*i64", out_ptr="*bf16"), dict(BLOCK_D=128)),
    (
        rms._rms_norm,
        dict(x_ptr="*bf16", w_ptr="*fp32", y_ptr="*fp32", eps="fp32"),
        dict(BLOCK_D=4096),
    ),
    (
        rms._rms_norm,
        dict(x_ptr="*fp16", w_ptr="*fp16", y_ptr="*fp16", eps="fp32"),
        dict(BLOCK_D=128),
    ),
    (
        kv._values_and_key_amax,
        dict(
            k_ptrs="*i64",
            k0="*bf16",
            v_ptrs="*i64",
            v0="*bf16",
            vq_ptr="*i8",
            vs_ptr="*fp32",
            kmax_ptr="*fp32",
        ),
        dict(BLOCK_S=32, BLOCK_D=128),
    ),
    (
        kv._keys,
        dict(k_ptrs="*i64", k0="*fp16", kq_ptr="*i8", ks_ptr="*fp32", kmax_ptr="*fp32"),
        dict(BLOCK_S=32, BLOCK_D=128),
    ),
    (
        kv._dequant,
        dict(
            kq_ptr="*i8", vq_ptr="*i8", ks_ptr="*fp32", vs_ptr="*fp32", k_out="*bf16", v_out="*bf16"
        ),
        dict(BLOCK_S=32, BLOCK_D=128),
    ),
    (
        tk._similarity_block_topk,
        dict(q_ptr="*bf16", k_ptr="*bf16", cs_ptr="*fp32", ci_ptr="*i64"),
        dict(NORMALIZE=True, EPS=1e-12, BLOCK_Q=16, BLOCK_N=128, BLOCK_D=64),
    ),
    (
        tk._similarity_block_topk,
        dict(q_ptr="*fp32", k_ptr="*fp32", cs_ptr="*fp32", ci_ptr="*i64"),
        dict(NORMALIZE=False, EPS=1e-12, BLOCK_Q=16, BLOCK_N=32, BLOCK_D=64),
    ),
]
bad = 0
for fn, types, consts in jobs:
    try:
        triton.compile(
            ASTSource(fn, sig(fn, types, consts), consts), target=GPUTarget("cuda", 90, 32)
        )
        print("ok  ", fn.__name__, consts)
    except Exception as e:
        bad += 1
        print("FAIL", fn.__name__, consts, type(e).__name__, str(e)[:1500])
sys.exit(bad)
