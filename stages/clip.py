"""CLIP image and text embeddings (open_clip), batched, cached by content hash across questions."""

from __future__ import annotations

import pickle
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from pydantic import Field

from cascade.artifacts import Image
from cascade.devices import pick_device
from cascade.errors import InputError
from cascade.media import VideoSource
from cascade.model_refs import ModelRef, open_clip_weights
from cascade.progress import progress
from cascade.shared_models import shared_model
from cascade.stage import Serving, Stage, StageParams, stage
from cascade.trace import record

from ._inputs import as_image_list
from ._retrieval import Embeddings, normalize


def load_clip(model: str, pretrained: str | None, device: str, allow_pickle: bool = False):
    """(model, preprocess, tokenizer). `pretrained=None` builds the architecture with random
    weights from a fixed seed, so every process gets the same random model. Checkpoints load as
    safetensors or with `torch.load(weights_only=True)` (tensors only, no code) unless
    `allow_pickle`."""
    import open_clip
    import torch

    try:
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(0)
            net, _, preprocess = open_clip.create_model_and_transforms(
                model, pretrained=pretrained, device=device, weights_only=not allow_pickle
            )
        tokenizer = open_clip.get_tokenizer(model)
    except Exception as e:
        known = open_clip.list_models()
        hint = "" if model in known else f"; known architectures include {', '.join(known[:8])} ..."
        if isinstance(e, pickle.UnpicklingError) and not allow_pickle:
            hint += (
                "; the checkpoint holds more than tensors: loading it would run code from "
                "the file, so it needs allow_pickle: true on this stage (only if you trust it)"
            )
        raise RuntimeError(
            f"cannot load CLIP model '{model}' (pretrained={pretrained!r}): {e}"
            f"{hint}. Without a model hub use pretrained: null (random weights) "
            "or a local checkpoint path"
        ) from e
    net.eval()
    return net, preprocess, tokenizer


