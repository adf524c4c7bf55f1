"""Speed of the sinusoidal tables.

Targets (exit status 1 when missed):
* the vectorised ``sinusoidal`` is at least 20x faster than a per-position Python loop;
* a cached ``SinusoidalEncoding`` forward is faster than recomputing the table;
* the accurate (float64-angle) ``sinusoidal`` costs at most 10x a plain float32 computation.

Times are the minimum of the recorded calls (median and spread beside it), from
:func:`timing.compare`; ``--tiny`` runs the script at toy sizes without enforcing the targets.
"""

from __future__ import annotations

import argparse
import math
import os
import sys

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import torch  # noqa: E402

import posenc.torch as pt  # noqa: E402
from timing import compare  # noqa: E402

TINY = {"seq": 64, "dim": 32, "small": (16, 8), "repeat": 2}


def loop_table(n: int, dim: int) -> torch.Tensor:
    """The per-position loop found in many tutorials (for comparison only)."""
    table = torch.zeros(n, dim)
    for p in range(n):
        for i in range(0, dim, 2):
            angle = p / 10000 ** (i / dim)
            table[p, i] = math.sin(angle)
            table[p, i + 1] = math.cos(angle)
    return table


def plain_float32(n: int, dim: int, device: str) -> torch.Tensor:
    pos = torch.arange(n, device=device, dtype=torch.float32)[:, None]
    inv = 10000.0 ** (-torch.arange(0, dim, 2, device=device, dtype=torch.float32) / dim)
    ang = pos * inv
    return torch.stack((ang.sin(), ang.cos()), -1).flatten(-2)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--seq", type=int, default=8192)
    parser.add_argument("--dim", type=int, default=1024)
    parser.add_argument("--repeat", type=int, default=7, help="recorded calls of each method")
    parser.add_argument("--no-keras", action="store_true", help="skip the Keras row")
    parser.add_argument("--tiny", action="store_true",
                        help="a smoke run at toy sizes: the targets are printed, not enforced")
    args = parser.parse_args()
    small_n, small_d = 256, 128
    if args.tiny:
        args.seq, args.dim, (small_n, small_d), args.repeat = (
            TINY["seq"], TINY["dim"], TINY["small"], TINY["repeat"])
    device, n, dim, repeat = args.device, args.seq, args.dim, args.repeat
    rows, failures = [], []

    assert torch.allclose(loop_table(small_n, small_d), pt.sinusoidal(small_n, small_d), atol=1e-5)
    t = compare({"loop": lambda: loop_table(small_n, small_d),
                 "vectorised": lambda: pt.sinusoidal(torch.arange(small_n), small_d)},
                repeat=min(repeat, 3))
    rows.append((f"python loop, {small_n}x{small_d}", t["loop"]))
    rows.append((f"sinusoidal, {small_n}x{small_d}", t["vectorised"]))
    if t["loop"].min_ms < 20 * t["vectorised"].min_ms:
        failures.append(f"vectorised only {t['loop'].min_ms / t['vectorised'].min_ms:.1f}x "
                        "faster than the loop (target 20x)")

    positions = torch.arange(n, device=device)
    t = compare({"accurate": lambda: pt.sinusoidal(positions, dim),
                 "plain": lambda: plain_float32(n, dim, device)}, repeat=repeat, device=device)
    rows.append((f"sinusoidal (float64 angles), {n}x{dim}", t["accurate"]))
    rows.append((f"plain float32 formula, {n}x{dim}", t["plain"]))
    if t["accurate"].min_ms > 10 * t["plain"].min_ms:
        failures.append(f"accurate table costs {t['accurate'].min_ms / t['plain'].min_ms:.1f}x "
                        "the plain one (target <= 10x)")

    enc = pt.SinusoidalEncoding(dim).to(device)
    x = torch.zeros(4, n, dim, device=device)
    t = compare({"cached": lambda: enc(x),
                 "recomputed": lambda: x + pt.sinusoidal(positions, dim)},
                repeat=repeat, device=device)
    rows.append((f"SinusoidalEncoding forward (cached), 4x{n}x{dim}", t["cached"]))
    rows.append((f"x + sinusoidal(...) recomputed, 4x{n}x{dim}", t["recomputed"]))
    if t["cached"].min_ms >= t["recomputed"].min_ms:
        failures.append("the cached module is not faster than recomputing")

    if not args.no_keras:
        try:
            import keras

            import posenc.keras as pk
        except ImportError:
            pass
        else:
            t = compare({"keras": lambda: keras.ops.convert_to_numpy(pk.sinusoidal(n, dim))},
                        repeat=repeat)
            rows.append((f"keras sinusoidal ({keras.backend.backend()}), {n}x{dim}", t["keras"]))

    width = max(len(r[0]) for r in rows)
    print(f"device={device} torch={torch.__version__} threads={torch.get_num_threads()}; "
          f"ms over {repeat} calls after a warm-up ({min(repeat, 3)} for the loop and its "
          "match), methods compared in the same rounds")
    print(f"{'':<{width}}  {'min':>10} {'median':>10} {'spread':>10}")
    for name, timing in rows:
        print(f"{name:<{width}}  {timing.min_ms:10.3f} {timing.median_ms:10.3f} "
              f"{timing.spread_ms:10.3f}")
    for failure in failures:
        print("MISSED:", failure)
    if args.tiny:
        return 0
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
