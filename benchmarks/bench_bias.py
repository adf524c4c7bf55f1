"""Attention biases through PyTorch's fused attention against an explicit softmax.

For ALiBi (causal) and T5 (bidirectional), at batch 1, 8 heads, head_dim 64 and a few lengths:
* the bias: ``ALiBiBias`` read from its cache, and ``T5RelativeBias`` (buckets and gather);
* attention with the bias: ``scaled_dot_product_attention(q, k, v, attn_mask=bias)`` against
  ``softmax(q k^T / sqrt(d) + bias) v`` written out.

Targets (exit status 1 when missed): both ways give the same output (max abs difference
below 1e-4), and the fused path is at most 1.25x the explicit one's time (it is usually
faster: it does not keep the softmax's temporaries).
"""

from __future__ import annotations

import argparse
import os
import sys
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import torch  # noqa: E402
import torch.nn.functional as F  # noqa: E402

import posenc.torch as pt  # noqa: E402
import record  # noqa: E402
from bench_sinusoidal import timeit as shared_timeit  # noqa: E402

HEADS, HEAD_DIM = 8, 64


def timeit(fn, **kwargs) -> float:
    """Shortest of 7 wall times of ``fn()`` in milliseconds, after a warm-up call."""
    return shared_timeit(fn, best=True, **kwargs)


def explicit(q, k, v, bias):
    """The attention the bias is defined by, written out."""
    scores = q @ k.transpose(-1, -2) / q.shape[-1] ** 0.5 + bias
    return torch.softmax(scores, dim=-1) @ v


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--lengths", type=int, nargs="+", default=[256, 1024, 2048])
    record.add_arguments(parser)
    args = parser.parse_args()
    started = time.time()
    device = args.device
    torch.manual_seed(0)
    schemes = {"ALiBi (causal)": pt.ALiBiBias(HEADS).to(device),
               "T5 (bidirectional)": pt.T5RelativeBias(HEADS).to(device)}
    print(f"batch 1, {HEADS} heads, head_dim {HEAD_DIM}, float32, {device}; times in ms "
          "(best of 7)")
    print(f"{'scheme':<20}{'L':>6}{'bias':>9}{'SDPA':>9}{'explicit':>10}{'ratio':>7}"
          f"{'max |diff|':>12}")
    failed, rows = [], []
    for name, module in schemes.items():
        for length in args.lengths:
            q, k, v = (torch.randn(1, HEADS, length, HEAD_DIM, device=device) for _ in range(3))
            with torch.no_grad():
                bias = module(length, length)
                t_bias = timeit(lambda: module(length, length), device=device)
                t_sdpa = timeit(lambda: F.scaled_dot_product_attention(q, k, v, attn_mask=bias),
                                device=device)
                t_explicit = timeit(lambda: explicit(q, k, v, bias), device=device)
                diff = (F.scaled_dot_product_attention(q, k, v, attn_mask=bias)
                        - explicit(q, k, v, bias)).abs().max().item()
            ratio = t_sdpa / t_explicit
            rows.append({"scheme": name, "L": length, "bias_ms": t_bias, "sdpa_ms": t_sdpa,
                         "explicit_ms": t_explicit, "sdpa_over_explicit": ratio,
                         "max_abs_diff": diff})
            print(f"{name:<20}{length:>6}{t_bias:>9.2f}{t_sdpa:>9.2f}{t_explicit:>10.2f}"
                  f"{ratio:>7.2f}{diff:>12.1e}")
            if diff >= 1e-4:
                failed.append(f"{name}, L={length}: outputs differ by {diff:.1e}")
            if ratio > 1.25:
                failed.append(f"{name}, L={length}: SDPA takes {ratio:.2f}x the explicit time")
    for line in failed:
        print("MISSED:", line)
    record.save("bench-bias", rows, args, started=started, heads=HEADS, head_dim=HEAD_DIM,
                missed=failed)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
