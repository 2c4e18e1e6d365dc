"""vlm-cascade: coarse-to-fine orchestration that sends a VLM only the pixels a question needs.

from cascade import Pipeline
result = Pipeline.load("route_demo").run(image="photo.jpg")
result.outputs, result.trace
"""

from .api import QA, DocQA, MultiImageQA, Session, VideoQA
from .artifacts import Answer, Box, Detection, Evidence, Frame, Image, LayoutRegion, OcrLine, Route
from .errors import CascadeError, ConnectError, InputError, RegistryError, SpecError, StageError
from .pipeline import Pipeline
from .runner import PipelineResult
from .stage import Router, Stage, StageParams, stage
from .trace import Trace

__version__ = "0.1.0"

__all__ = [
    "QA",
    "DocQA",
    "MultiImageQA",
    "Session",
    "VideoQA",
    "Answer",
    "Box",
    "CascadeError",
    "ConnectError",
    "Detection",
    "Evidence",
    "Frame",
    "Image",
    "InputError",
    "LayoutRegion",
    "OcrLine",
    "Pipeline",
    "PipelineResult",
    "RegistryError",
    "Route",
    "Router",
    "SpecError",
    "Stage",
    "StageError",
    "StageParams",
    "Trace",
    "stage",
]
