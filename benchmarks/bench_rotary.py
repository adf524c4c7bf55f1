"""Rotary embeddings: posenc's RoPE against Hugging Face's and a plain copy, side by side.

float32 ``q`` and ``k`` of shape ``(4, 8, 2048, 64)`` (batch, heads, seq, head_dim;
``--shape`` changes it), given as an attention layer hands them over: a view
``x.view(batch, seq, heads, head_dim).transpose(1, 2)`` of a projection's output, not a
contiguous tensor. Forward and forward+backward, all in one process and in the same
rounds (:func:`timing.compare`) so the ratios share the machine's state. A model computes the
rotation's cos and sin once per forward pass (once per model) and rotates q and k in every
layer; the table times the two parts apart, and both together:

* ``copy``: ``q.clone(), k.clone()``, the memory bound of an elementwise op;
* per layer: ``posenc RotaryEmbedding`` (the module a posenc Transformer calls in each layer:
  cos and sin from its cache) against ``HF apply_rotary_pos_emb (per layer)`` (cos and sin
  given, as each Llama layer runs it);
* once per model: ``posenc cos/sin table (once per model)`` (the module's cos and sin of
  every position, what it computes when its cache is built or grows; a half-width
  ``(seq, head_dim / 2)`` table) against ``HF LlamaRotaryEmbedding cos/sin (once per
  model)`` (``(1, seq, head_dim)``); both on a module built before the timing, forward only
  (neither takes a gradient);
* everything in one call: ``posenc apply_rope`` (:func:`posenc.torch.apply_rope` on ``q``
  and on ``k``, angles, cos and sin computed in each call) against ``HF cos/sin +
  apply_rotary_pos_emb``; ``apply_rope`` with ``layout="interleaved"`` (one complex
  product); ``posenc apply_rope (torch.compile)``, the same compiled by inductor
  (``--no-compile`` skips it);
* ``straightforward``: the eager version many tutorials write (``einsum`` angles, the
  ``cat`` of the frequencies, ``rotate_half``, four temporaries), for context.
Then the Keras face's ``apply_rope``, eager and compiled by XLA (TensorFlow and JAX backends),
against keras-hub's ``RotaryEmbedding`` (forward, the current Keras backend; keras-hub's tensors
are ``(batch, seq, heads, head_dim)``).

Targets (exit status 1 when missed), forward and forward+backward, like for like: posenc's
per-layer ``RotaryEmbedding`` no slower than HF's per-layer ``apply_rotary_pos_emb``, and
``posenc apply_rope`` no slower than HF's cos/sin + ``apply_rotary_pos_emb``. Aim (printed,
not enforced): 3x a copy forward. At the default shape q and k are 16 MiB each, so the copy
reads and writes 64 MiB. ``--device cuda`` runs the PyTorch table on the GPU too. PyTorch runs
on one CPU thread unless ``--threads`` says otherwise. Hugging Face gets the position ids
``LlamaModel`` builds by default, ``(1, seq)``, not one row per batch element. Its
``apply_rotary_pos_emb`` is replaced by a kernel from the Hub when the ``kernels`` package is
installed; the metadata records whether it was (``hf_hub_kernels``). Times are minima over the rounds
(median and spread in the results); ``--tiny`` runs toy sizes and enforces nothing.
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
from timing import compare  # noqa: E402

SHAPE = (4, 8, 2048, 64)
BASE = 10000.0
COPY_AIM = 3.0
ROUNDS = 7
TINY = {"shape": (1, 2, 32, 16), "rounds": 2}
HF_PER_CALL = "HF cos/sin + apply_rotary_pos_emb"
HF_PER_LAYER = "HF apply_rotary_pos_emb (per layer)"
HF_PER_MODEL = "HF LlamaRotaryEmbedding cos/sin (once per model)"
OURS_PER_LAYER = "posenc RotaryEmbedding"
OURS_PER_MODEL = "posenc cos/sin table (once per model)"
KERAS_COMPILED = "posenc.keras apply_rope (XLA)"


def straightforward(q, k, positions, inv_freq):
    """RoPE as commonly written in eager PyTorch (for comparison only)."""
    freqs = torch.einsum("s,f->sf", positions.float(), inv_freq)
    emb = torch.cat((freqs, freqs), -1)
    cos, sin = emb.cos(), emb.sin()

    def rotate_half(x):
        x1, x2 = x.chunk(2, -1)
        return torch.cat((-x2, x1), -1)

    return q * cos + rotate_half(q) * sin, k * cos + rotate_half(k) * sin


def projected(shape):
    """The ``(batch, seq, heads, head_dim)`` shape of a projection's output, for the
    ``(batch, heads, seq, head_dim)`` shape of the attention's q or k."""
    batch, heads, seq, head_dim = shape
    return batch, seq, heads, head_dim


