"""A small simulator of colocated, PD and EPD serving: where disaggregation wins.

Each role's replica is a worker that runs one thing at a time; the cluster has `processors`
compute units shared by the busy workers (processor sharing: with k busy workers and P
processors each runs at min(1, P/k) speed; on a GPU per worker, P = the worker count):

- a colocated replica (or PD/EPD's decode replica) runs the next waiting request's prefill
  (colocated: tower + prefix + question; decode side: the question only) and its batch's decode
  steps (`step_s = a + b * batch`). With `overlap` both run at once, sharing the processors (this
  project's runtime: a prefill in the caller's thread, the steps in the batcher's); without it a
  prefill goes first and every stream's next token waits (a GPU engine without chunked prefill);
- a prefill replica runs each request's prefix prefill (PD: with the tower), then its KV blocks
  travel `transfer_s` (not occupying any worker) to the least-loaded decode replica;
- an encode replica runs the tower; the embeddings travel `embeds_s` to a prefill replica.

Requests go to the least-loaded replica of their role (queue + batch). Inputs are measured costs
(`benchmarks/disagg.py` measures them on this CPU) or costs from the cost model and a stated
device (`gpu_costs`). Events: an arrival or the end of a job; between two, every busy worker
runs at the same speed, so the simulation is exact for this model.
"""

from __future__ import annotations

import heapq
import itertools
import statistics
from dataclasses import dataclass, field

__all__ = ["Costs", "Request", "simulate", "summarize"]


@dataclass(frozen=True)
class Costs:
    """Seconds per request kind ("short", "long") on one worker at full speed."""

    encode_s: dict[str, float]  # the vision tower
    prefix_s: dict[str, float]  # the prefix prefill (images and the text around them)
    question_s: float  # the question's prefill on the decode side (and its first token)
    step_s: tuple[float, float]  # one decode step: a + b * sequences in the batch
    transfer_s: dict[str, float]  # the prefix's KV blocks from prefill to decode
    embeds_s: dict[str, float]  # the embeddings from encode to prefill


@dataclass
class Request:
    kind: str
    arrival: float
    new_tokens: int
    tokens: list[float] = field(default_factory=list)  # when each token was emitted
    done: float | None = None


@dataclass
class _Worker:
    """A replica: a prefill lane (its queue) and, on the decode side, a step lane (its batch)."""

    role: str
    queue: list[tuple[Request, float]] = field(default_factory=list)  # (request, work s)
    batch: list[Request] = field(default_factory=list)
    prefill: tuple[float, Request] | None = None  # (work left, request)
    step: float | None = None  # work left of the batch's decode step

    @property
    def load(self) -> int:
        return len(self.queue) + len(self.batch) + (self.prefill is not None)


def _step(costs: Costs, batch: int) -> float:
    return costs.step_s[0] + costs.step_s[1] * batch


