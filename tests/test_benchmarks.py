"""The benchmark scripts: one shared timer, and each script's output at a toy size.

Nothing here times anything for its own sake: the scripts run with ``--tiny`` (toy sizes,
targets printed but not enforced) and the tests read what their results record.
"""

from __future__ import annotations

import json
import os
import pathlib
import re
import subprocess
import sys

import pytest

BENCH = pathlib.Path(__file__).resolve().parent.parent / "benchmarks"
sys.path.insert(0, str(BENCH))

import timing  # noqa: E402


def run_script(name: str, tmp_path, *args) -> dict:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(
        [str(BENCH.parent), os.environ.get("PYTHONPATH", "")])}
    out = subprocess.run([sys.executable, str(BENCH / name), "--tiny", "--out", str(tmp_path),
                          *args], capture_output=True, text=True, env=env, timeout=600)
    assert out.returncode == 0, out.stdout + out.stderr
    stem = name.removesuffix(".py").replace("bench_", "bench-")
    return json.loads((tmp_path / stem / "results.json").read_text())


# --------------------------------------------------------------------------- the timer


class Clock:
    """A fake clock: each function advances it by its own duration when called."""

    def __init__(self):
        self.now, self.calls = 0.0, []

    def __call__(self):
        return self.now

    def work(self, name, durations):
        durations = iter(durations)

        def fn():
            self.calls.append(name)
            self.now += next(durations) / 1e3
        return fn


def test_compare_excludes_the_warm_up_and_interleaves_the_methods():
    clock = Clock()
    fns = {"a": clock.work("a", [500, 3, 1, 2]),        # the slow first call is the warm-up
           "b": clock.work("b", [900, 10, 30, 20])}
    got = timing.compare(fns, repeat=3, warmup=1, clock=clock)
    assert clock.calls == ["a", "b"] + ["a", "b"] * 3   # warm-ups, then rounds in turn
    assert got["a"].repeat == got["b"].repeat == 3
    assert (got["a"].min_ms, got["a"].median_ms, got["a"].spread_ms) == pytest.approx((1, 2, 2))
    assert (got["b"].min_ms, got["b"].median_ms, got["b"].spread_ms) == pytest.approx((10, 20, 20))
    assert got["a"].columns("fwd_") == pytest.approx(
        {"fwd_ms": 1, "fwd_median_ms": 2, "fwd_spread_ms": 2})


def test_compare_refuses_no_rounds():
    with pytest.raises(ValueError, match="repeat must be >= 1"):
        timing.compare({"a": lambda: None}, repeat=0)


def test_the_benchmarks_have_one_timer():
    """No script keeps a clock of its own: all time through timing.py."""
    for path in BENCH.glob("bench_*.py"):
        text = path.read_text()
        assert "perf_counter" not in text and "def timeit" not in text, path.name
        assert "from timing import" in text, path.name


# --------------------------------------------------------------------------- the scripts


def test_bench_bias_records_the_sdpa_kernel_and_the_spread(tmp_path):
    results = run_script("bench_bias.py", tmp_path, "--no-compile")
    rows = results["rows"]
    assert {r["scheme"] for r in rows} == {"ALiBi (causal)", "T5 (bidirectional)"}
    for row in rows:
        assert row["sdpa_backend"] in {"FLASH_ATTENTION", "EFFICIENT_ATTENTION",
                                       "CUDNN_ATTENTION", "MATH"}
        assert row["sdpa_median_ms"] >= row["sdpa_ms"] and row["sdpa_spread_ms"] >= 0
        assert row["max_abs_diff"] < 1e-4
    assert "MATH" in results["meta"]["sdpa_backends_allowed"]


def test_bench_shaw_measures_the_largest_tensor_and_both_savings(tmp_path):
    rows = run_script("bench_shaw.py", tmp_path)["rows"]
    shaw = {r["method"]: r for r in rows if r["table"] == "shaw"}
    assert set(shaw) == {"naive", "skew", "skew, one block"}
    length = shaw["naive"]["L"]
    # measured, and it is the naive method's (L, L, d) a^K of 4 L^2 d bytes
    assert shaw["naive"]["largest_tensor_mib"] == 4 * length ** 2 * 64 / 2 ** 20
    assert shaw["skew"]["largest_tensor_mib"] != shaw["skew"]["formula_mib"]  # at L < 2k, the
    # bucket sums (heads, block, 2k + 2) are larger than the logits the formula counts
    saving = {r["measure"]: r for r in rows if r["table"] == "shaw-saving"}
    for r in saving.values():
        assert r["total_x"] == pytest.approx(r["skew_alone_x"] * r["query_blocks_x"])
    windowed = [r for r in rows if r["table"] == "windowed"]
    assert {r["method"] for r in windowed} == {"vectorised", "per-position loop"}
    assert all(r["median_ms"] >= r["ms"] for r in windowed)


