"""Cascade vs full_res vs thumbnail_only on the built-in evaluation set (same as `cascade bench`).

    python benchmarks/cascade.py [--size bench|test] [--limit N] [--out benchmarks/results]

Writes benchmarks/results/cascade_<cpu|gpu>.json and .png: visual tokens, prefill FLOPs, seconds,
TTFT, evidence recall (real OCR on the pixels each answer used), router decisions vs the oracle and
tool-answer accuracy, per pipeline. The VLM and CLIP have random weights (no model hub here).
"""
import sys
from pathlib import Path

# This script shares the package's name: drop its own folder from the path so `cascade` imports
# the package, not this file.
_HERE = Path(__file__).resolve().parent
sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != _HERE]

from cascade.cli import main  # noqa: E402

if __name__ == "__main__":
    sys.exit(main(["bench", *sys.argv[1:]]))
