"""Before any model loads: is every model a pipeline needs here, or can it be downloaded?

    refs = pipeline_models(pipeline)        # what the pipeline declares and its stages load
    ensure_models(refs)                     # seconds; raises ModelsUnavailable, or downloads

A model is here when its local file or folder exists (the user's, or one bundled in a wheel) or
the hub cache holds its files. For the rest, one short probe per model asks the hub
(`cascade.hub.probe`: a HEAD request bounded in wall-clock time; `HF_HUB_OFFLINE` means no
probe). Anything that is neither here nor downloadable ends in one `ModelsUnavailable` naming
every such model, who needs it, and the ways out (random stand-in weights, a local copy per
model, a mirror). Downloadable models are fetched before loading, one progress bar per file.
When everything is cached but the hub cannot be reached, the process goes offline
(`HF_HUB_OFFLINE=1`) so loading never waits on the hub client's retries.

`Pipeline.run` and `Pipeline.setup` call this once per pipeline; `cascade run` and `cascade serve`
word the remedies as their own flags; `cascade doctor` reports `assess` for every pipeline.
"""

from __future__ import annotations

import dataclasses
import threading
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal, Protocol

from . import hub
from .errors import CascadeError
from .model_refs import ModelRef
from .models import Models
from .stage import Stage

__all__ = [
    "Found",
    "ModelsUnavailable",
    "pipeline_models",
    "assess",
    "ensure_models",
    "check_pipelines",
    "ways_out",
    "Front",
]

Front = Literal["python", "cli", "serve"]
State = Literal["local", "cached", "download", "missing"]
_LOCK = threading.Lock()  # one check at a time: a server's workers share the answer and the cache


class PipelineLike(Protocol):
    """What this module reads of a `cascade.pipeline.Pipeline`. A protocol, not an import: the
    pipeline calls this module, so this module sits below it (no import circle)."""

    models_checked: bool

    @property
    def name(self) -> str: ...

    @property
    def models(self) -> Models: ...

    @property
    def stages(self) -> dict[str, Stage]: ...

    @property
    def executor(self) -> Any: ...  # a `cascade.runner.StageExecutor` or None


@dataclass(frozen=True)
class Found:
    """Where one model is. state: local (a file or folder, the user's or a wheel's), cached (the
    hub cache has it), download (not here, the hub has it), missing (neither); where: the path,
    cache folder or URL; why: for missing, the reason in words."""

    ref: ModelRef
    state: State
    where: str
    why: str = ""


class ModelsUnavailable(CascadeError):
    """Models a pipeline needs are neither here nor downloadable: names each and the ways out."""

    def __init__(self, missing: list[Found], front: Front = "python"):
        self.missing, self.front = missing, front
        lines = [f"{len(missing)} model(s) are not here and cannot be downloaded:"]
        for f in missing:
            lines.append(
                f"  - {f.ref.kind} {f.ref.describe()}, for {', '.join(f.ref.users) or '-'}: {f.why}"
            )
        lines.append("Ways out:")
        lines += [f"  - {way}" for way in ways_out(missing, front)]
        super().__init__("\n".join(lines))

    def worded_for(self, front: Front) -> ModelsUnavailable:
        """The same error with the remedies in another front end's terms (flags, not kwargs)."""
        return ModelsUnavailable(self.missing, front)


def pipeline_models(pipeline: PipelineLike) -> list[ModelRef]:
    """Every model `pipeline` loads when it runs: each declared model (`models:`) and what each
    stage's `model_refs()` names, once per distinct model, with who uses it and the override
    that points it elsewhere. Stages an executor runs elsewhere (Ray replicas) load their own;
    there the declared models are only priced here, so only their config is needed."""
    remote = pipeline.executor is not None
    refs: list[ModelRef] = []
    for name, declared in pipeline.models.items():
        for ref in declared.spec.model_refs():
            if remote and ref.layout == "transformers":
                ref = dataclasses.replace(ref, layout="transformers_config")
            refs.append(
                dataclasses.replace(
                    ref, users=(f"model '{name}'",), overrides=(f"models.{name}.{ref.setting}",)
                )
            )
    for st in pipeline.stages.values():
        if remote and pipeline.executor.handles(st):
            continue
        for ref in st.model_refs():
            refs.append(
                dataclasses.replace(
                    ref,
                    users=(f"stage '{st.name}' ({st.type_name})",),
                    overrides=(f"{st.name}.{ref.setting}",),
                )
            )
    return merge(refs)