@stage("clip_embed")
class ClipEmbed(Stage):
    """Embed images (and optionally the question) with an open_clip model, in batches.

    Image embeddings are cached by pixel content in a process-wide LRU shared by every stage using
    the same model, so a second question about the same video embeds nothing again; with a `video`
    input and the pipeline's `index:` on, vectors `retrieve` saved in the video's index are reused
    too. Defaults
    are ViT-B-32 with OpenAI weights (downloaded by open_clip on first use). Checkpoints load as
    tensors only (safetensors, `torch.load(weights_only=True)`); a full pickle needs
    `allow_pickle: true`. `pretrained: null`
    gives random weights: real costs and mechanics, meaningless similarities; tests and benchmarks
    here use it because no CLIP weights can be downloaded on those machines.
    """

    serving = Serving(heavy=True)  # on Ray: its own deployment, the model loaded there

    class Params(StageParams):
        model: str = Field("ViT-B-32", description="open_clip architecture name")
        pretrained: str | None = Field(
            "openai",
            description="open_clip weights tag or checkpoint "
            "path; null = random init (mechanics only)",
        )
        allow_pickle: bool = Field(
            False,
            description="load a checkpoint that holds more than "
            "tensors (full pickle): runs any code inside the file; only "
            "for files you trust",
        )
        device: str = Field("auto", description="'auto', 'cpu', 'cuda', 'cuda:1' ...")
        batch_size: int = Field(32, gt=0, le=4096, description="images per forward pass")
        cache_mb: int = Field(256, gt=0, description="embedding cache budget (per model)")

    params: Params  # what the base class's `params` property returns here

    @dataclass(frozen=True)
    class Outputs:
        embeddings: Embeddings

    def setup(self) -> None:
        from cascade.cache import LRUCache

        p = self.params
        self.device = pick_device(p.device)
        key = ("open_clip", p.model, p.pretrained, self.device, p.allow_pickle)
        self.shared = shared_model(
            key, lambda: load_clip(p.model, p.pretrained, self.device, p.allow_pickle)
        )
        self.shared.extra.setdefault("embed_cache", LRUCache(p.cache_mb * 2**20))
        # saved indexes already read into embed_cache (emptied with it by clear_all_caches)
        self.shared.extra.setdefault("seeded_from", LRUCache(1024, size_of=lambda v: 1))
        self.model_id = f"open_clip:{p.model}:{p.pretrained or 'random-seed0'}"

    def model_refs(self) -> list[ModelRef]:
        return open_clip_weights(self.params.model, self.params.pretrained)

    def embed_images(self, images: list[Image]) -> tuple[np.ndarray, int, int]:
        """Unit vectors for `images` ([N, D] float32), how many came from the cache and how many
        were computed (identical images in one call are computed once)."""
        import torch

        net, preprocess, _ = self.shared.model
        cache = self.shared.extra["embed_cache"]
        keys = [im.__content_hash__() for im in images]
        out: dict[str, np.ndarray] = {}
        for k in dict.fromkeys(keys):
            v = cache.get(k)
            if v is not None:
                out[k] = v
        hits = sum(1 for k in keys if k in out)
        todo = [(k, im) for k, im in dict(zip(keys, images, strict=True)).items() if k not in out]
        bs = self.params.batch_size
        for start in progress(
            range(0, len(todo), bs), desc=f"{self.name}: CLIP", unit="batch", min_total=4
        ):
            chunk = todo[start : start + bs]
            batch = torch.stack([preprocess(im.to_pil()) for _, im in chunk]).to(self.device)
            with self.shared.lock, torch.inference_mode():
                feats = net.encode_image(batch).float().cpu().numpy()
            for (k, _), v in zip(chunk, normalize(feats), strict=True):
                out[k] = v
                cache.put(k, v)
        dim = int(net.visual.output_dim) if hasattr(net.visual, "output_dim") else None
        vecs = np.stack([out[k] for k in keys]) if keys else np.zeros((0, dim or 0), np.float32)
        return vecs, hits, len(todo)

    def embed_text(self, texts: list[str]) -> np.ndarray:
        import torch

        net, _, tokenizer = self.shared.model
        with self.shared.lock, torch.inference_mode():
            feats = net.encode_text(tokenizer(texts).to(self.device)).float().cpu().numpy()
        return normalize(feats)

    def _seed_from_saved(self, video: Path | VideoSource) -> None:
        store = self.video_index.vectors(video)
        version = None if store is None else store.version()
        if store is None or version is None:
            return
        # Read a saved index once per version of it, not on every question about the video.
        version = (*version, self.model_id)
        seeded = self.shared.extra["seeded_from"]
        if version in seeded:
            return
        seeded.put(version, True)
        cache = self.shared.extra["embed_cache"]
        saved = store.for_model(self.model_id)
        for k, v in saved.items():
            if k not in cache:
                cache.put(k, v)
        if saved:
            record(saved_vectors_loaded=len(saved))

    def run(
        self,
        images: list[Image] | Image,
        text: str | None = None,
        video: Path | VideoSource | None = None,
    ) -> Outputs:
        items = as_image_list(images)
        if not items:
            raise InputError("clip_embed: no images to embed")
        # an indexed video's frame vectors are kept by frame as they are computed (an index
        # built in chunks keeps each chunk's), and read back before computing any
        keyed = self.video_index.keyed(video, "clip", self.model_id) if video is not None else None
        if video is not None:
            self._seed_from_saved(video)
        if keyed is not None:
            record(saved_vectors_loaded=keyed.seed(self.shared.extra["embed_cache"]))
        vecs, hits, computed = self.embed_images(items)
        record(embed_images=computed, embed_cache_hits=hits)
        if keyed is not None and computed:
            keyed.add(
                {im.__content_hash__(): v for im, v in zip(items, vecs, strict=True)},
                self.shared.extra["embed_cache"],
            )
        query = self.embed_text([text])[0] if text else None
        keys = tuple(im.__content_hash__() for im in items)
        return self.Outputs(Embeddings(vecs, tuple(items), self.model_id, query, keys))
