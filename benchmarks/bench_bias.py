"""Attention biases through PyTorch's scaled_dot_product_attention against an explicit softmax.

For ALiBi (causal) and T5 (bidirectional), at batch 1, 8 heads, head_dim 64 and a few lengths:
* the bias: ``ALiBiBias`` read from its cache, and ``T5RelativeBias`` (buckets and gather);
* attention with the bias: ``scaled_dot_product_attention(q, k, v, attn_mask=bias)`` against
  ``softmax(q k^T / sqrt(d) + bias) v`` written out.

Targets (exit status 1 when missed): both ways give the same output (max abs difference
below 1e-4), and the SDPA path is at most 1.25x the explicit one's time (it is usually
faster when its kernel is a fused one, which does not keep the softmax's temporaries).

"SDPA" is whichever kernel PyTorch picks for a float ``attn_mask`` (``--sdpa-backend`` pins
one); each row of the results names it (``sdpa_backend``). A last column times the bias path
(bias and attention) compiled by ``torch.compile`` (inductor); ``--no-compile`` skips it.
Times are minima over rounds that run every method in turn (:func:`timing.compare`), the
median and spread beside them in the results. ``--tiny`` runs toy sizes and enforces nothing.
"""

from __future__ import annotations

import argparse
import os
import sys
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import torch  # noqa: E402
import torch.nn.functional as F  # noqa: E402
from torch.nn.attention import SDPBackend, sdpa_kernel  # noqa: E402

import posenc.torch as pt  # noqa: E402
import record  # noqa: E402
from timing import compare  # noqa: E402

HEADS, HEAD_DIM = 8, 64
TINY = {"lengths": [16, 32], "repeat": 2}


def explicit(q, k, v, bias):
    """The attention the bias is defined by, written out."""
    scores = q @ k.transpose(-1, -2) / q.shape[-1] ** 0.5 + bias
    return torch.softmax(scores, dim=-1) @ v


def sdpa_backend(q, k, v, bias) -> str:
    """The kernel ``scaled_dot_product_attention`` picks for these inputs (in the backends
    allowed at the call), e.g. ``"FLASH_ATTENTION"`` or ``"MATH"``."""
    return SDPBackend(torch._fused_sdp_choice(q, k, v, attn_mask=bias)).name


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--lengths", type=int, nargs="+", default=[256, 1024, 2048])
    parser.add_argument("--repeat", type=int, default=7, help="recorded calls of each method")
    parser.add_argument("--sdpa-backend", default=None,
                        choices=[b for b in SDPBackend.__members__ if b not in ("ERROR",)],
                        help="pin scaled_dot_product_attention to this kernel (default: "
                             "PyTorch's choice, recorded in the results)")
    parser.add_argument("--no-compile", action="store_true",
                        help="skip the torch.compile (inductor) row of the bias path")
    parser.add_argument("--tiny", action="store_true",
                        help="a smoke run at toy sizes: the targets are printed, not enforced")
    record.add_arguments(parser)
    args = parser.parse_args()
    if args.tiny:
        args.lengths, args.repeat = TINY["lengths"], TINY["repeat"]
    started = time.time()
    device = args.device
    torch.manual_seed(0)
    schemes = {"ALiBi (causal)": pt.ALiBiBias(HEADS).to(device),
               "T5 (bidirectional)": pt.T5RelativeBias(HEADS).to(device)}
    backends = ([SDPBackend.__members__[args.sdpa_backend]] if args.sdpa_backend
                else [SDPBackend.__members__[b] for b in ("FLASH_ATTENTION", "EFFICIENT_ATTENTION",
                                              "CUDNN_ATTENTION", "MATH")])
    print(f"batch 1, {HEADS} heads, head_dim {HEAD_DIM}, float32, {device}; times in ms "
          f"(min of {args.repeat} calls after a warm-up, methods in the same rounds; median "
          "and spread in the results)")
    print(f"{'scheme':<20}{'L':>6}{'bias':>9}{'SDPA':>9}{'explicit':>10}{'compiled':>10}"
          f"{'ratio':>7}{'max |diff|':>12}  SDPA kernel")
    failed, rows = [], []
    for name, module in schemes.items():
        for length in args.lengths:
            q, k, v = (torch.randn(1, HEADS, length, HEAD_DIM, device=device) for _ in range(3))
            fns = {"bias": lambda: module(length, length),
                   "sdpa": lambda: F.scaled_dot_product_attention(q, k, v, attn_mask=bias),
                   "explicit": lambda: explicit(q, k, v, bias)}
            if not args.no_compile:
                # the whole bias path, bias and attention, through inductor
                path = torch.compile(lambda q, k, v: F.scaled_dot_product_attention(
                    q, k, v, attn_mask=module(q.shape[-2], k.shape[-2])), dynamic=False)
                fns["compiled"] = lambda: path(q, k, v)
            with torch.no_grad(), sdpa_kernel(backends):
                bias = module(length, length)
                backend = sdpa_backend(q, k, v, bias)
                t = compare(fns, repeat=args.repeat, device=device)
                diff = (F.scaled_dot_product_attention(q, k, v, attn_mask=bias)
                        - explicit(q, k, v, bias)).abs().max().item()
                if "compiled" in fns:
                    compiled_diff = fns["compiled"]() - explicit(q, k, v, bias)
                    diff = max(diff, compiled_diff.abs().max().item())
            ratio = t["sdpa"].min_ms / t["explicit"].min_ms
            row = {"scheme": name, "L": length, "bias_ms": t["bias"].min_ms,
                   "sdpa_ms": t["sdpa"].min_ms, "explicit_ms": t["explicit"].min_ms,
                   "sdpa_over_explicit": ratio, "max_abs_diff": diff, "sdpa_backend": backend,
                   **{f"{key}_{stat}_ms": getattr(t[key], f"{stat}_ms")
                      for key in t for stat in ("median", "spread")}}
            if "compiled" in t:
                row["compiled_ms"] = t["compiled"].min_ms
            rows.append(row)
            compiled = f"{t['compiled'].min_ms:>10.2f}" if "compiled" in t else f"{'-':>10}"
            print(f"{name:<20}{length:>6}{t['bias'].min_ms:>9.2f}{t['sdpa'].min_ms:>9.2f}"
                  f"{t['explicit'].min_ms:>10.2f}{compiled}{ratio:>7.2f}{diff:>12.1e}  {backend}")
            if diff >= 1e-4:
                failed.append(f"{name}, L={length}: outputs differ by {diff:.1e}")
            if ratio > 1.25:
                failed.append(f"{name}, L={length}: SDPA takes {ratio:.2f}x the explicit time")
    for line in failed:
        print("MISSED:", line)
    record.save("bench-bias", rows, args, started=started, heads=HEADS, head_dim=HEAD_DIM,
                repeat=args.repeat, sdpa_backends_allowed=[b.name for b in backends],
                missed=failed)
    if args.tiny:
        return 0
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