def test_largest_tensor_is_measured_not_computed():
    import torch

    import bench_shaw

    assert bench_shaw.largest_tensor_bytes(lambda: torch.zeros(10, 10)) == 400
    assert bench_shaw.largest_tensor_bytes(                 # views and expands are not new
        lambda: torch.zeros(10, 10).expand(3, 10, 10)[0].t()) == 400


@pytest.mark.reference
def test_bench_rotary_times_hugging_face_per_layer_and_per_model_apart(tmp_path):
    pytest.importorskip("transformers")
    results = run_script("bench_rotary.py", tmp_path, "--no-keras", "--no-compile")
    rows = results["rows"]
    assert isinstance(results["meta"]["hf_hub_kernels"], bool)   # a Hub kernel, or HF's own
    methods = {r["method"]: r for r in rows}
    assert {"posenc RotaryEmbedding", "HF apply_rotary_pos_emb (per layer)",
            "posenc cos/sin table (once per model)",
            "HF LlamaRotaryEmbedding cos/sin (once per model)",
            "posenc apply_rope", "HF cos/sin + apply_rotary_pos_emb"} <= set(methods)
    for name in ("posenc cos/sin table (once per model)",
                 "HF LlamaRotaryEmbedding cos/sin (once per model)"):
        assert "forward_backward_ms" not in methods[name]       # no gradient once per model
    assert methods["posenc RotaryEmbedding"]["forward_backward_median_ms"] > 0


@pytest.mark.reference
def test_bench_rotary_gives_both_sides_what_a_model_gives(monkeypatch):
    """Like for like: Hugging Face gets the (1, seq) position ids LlamaModel builds (not one
    row per batch element, which computes cos and sin batch times over), every method gets q
    and k as the attention layer's non-contiguous view of a projection, and the once-per-model
    rows time the cos/sin of a module built before the timing, on both sides."""
    pytest.importorskip("transformers")
    import bench_rotary

    seen = {"position_ids": set(), "contiguous": set(), "built": 0}
    rotary, apply_rotary_pos_emb = bench_rotary.hf_rope((1, 2, 8, 16), "cpu")

    def hf_rope(shape, device):
        def cos_sin(x, position_ids):
            seen["position_ids"].add(tuple(position_ids.shape))
            return rotary(x, position_ids)

        def apply(q, k, cos, sin):
            seen["contiguous"].update((q.is_contiguous(), k.is_contiguous()))
            return apply_rotary_pos_emb(q, k, cos, sin)
        return cos_sin, apply

    built = bench_rotary.pt.RotaryEmbedding

    def counting(*args, **kwargs):
        seen["built"] += 1
        return built(*args, **kwargs)

    monkeypatch.setattr(bench_rotary, "hf_rope", hf_rope)
    monkeypatch.setattr(bench_rotary.pt, "RotaryEmbedding", counting)
    rows = []
    bench_rotary.torch_table("cpu", rows, shape=(3, 2, 8, 16), rounds=1, compile_rows=False)
    assert seen["position_ids"] == {(1, 8)}
    assert seen["contiguous"] == {False}
    assert seen["built"] == 1                    # no module is built inside the timing


@pytest.mark.reference
@pytest.mark.keras
def test_bench_rotary_times_the_keras_face_eager_and_compiled(tmp_path):
    keras = pytest.importorskip("keras")
    rows = run_script("bench_rotary.py", tmp_path, "--no-compile")["rows"]
    backend = keras.backend.backend()
    methods = {r["method"] for r in rows if r["table"] == f"keras-{backend}"}
    assert {"copy", "posenc.keras apply_rope"} <= methods
    assert ("posenc.keras apply_rope (XLA)" in methods) == (backend in ("tensorflow", "jax"))


