"""Mutation tests: every bug of ``posenc.bugs.BUGS`` is caught by a check of posenc's suite.

For each bug, the check that the test named in ``caught_by`` runs on posenc (imported from
that test file, not written again) runs here on the deliberately wrong code of
``posenc.bugs`` / ``posenc.{torch,keras}.bugs`` and must FAIL there, and pass on posenc. A
check that passes on a known bug would guard nothing.
"""

from __future__ import annotations

import ast
from pathlib import Path

import numpy as np
import pytest

from posenc import bias as nb
from posenc import bugs

HERE = Path(__file__).resolve().parent
FACES = ["torch", pytest.param("keras", marks=pytest.mark.keras)]


def face_bugs(face: str):
    if face == "torch":
        import posenc.torch.bugs as module
    else:
        import posenc.keras.bugs as module
    return module


def face_module(face: str):
    if face == "torch":
        import posenc.torch as module
    else:
        import posenc.keras as module
    return module


# --------------------------------------------------------------------------- the registry

def test_every_bug_names_a_test_that_exists_and_is_run_here():
    here = (HERE / "test_bugs.py").read_text()
    for name, bug in bugs.BUGS.items():
        path, function = bug.caught_by.split("::")
        tree = ast.parse((HERE.parent / path).read_text())
        assert function in {n.name for n in tree.body if isinstance(n, ast.FunctionDef)}, name
        assert f'"{name}"' in here, f"no mutation test for {name}"
        for face in bug.faces:
            module = bugs if face == "numpy" else face_bugs(face)
            assert hasattr(module, bug.wrong), (name, face)


# --------------------------------------------------------------------------- one test per bug

@pytest.mark.parametrize("face", FACES)
def test_rope_layout(face):
    """"rope-layout": the layout check fails on a conversion that ignores the heads."""
    from test_rotary import layout_scores_error

    assert layout_scores_error(face, face_module(face).convert_rope_layout) < 1e-4
    assert layout_scores_error(face, face_bugs(face).convert_rope_layout_one_head) > 0.1


@pytest.mark.parametrize("face", FACES)
def test_bfloat16_positions(face):
    """"bfloat16-positions": the bound near 65,536 fails on angles in bfloat16."""
    from test_rotary import bf16_error

    assert bf16_error(face, face_module(face).apply_rope) < 0.05
    assert bf16_error(face, face_bugs(face).apply_rope_in_input_dtype) > 0.5


@pytest.mark.parametrize("face", FACES)
@pytest.mark.parametrize("position", ["rope", "learned", "sinusoidal"])
def test_cache_offset(face, position):
    """"cache-offset": cached decoding differs from the full pass with the off-by-one cache."""
    from test_attention import decoding_gap

    assert decoding_gap(face, position) < 1e-4
    assert decoding_gap(face, position, lambda m: bugs.OffByOneCache(m.depth)) > 1e-2


@pytest.mark.parametrize("face", FACES)
def test_short_table(face):
    """"short-table": reading past the table must raise; the clamping read does not."""
    from test_learned import past_the_table_error

    assert "max_len=4" in past_the_table_error(face, lambda enc, p: enc.encoding(p))
    assert past_the_table_error(face, face_bugs(face).clamped_encoding) == ""


@pytest.mark.parametrize("face", FACES)
def test_swapped_halves(face):
    """"swapped-halves": the reference values fail on cosines first."""
    from test_sinusoidal import reference_gap

    module = face_module(face)
    right = lambda p, d, base: module.sinusoidal(p, d, base=base, layout="concat")  # noqa
    assert reference_gap(face, right, 64, 10000.0, "concat") < 1e-6
    assert reference_gap(face, face_bugs(face).sinusoidal_swapped, 64, 10000.0, "concat") > 0.5


@pytest.mark.parametrize("window", [(2, 2), (7, 7)])
def test_swin_unscaled(window):
    """"swin-unscaled": the no-collision check fails on the unscaled row offset."""
    from test_bias import assert_swin_index

    assert_swin_index(nb.swin_relative_index(*window), *window)
    with pytest.raises(AssertionError):
        assert_swin_index(bugs.swin_relative_index_unscaled(*window), *window)


@pytest.mark.parametrize("face", FACES)
def test_starved_table(face):
    """"starved-table": the gradient monitor's verdict turns from healthy to starved."""
    from test_diagnostics import lab_table_health

    assert lab_table_health(face) == "healthy"
    assert lab_table_health(face, face_bugs(face).starve_position_table) == "starved"


def test_unscaled_swin_index_collides_where_the_text_says():
    """(dy, dx) = (0, 1) and (1, 0) share an index without the factor 2W - 1."""
    wrong = bugs.swin_relative_index_unscaled(2, 2)
    assert wrong[1, 0] == wrong[2, 0]
    assert nb.swin_relative_index(2, 2)[1, 0] != nb.swin_relative_index(2, 2)[2, 0]
    assert len(np.unique(wrong)) < 9


@pytest.mark.parametrize("face", FACES)
def test_alibi_key_only(face):
    """"alibi-key-only": the bfloat16 attention check fails on the key-only bias."""
    from test_bias import bf16_alibi_gap

    assert bf16_alibi_gap(face, face_module(face).alibi_bias) < 0.01
    assert bf16_alibi_gap(face, face_bugs(face).alibi_bias_key_only) > 0.1


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
    assert "257" in symptom and "128 radians" not in symptom


def test_starved_table_symptom_separates_the_detached_and_the_scaled_table():
    # It once said "the table never moves", false for the scaled table under Adam.
    from posenc.bugs import BUGS

    symptom = BUGS["starved-table"].symptom
    assert "detached, the table never moves" in symptom and "under Adam" in symptom