def as_attention_input(x):
    """q or k as an attention layer passes them on: the projection's output
    ``(batch, seq, heads, head_dim)`` seen as ``(batch, heads, seq, head_dim)``, a
    non-contiguous view (Hugging Face's Llama and ``posenc``'s ``MultiHeadAttention`` both
    do this)."""
    return x.transpose(1, 2)


def hf_hub_kernels() -> bool:
    """Whether Hugging Face may swap ``apply_rotary_pos_emb`` for a kernel from the Hub (the
    ``kernels`` package is installed); ``False`` without transformers."""
    try:
        from transformers.utils.import_utils import is_kernels_available
    except ImportError:
        return False
    return bool(is_kernels_available())


def hf_rope(shape, device):
    """Hugging Face's Llama rotary embedding (the once-per-model cos/sin) and
    ``apply_rotary_pos_emb`` (the per-layer rotation), or ``None``."""
    try:
        from transformers import LlamaConfig
        from transformers.models.llama.modeling_llama import (LlamaRotaryEmbedding,
                                                              apply_rotary_pos_emb)
    except ImportError:
        return None
    heads, head_dim = shape[1], shape[3]
    config = LlamaConfig(hidden_size=heads * head_dim, num_attention_heads=heads,
                         head_dim=head_dim, max_position_embeddings=shape[2],
                         rope_parameters={"rope_type": "default", "rope_theta": BASE})
    return LlamaRotaryEmbedding(config).to(device), apply_rotary_pos_emb


