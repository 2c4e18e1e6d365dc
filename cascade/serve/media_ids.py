"""Media ids, as vLLM takes them: a content part may carry a `uuid`; the server keeps the part's
bytes under it (a least-recently-used store bounded in bytes, --media-cache-mb), and a later
request may send the `uuid` alone (`{"type": "image_url", "image_url": null, "uuid": "..."}`)
while the server still has it. A uuid the server does not have (never sent, evicted, another
server process) is a 400 naming the part and asking for the media again; a uuid sent again with
different bytes is a 400 too: an id names one piece of media here. (vLLM instead trusts the id,
keying its caches by it without hashing the bytes, so there a reused id with new bytes is
answered from the first media's cached work; refusing is the safer of the two.)

What is kept are the bytes as sent, not decoded pixels: a reference decodes them again with the
request's own limits, and the content-keyed caches behind the pipelines (OCR, CLIP, the VLM's
KV prefix) still see the same pixels, so the work done for them is reused as it is for media
sent in full.
"""

from __future__ import annotations

import dataclasses
import threading
from collections import OrderedDict

from .errors import APIError
from .media import Payload

__all__ = ["MediaIds"]


class MediaIds:
    """uuid -> `Payload`, at most `max_bytes` of media bytes, least recently used out first."""

    def __init__(self, max_bytes: int):
        self.max_bytes, self.used = max_bytes, 0
        self._items: OrderedDict[str, Payload] = OrderedDict()
        self._lock = threading.Lock()  # requests run on several worker threads

    def resolve(self, uuid: str, kind: str, sent: Payload | None, param: str) -> Payload:
        """The media a part with `uuid` stands for: `sent` when it came with its bytes (refused
        if the uuid already names other bytes), else the kept media (refused if there is none,
        or if it is of another kind)."""
        with self._lock:
            kept = self._items.get(uuid)
            if kept is not None:
                self._items.move_to_end(uuid)
        shown = repr(uuid if len(uuid) <= 60 else uuid[:57] + "...")
        if sent is not None:
            if kept is not None and kept.digest != sent.digest:
                raise APIError(
                    400,
                    f"{param}: uuid {shown} already names other media on this "
                    "server (sent earlier with different bytes); give new media a "
                    "new uuid",
                    code="uuid_conflict",
                    param=f"{param}.uuid",
                )
            return sent
        if kept is None:
            raise APIError(
                400,
                f"{param}: no media with uuid {shown} on this server (never "
                "sent, or evicted from its media cache); resend the media with its "
                "uuid",
                code="media_not_cached",
                param=param,
            )
        if kept.kind != kind:
            raise APIError(
                400,
                f"{param}: uuid {shown} names the media of {_a(kept.kind)} "
                f"part, and this part is {_a(kind)} part",
                code="uuid_kind_mismatch",
                param=f"{param}.uuid",
            )
        return kept

    def keep(self, uuid: str, payload: Payload) -> None:
        """Remember `payload` under `uuid` (its bytes only: a file URL's file may change or go).
        Media larger than the whole store are not kept."""
        payload = dataclasses.replace(payload, path=None)
        size = len(payload.data)
        with self._lock:
            old = self._items.pop(uuid, None)
            if old is not None:
                self.used -= len(old.data)
            if size > self.max_bytes:
                return
            self._items[uuid] = payload
            self.used += size
            while self.used > self.max_bytes:
                _, evicted = self._items.popitem(last=False)
                self.used -= len(evicted.data)

    def __len__(self) -> int:
        return len(self._items)


def _a(kind: str) -> str:
    return ("an " if kind[0] in "aeiou" else "a ") + kind
