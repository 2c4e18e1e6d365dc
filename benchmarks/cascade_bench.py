"""Cascade vs full_res vs thumbnail_only on one split of the built-in evaluation set (same as
`cascade bench`).

    python benchmarks/cascade_bench.py [--split dev|test] [--quick] [--genre GENRE ...]
                                       [--full-res run|estimate] [--size bench|test] [--limit N]
                                       [--out benchmarks/results]

(Not `benchmarks/cascade.py`: a script of that name would shadow the `cascade` package for every
script run from this folder.)

Writes benchmarks/results/cascade_<split>[_quick][_<genres>]_<cpu|gpu>.json and a per-genre .png:
per genre (`by_genre`) and per kind of media and pipeline (`summary`), visual tokens and their
share of full_res, prefill FLOPs, seconds, TTFT, evidence recall (real OCR on the pixels sent to
the VLM, at the size sent), router decisions vs the oracle, tool answers given / exact (the wrong
ones by id). The VLM and CLIP have random weights (no model hub here). Tune on dev; report test.
"""

import sys

from cascade.cli import main

if __name__ == "__main__":
    sys.exit(main(["bench", *sys.argv[1:]]))