def simulate(
    layout: str,
    requests: list[Request],
    costs: Costs,
    replicas: dict[str, int],
    processors: float,
    overlap: bool = False,
) -> list[Request]:
    """Run `requests` through `layout` ("colocated", "pd", "epd") with `replicas` per role
    ("decode" is the colocated replicas too; "prefill", "encode"). overlap: a decode-side replica
    runs a prefill and its batch's decode steps at once (this project's runtime: the prefill in
    the caller's thread, the steps in the batcher's), sharing the processors; otherwise a
    prefill goes first and the steps wait. Returns the requests with their token times."""
    roles = {
        "colocated": ["decode"],
        "pd": ["prefill", "decode"],
        "epd": ["encode", "prefill", "decode"],
    }[layout]
    workers = [_Worker(r) for r in roles for _ in range(replicas[r])]
    # a heap of (time, order, where the request goes next, request)
    pending = [(q.arrival, i, "new", q) for i, q in enumerate(requests)]
    heapq.heapify(pending)
    t, order, left_to_finish = 0.0, len(pending), len(requests)

    def first_role(q: Request) -> tuple[str, float]:
        if layout == "colocated":
            return "decode", costs.encode_s[q.kind] + costs.prefix_s[q.kind] + costs.question_s
        if layout == "pd":
            return "prefill", costs.encode_s[q.kind] + costs.prefix_s[q.kind]
        return "encode", costs.encode_s[q.kind]

    def enqueue(role: str, q: Request, work: float) -> None:
        min((w for w in workers if w.role == role), key=lambda w: w.load).queue.append((q, work))

    while left_to_finish:
        while pending and pending[0][0] <= t:
            _, _, where, q = heapq.heappop(pending)
            if where == "new":
                role, work = first_role(q)
                enqueue(role, q, work)
            elif where == "prefill":
                enqueue("prefill", q, costs.prefix_s[q.kind])
            else:
                enqueue("decode", q, costs.question_s)
        for w in workers:
            if w.prefill is None and w.queue and (overlap or w.step is None):
                q, work = w.queue.pop(0)
                w.prefill = (work, q)
            if w.step is None and w.batch and (overlap or w.prefill is None):
                w.step = _step(costs, len(w.batch))
        lanes = [w.prefill[0] for w in workers if w.prefill] + [
            w.step for w in workers if w.step is not None
        ]
        if not lanes:  # idle until the next arrival
            t = max(t, pending[0][0])
            continue
        speed = min(1.0, processors / len(lanes))
        # the busy lanes change only at the next event: the first job to end or the next arrival
        dt = min(lanes) / speed
        if pending:
            dt = min(dt, max(0.0, pending[0][0] - t))
        t += dt
        for w in workers:
            if w.step is not None:
                w.step -= dt * speed
                if w.step <= 1e-12:
                    w.step = None
                    for s in w.batch:
                        s.tokens.append(t)
                    for s in [s for s in w.batch if len(s.tokens) >= s.new_tokens]:
                        s.done = t
                        w.batch.remove(s)
                        left_to_finish -= 1
            if w.prefill is None:
                continue
            left, q = w.prefill[0] - dt * speed, w.prefill[1]
            w.prefill = (left, q) if left > 1e-12 else None
            if w.prefill is not None:
                continue
            if w.role == "decode":  # the prefill that makes the first token
                q.tokens.append(t)
                if q.new_tokens <= 1:
                    q.done = t
                    left_to_finish -= 1
                else:
                    w.batch.append(q)
            else:  # encode -> prefill, prefill -> decode, after the transfer
                nxt = "prefill" if w.role == "encode" else "decode"
                delay = costs.embeds_s[q.kind] if nxt == "prefill" else costs.transfer_s[q.kind]
                heapq.heappush(pending, (t + delay, order, nxt, q))
                order += 1
    return requests


def _pct(xs: list[float], p: float) -> float:
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(round(p * (len(xs) - 1))))] if xs else float("nan")


def summarize(requests: list[Request], slo_ttft: float, slo_gap: float) -> dict[str, float]:
    """The short streams' time to first token, time per output token and worst inter-token gap
    (a visible stall; p50/p95 over streams), their goodput (the share whose TTFT and worst gap
    both meet the SLO), and throughput (requests per second, first arrival to last answer)."""
    short = [q for q in requests if q.kind == "short"]
    ttft = {id(q): q.tokens[0] - q.arrival for q in short}
    gaps = {id(q): [b - a for a, b in itertools.pairwise(q.tokens)] or [0.0] for q in short}
    tpot = [statistics.mean(g) for g in gaps.values()]
    worst = {k: max(g) for k, g in gaps.items()}
    ok = [q for q in short if ttft[id(q)] <= slo_ttft and worst[id(q)] <= slo_gap]
    span = max(q.done or 0.0 for q in requests) - min(q.arrival for q in requests)
    return {
        "ttft_p50_s": round(statistics.median(ttft.values()), 4),
        "ttft_p95_s": round(_pct(list(ttft.values()), 0.95), 4),
        "tpot_p50_s": round(statistics.median(tpot), 4),
        "tpot_p95_s": round(_pct(tpot, 0.95), 4),
        "worst_gap_p50_s": round(statistics.median(worst.values()), 4),
        "worst_gap_p95_s": round(_pct(list(worst.values()), 0.95), 4),
        "goodput": round(len(ok) / len(short), 3),
        "throughput_rps": round(len(requests) / span, 3),
    }
