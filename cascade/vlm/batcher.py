"""Continuous batching: every running completion of one model decodes in one batched step.

Iteration-level scheduling, as in Orca, vLLM and SGLang. A request is prefilled by its caller's
thread (tower, reduction and prefill under the backend's lock); its prompt's KV, the last hidden
state of each of its rows and its `Sequence`s are then handed to the model's `ContinuousBatcher`,
whose one thread runs the decode loop:

1. admit what is waiting (between two steps): the new rows' KV joins the running batch, the
   shorter side left-padded to the longer and masked out;
2. pick one token for every running row (`Decoder.pick`: the LM head, each row's own sampling,
   logit processors, constraint, logprobs and stop conditions, its own streaming callback);
3. drop the rows that finished (their request returns when all its rows have) and trim the
   padding no row needs any more;
4. one forward of the decoder for all the rows left: each row's last token at its own position.

So the weights are read once per step for the whole batch instead of once per request, and while
the batch decodes the next request's images go through the tower in its own thread (the tower
and the LLM overlap). A request keeps its own max_tokens, stop strings, sampling, streaming and
bill: all of it lives in its sequences (`cascade.vlm.sequence`). A row whose streaming callback
raises (its client went away) ends its request with that error; the other rows go on. A failed
forward fails the requests in that batch, and the loop goes on with the next ones.

A request alone in the loop decodes exactly as `Decoder.run` does (no mask, the same ops in the
same order): its tokens are bit-identical. In a batch the padded attention and the batched matmuls
round differently, so logits agree to float precision (the tests bound the difference), not bit
for bit.
"""

from __future__ import annotations

import atexit
import threading
import weakref
from collections import deque
from dataclasses import dataclass, field
from typing import Any

import torch

from ..decoding import DEFAULT_MAX_NUM_SEQS
from .decode import Decoder, Generated, Sequence
from .kv_cache import cache_layers, new_dynamic_cache

__all__ = ["ContinuousBatcher"]

IDLE_EXIT_S = 10.0  # the loop's thread ends after this long with nothing to decode
_LIVE: weakref.WeakSet[ContinuousBatcher] = weakref.WeakSet()


@atexit.register
def _stop_all() -> None:
    """End every loop thread while the interpreter is still whole: a daemon thread that is still
    running at finalization is killed inside whatever it does, and one that was freeing tensors
    aborts the process (a forced unwind through torch's C++ destructors)."""
    for batcher in list(_LIVE):
        batcher.close()


@dataclass(eq=False)
class _Request:
    """One caller's prefilled rows, waiting to be admitted or running."""

    seqs: list[Sequence]
    hidden: torch.Tensor  # [n, D]: each row's last prefill hidden state
    cache: Any  # its prompt's KV: a DynamicCache of n rows
    mask: torch.Tensor | None  # [n, T], 1 = real token (None: nothing padded)
    next_pos: list[int]
    done: threading.Event = field(default_factory=threading.Event)
    error: BaseException | None = None
    running: int = 0  # rows still in the batch


def _pad_left(t: torch.Tensor, width: int, dim: int) -> torch.Tensor:
    if width == 0:
        return t
    shape = list(t.shape)
    shape[dim] = width
    return torch.cat([t.new_zeros(shape), t], dim=dim)