def test_readme_matches_the_scripts():
    readme = (BENCH / "README.md").read_text()
    assert not re.search(r"\|\s*\d+\.\d+\s*\|", readme), "tables of timings go stale"
    assert "134 MB" not in readme and "cache speed" not in readme
    shaw = (BENCH / "bench_shaw.py").read_text()
    assert "at least 2x faster than a per-position Python" in shaw
    assert "target: 2x faster" in readme and "10x" not in readme
    # the committed results are described as they are (test_the_committed_results_are_...)
    assert "before the scripts shared one timer" not in readme and "2x or more" not in readme
    assert "from one clean commit" in readme


def test_bench_sinusoidal_prints_min_median_and_spread():
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(
        [str(BENCH.parent), os.environ.get("PYTHONPATH", "")])}
    out = subprocess.run([sys.executable, str(BENCH / "bench_sinusoidal.py"), "--tiny",
                          "--no-keras"], capture_output=True, text=True, env=env, timeout=600)
    assert out.returncode == 0, out.stdout + out.stderr
    header = next(line for line in out.stdout.splitlines() if "median" in line)
    assert header.split() == ["min", "median", "spread"]
    assert sum("ms over 2 calls" in line for line in out.stdout.splitlines()) == 1


# --------------------------------------------------------------------------- the records


def test_a_run_records_the_versions_of_the_comparators(monkeypatch):
    """The versions of Hugging Face transformers and keras-hub, the libraries bench_rotary.py
    compares posenc with, are part of a run's metadata when the run imported them."""
    import types

    from posenc.experiments.records import hardware, versions

    for name, version in (("transformers", "9.9.9"), ("keras_hub", "8.8.8")):
        fake = types.ModuleType(name)
        fake.__version__ = version
        monkeypatch.setitem(sys.modules, name, fake)
    found = versions()
    assert (found["transformers"], found["keras_hub"]) == ("9.9.9", "8.8.8")
    if hasattr(os, "getloadavg"):
        assert len(hardware()["load_average"]) == 3


COMMITTED = ("bench-bias", "bench-rotary", "bench-shaw")


def test_the_committed_results_are_one_run_from_one_clean_commit():
    """What benchmarks/README.md and the Performance chapter say of the committed results:
    every benchmark ran from the same commit, with no uncommitted change, on the CPU, through
    the shared timer (median and spread beside each minimum)."""
    from posenc.experiments import load_results

    results = {name: load_results(name) for name in COMMITTED}
    commits = {r["meta"]["commit"] for r in results.values()}
    assert len(commits) == 1 and re.fullmatch(r"[0-9a-f]{40}", commits.pop())
    assert all(r["meta"]["device"] == "cpu" for r in results.values())
    bias, rotary, shaw = (results[name]["rows"] for name in COMMITTED)
    assert all("sdpa_median_ms" in r and "compiled_ms" in r and r["sdpa_backend"] for r in bias)
    methods = {r["method"] for r in rotary}
    assert {"posenc RotaryEmbedding", "HF apply_rotary_pos_emb (per layer)",
            "posenc cos/sin table (once per model)",
            "HF LlamaRotaryEmbedding cos/sin (once per model)",
            "posenc apply_rope (torch.compile)"} <= methods
    assert all("forward_median_ms" in r for r in rotary)
    assert {r["table"] for r in shaw} == {"shaw", "shaw-saving", "windowed"}
    assert all("median_ms" in r for r in shaw if r["table"] == "shaw")


def test_bench_flex_records_each_method_equal_to_the_dense_bias(tmp_path):
    results = run_script("bench_flex.py", tmp_path, "--schemes", "fox", "--eager-max-len", "64")
    rows = results["rows"]
    # the dense path and the compiled kernel at every length, eager flex_attention only up to
    # --eager-max-len; each method's name survives the trip to its child ("flex, compiled")
    assert {(r["scheme"], r["method"], r["L"]) for r in rows} == {
        *(("fox", m, n) for m in ("dense", "flex, compiled") for n in (64, 128)),
        ("fox", "flex", 64)}
    assert results["meta"]["eager_max_len"] == 64
    assert results["meta"]["tiny"] is True and results["meta"]["batch"] == 1
    # the causal block mask of 64 or 128 keys is one block of 128: nothing skipped
    assert {r["block_sparsity"] for r in rows} == {0.0}
    for row in rows:
        assert row["max_abs_diff"] < 1e-4
        assert row["median_ms"] >= row["ms"] > 0 and row["peak_mib"] >= 0
    assert results["meta"]["heads"] == 8 and results["meta"]["fox_dim"] == 512
    assert results["meta"]["missed"] == []
