"""One evaluation question (`EvalItem`) and the genres the questions come in."""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any, Literal

Kind = Literal["read", "doc", "count", "scene"]
MediaKind = Literal["video", "images", "document"]
SPLITS: tuple[str, ...] = ("dev", "test")

# genre -> what its questions ask. Every genre is in both splits; `cascade bench` reports each
# apart.
GENRES: dict[str, str] = {
    "video_sign": "a small sign (12-24 px text) shown ~2 s in a 10 s video, with a caption and "
    "often a second sign as distractors",
    "image_sign": "a small sign in one photo of a set of 5-8, a caption in another",
    "receipt": "key-value reading on receipts, invoices and forms (total, date, number) next to "
    "distractor amounts",
    "router": "count and scene questions the resolution router should decline (no fine look "
    "needed)",
    "heading": "a document's title, or a section heading by number or by topic, on a page of "
    "several sections",
    "table": "the cell at row key x column key of a timetable, a price list or a spec sheet",
    "code": "the name of the function or class a code screenshot defines (other identifiers in "
    "view)",
    "paragraph": "one fact inside a paragraph (a day, a time, a room, a name): the span, not the "
    "sentence",
    "ids": "an invoice / order / ticket id among phone numbers, dates, amounts and other numbers",
    "zh_sign": "signs with Chinese text in videos and image sets, asked in Chinese or English",
    "zh_receipt": "Chinese receipts (总计 / 合计 / 实付, 日期, 单号) next to distractor amounts",
    "zh_question": "questions asked in Chinese about English signs and documents",
    "colour": "'What does the red sign say?' with two signs of different colours in view",
    "time_order": "first / last / before / after a banner shown in the video; the other sign sits "
    "on the other side of the event",
    "photo_doc": "a printed page photographed inside a photo: at an angle, lower contrast, JPEG; "
    "alone or among ordinary photos",
    "long_video": "a video of several minutes (3-5 min, low fps) where the text is visible <= 2 s",
}
ROUND2_GENRES = ("video_sign", "image_sign", "receipt", "router")


@dataclass(frozen=True)
class EvalItem:
    """One question about one piece of media, with its gold answer and where the answer is.

    `answer` is the exact span a tool should answer (the identifier, the day, the cell, the id, the
    amount, the sign's text), as written in the media; for count questions the number, for scene
    questions a word the VLM is not scored on."""

    id: str
    split: str
    genre: str
    media_kind: MediaKind
    media: tuple[str, ...]  # one video path, or image paths
    question: str
    answer: str
    kind: Kind  # what the judge measures: read / doc (evidence recall), count, scene
    lang: str = "en"  # language of the question: "en" or "zh"
    target: str = (
        ""  # what the question points at: sign, title, heading, cell, fact, identifier, ...
    )
    text_size: int | None = None  # font size of the text to read, in source pixels
    frames: tuple[int, ...] = ()  # images: indices of the images that hold the answer
    times: tuple[float, ...] = ()  # video: seconds during which the answer is visible
    box: tuple[int, int, int, int] | None = None  # the answer's box (x0, y0, x1, y1), source pixels
    label: str | None = None  # count questions: the detector label counted
    distractors: tuple[str, ...] = ()  # texts in view that a careless answer would give

    def media_arg(self) -> str | list[str]:
        return self.media[0] if self.media_kind == "video" else list(self.media)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> EvalItem:
        fields: dict[str, Any] = {k: tuple(v) if isinstance(v, list) else v for k, v in d.items()}
        return cls(**fields)
