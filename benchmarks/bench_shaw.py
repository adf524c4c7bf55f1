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
``/proc/self/clear_refs``), inputs excluded. The largest tensor is measured too, in another
call: the largest new tensor any operation of the call returns (seen by a PyTorch dispatch mode),
beside the size the shapes predict (``formula_mib``: ``4 L^2 d`` bytes for the naive method's
a^K, one block of logits for the skew method).

The memory the skew method saves has two causes, measured apart: the skew itself (never
building the ``(L, L, d)`` tensors a^K and a^V), seen in ``skew, one block``, the skew method
with its query blocks switched off so that every ``(heads, L, L)`` temporary is whole; and the
query blocks (``skew``, the default), which cap those temporaries. The ``shaw-saving`` rows of
the results give naive / ``skew, one block`` (the skew alone), ``skew, one block`` / ``skew``
(the query blocks) and their product, naive / ``skew``, for each length and for time as well
as memory: the blocks trade a little time (a loop over blocks) for their memory.

Times are the minimum over calls after a warm-up, the median and spread beside them, without
gradients (:func:`timing.compare`); ``--tiny`` runs toy sizes and enforces nothing.
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
from torch.utils._python_dispatch import TorchDispatchMode  # noqa: E402
from torch.utils._pytree import tree_leaves  # noqa: E402

import posenc.shaw as shaw  # noqa: E402
import posenc.torch as pt  # noqa: E402
import record  # noqa: E402
from timing import compare, timeit  # noqa: E402

HEADS, HEAD_DIM, MAX_DISTANCE = 8, 64, 128
METHODS = {"naive": "naive", "skew": "skew", "skew, one block": "skew"}
MiB = 2 ** 20
TINY = {"lengths": [48], "window": 4, "window_length": 64, "repeat": 2}


def inputs(length: int, device: str, *, seed: int = 0):
    g = torch.Generator().manual_seed(seed)
    q, k, v = (torch.randn(1, HEADS, length, HEAD_DIM, generator=g).to(device) for _ in "qkv")
    tables = torch.randn(2, 2 * MAX_DISTANCE + 1, HEAD_DIM, generator=g).to(device)
    return q, k, v, tables[0], tables[1]


# --------------------------------------------------------------------------- memory

# the smallest peak (MiB) and time (ms) a saving is computed from: one page of RSS, 1 us
RESOLUTION_MIB = {"memory": 4096 / 2 ** 20, "time": 1e-3}


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


class _LargestTensor(TorchDispatchMode):
    """Records the largest new storage (bytes) an operation returns while the mode is on
    (a view or an in-place result shares an input's storage and is not new)."""

    def __init__(self):
        super().__init__()
        self.nbytes = 0

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        out = func(*args, **kwargs)
        seen = {t.untyped_storage().data_ptr() for t in tree_leaves((args, kwargs))
                if isinstance(t, torch.Tensor)}
        for t in tree_leaves(out):
            if isinstance(t, torch.Tensor) and t.untyped_storage().data_ptr() not in seen:
                self.nbytes = max(self.nbytes, t.untyped_storage().nbytes())
        return out


def largest_tensor_bytes(fn) -> int:
    """The largest tensor any operation of ``fn()`` creates, in bytes (measured)."""
    with _LargestTensor() as mode:
        fn()
    return mode.nbytes


def child(name: str, length: int, device: str, repeat: int = 3) -> dict:
    """Peak extra memory (MiB), largest tensor (MiB) and time (ms) of one method at one
    length, in this process."""
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
        largest = largest_tensor_bytes(
            lambda: pt.shaw_attention(*data, MAX_DISTANCE, method=method))
        t = timeit(lambda: pt.shaw_attention(*data, MAX_DISTANCE, method=method), repeat=repeat,
                   device=device)
    return {"peak_mib": peak / MiB, "largest_mib": largest / MiB, **t.columns()}


def measure(name: str, length: int, device: str, repeat: int = 3) -> dict:
    # glibc keeps freed blocks below its (growing) mmap threshold in the heap, where the
    # resident size would count them as used; a fixed 1 MiB threshold hands every large
    # tensor back to the system when it is freed, so the peak RSS follows the live tensors.
    env = {**os.environ, "MALLOC_MMAP_THRESHOLD_": str(MiB)}
    result = subprocess.run(
        [sys.executable, __file__, "--child", name, str(length), "--device", device,
         "--repeat", str(repeat)],
        capture_output=True, text=True, check=True, env=env)
    return json.loads(result.stdout.strip().splitlines()[-1])


