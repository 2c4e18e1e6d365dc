"""Cascade vs full_res vs thumbnail_only on the built-in evaluation set (same as `cascade bench`).

    python benchmarks/cascade.py [--size bench|test] [--limit N] [--out benchmarks/results]

Writes benchmarks/results/cascade_<cpu|gpu>.json and .png: visual tokens, prefill FLOPs, seconds,
TTFT, evidence recall (real OCR on the pixels each answer used), router decisions vs the oracle and
tool-answer accuracy, per pipeline. The VLM and CLIP have random weights (no model hub here).
"""
import sys

from cascade.cli import main

if __name__ == "__main__":
    sys.exit(main(["bench", *sys.argv[1:]]))
