"""OCR: read text lines (rapidocr's bundled PP-OCR ONNX models, or PaddleOCR), or just find text.

Boxes come back in source coordinates (`image.to_source`), so text read on a tile or a crop lands
where it is in the original. `mode: detect` skips recognition and reports how much of each image
is text (area fraction covered by text boxes, line count): a cheap signal for routers.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

import numpy as np
from pydantic import Field

from cascade.artifacts import Box, Image, OcrLine
from cascade.media import VideoSource
from cascade.model_refs import ModelRef, bundled_file
from cascade.progress import progress
from cascade.shared_models import result_cache, shared_model
from cascade.stage import Serving, Stage, StageParams, stage
from cascade.trace import record

from ._inputs import as_image_list

PADDLE_HINT = (
    "the 'paddleocr' OCR backend needs the optional extra: pip install 'vlm-cascade[paddle]'"
)


def _rapidocr_engine(p: Ocr.Params):
    from rapidocr import RapidOCR

    # Everything rapidocr needs by default (PP-OCRv6 det/rec small, ONNX) ships inside its wheel;
    # model_dir points it at other local models instead of a download.
    params: dict[str, Any] = {
        "Global.log_level": "error",
        "Global.max_side_len": p.max_side,
        "Global.use_cls": p.use_angle_cls,
        "Det.limit_side_len": p.det_limit_side_len,
        "Det.limit_type": p.det_limit_type,
    }
    if p.model_dir:
        params["Global.model_root_dir"] = p.model_dir
    return RapidOCR(params=params)


def bundled_rapidocr_models(use_cls: bool) -> list[ModelRef]:
    """The detection and recognition ONNX models (and the angle classifier's, with `use_cls`)
    that ship inside the rapidocr wheel and that it uses by default."""
    import importlib.util

    spec = importlib.util.find_spec("rapidocr")
    folder = (
        Path(spec.origin).parent / "models" if spec and spec.origin else Path("rapidocr/models")
    )
    refs = []
    for task in ("det", "rec") + (("cls",) if use_cls else ()):
        found = sorted(folder.glob(f"*{task}*.onnx"))
        refs.append(
            bundled_file(
                "OCR",
                found[0] if found else folder / f"<{task} model>.onnx",
                "rapidocr",
                "model_dir",
            )
        )
    return refs


def _paddle_engine(p: Ocr.Params):
    try:
        from paddleocr import PaddleOCR
    except ImportError as e:
        raise RuntimeError(f"{PADDLE_HINT} (import failed: {e})") from e
    kwargs: dict[str, Any] = {
        "use_doc_orientation_classify": False,
        "use_doc_unwarping": False,
        "use_textline_orientation": p.use_angle_cls,
    }
    if p.model_dir:
        kwargs["text_detection_model_dir"] = f"{p.model_dir}/det"
        kwargs["text_recognition_model_dir"] = f"{p.model_dir}/rec"
    try:
        return PaddleOCR(**kwargs)
    except Exception as e:
        raise RuntimeError(
            f"PaddleOCR could not load its models ({type(e).__name__}: {e}). "
            "PaddleOCR downloads them from a model hub; offline, set the ocr "
            "param model_dir to a folder holding det/ and rec/ Paddle inference "
            "model dirs"
        ) from e


def text_density(boxes: list[Box], width: int, height: int) -> float:
    """Fraction of the image area covered by the union of `boxes` (in that image's pixels)."""
    if not boxes:
        return 0.0
    clipped = [b.clip(width, height) for b in boxes]
    # the union lies inside the boxes' bounding box: a mask of that size counts the same pixels
    # (a whole-frame mask per frame made reading an indexed video's OCR grow with its length)
    x0, y0 = min(int(b.x0) for b in clipped), min(int(b.y0) for b in clipped)
    x1, y1 = max(int(np.ceil(b.x1)) for b in clipped), max(int(np.ceil(b.y1)) for b in clipped)
    mask = np.zeros((max(0, y1 - y0), max(0, x1 - x0)), bool)
    for b in clipped:
        mask[int(b.y0) - y0 : int(np.ceil(b.y1)) - y0, int(b.x0) - x0 : int(np.ceil(b.x1)) - x0] = (
            True
        )
    return float(np.count_nonzero(mask) / (height * width))


def baseline_angle(poly: np.ndarray) -> float:
    """Degrees counter-clockwise of a text polygon's top edge (first to second corner: the
    detectors give corners clockwise from the top left); 0 for anything but a quadrilateral."""
    if len(poly) != 4:
        return 0.0
    (x0, y0), (x1, y1) = poly[0], poly[1]
    return round(float(np.degrees(np.arctan2(y0 - y1, x1 - x0))), 2) if x1 > x0 else 0.0


@stage("ocr")
class Ocr(Stage):
    """Read text lines in a list of images (or, with mode=detect, only find where text is).

    Backends: `rapidocr` (default; PP-OCR ONNX models bundled in the wheel, offline) and
    `paddleocr` (optional extra `vlm-cascade[paddle]`; needs its models, see `model_dir`).
    Results are cached by pixel content; lines carry media index and frame timestamp. With the
    pipeline's `index:` on and a `video` input, each frame's lines are saved in the video's index
    and read back by later processes.
    """

    serving = Serving(heavy=True)  # on Ray: its own deployment, the model loaded there

    class Params(StageParams):
        backend: Literal["rapidocr", "paddleocr"] = Field("rapidocr", description="OCR engine")
        mode: Literal["read", "detect"] = Field(
            "read",
            description="read = detect + recognise; detect = text boxes and density only (cheaper)",
        )
        min_confidence: float = Field(0.5, ge=0, le=1, description="drop lines scored lower")
        use_angle_cls: bool = Field(False, description="classify upside-down lines (slower)")
        det_limit_side_len: int = Field(960, gt=0, description="detector input scale (rapidocr)")
        det_limit_type: Literal["max", "min"] = Field(
            "max",
            description="max: shrink so the longest side <= det_limit_side_len (fast); "
            "min: grow so the shortest side >= it (rapidocr's default, slow)",
        )
        max_side: int = Field(2000, gt=0, description="images are shrunk to this longest side")
        model_dir: str | None = Field(
            None,
            description="local model folder (rapidocr: model root; "
            "paddleocr: folder with det/ and rec/ model dirs)",
        )
        cache_items: int = Field(4096, gt=0, description="images whose results are kept")

    params: Params  # what the base class's `params` property returns here

    @dataclass(frozen=True)
    class Outputs:
        lines: list[OcrLine]
        text: str
        density: list[float]
        line_counts: list[int]

    def setup(self) -> None:
        p = self.params
        key = (
            "ocr",
            p.backend,
            p.use_angle_cls,
            p.det_limit_side_len,
            p.det_limit_type,
            p.max_side,
            p.model_dir,
        )
        load = _rapidocr_engine if p.backend == "rapidocr" else _paddle_engine
        self.shared = shared_model(key, lambda: load(p))
        self.cache = result_cache(
            self.shared, f"results:{p.mode}:{p.min_confidence}", p.cache_items
        )
        self.config_key = f"{key}:{p.mode}:{p.min_confidence}"

    def model_refs(self) -> list[ModelRef]:
        p = self.params
        if p.model_dir:
            return [
                ModelRef("OCR", str(Path(p.model_dir).expanduser()), "path", setting="model_dir")
            ]
        # PaddleOCR fetches its own models from its own hubs: not checked here.
        return bundled_rapidocr_models(p.use_angle_cls) if p.backend == "rapidocr" else []

    def _read(self, pixels: np.ndarray) -> list[tuple[str, float, Box, float]]:
        """(text, confidence, box in these pixels, angle) per line; text is '' in detect mode."""
        p = self.params
        bgr = np.ascontiguousarray(pixels[:, :, ::-1])
        with self.shared.lock:
            if p.backend == "rapidocr":
                if p.mode == "detect":
                    res = self.shared.model(bgr, use_det=True, use_cls=False, use_rec=False)
                    texts, scores = None, res.scores
                else:
                    # rapidocr keeps use_* flags from the last call: always pass all of them
                    res = self.shared.model(
                        bgr,
                        use_det=True,
                        use_cls=p.use_angle_cls,
                        use_rec=True,
                        text_score=p.min_confidence,
                    )
                    texts, scores = res.txts, res.scores
                polys = res.boxes
            else:
                res = list(self.shared.model.predict(bgr))[0]
                texts = None if p.mode == "detect" else res["rec_texts"]
                scores, polys = res["rec_scores"], res["rec_polys"]
        out = []
        for i, poly in enumerate([] if polys is None else polys):
            poly = np.asarray(poly, np.float32).reshape(-1, 2)
            conf = float(scores[i]) if scores is not None else 1.0
            if conf < p.min_confidence:
                continue
            box = Box(
                float(poly[:, 0].min()),
                float(poly[:, 1].min()),
                float(poly[:, 0].max()),
                float(poly[:, 1].max()),
            )
            out.append(("" if texts is None else str(texts[i]), conf, box, baseline_angle(poly)))
        return out

    def run(self, images: list[Image] | Image, video: Path | VideoSource | None = None) -> Outputs:
        saved = self.video_index.results(video, "ocr", self.config_key)
        if saved is not None:
            record(saved_results_loaded=saved.seed(self.cache))
        lines, density, counts = [], [], []
        hits, found = 0, {}
        for im in progress(as_image_list(images), desc=f"{self.name}: OCR", unit="image"):
            key = im.__content_hash__()
            local = self.cache.get(key)
            if local is None:
                local = self._read(im.pixels)
                self.cache.put(key, local)
            else:
                hits += 1
            found[key] = local
            ts = getattr(im, "timestamp", None)
            # results saved before lines had an angle hold three fields: level text
            lines += [
                OcrLine(
                    text, conf, im.to_source(box), im.media_index, ts, angle[0] if angle else 0.0
                )
                for text, conf, box, *angle in local
            ]
            density.append(text_density([f[2] for f in local], im.width, im.height))
            counts.append(len(local))
        if saved is not None:
            saved.add(found, self.cache)
        record(ocr_images=len(counts) - hits, ocr_cache_hits=hits, ocr_lines=len(lines))
        text = "\n".join(line.text for line in lines if line.text)
        return self.Outputs(lines, text, density, counts)
