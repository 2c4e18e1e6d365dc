"""vLLM's media parameters for one request: `mm_processor_kwargs` as stage params of the served
pipeline, for that request's run only (`cascade.stage.run_params`), and the server's
`--limit-mm-per-prompt`.

| key | stage type | param | what it does |
|---|---|---|---|
| `fps` | `video_frames` | `fps` (and `mode: fps`) | frames sampled per second of video |
| `max_frames` | `video_frames` | `max_frames` | most frames kept (thinned evenly) |
| `min_pixels` | `vlm_answer` | `min_pixels` | each image the VLM sees scaled up to at least this |
| `max_pixels` | `vlm_answer` | `max_pixels` | ... and down to at most this |
| `video_pruning_rate` | `vlm_answer` | `video_pruning_rate` | drops repeating tokens (EVS) |
| `route_policy` | `path_route` | `policy` | cost / cascade / full: the whole media or the cascade |
| `max_visual_tokens` | `path_route` | `max_visual_tokens` | whole media over this is cascaded |

A key is set on every stage of its type in the pipeline; a key the pipeline has no stage for
(`fps` to a document pipeline) or a value the stage's params refuse is a 400 naming
`mm_processor_kwargs.<key>` (an unknown key is refused by the request's schema, with a
did-you-mean). Never a silent no-op.
"""

from __future__ import annotations

from typing import Any

from pydantic import ValidationError

from .errors import APIError

__all__ = ["MM_KEYS", "stage_params_of", "check_limits"]

MM_KEYS: dict[str, tuple[str, str]] = {  # key -> (stage type, param)
    "fps": ("video_frames", "fps"),
    "max_frames": ("video_frames", "max_frames"),
    "min_pixels": ("vlm_answer", "min_pixels"),
    "max_pixels": ("vlm_answer", "max_pixels"),
    "video_pruning_rate": ("vlm_answer", "video_pruning_rate"),
    "route_policy": ("path_route", "policy"),
    "max_visual_tokens": ("path_route", "max_visual_tokens"),
}
_LACKS = {  # stage type -> what a pipeline without one does not do
    "video_frames": "samples no video frames",
    "vlm_answer": "sends no image to a VLM",
    "path_route": "has no path route (doc_qa, multi_image_qa and video_qa have one)",
}
_FIELD = "mm_processor_kwargs"


def _bad(key: str, why: str, code: str = "invalid_mm_processor_kwargs") -> APIError:
    param = f"{_FIELD}.{key}"
    return APIError(400, f"{param}: {why}", code=code, param=param)


def stage_params_of(kwargs: dict[str, Any], stages: dict[str, Any], model: str) -> dict[Any, Any]:
    """{stage: its params for this request} from a request's `mm_processor_kwargs` (the keys
    set, already typed by `schema.MMProcessorKwargs`; raises `APIError(400)` naming the key).
    `stages`: the pipeline's stages by name."""
    wanted: dict[Any, dict[str, Any]] = {}
    for key, value in kwargs.items():
        stage_type, param = MM_KEYS[key]
        targets = [st for st in stages.values() if st.type_name == stage_type]
        if not targets:
            raise _bad(
                key,
                f"'{model}' has no {stage_type} stage for {key!r} to set (its "
                f"pipeline {_LACKS[stage_type]}); leave it out",
                "unsupported_parameter",
            )
        for st in targets:
            wanted.setdefault(st, {})[param] = value
            if key == "fps":  # a rate means sampling by rate, whatever the stage's mode
                wanted[st]["mode"] = "fps"
    lo, hi = kwargs.get("min_pixels"), kwargs.get("max_pixels")
    if lo is not None and hi is not None and lo > hi:
        raise _bad("min_pixels", f"min_pixels ({lo}) is over max_pixels ({hi})")
    out = {}
    for st, changes in wanted.items():  # outside a run, `st.params` are the stage's own
        try:
            out[st] = type(st.params).model_validate({**st.params.model_dump(), **changes})
        except ValidationError as e:
            err = e.errors()[0]
            # the field refused, or (a check across fields) this request's first key here
            mine = [k for k in kwargs if MM_KEYS[k][0] == st.type_name]
            field = err["loc"][0] if err["loc"] else None
            key = next((k for k in mine if MM_KEYS[k][1] == field), mine[0])
            raise _bad(
                key, f"{err['msg'].replace('Input should be', 'expected')}, got {kwargs[key]!r:.40}"
            ) from None
    return out


def check_limits(kinds: list[str], params: list[str], limits: dict[str, int]) -> None:
    """400 for the first part past `--limit-mm-per-prompt` (its modality's count, in order)."""
    seen: dict[str, int] = {}
    for kind, param in zip(kinds, params, strict=False):
        seen[kind] = seen.get(kind, 0) + 1
        limit = limits.get(kind)
        if limit is not None and seen[kind] > limit:
            raise APIError(
                400,
                f"{param}: more than {limit} {kind} part(s) in one request, this "
                f"server's limit (--limit-mm-per-prompt {kind}={limit})",
                code="too_many_media",
                param=param,
            )
