"""Server settings: one model for the flags, the environment and the defaults.

`ServeConfig` is a pydantic-settings model: each field's default is written once, here; a
`CASCADE_<FIELD>` environment variable overrides it (`CASCADE_MAX_CONCURRENT=8`,
`CASCADE_PIPELINES='{"mine": "p.yaml"}'`); a command-line flag overrides both. The flags of
`cascade serve` / `cascade demo` are built from the fields (`add_flags`, each field's `Flag`), and
`from_args` reads them back, so no default or flag list is written twice (the Ray layout,
`cascade.serve.ray.options.RayOptions`, is a settings model of the same kind: `CASCADE_RAY_*`).
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any, Literal, TypeVar

from pydantic import Field, ValidationError, field_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

from ..errors import CascadeError, did_you_mean
from ..pdf import DEFAULT_DPI, MAX_PAGES

__all__ = ["ServeConfig", "Flag", "add_flags", "from_args", "ENV_PREFIX", "MODALITIES"]

ENV_PREFIX = "CASCADE_"
# --limit-mm-per-prompt keys: vLLM's modalities, plus `file` (PDF documents) here.
MODALITIES = ("image", "video", "file")
S = TypeVar("S", bound=BaseSettings)
_MIB = 1 << 20


@dataclass(frozen=True)
class Flag:
    """How a setting appears on the command line. name: the flag (default `--field-name`);
    action: argparse's (`store_true`, `store_false`, `append`); type: what argparse parses;
    to_setting: flag value -> the setting's value; shown: the setting's default as the flag says
    it; env_unit: the variable's unit where it is not the flag's; exclusive: flags sharing this
    group name exclude each other; nargs: argparse's (`+`: one or more values)."""

    help: str
    name: str | None = None
    action: str | None = None
    type: Callable[[str], Any] | None = None
    metavar: str | None = None
    to_setting: Callable[[Any], Any] | None = None
    shown: Callable[[Any], Any] | None = None
    env_unit: str = ""
    exclusive: str | None = None
    nargs: str | None = None


def _mm_limits(text: str) -> dict[str, int]:
    """--limit-mm-per-prompt in vLLM's forms: `image=4,video=1` or JSON `{"image": 4}`."""
    if text.lstrip().startswith("{"):
        try:
            limits = json.loads(text)
        except json.JSONDecodeError as e:
            raise CascadeError(f"--limit-mm-per-prompt: not valid JSON ({e})") from None
        if not isinstance(limits, dict):
            raise CascadeError(
                '--limit-mm-per-prompt: expected a JSON object such as \'{"image": 4, "video": 1}\''
            )
        return limits
    limits = {}
    for item in filter(None, (i.strip() for i in text.split(","))):
        kind, eq, count = item.partition("=")
        if not eq or not count.strip().isdigit():
            raise CascadeError(
                f"--limit-mm-per-prompt '{item}': expected MODALITY=COUNT, e.g. image=4,video=1"
            )
        limits[kind.strip()] = int(count)
    return limits


def _words(items: list[str]) -> list[str]:
    """Values given as separate arguments or comma-separated (`a.com b.com` or `a.com,b.com`)."""
    return [w for item in items for w in item.replace(",", " ").split()]


def _pipelines(items: list[str]) -> dict[str, str]:
    pipelines = {}
    for item in items:
        name, eq, path = item.partition("=")
        if not eq or not name or not path:
            raise CascadeError(f"--pipeline '{item}': expected NAME=path/to/pipeline.yaml")
        pipelines[name] = path
    return pipelines