def merge(refs: Iterable[ModelRef]) -> list[ModelRef]:
    """One ref per distinct model, its users and overrides joined (first-seen order)."""
    by_key: dict[tuple, ModelRef] = {}
    for r in refs:
        seen = by_key.get(r.key)
        by_key[r.key] = (
            r
            if seen is None
            else dataclasses.replace(
                seen,
                users=tuple(dict.fromkeys(seen.users + r.users)),
                overrides=tuple(dict.fromkeys(seen.overrides + r.overrides)),
                stand_in=seen.stand_in and r.stand_in,
            )
        )
    return list(by_key.values())


def _here(ref: ModelRef) -> Found | None:
    """Found without the network: a path that exists, or a hub repo the cache holds."""
    if ref.source == "path":
        return Found(ref, "local", ref.name) if Path(ref.name).exists() else None
    snapshot = hub.cached(ref)
    return Found(ref, "cached", str(snapshot)) if snapshot is not None else None


def _probe_urls(ref: ModelRef) -> list[str]:
    """What to ask the server for: a file the loader fetches first (each alternative in turn)."""
    if ref.source == "url":
        return [ref.name]
    if ref.layout == "files":
        return [hub.file_url(ref, n) for n in ref.files[0]]
    return [
        hub.file_url(
            ref, "modules.json" if ref.layout == "sentence_transformers" else "config.json"
        )
    ]


def _ask_server(ref: ModelRef, timeout: float, down: dict[str, hub.Reach]) -> Found:
    """Is `ref` downloadable? `down` remembers hosts that did not answer: asked once."""
    host = hub.endpoint() if ref.source == "hub" else ref.name.split("/", 3)[2]
    if ref.source == "hub" and hub.is_offline():
        return Found(
            ref,
            "missing",
            hub.endpoint(),
            f"not in the hub cache ({hub.cache_dir()}) and HF_HUB_OFFLINE is set",
        )
    reach = None
    for url in _probe_urls(ref):
        if host in down:
            reach = down[host]
            break
        reach = hub.probe(url, timeout)
        if not reach.reachable:
            down[host] = reach
            break
        if reach.found:
            return Found(ref, "download", url)
    assert reach is not None
    if not reach.reachable:
        where = f"not in the hub cache ({hub.cache_dir()})" if ref.source == "hub" else "not here"
        return Found(
            ref, "missing", reach.url, f"{where} and {host} cannot be reached ({reach.detail})"
        )
    if reach.status == 429 or (reach.status or 0) >= 500:
        why = f"{host} answered HTTP {reach.status}: it is busy or failing; try again later"
    else:
        why = (
            f"{host} answered HTTP {reach.status} for it: no such model or file, or a gated / "
            "private one (log in with `hf auth login` or set HF_TOKEN)"
        )
    return Found(ref, "missing", reach.url, why)


def assess(refs: list[ModelRef], timeout: float = hub.PROBE_TIMEOUT_S) -> tuple[list[Found], bool]:
    """Where each model is, asking a server only about what is not here; and whether the hub
    is known to be unreachable (asked, when something is only in the cache, to decide whether
    loading must go offline)."""
    found: list[Found] = []
    down: dict[str, hub.Reach] = {}
    for ref in refs:
        here = _here(ref)
        if here is not None:
            found.append(here)
        elif ref.source == "path":
            why = (
                f"not installed: pip install {ref.bundled}"
                if ref.bundled
                else "no such file or folder"
            )
            found.append(Found(ref, "missing", ref.name, why))
        else:
            found.append(_ask_server(ref, timeout, down))
    hub_down = hub.endpoint() in down
    cached = [f for f in found if f.state == "cached"]
    if cached and not hub_down and not hub.is_offline():
        url = _probe_urls(cached[0].ref)[0]
        hub_down = not hub.probe(url, timeout).reachable
    return found, hub_down