def torch_table(device: str, rows: list, *, shape=SHAPE, rounds=ROUNDS,
                compile_rows=True) -> list[str]:
    torch.manual_seed(0)
    q0, k0 = (as_attention_input(torch.randn(projected(shape), device=device))
              for _ in range(2))
    gq, gk = (torch.randn(shape, device=device) for _ in range(2))
    seq = shape[2]
    positions = torch.arange(seq, device=device)
    position_ids = positions[None]              # (1, seq), as LlamaModel builds them
    inv_freq = pt.rope_frequencies(shape[3], base=BASE)[0].to(device)
    module = pt.RotaryEmbedding(shape[3], base=BASE, max_len=seq).to(device)
    hf = hf_rope(shape, device)

    def apply_rope(q, k):
        return pt.apply_rope(q, positions, inv_freq), pt.apply_rope(k, positions, inv_freq)

    methods = {
        "copy": lambda q, k: (q.clone(), k.clone()),
        OURS_PER_LAYER: lambda q, k: module(q, k),
        "posenc apply_rope": apply_rope,
        "posenc apply_rope interleaved": lambda q, k: (
            pt.apply_rope(q, positions, inv_freq, layout="interleaved"),
            pt.apply_rope(k, positions, inv_freq, layout="interleaved")),
        "straightforward eager": lambda q, k: straightforward(q, k, positions, inv_freq),
    }
    # once per model: no gradient flows into cos and sin (forward only)
    per_model = {OURS_PER_MODEL: lambda: module._angles(positions, seq)}
    if compile_rows:
        methods["posenc apply_rope (torch.compile)"] = torch.compile(apply_rope, dynamic=False)
    if hf:
        rotary, apply_rotary_pos_emb = hf
        cos, sin = rotary(q0, position_ids)
        methods[HF_PER_LAYER] = lambda q, k: apply_rotary_pos_emb(q, k, cos, sin)
        methods[HF_PER_CALL] = lambda q, k: apply_rotary_pos_emb(
            q, k, *rotary(q, position_ids))
        per_model[HF_PER_MODEL] = lambda: rotary(q0, position_ids)
    want = methods["straightforward eager"](q0, k0)
    runs = {}
    for name, fn in methods.items():
        got = fn(q0, k0)
        if name not in ("copy", "posenc apply_rope interleaved"):   # another layout
            diff = max((a - b).abs().max().item() for a, b in zip(got, want))
            assert diff < 1e-3, (name, diff)   # angles near 2047 rad: a float32 ulp is 1e-4
        # the leaves are the projections' outputs; each call sees the attention layer's view
        q, k = (t.detach().transpose(1, 2).clone().requires_grad_() for t in (q0, k0))

        def forward(fn=fn):
            with torch.no_grad():
                fn(q0, k0)

        def forward_backward(fn=fn, q=q, k=k):
            out_q, out_k = fn(as_attention_input(q), as_attention_input(k))
            torch.autograd.backward((out_q, out_k), (gq, gk))
            q.grad = k.grad = None
        runs[(name, "f")], runs[(name, "fb")] = forward, forward_backward
    for name, fn in per_model.items():
        runs[(name, "f")] = fn
    measured = compare(runs, repeat=rounds, device=device)
    copy_f, copy_fb = measured[("copy", "f")].min_ms, measured[("copy", "fb")].min_ms
    print(f"\nPyTorch {torch.__version__}, q and k float32 {tuple(shape)}, {device} "
          f"({torch.get_num_threads()} threads); ms, min of {rounds} rounds side by side; "
          "ratios to the copy")
    print(f"{'method':<50}{'fwd':>9}{'x copy':>8}{'fwd+bwd':>10}{'x copy':>8}")
    times = {}
    for name in [*methods, *per_model]:
        f, fb = measured[(name, "f")], measured.get((name, "fb"))
        times[name] = (f.min_ms, fb.min_ms if fb else None)
        row = {"table": f"torch-{device}", "method": name, "forward_ms": f.min_ms,
               "forward_median_ms": f.median_ms, "forward_spread_ms": f.spread_ms,
               "forward_x_copy": f.min_ms / copy_f}
        if fb:
            row.update({"forward_backward_ms": fb.min_ms,
                        "forward_backward_median_ms": fb.median_ms,
                        "forward_backward_spread_ms": fb.spread_ms,
                        "forward_backward_x_copy": fb.min_ms / copy_fb})
        rows.append(row)
        backward = (f"{fb.min_ms:>10.1f}{fb.min_ms / copy_fb:>8.2f}" if fb
                    else f"{'-':>10}{'-':>8}")
        print(f"{name:<50}{f.min_ms:>9.1f}{f.min_ms / copy_f:>8.2f}{backward}")
    failed = []
    pairs = [(OURS_PER_LAYER, HF_PER_LAYER, "per layer"),
             ("posenc apply_rope", HF_PER_CALL, "cos/sin and rotation in one call")]
    for ours, theirs, what in pairs if hf else []:
        (ours_f, ours_fb), (hf_f, hf_fb) = times[ours], times[theirs]
        print(f"{what}: {ours} / {theirs}: forward {ours_f / hf_f:.2f}, "
              f"forward+backward {ours_fb / hf_fb:.2f}")
        if ours_f > hf_f:
            failed.append(f"{device}: {ours} forward {ours_f:.1f} ms > {theirs} {hf_f:.1f} ms")
        if ours_fb > hf_fb:
            failed.append(f"{device}: {ours} forward+backward {ours_fb:.1f} ms > {theirs} "
                          f"{hf_fb:.1f} ms")
    if hf:
        print(f"once per model: {OURS_PER_MODEL} {times[OURS_PER_MODEL][0]:.2f} ms, "
              f"{HF_PER_MODEL} {times[HF_PER_MODEL][0]:.2f} ms")
    print(f"posenc apply_rope / copy: forward {times['posenc apply_rope'][0] / copy_f:.2f} "
          f"(aim: {COPY_AIM})")
    return failed


def keras_compiled(fn):
    """``fn`` compiled by the Keras backend's XLA compiler (``tf.function(jit_compile=True)``
    on TensorFlow, ``jax.jit`` on JAX), or ``None`` on the PyTorch backend (whose compiled
    row is the PyTorch table's)."""
    import keras

    backend = keras.backend.backend()
    if backend == "tensorflow":
        import tensorflow as tf

        return tf.function(fn, jit_compile=True, autograph=False)
    if backend == "jax":
        import jax

        return jax.jit(fn)
    return None


