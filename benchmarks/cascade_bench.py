"""Cascade vs full_res vs thumbnail_only on the built-in evaluation set (same as `cascade bench`).

    python benchmarks/cascade_bench.py [--size bench|test] [--limit N] [--out benchmarks/results]

(Not `benchmarks/cascade.py`: a script of that name would shadow the `cascade` package for every
script run from this folder.)

Writes benchmarks/results/cascade_<cpu|gpu>.json and .png: visual tokens, prefill FLOPs, seconds,
TTFT, evidence recall (real OCR on the pixels each answer used), router decisions vs the oracle and
tool-answer accuracy, per pipeline. The VLM and CLIP have random weights (no model hub here).
"""
import sys

from cascade.cli import main

if __name__ == "__main__":
    sys.exit(main(["bench", *sys.argv[1:]]))
