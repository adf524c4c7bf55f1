"""Rotary embeddings: posenc's apply_rope against Hugging Face's and a plain copy, side by side.

float32 ``q`` and ``k`` of shape ``(4, 8, 2048, 64)`` (batch, heads, seq, head_dim), forward
and forward+backward, all in one process so the ratios share the machine's state:
* ``copy``: ``q.clone(), k.clone()``, the memory bound of an elementwise op;
* ``posenc apply_rope``: :func:`posenc.torch.apply_rope` on ``q`` and on ``k`` (angles, cos
  and sin computed in each call), ``posenc RotaryEmbedding`` (cos and sin from its cache), and
  ``apply_rope`` with ``layout="interleaved"`` (one complex product);
* ``HF``: ``LlamaRotaryEmbedding`` (cos/sin) then ``apply_rotary_pos_emb``, as Llama runs it;
* ``straightforward``: the eager version many tutorials write (``einsum`` angles, the
  ``cat`` of the frequencies, ``rotate_half``, four temporaries), for context.
Then the Keras face's ``apply_rope`` against keras-hub's ``RotaryEmbedding`` (forward, the
current Keras backend; keras-hub's tensors are ``(batch, seq, heads, head_dim)``).

Target (exit status 1 when missed): ``posenc apply_rope`` no slower than HF, forward and
forward+backward. Aim (printed, not enforced: on a CPU whose cache holds q and k the copy
runs far above memory speed): 3x a copy forward. ``--device cuda`` runs the PyTorch table
on the GPU too. PyTorch runs on one CPU thread unless ``--threads`` says otherwise.
"""

from __future__ import annotations

import argparse
import os
import sys
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import torch  # noqa: E402

import posenc.torch as pt  # noqa: E402
import record  # noqa: E402
from bench_sinusoidal import timeit as shared_timeit  # noqa: E402

SHAPE = (4, 8, 2048, 64)
BASE = 10000.0
COPY_AIM = 3.0


ROUNDS = 7


def timeit(fn, **kwargs) -> float:
    """Shortest of 5 wall times of ``fn()`` in milliseconds, after a warm-up call."""
    return shared_timeit(fn, best=True, repeat=5, **kwargs)


def side_by_side(fns: dict, *, device: str = "cpu") -> dict:
    """Shortest wall time (ms) of each ``fn`` over ``ROUNDS`` rounds that run every ``fn``
    in turn, so that a busy moment of a shared machine hits them all alike."""
    times = {name: [] for name in fns}
    for _ in range(ROUNDS):
        for name, fn in fns.items():
            times[name].append(shared_timeit(fn, repeat=1, device=device))
    return {name: min(t) for name, t in times.items()}


def straightforward(q, k, positions, inv_freq):
    """RoPE as commonly written in eager PyTorch (for comparison only)."""
    freqs = torch.einsum("s,f->sf", positions.float(), inv_freq)
    emb = torch.cat((freqs, freqs), -1)
    cos, sin = emb.cos(), emb.sin()

    def rotate_half(x):
        x1, x2 = x.chunk(2, -1)
        return torch.cat((-x2, x1), -1)

    return q * cos + rotate_half(q) * sin, k * cos + rotate_half(k) * sin


def hf_rope(device):
    """Hugging Face's Llama rotary embedding and ``apply_rotary_pos_emb``, or ``None``."""
    try:
        from transformers import LlamaConfig
        from transformers.models.llama.modeling_llama import (LlamaRotaryEmbedding,
                                                              apply_rotary_pos_emb)
    except ImportError:
        return None
    heads, head_dim = SHAPE[1], SHAPE[3]
    config = LlamaConfig(hidden_size=heads * head_dim, num_attention_heads=heads,
                         head_dim=head_dim, max_position_embeddings=SHAPE[2],
                         rope_parameters={"rope_type": "default", "rope_theta": BASE})
    rotary = LlamaRotaryEmbedding(config).to(device)

    def run(q, k, position_ids):
        cos, sin = rotary(q, position_ids)
        return apply_rotary_pos_emb(q, k, cos, sin)
    return run


