"""The model hub seen from this process: is it reachable, what is cached, fetch what is missing.

Everything goes through `huggingface_hub`, so its settings hold: `HF_ENDPOINT` (a mirror),
`HF_HUB_OFFLINE`, `HF_HOME` / `HF_HUB_CACHE`, `HF_TOKEN`, and proxies (`HTTPS_PROXY` ...: its HTTP
client reads them). The probe is one HEAD request bounded in wall-clock time, name lookup
included; the hub client's own retry loop (5 retries with backoff per file, a minute or more when
the hub cannot be reached) is never entered to find out. Its log lines go to the `cascade.hub`
debug log (`cascade --debug` shows them), not the console.
"""

from __future__ import annotations

import json
import logging
import os
import sys
import threading
import time
from dataclasses import dataclass
from pathlib import Path

from .errors import CascadeError
from .model_refs import ModelRef

__all__ = [
    "PROBE_TIMEOUT_S",
    "Reach",
    "endpoint",
    "is_offline",
    "cache_dir",
    "go_offline",
    "probe",
    "file_url",
    "cached",
    "select_files",
    "needed_files",
    "download",
    "quiet_hub_logs",
]

log = logging.getLogger("cascade.hub")

PROBE_TIMEOUT_S = 3.0
_MEMO_S = 60.0  # a probe's answer is reused this long (a server checks many pipelines at once)
_MEMO: dict[str, tuple[float, Reach]] = {}
_MEMO_LOCK = threading.Lock()


def endpoint() -> str:
    """The hub the client talks to (`HF_ENDPOINT`, default https://huggingface.co)."""
    from huggingface_hub import constants

    return constants.ENDPOINT


def is_offline() -> bool:
    """`HF_HUB_OFFLINE` (or `TRANSFORMERS_OFFLINE`) is set, or `go_offline` was called."""
    from huggingface_hub import constants

    return bool(constants.HF_HUB_OFFLINE)


def cache_dir() -> str:
    """Where hub downloads live (`HF_HUB_CACHE`, default `$HF_HOME/hub`)."""
    from huggingface_hub import constants

    return constants.HF_HUB_CACHE


def go_offline() -> None:
    """Load everything from the cache for the rest of the process (and the processes it starts).

    Used when every model is cached and the hub cannot be reached: otherwise each load would
    first ask the hub whether its files changed, through the client's retry loop."""
    from huggingface_hub import constants

    os.environ["HF_HUB_OFFLINE"] = "1"
    constants.HF_HUB_OFFLINE = True
    log.info("model hub unreachable: loading cached models offline (HF_HUB_OFFLINE=1)")


@dataclass(frozen=True)
class Reach:
    """The answer to one probe. reachable: the server answered (any HTTP status); status: that
    status; detail: what happened, in words; seconds: how long it took."""

    url: str
    reachable: bool
    detail: str
    status: int | None = None
    seconds: float = 0.0

    @property
    def found(self) -> bool:
        """The server answered and has the file (2xx, or a redirect to where it lives)."""
        return self.reachable and self.status is not None and self.status < 400


def file_url(ref: ModelRef, filename: str) -> str:
    """The URL the hub client fetches `filename` of a hub repo from (revision main)."""
    from urllib.parse import quote

    return f"{endpoint()}/{ref.name}/resolve/main/{quote(filename)}"


def probe(url: str, timeout: float = PROBE_TIMEOUT_S) -> Reach:
    """One HEAD request to `url` through the hub client's HTTP session (its proxies and, for hub
    URLs, its token), answered within `timeout` seconds whatever the network does: the request
    runs in a daemon thread, so a name lookup that hangs cannot hold the caller."""
    with _MEMO_LOCK:
        hit = _MEMO.get(url)
        if hit is not None and time.monotonic() - hit[0] < _MEMO_S:
            return hit[1]
    box: list[Reach] = []
    start = time.monotonic()

    def ask() -> None:
        from huggingface_hub import utils as hf_utils

        headers = hf_utils.build_hf_headers() if url.startswith(endpoint()) else None
        try:
            r = hf_utils.get_session().head(
                url, timeout=timeout, headers=headers, follow_redirects=False
            )
        except Exception as e:  # any transport failure means "not reachable", said in words
            box.append(
                Reach(url, False, _transport_error(e, timeout), seconds=time.monotonic() - start)
            )
        else:
            box.append(
                Reach(url, True, f"HTTP {r.status_code}", r.status_code, time.monotonic() - start)
            )

    worker = threading.Thread(target=ask, name="cascade-hub-probe", daemon=True)
    worker.start()
    worker.join(timeout + 0.5)
    reach = box[0] if box else Reach(url, False, f"no answer within {timeout:g} s", seconds=timeout)
    log.debug("probe %s: %s (%.2f s)", url, reach.detail, reach.seconds)
    with _MEMO_LOCK:
        _MEMO[url] = (time.monotonic(), reach)
    return reach


def _transport_error(e: Exception, timeout: float) -> str:
    name = type(e).__name__
    if "Timeout" in name:
        return f"no answer within {timeout:g} s"
    text = str(e) or name
    return text.split("\n")[0][:200]


# --- the cache ----------------------------------------------------------------------------------


def _cached_file(repo: str, filename: str) -> str | None:
    from huggingface_hub import try_to_load_from_cache

    found = try_to_load_from_cache(repo, filename, cache_dir=cache_dir())
    return found if isinstance(found, str) else None


def _snapshot_of(path: str, filename: str) -> Path:
    return Path(path).parents[len(Path(filename).parts) - 1]