class ContinuousBatcher:
    """The decode loop of one loaded model (module docstring). Thread-safe: any thread may call
    `decode`; one daemon thread runs every step (started by the first `decode`, ended after
    `IDLE_EXIT_S` with nothing to do)."""

    def __init__(self, decoder: Decoder, max_num_seqs: int = DEFAULT_MAX_NUM_SEQS):
        if max_num_seqs < 1:
            raise ValueError(f"max_num_seqs must be >= 1, got {max_num_seqs}")
        self.decoder, self.runtime, self.max_num_seqs = decoder, decoder.runtime, max_num_seqs
        self._waiting: deque[_Request] = deque()
        self._wake = threading.Condition()
        self._thread: threading.Thread | None = None
        # the running batch (the loop thread's own)
        self._rows: list[tuple[_Request, Sequence]] = []
        self._cache: Any = None  # the batch's KV (a DynamicCache, rows in `_rows` order)
        self._mask: torch.Tensor | None = None  # [B, T]
        self._pos: torch.Tensor | None = None  # [B]: each row's next position
        self._last: torch.Tensor | None = None  # [B, D]: the hidden state each row picks from
        self.steps = 0  # batched decode steps run
        self.peak_rows = 0  # the most rows one step decoded
        self._closed = False
        _LIVE.add(self)

    @property
    def kv_bytes(self) -> int:
        """Bytes of the running batch's KV (0 when idle); read from any thread, it may be one
        step old."""
        cache = self._cache
        if cache is None:
            return 0
        return sum(t.numel() * t.element_size() for kv in cache_layers(cache) for t in kv)

    # -- callers ----------------------------------------------------------------------------------
    def decode(
        self,
        hidden: torch.Tensor,
        cache: Any,
        next_pos: list[int],
        seqs: list[Sequence],
        attention_mask: torch.Tensor | None = None,
    ) -> list[Generated]:
        """Generate the sequences whose prompts are in `cache` (n rows) and whose prefill's last
        hidden states are `hidden` [n, L, D]; blocks until all n have finished, decoding in the
        shared batch. attention_mask [n, T]: a left-padded prompt batch (None: none padded).
        Raises what ended the request (a streaming callback's exception, a failed forward)."""
        n = len(seqs)
        if hidden.shape[0] != n or len(next_pos) != n:
            raise ValueError(f"{hidden.shape[0]} rows, {n} sequences, {len(next_pos)} positions")
        req = _Request(seqs, hidden[:, -1], cache, attention_mask, list(next_pos))
        with self._wake:
            if self._closed:
                raise RuntimeError("this model's decode loop is closed (the process is exiting)")
            self._waiting.append(req)
            if self._thread is None:
                self._thread = threading.Thread(
                    target=self._loop, name="cascade-decode", daemon=True
                )
                self._thread.start()
            self._wake.notify()
        req.done.wait()
        if req.error is not None:
            raise req.error
        return [s.generated for s in seqs]

    def close(self, timeout: float = 10.0) -> None:
        """Stop the loop: requests still waiting or running fail; waits for the thread to end."""
        with self._wake:
            self._closed = True
            thread = self._thread
            self._wake.notify()
        if thread is not None and thread is not threading.current_thread():
            thread.join(timeout)

    @property
    def running(self) -> int:
        """Rows in the batch now."""
        return len(self._rows)

    @property
    def waiting(self) -> int:
        """Requests prefilled and waiting to join the batch at the next step."""
        with self._wake:
            return len(self._waiting)

    # -- the loop ---------------------------------------------------------------------------------
    def _loop(self) -> None:
        while True:
            with self._wake:
                while not self._waiting and not self._rows and not self._closed:
                    if not self._wake.wait(IDLE_EXIT_S) and not self._waiting:
                        # idle: end the thread, so an unused model can be freed (the next
                        # `decode` starts another)
                        self._thread = None
                        return
                if self._closed:
                    stopped = RuntimeError("the model's decode loop was closed")
                    for req in {r for r, _ in self._rows} | set(self._waiting):
                        self._finish(req, stopped)
                    self._waiting.clear()
                    self._reset()
                    self._thread = None
                    return
                admitted = self._take_waiting()
            try:
                with torch.inference_mode():
                    for req in admitted:
                        self._admit(req)
                    self._step()
            except Exception as e:  # a failed forward: fail the batch, keep serving
                for req in {r for r, _ in self._rows} | set(admitted):
                    self._finish(req, e)
                self._reset()

    def _take_waiting(self) -> list[_Request]:
        taken, room = [], self.max_num_seqs - len(self._rows)
        # a request of more rows than max_num_seqs runs when it is alone
        while self._waiting and (len(self._waiting[0].seqs) <= room or room == self.max_num_seqs):
            req = self._waiting.popleft()
            room -= len(req.seqs)
            taken.append(req)
        return taken

    def _admit(self, req: _Request) -> None:
        """Join the request's rows to the batch: the shorter KV left-padded to the longer."""
        n, new_len = len(req.seqs), req.cache.get_seq_length()
        mask = (
            req.mask
            if req.mask is not None
            else torch.ones(n, new_len, dtype=torch.long, device=req.hidden.device)
        )
        pos = torch.tensor(req.next_pos, device=req.hidden.device)
        if not self._rows:
            self._cache, self._mask, self._pos, self._last = req.cache, mask, pos, req.hidden
        else:
            old_len = self._cache.get_seq_length()
            # set together with the first rows (above), cleared with the last (_reset)
            assert self._mask is not None and self._pos is not None and self._last is not None
            length = max(old_len, new_len)
            self._cache = new_dynamic_cache(
                self.runtime.text_config,
                (
                    (
                        torch.cat(
                            [_pad_left(k, length - old_len, 2), _pad_left(k2, length - new_len, 2)]
                        ),
                        torch.cat(
                            [_pad_left(v, length - old_len, 2), _pad_left(v2, length - new_len, 2)]
                        ),
                    )
                    for (k, v), (k2, v2) in zip(
                        cache_layers(self._cache), cache_layers(req.cache), strict=True
                    )
                ),
            )
            self._mask = torch.cat(
                [_pad_left(self._mask, length - old_len, 1), _pad_left(mask, length - new_len, 1)]
            )
            self._pos = torch.cat([self._pos, pos])
            self._last = torch.cat([self._last, req.hidden])
        req.cache = None  # the batch holds it now
        self._rows += [(req, s) for s in req.seqs]
        req.running = n

    def _step(self) -> None:
        # the loop steps a batch with rows: set with the first rows (_admit), cleared with the last
        assert self._mask is not None and self._pos is not None and self._last is not None
        rows = [s for _, s in self._rows]
        self.peak_rows = max(self.peak_rows, len(rows))
        failed: dict[_Request, Exception] = {}
        owner = {id(s): r for r, s in self._rows}
        self.decoder.pick(
            self._last, rows, on_error=lambda s, e: failed.setdefault(owner[id(s)], e)
        )
        keep = [i for i, (r, s) in enumerate(self._rows) if not s.done and r not in failed]
        for r, s in self._rows:
            if s.done or r in failed:
                r.running -= 1
                if r.running == 0 or r in failed:
                    self._finish(r, failed.get(r))
        if len(keep) < len(self._rows):
            self._drop(keep)
        if not self._rows:
            self._reset()
            return
        fam, B = self.runtime, len(self._rows)
        feed = torch.tensor(
            [[s.generated.tokens[-1]] for _, s in self._rows], device=self._pos.device
        )
        self._mask = torch.cat([self._mask, self._mask.new_ones(B, 1)], dim=1)
        # No padding anywhere: no mask, exactly the call a lone `Decoder.run` makes.
        mask = None if bool(self._mask.all()) else self._mask
        hidden = fam.forward(
            fam.embed(feed),
            self._pos.view(1, B, 1).expand(fam.position_rows, B, 1),
            self._cache,
            attention_mask=mask,
        )
        self._last = hidden[:, -1]
        self._pos = self._pos + 1
        self.steps += 1

    def _drop(self, keep: list[int]) -> None:
        """Keep only the rows at `keep`, and cut the left padding none of them needs."""
        # a running batch's (_step): set with the first rows (_admit)
        assert self._mask is not None and self._pos is not None and self._last is not None
        idx = torch.tensor(keep, device=self._pos.device)
        self._rows = [self._rows[i] for i in keep]
        if not keep:
            return
        mask = self._mask.index_select(0, idx)
        start = int(mask.any(0).int().argmax())  # the first column some row attends to
        self._mask = mask[:, start:]
        self._cache = new_dynamic_cache(
            self.runtime.text_config,
            (
                (k.index_select(0, idx)[:, :, start:], v.index_select(0, idx)[:, :, start:])
                for k, v in cache_layers(self._cache)
            ),
        )
        self._pos, self._last = self._pos.index_select(0, idx), self._last.index_select(0, idx)

    def _finish(self, req: _Request, error: BaseException | None) -> None:
        if req.done.is_set():
            return
        req.error = error
        req.done.set()

    def _reset(self) -> None:
        self._rows, self._cache = [], None
        self._mask = self._pos = self._last = None