def keras_table(out: list, *, shape=SHAPE, rounds=ROUNDS) -> list[str]:
    import keras

    import posenc.keras as pk
    try:
        import keras_hub
    except ImportError:
        keras_hub = None
    rng = torch.Generator().manual_seed(0)
    q = keras.ops.convert_to_tensor(torch.randn(shape, generator=rng).numpy())
    seq_first = keras.ops.transpose(q, (0, 2, 1, 3))
    inv_freq = pk.rope_frequencies(shape[3], base=BASE)[0]
    positions = keras.ops.arange(shape[2], dtype="int32")
    fns = {"copy": lambda: keras.ops.convert_to_numpy(keras.ops.add(q, 0.0)),
           "posenc.keras apply_rope": lambda: keras.ops.convert_to_numpy(
               pk.apply_rope(q, positions, inv_freq))}
    compiled = keras_compiled(lambda x: pk.apply_rope(x, positions, inv_freq))
    if compiled is not None:
        fns[KERAS_COMPILED] = lambda: keras.ops.convert_to_numpy(compiled(q))
        diff = abs(fns[KERAS_COMPILED]() - fns["posenc.keras apply_rope"]()).max()
        assert diff < 1e-4, (KERAS_COMPILED, diff)
    if keras_hub is not None:
        hub = keras_hub.layers.RotaryEmbedding(max_wavelength=int(BASE))
        fns["keras-hub RotaryEmbedding"] = lambda: keras.ops.convert_to_numpy(hub(seq_first))
    timings = compare(fns, repeat=rounds)
    copy, ours = timings["copy"].min_ms, timings["posenc.keras apply_rope"].min_ms
    print(f"\nKeras {keras.__version__} on {keras.backend.backend()}, one tensor {tuple(shape)} "
          f"float32, forward, CPU; ms, min of {rounds} rounds side by side")
    print(f"{'method':<50}{'fwd':>9}{'x copy':>8}")
    for name, t in timings.items():
        print(f"{name:<50}{t.min_ms:>9.1f}{t.min_ms / copy:>8.2f}")
        out.append({"table": f"keras-{keras.backend.backend()}", "method": name,
                    "forward_ms": t.min_ms, "forward_median_ms": t.median_ms,
                    "forward_spread_ms": t.spread_ms, "forward_x_copy": t.min_ms / copy})
    if keras_hub is not None:
        print(f"posenc.keras / keras-hub: "
              f"{ours / timings['keras-hub RotaryEmbedding'].min_ms:.2f}")
    return []


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--shape", type=int, nargs=4, default=list(SHAPE),
                        metavar=("BATCH", "HEADS", "SEQ", "HEAD_DIM"))
    parser.add_argument("--rounds", type=int, default=ROUNDS, help="recorded calls of each method")
    parser.add_argument("--no-keras", action="store_true", help="skip the Keras table")
    parser.add_argument("--no-compile", action="store_true",
                        help="skip the torch.compile (inductor) row")
    parser.add_argument("--threads", type=int, default=1,
                        help="CPU threads of PyTorch (default 1: on a shared machine, small "
                             "multi-threaded ops wait for busy cores; 0 keeps PyTorch's own)")
    parser.add_argument("--tiny", action="store_true",
                        help="a smoke run at toy sizes: the targets are printed, not enforced")
    record.add_arguments(parser)
    args = parser.parse_args()
    if args.tiny:
        args.shape, args.rounds = list(TINY["shape"]), TINY["rounds"]
    started = time.time()
    if args.threads > 0:
        torch.set_num_threads(args.threads)
    rows = []
    options = {"shape": tuple(args.shape), "rounds": args.rounds}
    failed = torch_table("cpu", rows, compile_rows=not args.no_compile, **options)
    if args.device != "cpu":
        failed += torch_table(args.device, rows, compile_rows=not args.no_compile, **options)
    if not args.no_keras:
        failed += keras_table(rows, **options)
    for line in failed:
        print("MISSED:", line)
    record.save("bench-rotary", rows, args, started=started, shape=list(args.shape),
                rounds=args.rounds, missed=failed, hf_hub_kernels=hf_hub_kernels())
    if args.tiny:
        return 0
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