def _weights_cached(repo: str) -> bool:
    """A transformers checkpoint's weights are cached: one file, or an index and all its shards."""
    for single, index in (
        ("model.safetensors", "model.safetensors.index.json"),
        ("pytorch_model.bin", "pytorch_model.bin.index.json"),
    ):
        if _cached_file(repo, single):
            return True
        idx = _cached_file(repo, index)
        if idx:
            try:
                shards = set(json.loads(Path(idx).read_text())["weight_map"].values())
            except (OSError, ValueError, KeyError):
                return False
            return all(_cached_file(repo, s) for s in shards)
    return False


def cached(ref: ModelRef) -> Path | None:
    """The cache folder (snapshot) holding what a hub ref needs, or None. Filesystem only."""
    if ref.source != "hub":
        return None
    if ref.layout == "files":
        first = None
        for group in ref.files:
            hit = next(((n, p) for n in group if (p := _cached_file(ref.name, n))), None)
            if hit is None:
                return None
            first = first or hit
        return _snapshot_of(first[1], first[0]) if first else None
    marker = "modules.json" if ref.layout == "sentence_transformers" else "config.json"
    path = _cached_file(ref.name, marker)
    if path is None:
        return None
    if ref.layout != "transformers_config" and not _weights_cached(ref.name):
        return None
    return _snapshot_of(path, marker)


# --- downloading --------------------------------------------------------------------------------

_CONFIG_SUFFIXES = (".json", ".txt", ".model", ".jinja", ".tiktoken")
_SKIP_FOLDERS = ("onnx", "openvino")  # other runtimes' copies of the weights


def select_files(ref: ModelRef, listing: list[tuple[str, int]]) -> list[tuple[str, int]]:
    """Which of a repo's files (path, size) the loader reads, by the ref's layout: configs,
    processor and tokenizer files, and one format of weights (safetensors when there are any)."""
    if ref.layout == "files":
        present = dict(listing)
        picked = [next((n for n in group if n in present), None) for group in ref.files]
        return [(n, present[n]) for n in picked if n is not None]
    nested = ref.layout == "sentence_transformers"
    usable = [
        (p, s)
        for p, s in listing
        if (nested or "/" not in p) and p.split("/")[0] not in _SKIP_FOLDERS
    ]
    configs = [(p, s) for p, s in usable if p.endswith(_CONFIG_SUFFIXES)]
    if ref.layout == "transformers_config":
        return configs
    weights = [(p, s) for p, s in usable if p.endswith(".safetensors")] or [
        (p, s) for p, s in usable if Path(p).name.startswith("pytorch_model") and p.endswith(".bin")
    ]
    return configs + weights


def needed_files(ref: ModelRef) -> list[tuple[str, int]]:
    """The files to download for a hub ref (lists the repo: needs the hub)."""
    from huggingface_hub import HfApi
    from huggingface_hub.hf_api import RepoFile

    tree = HfApi(endpoint=endpoint()).list_repo_tree(ref.name, recursive=True)
    return select_files(ref, [(e.path, e.size) for e in tree if isinstance(e, RepoFile)])


def _size(n: float) -> str:
    for unit in ("B", "KB", "MB", "GB"):
        if n < 1000 or unit == "GB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1000
    return f"{n} B"


def download(refs: list[ModelRef]) -> None:
    """Fetch every file of `refs` into the hub cache: the cache folder named once, then one
    progress bar per file (the hub client's, on stderr; `HF_HUB_DISABLE_PROGRESS_BARS=1` hides
    them). A failure names the model and file; what was fetched stays, so a rerun resumes."""
    from huggingface_hub import hf_hub_download

    plans = []
    for ref in refs:
        try:
            plans.append((ref, needed_files(ref)))
        except Exception as e:
            raise CascadeError(
                f"cannot list the files of {ref.kind} {ref.describe()} on "
                f"{endpoint()}: {type(e).__name__}: {e}"
            ) from e
    total = sum(s or 0 for _, files in plans for _, s in files)
    print(
        f"downloading {len(plans)} model(s), {_size(total)}, into {cache_dir()} "
        "(set HF_HOME to keep them elsewhere)",
        file=sys.stderr,
        flush=True,
    )
    for ref, files in plans:
        print(f"  {ref.kind} {ref.describe()}: {len(files)} files", file=sys.stderr, flush=True)
        for path, _ in files:
            try:
                hf_hub_download(ref.name, path, cache_dir=cache_dir(), endpoint=endpoint())
            except Exception as e:
                raise CascadeError(
                    f"downloading {path} of {ref.kind} {ref.describe()} failed: "
                    f"{type(e).__name__}: {e}; run again to resume"
                ) from e


# --- logging ------------------------------------------------------------------------------------


class _ToDebugLog(logging.Handler):
    """Re-logs a library's records on `cascade.hub` at DEBUG."""

    def emit(self, record: logging.LogRecord) -> None:
        log.debug("%s: %s", record.name, record.getMessage())


# The hub client's logger (retry notices) and transformers' hub module ("couldn't connect").
_HUB_LOGGERS = ("huggingface_hub", "transformers.utils.hub")


def quiet_hub_logs() -> None:
    """Send the hub clients' log lines (retries, connection notices) to the `cascade.hub` debug
    log instead of the console. Idempotent."""
    import huggingface_hub.utils.logging  # noqa: F401  (adds its console handler on import)

    for name in _HUB_LOGGERS:
        logger = logging.getLogger(name)
        if any(isinstance(h, _ToDebugLog) for h in logger.handlers):
            continue
        for h in list(logger.handlers):
            if type(h) is logging.StreamHandler:  # the library's own console handler
                logger.removeHandler(h)
        logger.addHandler(_ToDebugLog())
        logger.propagate = False