def torch_table(device: str, rows: list) -> list[str]:
    torch.manual_seed(0)
    q0, k0 = (torch.randn(SHAPE, device=device) for _ in range(2))
    gq, gk = (torch.randn(SHAPE, device=device) for _ in range(2))
    seq = SHAPE[2]
    positions = torch.arange(seq, device=device)
    position_ids = positions[None].expand(SHAPE[0], seq)
    inv_freq = pt.rope_frequencies(SHAPE[3], base=BASE)[0].to(device)
    module = pt.RotaryEmbedding(SHAPE[3], base=BASE, max_len=seq).to(device)
    hf = hf_rope(device)
    methods = {
        "copy": lambda q, k: (q.clone(), k.clone()),
        "posenc apply_rope": lambda q, k: (pt.apply_rope(q, positions, inv_freq),
                                           pt.apply_rope(k, positions, inv_freq)),
        "posenc RotaryEmbedding": lambda q, k: module(q, k),
        "posenc apply_rope interleaved": lambda q, k: (
            pt.apply_rope(q, positions, inv_freq, layout="interleaved"),
            pt.apply_rope(k, positions, inv_freq, layout="interleaved")),
        **({"HF cos/sin + apply_rotary_pos_emb": lambda q, k: hf(q, k, position_ids)}
           if hf else {}),
        "straightforward eager": lambda q, k: straightforward(q, k, positions, inv_freq),
    }
    want = methods["straightforward eager"](q0, k0)
    runs = {}
    for name, fn in methods.items():
        got = fn(q0, k0)
        if name not in ("copy", "posenc apply_rope interleaved"):   # another layout
            diff = max((a - b).abs().max().item() for a, b in zip(got, want))
            assert diff < 1e-3, (name, diff)   # angles near 2047 rad: a float32 ulp is 1e-4
        q, k = (t.detach().clone().requires_grad_() for t in (q0, k0))

        def forward(fn=fn):
            with torch.no_grad():
                fn(q0, k0)

        def forward_backward(fn=fn, q=q, k=k):
            out_q, out_k = fn(q, k)
            torch.autograd.backward((out_q, out_k), (gq, gk))
            q.grad = k.grad = None
        runs[(name, "f")], runs[(name, "fb")] = forward, forward_backward
    measured = side_by_side(runs, device=device)
    times = {name: (measured[(name, "f")], measured[(name, "fb")]) for name in methods}
    copy_f, copy_fb = times["copy"]
    print(f"\nPyTorch {torch.__version__}, q and k float32 {SHAPE}, {device} "
          f"({torch.get_num_threads()} threads); ms, best of {ROUNDS} rounds side by side; "
          "ratios to the copy")
    print(f"{'method':<36}{'fwd':>9}{'x copy':>8}{'fwd+bwd':>10}{'x copy':>8}")
    for name, (f, fb) in times.items():
        print(f"{name:<36}{f:>9.1f}{f / copy_f:>8.2f}{fb:>10.1f}{fb / copy_fb:>8.2f}")
        rows.append({"table": f"torch-{device}", "method": name, "forward_ms": f,
                     "forward_x_copy": f / copy_f, "forward_backward_ms": fb,
                     "forward_backward_x_copy": fb / copy_fb})
    failed = []
    ours_f, ours_fb = times["posenc apply_rope"]
    if hf:
        hf_f, hf_fb = times["HF cos/sin + apply_rotary_pos_emb"]
        print(f"posenc apply_rope / HF: forward {ours_f / hf_f:.2f}, "
              f"forward+backward {ours_fb / hf_fb:.2f}")
        if ours_f > hf_f:
            failed.append(f"{device}: apply_rope forward {ours_f:.1f} ms > HF {hf_f:.1f} ms")
        if ours_fb > hf_fb:
            failed.append(f"{device}: apply_rope forward+backward {ours_fb:.1f} ms > HF "
                          f"{hf_fb:.1f} ms")
    print(f"posenc apply_rope / copy: forward {ours_f / copy_f:.2f} (aim: {COPY_AIM})")
    return failed


def keras_table(out: list) -> list[str]:
    import keras

    import posenc.keras as pk
    try:
        import keras_hub
    except ImportError:
        keras_hub = None
    rng = torch.Generator().manual_seed(0)
    q = keras.ops.convert_to_tensor(torch.randn(SHAPE, generator=rng).numpy())
    seq_first = keras.ops.transpose(q, (0, 2, 1, 3))
    inv_freq = pk.rope_frequencies(SHAPE[3], base=BASE)[0]
    positions = keras.ops.arange(SHAPE[2], dtype="int32")
    fns = {"copy": lambda: keras.ops.convert_to_numpy(keras.ops.add(q, 0.0)),
           "posenc.keras apply_rope": lambda: keras.ops.convert_to_numpy(
               pk.apply_rope(q, positions, inv_freq))}
    if keras_hub is not None:
        hub = keras_hub.layers.RotaryEmbedding(max_wavelength=int(BASE))
        fns["keras-hub RotaryEmbedding"] = lambda: keras.ops.convert_to_numpy(hub(seq_first))
    rows = side_by_side(fns)
    copy, ours = rows["copy"], rows["posenc.keras apply_rope"]
    print(f"\nKeras {keras.__version__} on {keras.backend.backend()}, one tensor {SHAPE} "
          f"float32, forward, CPU; ms, best of {ROUNDS} rounds side by side")
    print(f"{'method':<36}{'fwd':>9}{'x copy':>8}")
    for name, t in rows.items():
        print(f"{name:<36}{t:>9.1f}{t / copy:>8.2f}")
        out.append({"table": f"keras-{keras.backend.backend()}", "method": name,
                    "forward_ms": t, "forward_x_copy": t / copy})
    if keras_hub is not None:
        print(f"posenc.keras / keras-hub: {ours / rows['keras-hub RotaryEmbedding']:.2f}")
    return []


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--no-keras", action="store_true", help="skip the Keras table")
    parser.add_argument("--threads", type=int, default=1,
                        help="CPU threads of PyTorch (default 1: on a shared machine, small "
                             "multi-threaded ops wait for busy cores; 0 keeps PyTorch's own)")
    record.add_arguments(parser)
    args = parser.parse_args()
    started = time.time()
    if args.threads > 0:
        torch.set_num_threads(args.threads)
    rows = []
    failed = torch_table("cpu", rows)
    if args.device != "cpu":
        failed += torch_table(args.device, rows)
    if not args.no_keras:
        failed += keras_table(rows)
    for line in failed:
        print("MISSED:", line)
    record.save("bench-rotary", rows, args, started=started, shape=list(SHAPE), rounds=ROUNDS,
                missed=failed)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
