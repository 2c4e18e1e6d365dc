"""Build (or reuse) one split of the evaluation set: every genre's media written under
`<folder>/<split>[-quick]/<genre>/`, its questions in `items.json` beside them.

Answers are known because we put them there. Everything is generated offline from what installs
with the package (and a CJK font for the Chinese genres), and reused when already there: a
genre is rebuilt only when its cache is of another `FORMAT` or a media file is missing."""

from __future__ import annotations

import json
import random
from pathlib import Path

from .genres import GENERATORS, Ctx
from .items import GENRES, EvalItem
from .splits import spec_for

FORMAT = 4  # bump when a generator changes: cached genres of another format are rebuilt


def _check_genres(genres) -> tuple[str, ...]:
    if genres is None:
        return tuple(GENRES)
    unknown = [g for g in genres if g not in GENRES]
    if unknown:
        raise ValueError(
            f"unknown genre(s) {', '.join(unknown)}: expected some of {', '.join(GENRES)}"
        )
    return tuple(g for g in GENRES if g in genres)


def _cached(index: Path) -> list[EvalItem] | None:
    if not index.is_file():
        return None
    saved = json.loads(index.read_text())
    if saved.get("format") != FORMAT:
        return None
    items = [EvalItem.from_dict(d) for d in saved["items"]]
    return items if all(Path(m).exists() for it in items for m in it.media) else None


def build_genre(folder: str | Path, split: str, genre: str, quick: bool = False) -> list[EvalItem]:
    """One genre of one split, generated into `folder/<split>[-quick]/<genre>` or reused."""
    spec = spec_for(split)
    make, full, few = GENERATORS[genre]
    out = Path(folder) / f"{split}{'-quick' if quick else ''}" / genre
    index = out / "items.json"
    items = _cached(index)
    if items is not None:
        return items
    out.mkdir(parents=True, exist_ok=True)
    # each genre draws from its own stream: a genre's items do not depend on which others are built
    rng = random.Random(f"{spec.seed}/{genre}")
    items = make(Ctx(out, spec, split, genre, rng, few if quick else full))
    index.write_text(
        json.dumps(
            {"format": FORMAT, "items": [it.to_dict() for it in items]},
            indent=1,
            ensure_ascii=False,
        )
    )
    return items


def build_eval_set(
    folder: str | Path, split: str = "test", quick: bool = False, genres=None
) -> list[EvalItem]:
    """Write (or reuse) one split's media under `folder/<split>[-quick]`; return its questions,
    genre by genre. `quick` makes 1-3 units per genre; `genres` picks some genres only."""
    spec_for(split)
    return [
        it for genre in _check_genres(genres) for it in build_genre(folder, split, genre, quick)
    ]