def formula_mib(method: str, length: int, block_queries: int) -> float:
    """The largest tensor each method should create, from the shapes (float32)."""
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
    parser.add_argument("--repeat", type=int, default=3, help="recorded calls of each method")
    parser.add_argument("--tiny", action="store_true",
                        help="a smoke run at toy sizes: the targets are printed, not enforced")
    parser.add_argument("--child", nargs=2, metavar=("METHOD", "LENGTH"), help=argparse.SUPPRESS)
    record.add_arguments(parser)
    args = parser.parse_args()
    started = time.time()
    if args.child:
        print(json.dumps(child(args.child[0], int(args.child[1]), args.device, args.repeat)))
        return 0
    if args.tiny:
        args.lengths, args.window, args.window_length, args.repeat = (
            TINY["lengths"], TINY["window"], TINY["window_length"], TINY["repeat"])

    ok = True
    print(f"Shaw attention: batch 1, {HEADS} heads, head_dim {HEAD_DIM}, k = {MAX_DISTANCE}, "
          f"float32, {args.device}; skew blocks of "
          f"{shaw.query_blocks(args.lengths[-1], args.lengths[-1], HEADS)[0][1]} queries at "
          f"L = {args.lengths[-1]}")
    print(f"{'L':>6} {'method':>16} {'time ms':>10} {'peak extra MiB':>15} "
          f"{'largest tensor MiB':>19} {'formula MiB':>12}")
    results, rows = {}, []
    for length in args.lengths:
        block = shaw.query_blocks(length, length, HEADS)[0][1]
        for name, method in METHODS.items():
            r = measure(name, length, args.device, args.repeat)
            results[name, length] = r
            formula = formula_mib(method, length, length if name == "skew, one block" else block)
            print(f"{length:>6} {name:>16} {r['ms']:>10.1f} {r['peak_mib']:>15.1f} "
                  f"{r['largest_mib']:>19.1f} {formula:>12.1f}")
            rows.append({"table": "shaw", "L": length, "method": name, "ms": r["ms"],
                         "median_ms": r["median_ms"], "spread_ms": r["spread_ms"],
                         "peak_extra_mib": r["peak_mib"], "largest_tensor_mib": r["largest_mib"],
                         "formula_mib": formula})
        saving = {}
        for what, key in (("memory", "peak_mib"), ("time", "ms")):
            # a peak below one page is below what RSS can resolve (it can even read
            # negative at toy sizes): each value is floored once, so the three ratios agree
            floor = RESOLUTION_MIB[what]
            naive, one_block, blocked = (max(results[m, length][key], floor)
                                         for m in ("naive", "skew, one block", "skew"))
            saving[what] = {"skew_alone_x": naive / one_block,
                            "query_blocks_x": one_block / blocked,
                            "total_x": naive / blocked,
                            "floored": [m for m in ("naive", "skew, one block", "skew")
                                        if results[m, length][key] < floor]}
            rows.append({"table": "shaw-saving", "L": length, "measure": what, **saving[what]})
        m = saving["memory"]
        print(f"{length:>6} memory saved: skew alone {m['skew_alone_x']:.1f}x, query blocks "
              f"{m['query_blocks_x']:.1f}x more, naive / skew {m['total_x']:.1f}x; time "
              f"naive / skew {saving['time']['total_x']:.2f}x")
    last = args.lengths[-1]
    ratio = (max(results["naive", last]["peak_mib"], RESOLUTION_MIB["memory"])
             / max(results["skew", last]["peak_mib"], RESOLUTION_MIB["memory"]))
    if ratio < 8:
        print(f"MISSED: skew's peak extra memory is only {ratio:.1f}x smaller than naive's at "
              f"L = {last} (target 8x)")
        ok = False
    for length in args.lengths:
        measured = results["naive", length]["largest_mib"]
        if measured != formula_mib("naive", length, length):
            print(f"NOTE: at L = {length} the naive method's largest tensor is {measured:.1f} "
                  f"MiB, not the {formula_mib('naive', length, length):.1f} MiB of a^K")

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
        t = compare({"vectorised": lambda: pt.windowed_attention(
                         q, k, v, window, key_table=key_table, value_table=value_table),
                     "per-position loop": lambda: loop_windowed(q, k, v, key_table,
                                                                value_table, window)},
                    repeat=args.repeat, device=args.device)
        t_fast, t_slow = t["vectorised"].min_ms, t["per-position loop"].min_ms
    print(f"\nwindowed attention, L = {length}, window = {window} on each side, {HEADS} heads, "
          f"head_dim {HEAD_DIM}:")
    print(f"  vectorised {t_fast:.1f} ms, per-position loop {t_slow:.1f} ms: "
          f"{t_slow / t_fast:.1f}x (max difference {diff:.1e})")
    rows += [{"table": "windowed", "L": length, "method": method, **timing.columns(),
              "window": window, "max_abs_diff": diff}
             for method, timing in t.items()]
    if t_slow / t_fast < 2 or diff > 1e-4:
        print("MISSED: the vectorised windowed attention should be 2x faster than the loop "
              "and equal to it")
        ok = False
    record.save("bench-shaw", rows, args, started=started, heads=HEADS, head_dim=HEAD_DIM,
                max_distance=MAX_DISTANCE, repeat=args.repeat, all_targets_met=ok)
    return 0 if ok or args.tiny else 1


if __name__ == "__main__":
    sys.exit(main())
