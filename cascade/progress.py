"""Progress bars for long work inside stages (decoding a long video, embedding many frames).

Shown on stderr, only on a terminal (so servers and CI logs stay clean) and only when there is
enough work to be worth watching; `TQDM_DISABLE=1` turns them off everywhere.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import TypeVar

T = TypeVar("T")


def progress(
    items: Iterable[T],
    *,
    total: int | None = None,
    desc: str = "",
    unit: str = "it",
    min_total: int = 16,
) -> Iterable[T] | Iterator[T]:
    """Wrap `items` in a tqdm bar when `total` (or len(items)) is at least `min_total`."""
    if total is None and hasattr(items, "__len__"):
        total = len(items)  # type: ignore[arg-type]
    if total is not None and total < min_total:
        return items
    from tqdm import tqdm

    return tqdm(items, total=total, desc=desc, unit=unit, leave=False, disable=None)