class ServeConfig(BaseSettings):
    """Everything `cascade serve` / `cascade demo` can be told (flag, `CASCADE_*` variable, or
    keyword in Python: `ServeConfig(tiny=True, max_concurrent=8)`). Each field's flag says what
    it does."""

    model_config = SettingsConfigDict(env_prefix=ENV_PREFIX, extra="forbid")

    model: Annotated[
        str | None,
        Flag(
            "VLM for every vlm_answer stage: hub id or local folder ('tiny' = --tiny); default: "
            "each pipeline's own",
            exclusive="model",
        ),
    ] = None
    tiny: Annotated[
        bool,
        Flag(
            "random-weight tiny Qwen2-VL and random CLIP: runs offline; VLM answers are random "
            "text, tool answers/evidence/bill real",
            action="store_true",
            exclusive="model",
        ),
    ] = False
    device: Annotated[
        str | None, Flag("cpu, cuda, cuda:1 ... for every stage that has a device")
    ] = None
    max_num_seqs: Annotated[
        int | None,
        Flag(
            "continuous batching: the most completions the in-process VLM decodes in one step "
            "(vLLM's --max-num-seqs; 1 decodes one request at a time; default: the model's "
            "declaration, 32)",
            type=int,
        ),
    ] = Field(None, ge=1)
    kv_dtype: Annotated[
        Literal["auto", "int8", "int4"] | None,
        Flag(
            "how the in-process VLM's KV prefix cache stores entries: auto (the model's dtype), "
            "int8, int4 (KIVI); default: the model's declaration"
        ),
    ] = None
    kv_press: Annotated[
        str | None,
        Flag(
            "KV press applied after each image block's prefill: none, snapkv, snapkv_visual, "
            "random, recency (docs/kv.md); default: the model's declaration"
        ),
    ] = None
    kv_keep: Annotated[
        float | None, Flag("fraction of the pressed tokens a KV press keeps, in (0, 1]", type=float)
    ] = Field(None, gt=0.0, le=1.0)
    pipelines: Annotated[
        dict[str, str],
        Flag(
            "also serve a YAML pipeline as model cascade/NAME (repeatable)",
            name="--pipeline",
            action="append",
            metavar="NAME=YAML",
            to_setting=_pipelines,
        ),
    ] = Field(default_factory=dict)
    shipped: Annotated[
        bool,
        Flag(
            "serve only --pipeline pipelines (default: every shipped pipeline that answers "
            "questions too)",
            name="--no-shipped",
            action="store_false",
        ),
    ] = True
    media_root: Annotated[
        Path | None,
        Flag("folder file:// URLs may read from (default: file URLs refused)", type=Path),
    ] = None
    allowed_media_domains: Annotated[
        list[str],
        Flag(
            "fetch http(s) media URLs from these hosts (patterns: example.com, *.example.com, "
            "* for any); each address a host resolves to must be public (default: none, remote "
            "URLs refused)",
            nargs="+",
            metavar="HOST",
            to_setting=_words,
        ),
    ] = Field(default_factory=list)
    allow_media_networks: Annotated[
        list[str],
        Flag(
            "address ranges (CIDR) media may be fetched from although not public, e.g. your "
            "own media store on 10.1.2.0/24 (default: none)",
            nargs="+",
            metavar="CIDR",
            to_setting=_words,
        ),
    ] = Field(default_factory=list)
    media_fetch_timeout: Annotated[
        float,
        Flag("seconds to fetch one media URL, redirects included (400 beyond)", type=float),
    ] = Field(10.0, gt=0)
    max_media_bytes: Annotated[
        int, Flag("largest media body fetched from a URL, in bytes (413 beyond)", type=int)
    ] = Field(64 * _MIB, ge=1)
    upload_dir: Annotated[
        Path | None,
        Flag(
            "where uploaded videos live while a request uses them; deleted after (default: a "
            "private temporary folder)",
            type=Path,
        ),
    ] = None
    max_upload_bytes: Annotated[
        int,
        Flag(
            "largest media upload (MiB)",
            name="--max-upload-mb",
            type=float,
            metavar="MIB",
            to_setting=lambda mb: int(mb * _MIB),
            shown=lambda b: b / _MIB,
            env_unit="bytes",
        ),
    ] = 64 * _MIB
    max_frames: Annotated[int, Flag("most frames in a video / images in a request", type=int)] = (
        3000
    )
    max_pixels: Annotated[int, Flag("most pixels per image/frame", type=int)] = 4096 * 4096
    max_total_pixels: Annotated[
        int,
        Flag(
            "most pixels one request may make the server decode: every image's and every video "
            "frame's width x height, summed (413 beyond)",
            type=int,
        ),
    ] = 1 << 31
    pdf_dpi: Annotated[
        float,
        Flag(
            "resolution PDF pages (file content parts) are rendered at", type=float, metavar="DPI"
        ),
    ] = Field(DEFAULT_DPI, gt=0, le=1200)
    max_pdf_pages: Annotated[int, Flag("most pages in one PDF document (413 beyond)", type=int)] = (
        Field(MAX_PAGES, ge=1)
    )
    media_cache_bytes: Annotated[
        int,
        Flag(
            "media kept by their content part's uuid, so a later request may send the uuid alone "
            "(MiB; least recently used out first; 0: uuids are not kept)",
            name="--media-cache-mb",
            type=float,
            metavar="MIB",
            to_setting=lambda mb: int(mb * _MIB),
            shown=lambda b: b / _MIB,
            env_unit="bytes",
        ),
    ] = Field(256 * _MIB, ge=0)
    limit_mm_per_prompt: Annotated[
        dict[str, int],
        Flag(
            "most media parts of each modality in one request, as vLLM takes it: image=4,video=1 "
            "(or JSON '{\"image\": 4}'); file counts PDF documents; 400 past it (default: no "
            "limit but --max-frames)",
            metavar="LIMITS",
            type=str,
            to_setting=_mm_limits,
        ),
    ] = Field(default_factory=dict)
    request_timeout_s: Annotated[
        float,
        Flag("seconds before a request gets 504 (queue included)", name="--timeout", type=float),
    ] = 300.0
    upload_timeout_s: Annotated[
        float,
        Flag(
            "seconds for a request body to arrive; a slower upload gets 408",
            name="--upload-timeout",
            type=float,
        ),
    ] = 60.0
    send_timeout_s: Annotated[
        float,
        Flag(
            "seconds a streamed chunk may wait for its client to read; then the stream is dropped "
            "and its decode cancelled",
            name="--send-timeout",
            type=float,
        ),
    ] = 30.0
    drain_timeout_s: Annotated[
        float,
        Flag(
            "on SIGTERM or SIGINT, seconds to let the requests in flight finish before the "
            "server stops (then it exits 0)",
            name="--drain-timeout",
            type=float,
        ),
    ] = Field(30.0, ge=0)
    max_concurrent: Annotated[
        int,
        Flag(
            "requests in progress at once (running, or waiting for their pipeline); more wait in "
            "the queue",
            type=int,
        ),
    ] = 8
    max_queue: Annotated[
        int,
        Flag(
            "requests waiting for a slot (in arrival order); more get 429 + Retry-After", type=int
        ),
    ] = 64
    workers: Annotated[
        int,
        Flag(
            "threads running pipelines; runs overlap and the VLM decodes them in one batch, so "
            "keep it >= --max-concurrent",
            type=int,
        ),
    ] = 8

    @field_validator("allow_media_networks")
    @classmethod
    def _networks(cls, networks: list[str]) -> list[str]:
        import ipaddress

        for n in networks:
            try:
                ipaddress.ip_network(n, strict=False)
            except ValueError:
                raise ValueError(f"{n!r} is not a network (CIDR such as 10.1.2.0/24)") from None
        return networks

    @field_validator("limit_mm_per_prompt")
    @classmethod
    def _known_modalities(cls, limits: dict[str, int]) -> dict[str, int]:
        for kind, count in limits.items():
            if kind not in MODALITIES:
                raise ValueError(
                    f"unknown modality {kind!r}{did_you_mean(kind, MODALITIES)}; "
                    f"expected {', '.join(MODALITIES)}"
                )
            if count < 0:
                raise ValueError(f"{kind}={count}: a count is 0 or more")
        return limits

    def model_options(self) -> dict[str, Any]:
        """What the flags override in every in-process VLM declaration (`models.<name>`)."""
        options: dict[str, Any] = {}
        if self.max_num_seqs is not None:
            options["max_num_seqs"] = self.max_num_seqs
        kv = {
            k: v
            for k, v in (("dtype", self.kv_dtype), ("press", self.kv_press), ("keep", self.kv_keep))
            if v is not None
        }
        if kv:
            options["kv"] = kv
        return options

    def resolved_model(self) -> str | None:
        """The model id to put on vlm_answer stages (builds the tiny model when asked)."""
        if self.tiny or self.model == "tiny":
            from ..vlm.tiny import build_tiny_vlm

            return str(build_tiny_vlm(family="qwen2_vl", size="test"))
        return self.model

    @property
    def random_weights(self) -> bool:
        return self.tiny or self.model == "tiny"


