"""The registry of ``posenc.bugs``: every bug is caught by the test it names, run on its code.

The test named in a bug's ``caught_by`` runs on the deliberately wrong code itself: it takes
an ``impl`` parameter whose bug case is a strict ``xfail`` that must fail with an
``AssertionError`` (``tests/mutants.py``), so the suite fails the day that test stops catching
the bug. The first test here checks that every bug has such a case; the others pin what the
registry and the debugging chapter say about the bugs.
"""

from __future__ import annotations

import importlib
from pathlib import Path

import numpy as np
import pytest
from _pytest.mark.structures import ParameterSet

from posenc import bias as nb
from posenc import bugs

HERE = Path(__file__).resolve().parent
FACES = ["torch", pytest.param("keras", marks=pytest.mark.keras)]


def face_bugs(face: str):
    return importlib.import_module(f"posenc.{face}.bugs")


def strict_xfail_cases(test, name: str) -> list:
    """The parameter sets of ``test`` that run the bug ``name`` as a strict xfail that must
    raise an AssertionError."""
    cases = []
    for mark in getattr(test, "pytestmark", []):
        if mark.name != "parametrize":
            continue
        for value in mark.args[1]:
            if not isinstance(value, ParameterSet) or name not in value.values:
                continue
            if any(m.name == "xfail" and m.kwargs.get("strict") is True
                   and m.kwargs.get("raises") is AssertionError for m in value.marks):
                cases.append(value)
    return cases


# --------------------------------------------------------------------------- the registry

@pytest.mark.parametrize("name", list(bugs.BUGS))
def test_every_bug_runs_in_the_test_that_names_it_as_a_strict_xfail(name):
    bug = bugs.BUGS[name]
    path, function = bug.caught_by.split("::")
    assert (HERE.parent / path).exists(), bug.caught_by
    test = getattr(importlib.import_module(Path(path).stem), function)
    assert strict_xfail_cases(test, name), f"{bug.caught_by} never runs {name!r}"
    for face in bug.faces:
        module = bugs if face == "numpy" else face_bugs(face)
        assert hasattr(module, bug.wrong), (name, face)


def test_every_shipped_bug_cites_its_threads():
    """A bug either cites public threads (issues or pull requests) or is only plausible."""
    for name, bug in bugs.BUGS.items():
        for url in bug.shipped:
            assert url.startswith("https://github.com/"), (name, url)
            assert url.split("/")[5] in ("issues", "pull"), (name, url)
            assert bugs.thread_name(url).split("#")[1].isdigit(), (name, url)
        assert bool(bug.how_shipped) == bool(bug.shipped), name
    assert [n for n, b in bugs.BUGS.items() if not b.shipped] == ["rope-layout"]


# --------------------------------------------------------------------------- what the chapter says

@pytest.mark.parametrize("face", FACES)
def test_the_query_heads_conversion_is_right_without_grouped_query_attention(face):
    """The GQA bug hides in a multi-head model: with as many key heads as query heads it is
    posenc's conversion, so only a grouped-query case can catch it."""
    from test_rotary import FACES as MODULES
    from test_rotary import np32, tensor

    m, rng = MODULES[face], np.random.default_rng(0)
    wq, wk = (tensor(face, rng.normal(size=(32, 12)).astype(np.float32)) for _ in "qk")
    q, k = face_bugs(face).convert_qk_with_query_heads(wq, wk, 4, 4, to="half")
    np.testing.assert_array_equal(np32(q), np32(m.convert_rope_layout(wq, 4, to="half")))
    np.testing.assert_array_equal(np32(k), np32(m.convert_rope_layout(wk, 4, to="half")))
    _, k2 = face_bugs(face).convert_qk_with_query_heads(wq, wk[:16], 4, 2, to="half")
    assert not np.array_equal(np32(k2), np32(m.convert_rope_layout(wk[:16], 2, to="half")))


@pytest.mark.parametrize("face", FACES)
@pytest.mark.parametrize("position", ["none", "shaw", "t5", "alibi"])
def test_the_off_by_one_cache_is_invisible_to_the_offset_blind_schemes(face, position):
    """A decoding test of these schemes alone passes on the wrong cache (the chapter's point:
    a check must run on a scheme the bug can reach)."""
    from test_attention import OFFSET_BLIND, decoding_gap

    assert position in OFFSET_BLIND
    assert decoding_gap(face, position, lambda m: bugs.OffByOneCache(m.depth)) < 1e-4


def test_short_table_symptom_names_what_each_gather_does():
    """A clamping gather (jax.numpy indexing) gives the last row, jax.numpy.take gives NaN
    (the gather of Keras' JAX backend), PyTorch and TensorFlow's CPU gather raise."""
    jnp = pytest.importorskip("jax.numpy")
    import tensorflow as tf
    import torch

    table = np.arange(8.0, dtype=np.float32).reshape(4, 2)
    past = np.array([4, 5])
    np.testing.assert_array_equal(np.asarray(jnp.asarray(table)[past]), table[[3, 3]])
    assert np.isnan(np.asarray(jnp.take(jnp.asarray(table), past, axis=0))).all()
    with pytest.raises(IndexError):
        torch.as_tensor(table)[torch.as_tensor(past)]
    with tf.device("/CPU:0"), pytest.raises(tf.errors.InvalidArgumentError):
        tf.gather(table, past)
    symptom = bugs.BUGS["short-table"].symptom
    assert "last row" in symptom and "NaN" in symptom and "zeros" in symptom


