"""Bias schemes through flex_attention's score_mod against the dense bias: time and peak memory.

For ALiBi, FIRE and FoX (its forget gates read from a layer input of width 512), causal, at
batch 1, 8 heads, head_dim 64, float32 and a few lengths, three methods of
``posenc/torch/flex.py``:
* ``dense``: the bias materialised, ``(1, heads, L, L)`` (FoX's ``(batch, heads, L, L)``),
  and ``scaled_dot_product_attention`` with it (and the causal mask) as a float ``attn_mask``
  (:func:`dense_bias_attention`, the path of ``MultiHeadAttention``);
* ``flex``: ``flex_attention`` with the scheme's score_mod and a causal block mask, eager
  (:func:`flex_bias_attention`, ``compiled=False``: it evaluates the score_mod over every
  entry with ``torch.vmap``, so it materialises the scores, and slowly: only up to
  ``--eager-max-len``, 512 by default);
* ``flex, compiled``: the same through ``torch.compile`` (``--no-compile`` skips it).

Target (exit status 1 when missed): every method gives the dense output (max abs difference
below 1e-4). The time and the peak memory are measured, not targets: on a CPU the compiled
kernel is inductor's C++ template, and the saving a GPU kernel makes is for a GPU run
(``--device cuda``) to measure.

Each (scheme, length) runs in a fresh Python process. The causal block mask is built once
there (:func:`causal_block_mask`, as a model would share it across layers), and the dense ALiBi
gets a fresh layer at every call (its cached square would otherwise skip building the bias).
Peak extra memory is, for each method in turn, the process's peak resident set size during one
call above its size before it (CPU, after a warm-up call; the peak is reset through
``/proc/self/clear_refs`` before each method, and large tensors go back to the system when
freed), or ``torch.cuda.max_memory_allocated`` above the allocated memory (GPU); inputs
excluded. Then the methods are timed in interleaved rounds (:func:`timing.compare`, so that a
busy moment hits all of them alike): minima over ``--repeat`` rounds, median and spread beside
them. Each row also records the share of the causal block mask's blocks the kernel skips
(``block_sparsity``, %): the compiled kernel's time includes that skipping, which the dense
path does not do. ``--tiny`` runs toy sizes, enforces nothing and saves only with ``--out``.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import torch  # noqa: E402

import posenc.torch as pt  # noqa: E402
import record  # noqa: E402
from posenc.torch.content import ForgetGateBias  # noqa: E402
from posenc.torch.flex import (causal_block_mask, dense_bias_attention,  # noqa: E402
                               flex_bias_attention)
from timing import compare  # noqa: E402

HEADS, HEAD_DIM, DIM = 8, 64, 512
MiB = 2 ** 20
TINY = {"lengths": [64, 128], "repeat": 2}
SCHEMES = ("alibi", "fire", "fox")
METHODS = ("dense", "flex", "flex, compiled")


def layer(scheme: str, device: str):
    torch.manual_seed(0)
    return {"alibi": lambda: pt.ALiBiBias(HEADS), "fire": lambda: pt.FireBias(HEADS),
            "fox": lambda: ForgetGateBias(HEADS, DIM)}[scheme]().to(device)


def inputs(length: int, device: str):
    g = torch.Generator().manual_seed(1)
    q, k, v = (torch.randn(1, HEADS, length, HEAD_DIM, generator=g).to(device) for _ in "qkv")
    return q, k, v, torch.randn(1, length, DIM, generator=g).to(device)


def call(method: str, scheme: str, m, q, k, v, x, block_mask):
    if method == "dense":
        if scheme == "alibi":        # a fresh layer: its cached square would skip the building
            m = pt.ALiBiBias(HEADS).to(q.device)
        return dense_bias_attention(q, k, v, m, x=x)
    return flex_bias_attention(q, k, v, m, x=x, compiled=method == "flex, compiled",
                               block_mask=block_mask)


# --------------------------------------------------------------------------- memory

def _rss_kib(field: str) -> int:
    with open("/proc/self/status") as status:
        for line in status:
            if line.startswith(field + ":"):
                return int(line.split()[1])
    raise RuntimeError(f"no {field} in /proc/self/status")


def _reset_peak() -> None:
    with open("/proc/self/clear_refs", "w") as f:
        f.write("5")


def child(scheme: str, methods: list, length: int, device: str, repeat: int) -> list:
    """Peak extra memory (MiB) of one call of each method, one method after the other (the peak
    reset between them), the largest difference from the dense output, then every method's
    time in interleaved rounds (:func:`timing.compare`), in this process."""
    m = layer(scheme, device)
    q, k, v, x = inputs(length, device)
    block_mask = causal_block_mask(length, length, device)      # built once, as a model would
    fns = {method: (lambda method=method: call(method, scheme, m, q, k, v, x, block_mask))
           for method in methods}
    rows = []
    with torch.no_grad():
        want = call("dense", scheme, m, q, k, v, x, block_mask)
        for method, fn in fns.items():
            fn()                                                  # warm-up (and compilation)
            if device.startswith("cuda"):
                torch.cuda.synchronize()
                torch.cuda.reset_peak_memory_stats()
                before = torch.cuda.memory_allocated()
            else:
                _reset_peak()
                before = _rss_kib("VmRSS") * 1024
            out = fn()
            if device.startswith("cuda"):
                torch.cuda.synchronize()
                peak = torch.cuda.max_memory_allocated() - before
            else:
                peak = _rss_kib("VmHWM") * 1024 - before
            rows.append({"method": method, "peak_mib": max(peak, 0) / MiB,
                         "max_abs_diff": (out - want).abs().max().item()})
            del out
        times = compare(fns, repeat=repeat, warmup=0, device=device)
    for row in rows:
        row.update(times[row["method"]].columns())
    return rows


def skipped_blocks(length: int) -> float:
    """The share (%) of the (query block, key block) pairs of a causal full pass of ``length``
    that the block mask marks empty, so the kernel skips them (``BLOCK_SIZE`` blocks, 128 by
    default; ``BlockMask.sparsity`` counts a partial block oddly below one block)."""
    size = causal_block_mask(length, length).BLOCK_SIZE[0]
    n = -(-length // size)
    return 100.0 * n * (n - 1) / 2 / n ** 2


def measure(scheme: str, methods: list, length: int, device: str, repeat: int) -> list:
    # a fixed 1 MiB mmap threshold hands every large tensor back to the system when it is
    # freed, so the peak resident size follows the live tensors (as in bench_shaw.py)
    env = {**os.environ, "MALLOC_MMAP_THRESHOLD_": str(MiB)}
    result = subprocess.run(
        [sys.executable, __file__, "--child", scheme, json.dumps(methods), str(length),
         "--device", device, "--repeat", str(repeat)], capture_output=True, text=True, env=env)
    if result.returncode != 0:
        raise RuntimeError(f"{scheme}, L={length} failed:\n{result.stderr[-2000:]}")
    return json.loads(result.stdout.strip().splitlines()[-1])


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--lengths", type=int, nargs="+", default=[512, 1024, 2048])
    parser.add_argument("--schemes", nargs="+", default=list(SCHEMES), choices=SCHEMES)
    parser.add_argument("--repeat", type=int, default=5, help="recorded calls of each method")
    parser.add_argument("--eager-max-len", type=int, default=512,
                        help="run eager flex_attention only up to this length (it evaluates "
                             "the score_mod over every score, slowly; default 512)")
    parser.add_argument("--no-compile", action="store_true",
                        help="skip the flex_attention compiled by torch.compile")
    parser.add_argument("--tiny", action="store_true",
                        help="a smoke run at toy sizes: the targets are printed, not enforced")
    parser.add_argument("--child", nargs=3, metavar=("SCHEME", "METHODS", "LENGTH"),
                        help=argparse.SUPPRESS)
    record.add_arguments(parser)
    args = parser.parse_args()
    if args.child:
        scheme, methods, length = args.child
        print(json.dumps(child(scheme, json.loads(methods), int(length), args.device,
                               args.repeat)))
        return 0
    if args.tiny:
        args.lengths, args.repeat = TINY["lengths"], TINY["repeat"]
        args.no_save = args.no_save or not args.out     # never over the committed results
    started = time.time()
    methods = [m for m in METHODS if not (args.no_compile and m == "flex, compiled")]
    print(f"batch 1, {HEADS} heads, head_dim {HEAD_DIM}, float32, causal, {args.device}; "
          f"times in ms (min of {args.repeat} calls after a warm-up), peak extra MiB (one "
          f"process per row)")
    print(f"{'scheme':<8}{'L':>6}  {'method':<16}{'ms':>10}{'peak MiB':>10}{'max |diff|':>12}")
    failed, rows = [], []
    for scheme in args.schemes:
        for length in args.lengths:
            chosen = [m for m in methods if not (m == "flex" and length > args.eager_max_len)]
            sparsity = skipped_blocks(length)
            for r in measure(scheme, chosen, length, args.device, args.repeat):
                rows.append({"scheme": scheme, "L": length, **r, "block_sparsity": sparsity})
                print(f"{scheme:<8}{length:>6}  {r['method']:<16}{r['ms']:>10.2f}"
                      f"{r['peak_mib']:>10.1f}{r['max_abs_diff']:>12.1e}")
                if r["max_abs_diff"] >= 1e-4:
                    failed.append(f"{scheme}, {r['method']}, L={length}: differs from the "
                                  f"dense output by {r['max_abs_diff']:.1e}")
    for line in failed:
        print("MISSED:", line)
    record.save("bench-flex", rows, args, started=started, heads=HEADS, head_dim=HEAD_DIM,
                fox_dim=DIM, batch=1, dtype="float32", repeat=args.repeat,
                eager_max_len=args.eager_max_len, tiny=bool(args.tiny),
                cpu_capability=torch.backends.cpu.get_cpu_capability(), missed=failed)
    if args.tiny:
        return 0
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