def _flags(settings: type[BaseSettings]) -> dict[str, Flag]:
    """The fields of `settings` that have a flag, and their `Flag`."""
    return {
        name: flag
        for name, field in settings.model_fields.items()
        for flag in field.metadata
        if isinstance(flag, Flag)
    }


def add_flags(
    parser: Any, settings: type[BaseSettings] = ServeConfig, exclude: frozenset[str] = frozenset()
) -> None:
    """The flags of `settings` (a parser or an argument group), but those of the `exclude`
    fields. A flag left out is absent from the parsed args (argparse's SUPPRESS), so the
    environment or the field's default decides it."""
    groups: dict[str, Any] = {}
    prefix = settings.model_config.get("env_prefix", "")
    for name, flag in _flags(settings).items():
        if name in exclude:
            continue
        field = settings.model_fields[name]
        target = parser
        if flag.exclusive:
            if flag.exclusive not in groups:
                groups[flag.exclusive] = parser.add_mutually_exclusive_group()
            target = groups[flag.exclusive]
        default = field.get_default(call_default_factory=True)
        option = flag.name or "--" + name.replace("_", "-")
        said = f"env {prefix}{name.upper()}" + (f", in {flag.env_unit}" if flag.env_unit else "")
        if not flag.action and default is not None:
            said = f"default {flag.shown(default) if flag.shown else default}; {said}"
        kw: dict[str, Any] = {
            "dest": name,
            "default": argparse.SUPPRESS,
            "help": f"{flag.help} ({said})",
        }
        if flag.action:
            kw["action"] = flag.action
        else:
            kw["metavar"] = flag.metavar or option.lstrip("-").replace("-", "_").upper()
        if flag.type:
            kw["type"] = flag.type
        if flag.nargs:
            kw["nargs"] = flag.nargs
        if flag.metavar:
            kw["metavar"] = flag.metavar
        target.add_argument(option, **kw)


def from_args(
    args: argparse.Namespace,
    settings: type[S] = ServeConfig,  # type: ignore[assignment]
    **override: Any,
) -> S:
    """The settings the parsed flags, the environment and the defaults give (`override` last)."""
    given = {}
    for name, flag in _flags(settings).items():
        if name in vars(args):
            value = getattr(args, name)
            given[name] = flag.to_setting(value) if flag.to_setting else value
    try:
        return settings(**given | override)
    except ValidationError as e:
        problems = "; ".join(
            f"{'.'.join(map(str, err['loc']))}: {err['msg']}" for err in e.errors()
        )
        prefix = settings.model_config.get("env_prefix", "")
        raise CascadeError(f"server settings (flags or {prefix}* variables): {problems}") from None
