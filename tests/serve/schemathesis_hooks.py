"""Schemathesis hooks for the contract test (test_contract.py), loaded through SCHEMATHESIS_HOOKS.

- Media URLs (`format: uri` in the schema) that decode: small PNGs and a short MP4 as data URLs,
  mixed with whatever else a URI may be, so that schema-valid requests reach the pipelines and
  not only the URL checks.
- A check that sharpens `positive_data_acceptance`: the chat endpoint may refuse a schema-valid
  request (400/413) only for what a JSON schema cannot say (the media do not decode, the
  conversation has no question, the pipeline cannot honour a sampling value, a size limit);
  never as malformed. A malformed-type refusal of a schema-valid body means the published
  schema and the parser disagree.
"""

from __future__ import annotations

import base64
import io
import tempfile
from pathlib import Path

import numpy as np
import schemathesis
from hypothesis import strategies as st

# The codes that say "this body does not match the schema": a schema-valid body never gets one.
MALFORMED = {
    "invalid_json",
    "invalid_request",
    "unknown_parameter",
    "invalid_text",
    "unsupported_media_type",
}


def _data_url(data: bytes, mime: str) -> str:
    return f"data:{mime};base64,{base64.b64encode(data).decode()}"


def _png(w: int, h: int, seed: int) -> str:
    from PIL import Image

    pixels = np.random.default_rng(seed).integers(0, 255, (h, w, 3), dtype=np.uint8)
    buf = io.BytesIO()
    Image.fromarray(pixels).save(buf, format="PNG")
    return _data_url(buf.getvalue(), "image/png")


def _mp4() -> str:
    from cascade.eval.video import make_sign_video

    with tempfile.TemporaryDirectory() as d:
        path = Path(d) / "v.mp4"
        make_sign_video(
            path,
            width=160,
            height=120,
            frames_per_scene=2,
            sign_frames=range(2, 4),
            sign_font_size=12,
        )
        return _data_url(path.read_bytes(), "video/mp4")


_DECODABLE = [_png(24, 16, 0), _png(40, 40, 1), _png(8, 64, 2), _mp4()]
schemathesis.openapi.format(
    "uri",
    st.one_of(
        st.sampled_from(_DECODABLE),
        st.sampled_from(_DECODABLE),
        st.sampled_from(
            [
                "file:///etc/passwd",
                "http://127.0.0.1:1/x.png",
                "data:image/png;base64,AAAA",
                "data:,plain",
            ]
        ),
        st.text(min_size=1, max_size=40),
    ),
)


@schemathesis.check
def schema_valid_requests_are_refused_only_for_content(ctx, response, case):
    meta = case.meta
    if (
        meta is None
        or not meta.generation.mode.is_positive
        or response.status_code not in (400, 413)
    ):
        return None
    if case.operation.path != "/v1/chat/completions":
        return None
    code = response.json()["error"]["code"]
    if code in MALFORMED:
        raise AssertionError(
            f"a request valid by the published schema was refused as malformed "
            f"({response.status_code} {code}): {response.json()['error']['message']}"
        )
    return None
