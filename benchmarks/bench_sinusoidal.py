"""Speed of the sinusoidal tables.

Targets (exit status 1 when missed):
* the vectorised ``sinusoidal`` is at least 20x faster than a per-position Python loop;
* a cached ``SinusoidalEncoding`` forward is faster than recomputing the table;
* the accurate (float64-angle) ``sinusoidal`` costs at most 10x a plain float32 computation.
"""

from __future__ import annotations

import argparse
import math
import os
import statistics
import sys
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import torch  # noqa: E402

import posenc.torch as pt  # noqa: E402


def timeit(fn, *, repeat: int = 7, device: str = "cpu", best: bool = False) -> float:
    """Median wall time of ``fn()`` in milliseconds, after one warm-up call; with
    ``best=True`` the shortest (the least disturbed run on a shared machine)."""
    fn()
    times = []
    for _ in range(repeat):
        if device == "cuda":
            torch.cuda.synchronize()
        start = time.perf_counter()
        fn()
        if device == "cuda":
            torch.cuda.synchronize()
        times.append((time.perf_counter() - start) * 1e3)
    return min(times) if best else statistics.median(times)


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
    args = parser.parse_args()
    device, n, dim = args.device, args.seq, args.dim
    rows, failures = [], []

    small_n, small_d = 256, 128
    t_loop = timeit(lambda: loop_table(small_n, small_d), repeat=3)
    t_vec_small = timeit(lambda: pt.sinusoidal(torch.arange(small_n), small_d))
    assert torch.allclose(loop_table(small_n, small_d), pt.sinusoidal(small_n, small_d), atol=1e-5)
    rows.append((f"python loop, {small_n}x{small_d}", t_loop))
    rows.append((f"sinusoidal, {small_n}x{small_d}", t_vec_small))
    if t_loop < 20 * t_vec_small:
        failures.append(f"vectorised only {t_loop / t_vec_small:.1f}x faster than the loop (target 20x)")

    positions = torch.arange(n, device=device)
    t_accurate = timeit(lambda: pt.sinusoidal(positions, dim), device=device)
    t_plain = timeit(lambda: plain_float32(n, dim, device), device=device)
    rows.append((f"sinusoidal (float64 angles), {n}x{dim}", t_accurate))
    rows.append((f"plain float32 formula, {n}x{dim}", t_plain))
    if t_accurate > 10 * t_plain:
        failures.append(f"accurate table costs {t_accurate / t_plain:.1f}x the plain one (target <= 10x)")

    enc = pt.SinusoidalEncoding(dim).to(device)
    x = torch.zeros(4, n, dim, device=device)
    t_cached = timeit(lambda: enc(x), device=device)
    t_recompute = timeit(lambda: x + pt.sinusoidal(positions, dim), device=device)
    rows.append((f"SinusoidalEncoding forward (cached), 4x{n}x{dim}", t_cached))
    rows.append((f"x + sinusoidal(...) recomputed, 4x{n}x{dim}", t_recompute))
    if t_cached >= t_recompute:
        failures.append("the cached module is not faster than recomputing")

    try:
        import keras

        import posenc.keras as pk

        t_keras = timeit(lambda: keras.ops.convert_to_numpy(pk.sinusoidal(n, dim)))
        rows.append((f"keras sinusoidal ({keras.backend.backend()}), {n}x{dim}", t_keras))
    except ImportError:
        pass

    width = max(len(r[0]) for r in rows)
    print(f"device={device} torch={torch.__version__} threads={torch.get_num_threads()}")
    for name, ms in rows:
        print(f"{name:<{width}}  {ms:10.3f} ms")
    for failure in failures:
        print("MISSED:", failure)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
