"""Sinusoidal encodings in both faces: values, properties, precision, function parity."""

import keras
import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from keras import ops

import posenc.keras as pk
import posenc.torch as pt
import reference as ref
from posenc.interop import copy_weights
from faces import dtype_name, numpy, tensor
from mutants import bug_param, wrong_code

FACES = {"torch": pt, "keras": pk}
SETTINGS = settings(max_examples=20, deadline=None, derandomize=True)


@pytest.fixture(params=list(FACES))
def face(request):
    return request.param


# ---------------------------------------------------------------------------
# Values against the float64 reference.


@pytest.mark.parametrize("layout, impl", [("interleaved", "posenc"), ("concat", "posenc"),
                                          bug_param("swapped-halves", "concat")])
@pytest.mark.parametrize("base", [10000.0, 100.0, 2.5, 1e6])
@pytest.mark.parametrize("dim", [2, 6, 64])
def test_sinusoidal_matches_reference(face, layout, base, dim, impl):
    out = FACES[face].sinusoidal(50, dim, base=base, layout=layout)
    assert tuple(out.shape) == (50, dim)
    assert dtype_name(out) == "float32"
    encode = (lambda p, d, base: FACES[face].sinusoidal(p, d, base=base, layout=layout)  # noqa
              ) if impl == "posenc" else wrong_code(impl, face)
    assert reference_gap(face, encode, dim, base, layout) < 1e-6


def reference_gap(face, encode, dim, base, layout) -> float:
    """Largest gap between ``encode(positions, dim, base=base)`` at positions 0 .. 49 and the
    float64 reference of Vaswani et al.'s formula in ``layout``."""
    out = encode(tensor(face, np.arange(50)), dim, base=base)
    return float(np.abs(numpy(out) - ref.sinusoidal(50, dim, base, layout)).max())


def test_layouts_are_permutations_of_each_other(face):
    inter = numpy(FACES[face].sinusoidal(20, 8, layout="interleaved"))
    concat = numpy(FACES[face].sinusoidal(20, 8, layout="concat"))
    np.testing.assert_array_equal(inter[:, 0::2], concat[:, :4])
    np.testing.assert_array_equal(inter[:, 1::2], concat[:, 4:])
    assert not np.allclose(inter, concat)


@SETTINGS
@given(shape=st.lists(st.integers(1, 4), min_size=0, max_size=3),
       dim=st.integers(1, 16).map(lambda h: 2 * h),
       layout=st.sampled_from(["interleaved", "concat"]),
       base=st.sampled_from([10000.0, 500.0, 1.5]),
       dtype=st.sampled_from(["int32", "int64", "float32", "float64"]),
       seed=st.integers(0, 2**16))
@pytest.mark.keras
def test_any_positions_shape_and_dtype(shape, dim, layout, base, dtype, seed):
    rng = np.random.default_rng(seed)
    if dtype.startswith("int"):
        positions = rng.integers(-1000, 5000, size=shape).astype(dtype)
    else:
        positions = rng.uniform(-1000.0, 5000.0, size=shape).astype(dtype)
    for face in FACES:
        # float positions keep the dtype the face holds them in: float32 for float64 on JAX
        # without x64, where the reference reads the float32 positions
        held = tensor(face, positions)
        want_dtype = "float32" if dtype.startswith("int") else dtype_name(held)
        expected = ref.sinusoidal(positions.astype(want_dtype) if dtype.startswith("float")
                                  else positions, dim, base, layout)
        out = FACES[face].sinusoidal(held, dim, base=base, layout=layout)
        assert tuple(out.shape) == (*shape, dim), face
        assert dtype_name(out) == want_dtype, face
        np.testing.assert_allclose(numpy(out), expected, atol=1e-6, err_msg=face)


def test_float_positions_between_integers(face):
    positions = np.array([0.5, 2.25, 7.75], dtype=np.float32)
    out = FACES[face].sinusoidal(tensor(face, positions), 16)
    np.testing.assert_allclose(numpy(out), ref.sinusoidal(positions, 16), atol=1e-6)


# ---------------------------------------------------------------------------
# Precision at large positions.