def ensure_models(
    refs: list[ModelRef], front: Front = "python", timeout: float = hub.PROBE_TIMEOUT_S
) -> list[Found]:
    """Check `refs` before anything loads: raise `ModelsUnavailable` naming every model that is
    neither here nor downloadable (with the remedies worded for `front`), go offline when all
    is cached but the hub is unreachable, and download what the hub has."""
    with _LOCK:
        hub.quiet_hub_logs()
        found, hub_down = assess(refs, timeout)
        missing = [f for f in found if f.state == "missing"]
        if missing:
            raise ModelsUnavailable(missing, front)
        if hub_down and any(f.state == "cached" for f in found) and not hub.is_offline():
            hub.go_offline()
        fetch = [f.ref for f in found if f.state == "download" and f.ref.source == "hub"]
        if fetch:
            hub.download(fetch)
        return found


def check_pipelines(pipelines: Iterable[PipelineLike], front: Front = "serve") -> None:
    """`ensure_models` over several pipelines at once (a server's start): one error listing
    every missing model of all of them; each pipeline is then marked checked."""
    pipelines = list(pipelines)
    refs = (
        dataclasses.replace(r, users=tuple(f"{u} of {p.name}" for u in r.users))
        for p in pipelines
        for r in pipeline_models(p)
    )
    ensure_models(merge(refs), front)
    for p in pipelines:
        p.models_checked = True


# --- the ways out -------------------------------------------------------------------------------

_LOCAL_COPY = {
    "VLM": "<checkpoint folder>",
    "VLM config": "<checkpoint folder>",
    "CLIP": "<open_clip .safetensors/.pt file>",
    "text embedder": "<sentence-transformers folder>",
    "detector": "<model.onnx>",
    "OCR": "<folder of RapidOCR ONNX models>",
}

_STAND_IN = {
    "cli": "--offline",
    "python": "QA.offline(...) (e.g. VideoQA.offline())",
    "serve": "--tiny",
}


def ways_out(missing: list[Found], front: Front) -> list[str]:
    """What a user can do about `missing`, worded for `front` (its flags or keyword arguments)."""
    ways = []
    stand_in = [f for f in missing if f.ref.stand_in]
    if stand_in:
        covers = (
            "every model listed"
            if len(stand_in) == len(missing)
            else ", ".join(f.ref.describe() for f in stand_in) + " (not the others)"
        )
        ways.append(
            f"no model hub needed: {_STAND_IN[front]} swaps in random weights for "
            f"{covers}: a tiny random-weight Qwen2-VL for the VLM, random CLIP. Token "
            "counts, FLOPs and timings stay real; VLM answers and CLIP rankings are "
            "noise. OCR, detection and text embeddings stay the real bundled models"
        )
    ways.append("a local copy of each model: " + _local_copies([f.ref for f in missing], front))
    if any(f.ref.source == "hub" for f in missing):
        if hub.is_offline():
            ways.append(
                f"download them: unset HF_HUB_OFFLINE (and TRANSFORMERS_OFFLINE) on a "
                f"machine that reaches {hub.endpoint()}"
            )
        ways.append(
            "a hub mirror: HF_ENDPOINT=https://<mirror>; or copy a hub cache filled "
            "elsewhere (`hf download <repo id>`) and point HF_HOME at it"
        )
    return ways


def _local_copies(refs: list[ModelRef], front: Front) -> str:
    where = [(o, _LOCAL_COPY.get(r.kind, "<local path>")) for r in refs for o in r.overrides]
    if front == "cli":
        return " ".join(f"--set {o}={path}" for o, path in where)
    if front == "python":
        return "QA(..., overrides={" + ", ".join(f'"{o}": "{path}"' for o, path in where) + "})"
    return "; ".join(
        f"--model {_LOCAL_COPY['VLM']}"
        if r.kind.startswith("VLM")
        else f"--pipeline NAME=<your.yaml> with {r.setting}: {_LOCAL_COPY.get(r.kind)} "
        f"on {', '.join(r.users)}"
        for r in refs
    )
