"""A small byte-level text LM trained here in minutes, so KV drift is measured on logits that mean
something (benchmarks/kv_drift.py).

Corpus: the docstrings of Python's own standard library (English prose about code), read with
`ast` from the interpreter's stdlib folder: modules sorted by name, the first 90 % to train, the
last 10 % held out (the drift prompts come from there only). The model is the Qwen2 decoder that
the Qwen2-VL family's language model is (rotary positions, GQA, RMSNorm), 2 layers, hidden 64,
2 query / 1 KV heads of 32, vocabulary = the 256 bytes (~0.13M parameters: small enough to train
on a CPU shared by eight jobs in minutes). Trained with AdamW on random 128-byte windows; the
held-out bits per byte are recorded next to the model (a uniform guess is 8.0, a unigram model
of English ~4.4): a model well below that predicts real structure, so which token it ranks
first is a property of the text, not of random weights.

    python benchmarks/kv_textlm.py               # train (or reuse) -> ~/.cache/vlm-cascade/textlm
"""

from __future__ import annotations

import argparse
import ast
import json
import math
import sysconfig
import time
from pathlib import Path

import torch  # noqa: E402

DEFAULT_DIR = Path.home() / ".cache" / "vlm-cascade" / "textlm"
SEQ = 128


def corpus() -> tuple[bytes, bytes]:
    """(train, held-out) text: stdlib docstrings, split by module name."""
    root = Path(sysconfig.get_paths()["stdlib"])
    files = sorted(p for p in root.glob("*.py") if not p.name.startswith("_"))
    docs = []
    for p in files:
        try:
            tree = ast.parse(p.read_text(encoding="utf-8"))
        except (SyntaxError, UnicodeDecodeError):
            continue
        parts = []
        for node in ast.walk(tree):
            if isinstance(node, (ast.Module, ast.FunctionDef, ast.ClassDef, ast.AsyncFunctionDef)):
                doc = ast.get_docstring(node)
                if doc and len(doc) > 80:
                    parts.append(" ".join(doc.split()))
        docs.append("\n".join(parts))
    cut = int(len(docs) * 0.9)
    return "\n".join(docs[:cut]).encode(), "\n".join(docs[cut:]).encode()


def config():
    from transformers import Qwen2Config

    return Qwen2Config(
        vocab_size=256,
        hidden_size=64,
        intermediate_size=256,
        num_hidden_layers=2,
        num_attention_heads=2,
        num_key_value_heads=1,
        max_position_embeddings=4096,
        rope_theta=10000.0,
        tie_word_embeddings=True,
    )


def bits_per_byte(model, data: torch.Tensor, windows: int = 32) -> float:
    g = torch.Generator().manual_seed(1)
    starts = torch.randint(0, data.numel() - SEQ - 1, (windows,), generator=g)
    x = torch.stack([data[s : s + SEQ + 1] for s in starts.tolist()])
    with torch.inference_mode():
        logits = model(input_ids=x[:, :-1]).logits
        nll = torch.nn.functional.cross_entropy(logits.reshape(-1, 256), x[:, 1:].reshape(-1))
    return float(nll) / math.log(2)


def train(out: Path, steps: int, threads: int) -> dict:
    from transformers import Qwen2ForCausalLM

    torch.manual_seed(0)
    torch.set_num_threads(threads)
    tr, ho = corpus()
    data = torch.tensor(list(tr), dtype=torch.long)
    held = torch.tensor(list(ho), dtype=torch.long)
    model = Qwen2ForCausalLM(config())
    opt = torch.optim.AdamW(model.parameters(), lr=3e-3, weight_decay=0.01)
    sched = torch.optim.lr_scheduler.OneCycleLR(opt, max_lr=3e-3, total_steps=steps, pct_start=0.1)
    g = torch.Generator().manual_seed(0)
    first = bits_per_byte(model.eval(), held)
    t0 = time.perf_counter()
    model.train()
    for step in range(steps):
        starts = torch.randint(0, data.numel() - SEQ - 1, (8,), generator=g)
        x = torch.stack([data[s : s + SEQ + 1] for s in starts.tolist()])
        loss = model(input_ids=x[:, :-1], labels=x[:, :-1].clone()).loss
        # labels are shifted inside the model: this is next-byte prediction
        opt.zero_grad()
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        sched.step()
        if step % 25 == 0:
            print(f"step {step} loss {loss.item() / math.log(2):.3f} bits/byte", flush=True)
    model.eval()
    info = {
        "train_bytes": len(tr),
        "held_out_bytes": len(ho),
        "steps": steps,
        "train_s": round(time.perf_counter() - t0, 1),
        "batch": [8, SEQ],
        "threads": threads,
        "held_out_bits_per_byte_before": round(first, 3),
        "held_out_bits_per_byte": round(bits_per_byte(model, held), 3),
        "parameters": sum(p.numel() for p in model.parameters()),
    }
    out.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(out)
    (out / "training.json").write_text(json.dumps(info, indent=1))
    return info


def load(path: Path = DEFAULT_DIR, steps: int = 700, threads: int = 1):
    """(model, training info, held-out bytes): trained on first use, reused after."""
    from transformers import Qwen2ForCausalLM

    if not (path / "training.json").exists():
        train(path, steps, threads)
    model = Qwen2ForCausalLM.from_pretrained(path, dtype=torch.float32).eval()
    return model, json.loads((path / "training.json").read_text()), corpus()[1]


if __name__ == "__main__":
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", type=Path, default=DEFAULT_DIR)
    ap.add_argument("--steps", type=int, default=700)
    ap.add_argument("--threads", type=int, default=1)
    a = ap.parse_args()
    print(json.dumps(train(a.out, a.steps, a.threads), indent=1))