@pytest.mark.parametrize("dtype", ["int64", "float32"])
def test_float32_result_is_accurate_near_a_million(face, dtype):
    positions = (10**6 + np.arange(0, 2000, 7)).astype(dtype)  # exact in float32 too
    expected = ref.sinusoidal(positions, 64)
    out = FACES[face].sinusoidal(tensor(face, positions), 64)
    assert dtype_name(out) == "float32"
    assert np.abs(numpy(out) - expected).max() < 2e-3
    # The naive float32 computation misses by far more: the test can fail.
    naive = ref.naive_float32_sinusoidal(positions, 64)
    assert np.abs(naive.astype(np.float64) - expected).max() > 2e-3


@pytest.mark.parametrize("dtype", ["int64", "float32"])
def test_near_a_million_only_the_final_rounding_is_lost(face, dtype):
    # chapter 2's claim: float64 angles (in NumPy on JAX without x64), one float32 rounding
    positions = (10**6 + np.arange(0, 2000, 7)).astype(dtype)
    out = FACES[face].sinusoidal(tensor(face, positions), 64)
    assert np.abs(numpy(out) - ref.sinusoidal(positions, 64)).max() < 1e-7


@pytest.mark.keras
def test_inside_jax_jit_the_angles_are_float32_within_the_stated_bound():
    if keras.backend.backend() != "jax":
        pytest.skip("jax.jit runs on the JAX backend only")
    import jax
    positions = (10**6 + np.arange(0, 2000, 7)).astype(np.float32)
    out = jax.jit(lambda p: pk.sinusoidal(p, 64))(positions)
    error = np.abs(numpy(out) - ref.sinusoidal(positions, 64)).max()
    assert 1e-7 < error < 6e-8 * 10**6 + 1e-6  # the docstring's bound: position * 6e-8


# ---------------------------------------------------------------------------
# The properties the book teaches.


@pytest.mark.parametrize("layout", ["interleaved", "concat"])
@pytest.mark.parametrize("k", [1, 7, 50, 1234])
def test_shift_is_a_fixed_block_rotation(face, layout, k):
    dim, base = 16, 10000.0
    positions = np.arange(0, 3000, 13)
    pe = numpy(FACES[face].sinusoidal(tensor(face, positions), dim, layout=layout))
    shifted = numpy(FACES[face].sinusoidal(tensor(face, positions + k), dim, layout=layout))
    m_k = ref.shift_matrix(k, dim, base, layout)
    np.testing.assert_allclose(pe @ m_k.T, shifted, atol=1e-5)
    # A different k gives a different map: the check is not vacuous.
    assert np.abs(pe @ ref.shift_matrix(k + 1, dim, base, layout).T - shifted).max() > 1e-2


def test_shift_map_fitted_on_two_ranges_is_the_same_rotation(face):
    dim, k = 8, 5
    fitted = []
    for start in (0, 40_000):
        positions = np.arange(start, start + 4000, 11)
        pe = numpy(FACES[face].sinusoidal(tensor(face, positions), dim))
        shifted = numpy(FACES[face].sinusoidal(tensor(face, positions + k), dim))
        m, *_ = np.linalg.lstsq(pe, shifted, rcond=None)  # pe @ m = shifted
        fitted.append(m.T)
    np.testing.assert_allclose(fitted[0], fitted[1], atol=1e-4)
    np.testing.assert_allclose(fitted[0], ref.shift_matrix(k, dim), atol=1e-4)
    for i in range(0, dim, 2):  # each 2x2 block is a rotation: orthogonal, det 1
        block = fitted[0][i:i + 2, i:i + 2]
        np.testing.assert_allclose(block @ block.T, np.eye(2), atol=1e-4)
        assert abs(np.linalg.det(block) - 1.0) < 1e-4
        fitted[0][i:i + 2, i:i + 2] = 0.0
    assert np.abs(fitted[0]).max() < 1e-4  # nothing outside the blocks


@pytest.mark.parametrize("layout", ["interleaved", "concat"])
def test_dot_product_depends_only_on_offset(face, layout):
    dim, n = 32, 64
    pe = numpy(FACES[face].sinusoidal(n, dim, layout=layout))
    gram = pe @ pe.T
    np.testing.assert_allclose(gram, gram.T, atol=1e-6)
    np.testing.assert_allclose(gram[1:, 1:], gram[:-1, :-1], atol=1e-5)  # Toeplitz
    delta = np.arange(n)[:, None] - np.arange(n)[None, :]
    np.testing.assert_allclose(gram, ref.sinusoidal_dot(delta, dim), atol=1e-5)
    np.testing.assert_allclose(np.diag(gram), dim / 2, atol=1e-5)


