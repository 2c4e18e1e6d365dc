"""Widen instead of guessing: when the fine look found nothing for the question, look further.

The fine pass reads the few frames retrieval picked. When none of them holds text a reading
question (any text target of the `Query`) could be about (or, for a counting question, the object
it names), this stage looks
further, cheapest first, until it finds some or its budget of `max_extra_frames` is spent:

1. a text-detector pass at higher resolution (`hires_side`) on the frames already fetched, for
   text too small for the normal detector scale;
2. video: the frames `neighbours_s` before and after the best ones (a sign shown between samples);
3. the next candidates in retrieval order (`ranked`), at full resolution.

Before that, a sign question on a small set (`whole_set`: a few images, or a short video's
sampled frames) reads every candidate at full resolution: the cheap pass ranks by what it could
read, and a placard too small for it would rank nowhere.

A sign of a named size ("the small sign") is found only when a text stands out by that size
(`size.text_fit`): a caption alone, or texts all printed alike, may not be the sign meant, so the
stage looks further; if nothing stands out even then, what was read is the evidence. Its route
says what it looked at and what it found; when nothing turns up, `select_tiles` sends
the best whole frame and says so. `evidence_lines` adds to the fine lines what the cheap pass
(`coarse_lines`) read on these same frames where no fine line is: the full-resolution detector
can miss a sign the cheap pass read, and that sign must still get its crop. Tools answer from the
fine lines only (a low-resolution read is a lead for the VLM, not an answer).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from pydantic import Field

from cascade.artifacts import Box, Detection, Frame, Image, OcrLine, Route, same_time
from cascade.evidence.blocks import ByFrame, frame_size_of, named_detections, salience, text_blocks
from cascade.evidence.query import Query
from cascade.evidence.size import text_fit
from cascade.media import VideoSource
from cascade.registry import get_stage_class
from cascade.stage import Stage, StageParams, stage
from cascade.trace import record


def _place(im: Image) -> tuple[int, float | None]:
    return im.media_index, getattr(im, "timestamp", None)


def _time(im: Image) -> float:
    """The timestamp of an image of a video (a video's images are its frames)."""
    if not isinstance(im, Frame):
        raise TypeError(f"find_evidence: image {im.source!r} of a video is not a Frame")
    return im.timestamp


def with_coarse(frames: list[Image], fine: list[OcrLine], coarse: list[OcrLine]) -> list[OcrLine]:
    """`fine` plus the lines of `coarse` that lie on `frames` where no fine line overlaps them."""
    on = ByFrame(frames)
    extra = [
        c
        for c in coarse
        if c.text.strip()
        and on.of(c.media_index, c.timestamp)
        and not any(
            f.media_index == c.media_index
            and same_time(f.timestamp, c.timestamp)
            and f.box.intersects(c.box)
            for f in fine
        )
    ]
    return [*fine, *extra]


def _overlap(a: Box, b: Box) -> float:
    """Share of the smaller box that the other covers."""
    ix = max(0.0, min(a.x1, b.x1) - max(a.x0, b.x0))
    iy = max(0.0, min(a.y1, b.y1) - max(a.y0, b.y0))
    return ix * iy / max(min(a.area, b.area), 1e-9)


def add_lines(lines: list[OcrLine], new: list[OcrLine]) -> None:
    """Add to `lines` (in place) what another look at the same frames read. A new line lying
    mostly on a line already read (over half the smaller box) is the same text read again: the
    more confident read stays, never both, so a sign read by both passes is one line, not a block
    that says it twice."""
    for n in new:
        same = [
            i
            for i, o in enumerate(lines)
            if o.media_index == n.media_index
            and same_time(o.timestamp, n.timestamp)
            and _overlap(o.box, n.box) > 0.5
        ]
        if not same:
            lines.append(n)
        elif all(n.confidence > lines[i].confidence for i in same):
            lines[same[0]] = n
            for i in reversed(same[1:]):
                del lines[i]


@stage("find_evidence")
class FindEvidence(Stage):
    """Check that the fine look found evidence for the question; if not, look further."""

    class Params(StageParams):
        max_extra_frames: int = Field(
            6, ge=0, description="budget: frames fetched and read beyond the fine pass"
        )
        neighbours_s: float = Field(
            0.5,
            ge=0,
            description="video: also look this many seconds before/after the best frames (0 = no)",
        )
        hires_side: int = Field(
            1920,
            ge=0,
            description="text-detector input side for the "
            "higher-resolution pass (0 = no such pass)",
        )
        min_salience: float = Field(
            0.3, ge=0, le=1, description="a text block counts as evidence from this salience on"
        )
        min_confidence: float = Field(
            0.5, ge=0, le=1, description="OCR lines kept when reading further"
        )
        whole_set: int = Field(
            12,
            ge=0,
            description="image sets (or videos sampled to) at most "
            "this many candidates: a sign question reads every one at full "
            "resolution (a small placard the cheap pass could not read may "
            "be in any of them); 0 = only the retrieved ones",
        )

    params: Params  # what the base class's `params` property returns here

    @dataclass(frozen=True)
    class Outputs:
        frames: list[Image]
        ocr_lines: list[OcrLine]
        evidence_lines: list[OcrLine]
        detections: list[Detection]
        routes: list[Route]

    def setup(self) -> None:
        ocr = get_stage_class("ocr")
        self.ocr = ocr({"min_confidence": self.params.min_confidence}, name=f"{self.name}.ocr")
        self.hires = (
            ocr(
                {
                    "min_confidence": self.params.min_confidence,
                    "det_limit_side_len": self.params.hires_side,
                },
                name=f"{self.name}.hires",
            )
            if self.params.hires_side
            else None
        )

    def _found(
        self,
        query: Query,
        frames: list[Image],
        lines: list[OcrLine],
        detections: list[Detection],
        by_size: bool = True,
    ) -> str | None:
        """What counts as evidence here, or None when there is none. A sign of a named size
        ("the small sign") needs a text that stands out by that size (`size.text_fit`) while
        `by_size`: one caption alone, or texts all of one size, may not be the one meant."""
        if query.reads_text:
            on = ByFrame(frames)
            good = {
                b: s
                for b in text_blocks(lines)
                if (s := salience(b, frame_size_of(on, b.media_index, b.timestamp), query.language))
                >= self.params.min_salience
            }
            if not good:
                return None
            if by_size and query.size and not query.in_document:
                fit = text_fit(query, list(good), on, good)
                if not fit.contrast:
                    return None
                return f"{len(good)} text block(s); {fit.reason}"
            return f"{len(good)} text block(s), e.g. '{next(iter(good)).text}'"
        if query.label is not None and query.target == "object_count":
            named = named_detections(detections, query.label)
            return f"{len(named)} {query.label} detection(s)" if named else None
        return "nothing to widen for a question that is not about text or a counted object"

    def _whole(
        self,
        query: Query,
        frames: list[Image],
        lines: list[OcrLine],
        ranked: list[Image] | None,
        src: VideoSource | None,
    ) -> str:
        """Recall first on a small set (a few images, a short video's sampled frames): the cheap
        pass ranks by what it could read, and a placard too small for it ranks nowhere, so a
        sign question reads every candidate like the retrieved ones, at the higher-resolution
        detection when the images are large. Extends `frames` and `lines` in place; says what
        it did ('' when the set is not small)."""
        p = self.params
        rest = [im for im in ranked or () if _place(im) not in {_place(f) for f in frames}]
        if (
            not rest
            or query.target != "sign"
            or query.in_document
            or len(frames) + len(rest) > p.whole_set
        ):
            return ""
        if src is not None:  # the candidates are the cheap pass's small frames: fetch them whole
            got = src.fetch([_time(im) for im in rest])
            rest = [got[float(_time(im))] for im in rest]
        frames += rest
        hires = self._large(frames)  # the retrieved ones too: the higher-resolution look
        add_lines(lines, self._read(frames if hires else rest, hires=hires))
        what = "frame" if src is not None else "image"
        return f"every {what} of the set ({len(frames)}) read at full resolution" + (
            f", text detection at {p.hires_side} px" if hires else ""
        )

    def _large(self, images: list[Image]) -> bool:
        """Worth the higher-resolution text detector: some image over 960 px."""
        return (
            bool(self.params.hires_side)
            and max((max(f.width, f.height) for f in images), default=0) > 960
        )

    def _read(self, images: list[Image], hires: bool = False) -> list[OcrLine]:
        self.ensure_setup()
        engine = self.hires if hires else self.ocr
        assert engine is not None  # hires only when hires_side set up self.hires (_large)
        return engine(images=images).lines if images else []

    def run(
        self,
        query: Query,
        frames: list[Image],
        ocr_lines: list[OcrLine] | None = None,
        detections: list[Detection] | None = None,
        ranked: list[Image] | None = None,
        video: Path | VideoSource | None = None,
        routes: list[Route] | None = None,
        coarse_lines: list[OcrLine] | None = None,
    ) -> Outputs:
        frames, lines, dets, route = self._search(
            query, frames, ocr_lines, detections, ranked, video
        )
        evidence = with_coarse(frames, lines, list(coarse_lines or ()))
        record(coarse_lines_added=len(evidence) - len(lines))
        return self.Outputs(frames, lines, evidence, dets, [*(routes or ()), route])

    def _search(
        self,
        query: Query,
        frames: list[Image],
        ocr_lines: list[OcrLine] | None,
        detections: list[Detection] | None,
        ranked: list[Image] | None,
        video: Path | VideoSource | None,
    ) -> tuple[list[Image], list[OcrLine], list[Detection], Route]:
        p = self.params
        frames, lines, dets = list(frames), list(ocr_lines or ()), list(detections or ())
        src = video if isinstance(video, VideoSource) or video is None else VideoSource(video)
        whole = self._whole(query, frames, lines, ranked, src)
        found = self._found(query, frames, lines, dets)
        if found is not None:
            return (
                frames,
                lines,
                dets,
                Route(
                    "found",
                    f"fine pass: {whole + '; ' if whole else ''}{found} in {len(frames)} frame(s)",
                ),
            )
        steps, budget = [whole] if whole else [], p.max_extra_frames
        looked = {_place(f) for f in frames}

        def fetch(times: list[float]) -> list[Image]:
            """Video frames at these times, at full resolution."""
            assert src is not None  # called only where src is checked
            got = src.fetch(times)
            return [got[float(t)] for t in times]

        if self._large(frames) and not whole:  # a whole-set read of large images did this
            add_lines(lines, self._read(frames, hires=True))
            steps.append(f"text detection at {p.hires_side} px on {len(frames)} frame(s)")
            found = self._found(query, frames, lines, dets)
        if found is None and src is not None and p.neighbours_s > 0 and budget > 0:
            times = []
            for f in frames:
                for dt in (-p.neighbours_s, p.neighbours_s):
                    t = _time(f) + dt
                    if 0 <= t < src.info.duration and not any(
                        abs(t - s) < 0.5 / src.info.fps for _, s in looked if s is not None
                    ):
                        times.append(t)
                        looked.add((f.media_index, t))
            near = fetch(times[:budget])
            budget -= len(near)
            add_lines(lines, self._read(near))
            frames += near
            steps.append(f"{len(near)} neighbouring frame(s) (+-{p.neighbours_s:g} s)")
            found = self._found(query, frames, lines, dets)
        if found is None and budget > 0 and ranked:
            more = [im for im in ranked if _place(im) not in looked][:budget]
            if src is not None:
                more = fetch([_time(im) for im in more])
            budget -= len(more)
            hires = self._large(more)  # the same look as the fetched frames got
            add_lines(lines, self._read(more, hires=hires))
            frames += more
            steps.append(
                f"{len(more)} more candidate(s) in retrieval order"
                + (f" (text detection at {p.hires_side} px)" if hires else "")
            )
            found = self._found(query, frames, lines, dets)
        if found is None and query.size:  # nothing stands out by size: what was read still counts
            found = self._found(query, frames, lines, dets, by_size=False)
            found = found and f"{found} (none stands out as {query.size})"
        record(widened_frames=p.max_extra_frames - budget)
        looked_at = "; ".join(steps) or "nothing left to look at"
        if found is not None:
            route = Route(
                "widened",
                f"fine pass found nothing; widened (budget "
                f"{p.max_extra_frames} frames): {looked_at}; found {found}",
            )
        else:
            route = Route(
                "none",
                f"nothing found after widening (budget {p.max_extra_frames} frames): {looked_at}",
            )
        return frames, lines, dets, route