def test_unscaled_swin_index_collides_where_the_text_says():
    """(dy, dx) = (0, 1) and (1, 0) share an index without the factor 2W - 1."""
    wrong = bugs.swin_relative_index_unscaled(2, 2)
    assert wrong[1, 0] == wrong[2, 0]
    assert nb.swin_relative_index(2, 2)[1, 0] != nb.swin_relative_index(2, 2)[2, 0]
    assert len(np.unique(wrong)) < 9


def test_alibi_key_only_symptom_names_bfloat16s_step_at_its_largest_bias():
    """The symptom's "step" is bfloat16's spacing where the steepest head's largest key-only
    bias lies (slope 1/2 of eight heads, key 4,095: 2,047.5, in [1,024, 2,048), step 8)."""
    torch = pytest.importorskip("torch")

    largest = float(nb.alibi_slopes(8).max()) * (4096 - 1)
    low = 2.0 ** np.floor(np.log2(largest))
    grid = torch.arange(low, 2 * low, dtype=torch.float32).to(torch.bfloat16).unique()
    step = int(grid.double().diff().min())
    above = torch.arange(2 * low, 4 * low, dtype=torch.float32).to(torch.bfloat16).unique()
    step_above = int(above.double().diff().min())
    symptom = bugs.BUGS["alibi-key-only"].symptom
    assert (largest, step, step_above) == (2047.5, 8, 16)
    assert f"bfloat16's step is {step} ({step_above} from {int(2 * low):,})" in symptom


def test_bfloat16_positions_symptom_is_what_the_wrong_code_does():
    """Neighbours share an angle from 257 on, and at ordinary lengths, not only near 65,536."""
    import torch

    from posenc.torch.bugs import apply_rope_in_input_dtype
    from posenc.torch.rotary import rope_frequencies

    inv_freq, _ = rope_frequencies(16)
    x = torch.ones(64, 16, dtype=torch.bfloat16)

    def distinct_rows(start):
        out = apply_rope_in_input_dtype(x, torch.arange(start, start + 64), inv_freq)
        return len(torch.unique(out.float(), dim=0))

    assert distinct_rows(0) == 64 and distinct_rows(193) == 64     # exact up to 256
    assert distinct_rows(2048) <= 8                                # runs of 8 or more at 2,048
    symptom = bugs.BUGS["bfloat16-positions"].symptom
    assert "257" in symptom and "128 radians" not in symptom and "hundreds" not in symptom
    # the angle error near 4,096 (it once said "hundreds of radians" near 65,536: it is ~30)
    positions = torch.arange(4096 - 8, 4096 + 8)
    wrong = torch.outer(positions.bfloat16(), inv_freq.bfloat16()).double()
    error = float((wrong - torch.outer(positions.double(), inv_freq.double())).abs().max())
    assert error > 2 * np.pi and "more than 2 pi (8 radians)" in symptom and error == 8.0


def test_starved_table_symptom_separates_the_detached_and_the_scaled_table():
    # It once said "the table never moves", false for the scaled table under Adam.
    from posenc.bugs import BUGS

    symptom = BUGS["starved-table"].symptom
    assert "detached, the table never moves" in symptom and "under Adam" in symptom


def test_bfloat16_positions_symptom_states_the_run_lengths_the_wrong_code_gives():
    """Runs of equal rows of the wrong RoPE: 15 to 17 positions from 2,048, 31 to 33 from 4,096
    (bfloat16's step is 16, then 32; ties round to even, so the runs alternate)."""
    import torch

    from posenc.torch.bugs import apply_rope_in_input_dtype
    from posenc.torch.rotary import rope_frequencies

    inv_freq, _ = rope_frequencies(16)
    x = torch.ones(1, 16, dtype=torch.bfloat16)

    def run_lengths(start, stop):
        rows = apply_rope_in_input_dtype(x.expand(stop - start + 64, 16),
                                         torch.arange(start - 32, stop + 32), inv_freq)
        new = np.flatnonzero((rows[1:] != rows[:-1]).any(-1).numpy()) + 1
        starts = new[(new >= 32) & (new < stop - start + 32)]
        return set(np.diff(starts).tolist())

    assert run_lengths(2048, 4096) == {15, 17}
    assert run_lengths(4096, 8192) == {31, 33}
    assert "runs of 15 to 17 tokens from 2,048 and of 31 to 33 from 4,096" in \
        bugs.BUGS["bfloat16-positions"].symptom


def test_alibi_key_only_symptom_states_the_total_variation_of_the_named_test():
    """The symptom's "total variation 0.2 over eight heads at 4,096 keys" is what the named
    test measures on the key-only bias (and posenc's bias stays below its bound 0.01)."""
    pytest.importorskip("torch")
    from test_bias import bf16_alibi_gap

    from posenc.torch import alibi_bias
    from posenc.torch.bugs import alibi_bias_key_only

    wrong = bf16_alibi_gap("torch", alibi_bias_key_only, num_heads=8, k_len=4096)
    assert round(wrong, 1) == 0.2 and bf16_alibi_gap("torch", alibi_bias) < 0.01
    assert "total variation 0.2 over eight heads at 4,096 keys" in \
        bugs.BUGS["alibi-key-only"].symptom


def test_gqa_layout_bug_says_which_head_count_each_llama_cpp_fix_used():
    """llama.cpp permuted the keys with the query heads' count, then with n_head // n_head_kv,
    which equals the key heads' count for Llama-2 70B (64 // 8 = 8) but not for TinyLlama
    (32 // 4 = 8, with 4 key heads)."""
    assert 64 // 8 == 8 and 32 // 4 != 4
    how = bugs.BUGS["rope-layout-gqa"].how_shipped
    assert "n_head // n_head_kv" in how and "TinyLlama" in how and "#3364" in how
    assert "Llama-2 or TinyLlama checkpoint with the query heads' count" not in how