# ---------------------------------------------------------------------------
# 2D.


@pytest.mark.parametrize("layout", ["interleaved", "concat"])
@pytest.mark.parametrize("hw", [(1, 1), (3, 5), (4, 4)])
def test_sinusoidal_2d_matches_reference_and_halves(face, layout, hw):
    h, w = hw
    dim = 16
    out = FACES[face].sinusoidal_2d(h, w, dim, base=500.0, layout=layout)
    assert tuple(out.shape) == (h * w, dim)
    assert dtype_name(out) == "float32"
    out = numpy(out)
    np.testing.assert_allclose(out, ref.sinusoidal_2d(h, w, dim, 500.0, layout), atol=1e-6)
    rows, cols = np.divmod(np.arange(h * w), w)
    np.testing.assert_allclose(out[:, :dim // 2], ref.sinusoidal(rows, dim // 2, 500.0, layout),
                               atol=1e-6)
    np.testing.assert_allclose(out[:, dim // 2:], ref.sinusoidal(cols, dim // 2, 500.0, layout),
                               atol=1e-6)


# ---------------------------------------------------------------------------
# Modules and layers.


def test_module_adds_the_encoding(face):
    x = np.random.default_rng(0).normal(size=(2, 9, 12)).astype(np.float32)
    enc = FACES[face].SinusoidalEncoding(12, base=300.0, layout="concat")
    out = enc(tensor(face, x))
    assert tuple(out.shape) == x.shape
    np.testing.assert_allclose(numpy(out), x + ref.sinusoidal(9, 12, 300.0, "concat"), atol=1e-6)
    np.testing.assert_allclose(numpy(enc.encoding(9)), ref.sinusoidal(9, 12, 300.0, "concat"),
                               atol=1e-6)


def test_module_batched_positions(face):
    x = np.zeros((2, 4, 8), np.float32)
    positions = np.array([[0, 1, 2, 3], [10, 11, 12, 13]])
    out = FACES[face].SinusoidalEncoding(8)(tensor(face, x), tensor(face, positions))
    np.testing.assert_allclose(numpy(out), ref.sinusoidal(positions, 8), atol=1e-6)
    explicit = FACES[face].SinusoidalEncoding(8)(tensor(face, x), tensor(face, np.arange(4)))
    default = FACES[face].SinusoidalEncoding(8)(tensor(face, x))
    np.testing.assert_array_equal(numpy(explicit), numpy(default))


def test_torch_cache_grows_with_longer_sequences():
    enc = pt.SinusoidalEncoding(8)
    short = enc(torch.zeros(1, 3, 8))
    long = enc(torch.zeros(1, 40, 8))
    np.testing.assert_allclose(numpy(short)[0], ref.sinusoidal(3, 8), atol=1e-6)
    np.testing.assert_allclose(numpy(long)[0], ref.sinusoidal(40, 8), atol=1e-6)
    assert enc.state_dict() == {}  # the cache is not saved


def test_torch_encoding_stays_float32_after_module_cast():
    enc = pt.SinusoidalEncoding(8)
    enc(torch.zeros(1, 600, 8))  # fills the cache in float32
    enc = enc.to(torch.bfloat16)  # ... which this casts to bfloat16
    pe = enc.encoding(500)
    assert pe.dtype == torch.float32
    np.testing.assert_allclose(numpy(pe), ref.sinusoidal(500, 8), atol=1e-6)


def test_bfloat16_positions_give_a_bfloat16_encoding(face):
    positions = FACES[face].sinusoidal(tensor(face, np.arange(30), "bfloat16"), 16)
    assert dtype_name(positions) == "bfloat16"
    np.testing.assert_allclose(numpy(positions), ref.sinusoidal(30, 16), atol=1e-2)


# ---------------------------------------------------------------------------
# Torch and Keras agree.


@pytest.mark.parametrize("layout", ["interleaved", "concat"])
@pytest.mark.parametrize("base", [10000.0, 30.0])
@pytest.mark.keras
def test_faces_agree(layout, base):
    positions = np.array([[0, 3, 99], [1000, 65_535, 10**6]])
    a = pt.sinusoidal(torch.as_tensor(positions), 24, base=base, layout=layout)
    b = pk.sinusoidal(ops.convert_to_tensor(positions), 24, base=base, layout=layout)
    np.testing.assert_allclose(numpy(a), numpy(b), atol=1e-5)
    a2 = pt.sinusoidal_2d(3, 7, 24, base=base, layout=layout)
    b2 = pk.sinusoidal_2d(3, 7, 24, base=base, layout=layout)
    np.testing.assert_allclose(numpy(a2), numpy(b2), atol=1e-5)


# ---------------------------------------------------------------------------
# Mixed precision keeps the positions it is given (bad arguments: tests/test_errors.py).


def test_keras_mixed_precision_keeps_float_positions(mixed_bfloat16):
    # 1000.5 is not a bfloat16 number: the layer must not round the positions it is given.
    layer = pk.SinusoidalEncoding(8)
    positions = np.array([1000.5], dtype="float32")
    out = layer(ops.zeros((1, 1, 8)), positions=positions)
    assert dtype_name(out) == "bfloat16"
    want = ref.sinusoidal(np.array([1000.5]), 8)
    rounded = ref.sinusoidal(np.array([1000.0]), 8)
    got = ops.convert_to_numpy(ops.cast(out, "float32"))[0]
    assert np.abs(got - want).max() < 1e-2
    assert np.abs(got - rounded).max() > 5e-2


# --------------------------------------------------------------------------- stretched grids


@pytest.mark.parametrize("face", ["torch", "keras"])
def test_sinusoidal_2d_at_fractional_grid_coordinates(face):
    mod = {"torch": pt, "keras": pk}[face]
    dim, (h0, w0), (h, w) = 8, (3, 5), (4, 7)
    got = np.asarray(mod.sinusoidal_2d(h, w, dim, trained_hw=(h0, w0)))
    assert got.dtype == np.float32 and got.shape == (h * w, dim)
    rows = (np.arange(h) + 0.5) * h0 / h - 0.5
    cols = (np.arange(w) + 0.5) * w0 / w - 0.5
    want = np.concatenate((ref.sinusoidal(np.repeat(rows, w), dim // 2),
                           ref.sinusoidal(np.tile(cols, h), dim // 2)), axis=-1)
    np.testing.assert_allclose(got, want, atol=1e-6)
    # the trained grid itself: exactly the integer table
    np.testing.assert_array_equal(np.asarray(mod.sinusoidal_2d(h0, w0, dim, trained_hw=(h0, w0))),
                                  np.asarray(mod.sinusoidal_2d(h0, w0, dim)))


def test_sinusoidal_2d_stretched_is_what_resize_samples():
    # linear resizing of a table that is linear in the coordinates reproduces them exactly,
    # so the coordinates of trained_hw are the ones resize_table_2d samples (away from edges)
    from posenc.learned import grid_resize_matrices
    from posenc.sinusoidal import grid_coordinates

    rows_m, cols_m = grid_resize_matrices((5 * 6, 1), (5, 6), (8, 9), 0, "bilinear")
    rows, cols = grid_coordinates(8, 9, trained_hw=(5, 6))
    inside = (rows >= 0) & (rows <= 4) & (cols >= 0) & (cols <= 5)
    np.testing.assert_allclose((rows_m @ np.arange(5.0)).repeat(9)[inside], rows[inside])
    np.testing.assert_allclose(np.tile(cols_m @ np.arange(6.0), 8)[inside], cols[inside])


@pytest.mark.keras
def test_sinusoidal_2d_faces_agree_when_stretched():
    np.testing.assert_allclose(np.asarray(pt.sinusoidal_2d(24, 24, 16, trained_hw=(14, 14))),
                               keras.ops.convert_to_numpy(
                                   pk.sinusoidal_2d(24, 24, 16, trained_hw=(14, 14))), atol=1e-6)
    for face, mod in (("torch", pt), ("keras", pk)):
        for bad in ((14,), (14, 0), (14.0, 14), "14x14"):
            with pytest.raises(ValueError, match=r"sinusoidal_2d: trained_hw must be a "
                                                 r"\(height, width\) pair of positive integers"):
                mod.sinusoidal_2d(4, 4, 8, trained_hw=bad)
