"""Memory and speed of Shaw et al.'s relative attention, and of windowed attention.

Targets (exit status 1 when missed):
* batch 1, 8 heads, head_dim 64, k = 128, float32, L = 2048 (or the largest length run): the
  skew method's peak extra memory is at least 8x smaller than the naive method's;
* the vectorised ``windowed_attention`` is at least 2x faster than a per-position Python
  loop (``for i in range(L)``, as tutorials write it) and gives the same numbers. (On a CPU
  the loop pays only Python's overhead per position; on a GPU it pays a kernel launch per
  operation and position, and the gap is far wider.)

Each (method, length) runs in a fresh Python process, so that one run's freed memory cannot
hide the next one's peak. Peak extra memory is the process's peak resident set size during
the call minus its resident size just before it (Linux: ``VmHWM`` after resetting it through
``/proc/self/clear_refs``), inputs excluded. ``skew, one block`` is the skew method with its
query blocks switched off (every ``(L, L)`` temporary whole), for comparison. Times are
medians of a few calls, without gradients.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import subprocess
import sys
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import torch  # noqa: E402

import posenc.shaw as shaw  # noqa: E402
import posenc.torch as pt  # noqa: E402
import record  # noqa: E402
from bench_sinusoidal import timeit  # noqa: E402  (median of calls after a warm-up)

HEADS, HEAD_DIM, MAX_DISTANCE = 8, 64, 128
METHODS = {"naive": "naive", "skew": "skew", "skew, one block": "skew"}
MiB = 2 ** 20


def inputs(length: int, device: str, *, seed: int = 0):
    g = torch.Generator().manual_seed(seed)
    q, k, v = (torch.randn(1, HEADS, length, HEAD_DIM, generator=g).to(device) for _ in "qkv")
    tables = torch.randn(2, 2 * MAX_DISTANCE + 1, HEAD_DIM, generator=g).to(device)
    return q, k, v, tables[0], tables[1]


# --------------------------------------------------------------------------- memory

def _rss_kib(field: str) -> int:
    with open("/proc/self/status") as status:
        for line in status:
            if line.startswith(field + ":"):
                return int(line.split()[1])
    raise RuntimeError(f"no {field} in /proc/self/status")


def _reset_peak() -> bool:
    try:
        with open("/proc/self/clear_refs", "w") as f:
            f.write("5")
        return True
    except OSError:
        return False


def child(name: str, length: int, device: str) -> dict:
    """Peak extra memory (MiB) and time (ms) of one method at one length, in this process."""
    if name == "skew, one block":
        shaw.SKEW_BLOCK_ELEMENTS = 1 << 62
    method = METHODS[name]
    data = inputs(length, device)
    with torch.no_grad():
        pt.shaw_attention(*inputs(64, device), MAX_DISTANCE, method=method)   # warm-up
        if device == "cuda":
            torch.cuda.synchronize()
            torch.cuda.reset_peak_memory_stats()
            before = torch.cuda.memory_allocated()
        else:
            if not _reset_peak():
                raise RuntimeError("cannot reset the peak RSS (/proc/self/clear_refs)")
            before = _rss_kib("VmRSS") * 1024
        out = pt.shaw_attention(*data, MAX_DISTANCE, method=method)
        if device == "cuda":
            torch.cuda.synchronize()
            peak = torch.cuda.max_memory_allocated() - before
        else:
            peak = _rss_kib("VmHWM") * 1024 - before
        del out
        ms = timeit(lambda: pt.shaw_attention(*data, MAX_DISTANCE, method=method), repeat=3,
                    device=device)
    return {"peak_mib": peak / MiB, "ms": ms}


def measure(name: str, length: int, device: str) -> dict:
    # glibc keeps freed blocks below its (growing) mmap threshold in the heap, where the
    # resident size would count them as used; a fixed 1 MiB threshold hands every large
    # tensor back to the system when it is freed, so the peak RSS follows the live tensors.
    env = {**os.environ, "MALLOC_MMAP_THRESHOLD_": str(MiB)}
    result = subprocess.run(
        [sys.executable, __file__, "--child", name, str(length), "--device", device],
        capture_output=True, text=True, check=True, env=env)
    return json.loads(result.stdout.strip().splitlines()[-1])


def largest_temporary_mib(method: str, length: int, block_queries: int) -> float:
    """The largest tensor each method creates, from the shapes (float32)."""
    if method == "naive":
        return length * length * HEAD_DIM * 4 / MiB            # a^K or a^V
    return HEADS * block_queries * length * 4 / MiB            # one block of logits


# --------------------------------------------------------------------------- windowed

def loop_windowed(q, k, v, key_table, value_table, window: int):
    """The per-position loop of the tutorials (for comparison only)."""
    length, out = q.shape[-2], torch.empty_like(q)
    for i in range(length):
        lo, hi = max(0, i - window), min(length, i + window + 1)
        rows = torch.arange(lo, hi) - i + window
        keys = k[:, :, lo:hi] + key_table[rows]
        logits = q[:, :, i:i + 1] @ keys.transpose(-1, -2) / math.sqrt(q.shape[-1])
        weights = torch.softmax(logits, dim=-1)
        out[:, :, i] = (weights @ (v[:, :, lo:hi] + value_table[rows]))[:, :, 0]
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--lengths", type=int, nargs="+", default=[256, 512, 1024, 2048])
    parser.add_argument("--window", type=int, default=32)
    parser.add_argument("--window-length", type=int, default=1024)
    parser.add_argument("--child", nargs=2, metavar=("METHOD", "LENGTH"), help=argparse.SUPPRESS)
    record.add_arguments(parser)
    args = parser.parse_args()
    started = time.time()
    if args.child:
        print(json.dumps(child(args.child[0], int(args.child[1]), args.device)))
        return 0

    ok = True
    print(f"Shaw attention: batch 1, {HEADS} heads, head_dim {HEAD_DIM}, k = {MAX_DISTANCE}, "
          f"float32, {args.device}; skew blocks of "
          f"{shaw.query_blocks(args.lengths[-1], args.lengths[-1], HEADS)[0][1]} queries at "
          f"L = {args.lengths[-1]}")
    print(f"{'L':>6} {'method':>16} {'time ms':>10} {'peak extra MiB':>15} "
          f"{'largest tensor MiB':>19}")
    results, rows = {}, []
    for length in args.lengths:
        block = shaw.query_blocks(length, length, HEADS)[0][1]
        for name, method in METHODS.items():
            r = measure(name, length, args.device)
            results[name, length] = r
            largest = largest_temporary_mib(method, length,
                                            length if name == "skew, one block" else block)
            print(f"{length:>6} {name:>16} {r['ms']:>10.1f} {r['peak_mib']:>15.1f} "
                  f"{largest:>19.1f}")
            rows.append({"table": "shaw", "L": length, "method": name, "ms": r["ms"],
                         "peak_extra_mib": r["peak_mib"], "largest_tensor_mib": largest})
        naive = results["naive", length]["peak_mib"]
        ratio = naive / max(results["skew", length]["peak_mib"], 1e-9)
        plain = naive / max(results["skew, one block", length]["peak_mib"], 1e-9)
        print(f"{length:>6} {'naive / skew':>16} {'':>10} {ratio:>14.1f}x "
              f"(naive / skew in one block: {plain:.1f}x)")
    last = args.lengths[-1]
    ratio = results["naive", last]["peak_mib"] / max(results["skew", last]["peak_mib"], 1e-9)
    if ratio < 8:
        print(f"MISSED: skew's peak extra memory is only {ratio:.1f}x smaller than naive's at "
              f"L = {last} (target 8x)")
        ok = False

    # windowed: vectorised vs the loop
    length, window = args.window_length, args.window
    q, k, v, _, _ = inputs(length, args.device)
    g = torch.Generator().manual_seed(1)
    key_table, value_table = (torch.randn(2 * window + 1, HEAD_DIM, generator=g).to(args.device)
                              for _ in "kv")
    with torch.no_grad():
        fast = pt.windowed_attention(q, k, v, window, key_table=key_table,
                                     value_table=value_table)
        slow = loop_windowed(q, k, v, key_table, value_table, window)
        diff = (fast - slow).abs().max().item()
        t_fast = timeit(lambda: pt.windowed_attention(q, k, v, window, key_table=key_table,
                                                      value_table=value_table),
                        device=args.device)
        t_slow = timeit(lambda: loop_windowed(q, k, v, key_table, value_table, window),
                        repeat=2, device=args.device)
    print(f"\nwindowed attention, L = {length}, window = {window} on each side, {HEADS} heads, "
          f"head_dim {HEAD_DIM}:")
    print(f"  vectorised {t_fast:.1f} ms, per-position loop {t_slow:.1f} ms: "
          f"{t_slow / t_fast:.1f}x (max difference {diff:.1e})")
    rows += [{"table": "windowed", "L": length, "method": method, "ms": ms, "window": window,
              "max_abs_diff": diff}
             for method, ms in (("vectorised", t_fast), ("per-position loop", t_slow))]
    if t_slow / t_fast < 2 or diff > 1e-4:
        print("MISSED: the vectorised windowed attention should be 2x faster than the loop "
              "and equal to it")
        ok = False
    record.save("bench-shaw", rows, args, started=started, heads=HEADS, head_dim=HEAD_DIM,
                max_distance=MAX_DISTANCE, all_targets_met=ok)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
