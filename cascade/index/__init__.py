"""One owner for a video's on-disk index: sampled frames, CLIP vectors and their FAISS index, OCR
lines, detections and the sentence vectors of their text per frame, each written by the one safe
writer (`files.write_atomic`).

The pipeline's `index:` setting (`IndexSpec`) turns it on for every stage at once; each stage
asks the pipeline's `VideoIndex` for its store. A later question, in this process or another,
reads the saved work instead of decoding, embedding and running the models again.
"""

from .files import read_json, write_atomic, write_json
from .frames import FrameStore
from .keyed import KeyedVectors
from .results import SavedResults
from .scores import SavedScores
from .vectors import SavedVectors
from .videoindex import IndexSpec, VideoIndex

__all__ = [
    "IndexSpec",
    "VideoIndex",
    "FrameStore",
    "SavedVectors",
    "SavedResults",
    "SavedScores",
    "KeyedVectors",
    "write_atomic",
    "write_json",
    "read_json",
]
