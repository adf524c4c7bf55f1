"""Learned and hybrid encodings and table resizing, in both faces."""

import keras
import numpy as np
import pytest
import torch
import torch.nn.functional as F
from hypothesis import given, settings
from hypothesis import strategies as st
from keras import ops

import posenc.keras.learned as pk
import posenc.torch.learned as pt
import reference as ref
from posenc.learned import interpolation_matrix
from faces import dtype_name, np32, numpy, same_error, tensor
from mutants import and_the_bugs, wrong_code

FACES = {"torch": pt, "keras": pk}
SETTINGS = settings(max_examples=25, deadline=None, derandomize=True)


def seeded(face: str, cls, *args, seed: int = 0, **kwargs):
    """Build a module/layer with a fixed seed."""
    if face == "torch":
        torch.manual_seed(seed)
    else:
        keras.utils.set_random_seed(seed)
    return cls(*args, **kwargs)


def randomize(face: str, weight, seed: int = 0):
    """Fill a weight with seeded normal noise (to test non-initial values)."""
    value = np.random.default_rng(seed).normal(size=tuple(weight.shape)).astype(np.float32)
    if face == "torch":
        with torch.no_grad():
            weight.copy_(torch.as_tensor(value))
    else:
        weight.assign(value)
    return value


@pytest.fixture(params=list(FACES))
def face(request):
    return request.param


# ---------------------------------------------------------------------------
# Interpolation matrices against torch.nn.functional.interpolate.


def torch_matrix_1d(old: int, new: int) -> np.ndarray:
    basis = torch.eye(old, dtype=torch.float64)[None]  # (1, channels=old, length=old)
    return F.interpolate(basis, size=new, mode="linear", align_corners=False)[0].T.numpy()


def torch_matrix_2d(old_hw, new_hw, mode: str, antialias: bool = False) -> np.ndarray:
    n = old_hw[0] * old_hw[1]
    basis = torch.eye(n, dtype=torch.float64).reshape(n, 1, *old_hw)
    kwargs = {} if mode == "nearest-exact" else {"align_corners": False, "antialias": antialias}
    out = F.interpolate(basis, size=tuple(new_hw), mode=mode, **kwargs)
    return out.reshape(n, -1).T.numpy()


@SETTINGS
@given(old=st.integers(1, 24), new=st.integers(1, 24))
@pytest.mark.keras
def test_linear_matrix_matches_torch(old, new):
    matrix = interpolation_matrix(old, new, "linear")
    assert matrix.shape == (new, old)
    np.testing.assert_allclose(matrix, torch_matrix_1d(old, new), atol=1e-12)
    np.testing.assert_allclose(matrix.sum(1), 1.0, atol=1e-12)
    table = np.random.default_rng(old * 31 + new).normal(size=(old, 3))
    np.testing.assert_allclose(matrix @ table, ref.interpolate_linear_1d(table, new), atol=1e-12)


@pytest.mark.parametrize("mode, torch_mode", [("bilinear", "bilinear"), ("bicubic", "bicubic"),
                                              ("nearest", "nearest-exact")])
@SETTINGS
@given(old_hw=st.tuples(st.integers(1, 8), st.integers(1, 8)),
       new_hw=st.tuples(st.integers(1, 8), st.integers(1, 8)))
@pytest.mark.keras
def test_2d_matrices_match_torch(mode, torch_mode, old_hw, new_hw):
    rows = interpolation_matrix(old_hw[0], new_hw[0], mode)
    cols = interpolation_matrix(old_hw[1], new_hw[1], mode)
    np.testing.assert_allclose(np.kron(rows, cols), torch_matrix_2d(old_hw, new_hw, torch_mode),
                               atol=1e-12)


@pytest.mark.parametrize("mode", ["bilinear", "bicubic"])
@pytest.mark.parametrize("old, new", [(14, 24), (24, 14), (7, 3), (3, 7)])
@pytest.mark.keras
def test_up_and_downsampling_match_torch(mode, old, new):
    m = interpolation_matrix(old, new, mode)
    expected = torch_matrix_2d((old, 5), (new, 5), mode)
    np.testing.assert_allclose(np.kron(m, np.eye(5)), expected, atol=1e-12)


@pytest.mark.parametrize("mode", ["bilinear", "bicubic"])
@SETTINGS
@given(old_hw=st.tuples(st.integers(1, 16), st.integers(1, 16)),
       new_hw=st.tuples(st.integers(1, 16), st.integers(1, 16)))
@pytest.mark.keras
def test_antialiased_matrices_match_torch(mode, old_hw, new_hw):
    # interpolate(..., antialias=True), which timm's resample_abs_pos_embed calls
    rows = interpolation_matrix(old_hw[0], new_hw[0], mode, antialias=True)
    cols = interpolation_matrix(old_hw[1], new_hw[1], mode, antialias=True)
    np.testing.assert_allclose(np.kron(rows, cols),
                               torch_matrix_2d(old_hw, new_hw, mode, antialias=True), atol=1e-12)
    np.testing.assert_allclose(rows.sum(1), 1.0, atol=1e-12)


@pytest.mark.parametrize("old, new", [(14, 24), (14, 7), (24, 14), (7, 3), (3, 7)])
def test_antialiased_bicubic_differs_from_plain_in_both_directions(old, new):
    # growing: a = -0.5 and renormalised edges instead of a = -0.75 and repeated edges;
    # shrinking: a kernel widened by old / new, so that more than four input samples contribute
    plain = interpolation_matrix(old, new, "bicubic")
    smooth = interpolation_matrix(old, new, "bicubic", antialias=True)
    assert np.abs(plain - smooth).max() > 0.01
    taps = (np.abs(plain) > 0).sum(1).max(), (np.abs(smooth) > 0).sum(1).max()
    assert taps[0] <= 4 and (taps[1] > 4 if new < old else taps[1] <= 4)


def test_nearest_ignores_antialias():
    np.testing.assert_array_equal(interpolation_matrix(7, 3, "nearest", antialias=True),
                                  interpolation_matrix(7, 3, "nearest"))


def test_bicubic_overshoots_and_linear_does_not():
    # Keys' kernel with a = -0.75 has negative lobes; linear weights never do.
    assert interpolation_matrix(4, 8, "bicubic").min() < -0.03
    assert interpolation_matrix(4, 8, "linear").min() >= 0.0


@pytest.mark.parametrize("mode", ["linear", "nearest", "cubic", "bilinear", "bicubic"])
def test_same_size_is_exactly_identity(mode):
    np.testing.assert_array_equal(interpolation_matrix(9, 9, mode), np.eye(9))


def test_matrix_errors():
    with pytest.raises(ValueError, match=r"old must be a positive integer, got old=0"):
        interpolation_matrix(0, 4)
    with pytest.raises(ValueError, match=r"new must be a positive integer, got new=-2"):
        interpolation_matrix(4, -2)
    with pytest.raises(ValueError, match=r"interpolation_matrix: mode must be one of .*"
                                         r"got mode='area'"):
        interpolation_matrix(4, 8, "area")


# ---------------------------------------------------------------------------
# resize_table and resize_table_2d.


@pytest.mark.parametrize("mode", ["linear", "cubic", "nearest"])
@pytest.mark.parametrize("old, new", [(10, 25), (25, 10), (1, 4)])
def test_resize_table_values(face, mode, old, new):
    table = np.random.default_rng(0).normal(size=(old, 6)).astype(np.float32)
    out = FACES[face].resize_table(tensor(face, table), new, mode=mode)
    assert tuple(out.shape) == (new, 6)
    assert dtype_name(out) == "float32"
    expected = interpolation_matrix(old, new, mode) @ table.astype(np.float64)
    np.testing.assert_allclose(numpy(out), expected, atol=1e-6)
    if mode == "linear":
        via_torch = F.interpolate(torch.as_tensor(table).double().T[None], size=new, mode="linear",
                                  align_corners=False)[0].T
        np.testing.assert_allclose(numpy(out), via_torch.numpy(), atol=1e-6)


@pytest.mark.parametrize("mode", ["bicubic", "bilinear"])
@pytest.mark.parametrize("old_hw, new_hw", [((4, 4), (7, 7)), ((6, 5), (3, 8)), ((9, 8), (4, 3))])
@pytest.mark.parametrize("antialias", [True, False, None])
def test_resize_table_2d_matches_interpolate_and_keeps_prefix(face, mode, old_hw, new_hw,
                                                              antialias):
    prefix, dim = 2, 5
    table = np.random.default_rng(1).normal(size=(prefix + old_hw[0] * old_hw[1], dim))
    table = table.astype(np.float32)
    options = {} if antialias is None else {"antialias": antialias}  # None: the default
    out = FACES[face].resize_table_2d(tensor(face, table), old_hw, new_hw,
                                      prefix_tokens=prefix, mode=mode, **options)
    assert tuple(out.shape) == (prefix + new_hw[0] * new_hw[1], dim)
    out = numpy(out)
    np.testing.assert_array_equal(out[:prefix], table[:prefix])  # verbatim
    grid = torch.as_tensor(table[prefix:]).reshape(*old_hw, dim).permute(2, 0, 1)[None]
    expected = F.interpolate(grid.double(), size=new_hw, mode=mode, align_corners=False,
                             antialias=antialias is not False)  # timm's default: True
    expected = expected[0].permute(1, 2, 0).reshape(-1, dim).numpy()
    np.testing.assert_allclose(out[prefix:], expected, atol=1e-6)


def test_resize_unchanged_size_is_exact_identity(face):
    table = np.random.default_rng(2).normal(size=(1 + 12, 7)).astype(np.float32)
    for mode in ("linear", "cubic", "nearest"):
        out = FACES[face].resize_table(tensor(face, table), 13, mode=mode)
        np.testing.assert_array_equal(numpy(out), table)
    for mode in ("bicubic", "bilinear", "nearest"):
        out = FACES[face].resize_table_2d(tensor(face, table), (3, 4), (3, 4), prefix_tokens=1,
                                          mode=mode)
        np.testing.assert_array_equal(numpy(out), table)


def test_resize_keeps_bfloat16(face):
    table = np.random.default_rng(3).normal(size=(8, 4)).astype(np.float32)
    out = FACES[face].resize_table(tensor(face, table, "bfloat16"), 12)
    assert dtype_name(out) == "bfloat16"
    expected = interpolation_matrix(8, 12) @ table
    np.testing.assert_allclose(numpy(out), expected, atol=3e-2)


@pytest.mark.keras
def test_resize_faces_agree():
    table = np.random.default_rng(4).normal(size=(1 + 9, 16)).astype(np.float32)
    for new in (4, 31):
        a = pt.resize_table(torch.as_tensor(table), new, mode="cubic")
        b = pk.resize_table(ops.convert_to_tensor(table), new, mode="cubic")
        np.testing.assert_allclose(numpy(a), numpy(b), atol=1e-6)
    for antialias in (True, False):
        a = pt.resize_table_2d(torch.as_tensor(table), (3, 3), (5, 2), prefix_tokens=1,
                               antialias=antialias)
        b = pk.resize_table_2d(ops.convert_to_tensor(table), (3, 3), (5, 2), prefix_tokens=1,
                               antialias=antialias)
        np.testing.assert_allclose(numpy(a), numpy(b), atol=1e-6)


@pytest.mark.keras
def test_keras_resize_docstrings_state_the_jax_precision():
    # Without jax_enable_x64, JAX has no float64: the Keras face resamples in float32 there.
    for function in (pk.resize_table, pk.resize_table_2d):
        assert "float32 on JAX unless ``jax_enable_x64``" in " ".join(function.__doc__.split())


def test_torch_resize_passes_gradients():
    table = torch.randn(6, 3, generator=torch.Generator().manual_seed(0), requires_grad=True)
    pt.resize_table(table, 9).sum().backward()
    expected = interpolation_matrix(6, 9).sum(0)  # d(sum)/d(row i) = column sum of M
    np.testing.assert_allclose(table.grad[:, 0].numpy(), expected, atol=1e-6)


# ---------------------------------------------------------------------------
# LearnedEncoding.


def test_learned_initialisation(face):
    enc = seeded(face, FACES[face].LearnedEncoding, 512, 64, init_std=0.05)
    table = numpy(enc.table)
    assert table.shape == (512, 64)
    assert np.abs(table).max() <= 2 * 0.05 + 1e-7  # truncated at two standard deviations
    assert np.abs(table).max() > 1.9 * 0.05
    # a normal truncated at +-2 sigma has standard deviation 0.8796 sigma
    assert abs(table.std() / 0.05 - 0.8796) < 0.02
    assert abs(table.mean()) < 0.002
    other = seeded(face, FACES[face].LearnedEncoding, 512, 64, init_std=0.05, seed=1)
    assert not np.allclose(numpy(other.table), table)


@SETTINGS
@given(batch=st.integers(1, 3), seq=st.integers(1, 12), dim=st.integers(1, 9),
       extra=st.integers(0, 5), bf16=st.booleans())
@pytest.mark.keras
def test_learned_forward_shapes_and_values(batch, seq, dim, extra, bf16):
    x = np.random.default_rng(seq).normal(size=(batch, seq, dim)).astype(np.float32)
    for face in FACES:
        kwargs = {"dtype": "bfloat16"} if face == "keras" and bf16 else {}
        enc = FACES[face].LearnedEncoding(seq + extra, dim, **kwargs)
        table = randomize(face, enc.table, seed=dim)
        out = enc(tensor(face, x, "bfloat16" if bf16 else None))
        assert tuple(out.shape) == x.shape, face
        assert dtype_name(out) == ("bfloat16" if bf16 else "float32"), face
        expected = x + ref.learned(table, np.arange(seq))
        np.testing.assert_allclose(numpy(out), expected, atol=5e-2 if bf16 else 1e-6,
                                   err_msg=face)


def test_learned_positions_and_encoding(face):
    enc = FACES[face].LearnedEncoding(20, 4)
    table = randomize(face, enc.table)
    positions = np.array([[0, 5, 19], [3, 3, 1]])
    x = np.zeros((2, 3, 4), np.float32)
    out = enc(tensor(face, x), tensor(face, positions))
    np.testing.assert_allclose(numpy(out), ref.learned(table, positions), atol=1e-6)
    np.testing.assert_allclose(numpy(enc.encoding(7)), table[:7], atol=0)
    assert dtype_name(enc.encoding(7)) == "float32"
    np.testing.assert_allclose(numpy(enc.encoding(tensor(face, positions))),
                               ref.learned(table, positions), atol=0)
    explicit = enc(tensor(face, x), tensor(face, np.arange(3)))
    np.testing.assert_array_equal(numpy(explicit), numpy(enc(tensor(face, x))))


def test_learned_vit_prefix_and_grid(face):
    h = w = 4
    enc = FACES[face].LearnedEncoding(1 + h * w, 8)
    table = randomize(face, enc.table)
    x = np.zeros((2, 1 + h * w, 8), np.float32)
    np.testing.assert_allclose(numpy(enc(tensor(face, x))), np.broadcast_to(table, x.shape),
                               atol=0)
    bigger = enc.resized_2d((h, w), (6, 6), prefix_tokens=1)
    assert bigger.max_len == 37 and tuple(bigger.table.shape) == (37, 8)
    np.testing.assert_array_equal(numpy(bigger.table)[0], table[0])
    expected = FACES[face].resize_table_2d(tensor(face, table), (h, w), (6, 6), prefix_tokens=1)
    np.testing.assert_array_equal(numpy(bigger.table), numpy(expected))
    assert tuple(bigger(tensor(face, np.zeros((1, 37, 8), np.float32))).shape) == (1, 37, 8)
    smaller = enc.resized_2d((h, w), (3, 2), prefix_tokens=1, antialias=False)
    expected = FACES[face].resize_table_2d(tensor(face, table), (h, w), (3, 2), prefix_tokens=1,
                                           antialias=False)
    np.testing.assert_array_equal(numpy(smaller.table), numpy(expected))


def test_learned_resized(face):
    enc = FACES[face].LearnedEncoding(16, 4, init_std=0.1)
    table = randomize(face, enc.table)
    longer = enc.resized(40)
    assert isinstance(longer, FACES[face].LearnedEncoding)
    assert (longer.max_len, longer.dim, longer.init_std) == (40, 4, 0.1)
    np.testing.assert_allclose(numpy(longer.table), interpolation_matrix(16, 40) @ table,
                               atol=1e-6)
    np.testing.assert_array_equal(numpy(enc.resized(16).table), table)
    np.testing.assert_allclose(numpy(enc.resized(8, mode="nearest").table),
                               interpolation_matrix(16, 8, "nearest") @ table, atol=0)
    randomize(face, longer.table, seed=9)  # the copy owns its table
    np.testing.assert_array_equal(numpy(enc.table), table)
    assert tuple(longer(tensor(face, np.zeros((1, 40, 4), np.float32))).shape) == (1, 40, 4)


# ---------------------------------------------------------------------------
# HybridEncoding.


@pytest.mark.parametrize("layout", ["interleaved", "concat"])
def test_hybrid_starts_as_scaled_sinusoid(face, layout):
    enc = FACES[face].HybridEncoding(32, 8, base=100.0, layout=layout, scale=0.5)
    np.testing.assert_array_equal(numpy(enc.offset), np.zeros((32, 8)))
    assert float(numpy(enc.scale)) == 0.5
    x = np.random.default_rng(5).normal(size=(2, 10, 8)).astype(np.float32)
    out = enc(tensor(face, x))
    np.testing.assert_allclose(numpy(out), x + 0.5 * ref.sinusoidal(10, 8, 100.0, layout),
                               atol=1e-6)


def test_hybrid_values_with_trained_weights(face):
    enc = FACES[face].HybridEncoding(32, 8, layout="concat", scale=1.0)
    offset = randomize(face, enc.offset, seed=6)
    if face == "torch":
        with torch.no_grad():
            enc.scale.fill_(-1.5)
    else:
        enc.scale.assign(-1.5)
    positions = np.array([[0, 31, 4], [7, 7, 2]])
    expected = ref.hybrid(-1.5, offset, positions, layout="concat")
    x = np.zeros((2, 3, 8), np.float32)
    np.testing.assert_allclose(numpy(enc(tensor(face, x), tensor(face, positions))), expected,
                               atol=1e-6)
    np.testing.assert_allclose(numpy(enc.encoding(tensor(face, positions))), expected, atol=1e-6)
    np.testing.assert_allclose(numpy(enc.encoding(5)), ref.hybrid(-1.5, offset, np.arange(5),
                                                                  layout="concat"), atol=1e-6)


@pytest.mark.keras
def test_hybrid_sinusoid_is_not_a_weight():
    t_names = {name for name, _ in pt.HybridEncoding(16, 4).named_parameters()}
    assert t_names == {"scale", "offset"}
    assert set(pt.HybridEncoding(16, 4).state_dict()) == {"scale", "offset"}
    k_names = {w.path.split("/")[-1] for w in pk.HybridEncoding(16, 4).weights}
    assert k_names == {"scale", "offset"}
    assert tuple(pt.HybridEncoding(16, 4).scale.shape) == ()
    assert tuple(pk.HybridEncoding(16, 4).scale.shape) == ()


# ---------------------------------------------------------------------------
# PyTorch specifics.


@pytest.mark.parametrize("cls", ["LearnedEncoding", "HybridEncoding"])
def test_torch_training_step_changes_used_rows_only(cls):
    torch.manual_seed(0)
    enc = getattr(pt, cls)(20, 4)
    before = {n: p.detach().clone() for n, p in enc.named_parameters()}
    opt = torch.optim.SGD(enc.parameters(), lr=0.5)
    x, target = torch.randn(3, 7, 4), torch.randn(3, 7, 4)
    loss = F.mse_loss(enc(x), target)
    loss.backward()
    opt.step()
    name = "table" if cls == "LearnedEncoding" else "offset"
    after = dict(enc.named_parameters())[name].detach()
    assert (after[:7] - before[name][:7]).abs().min() > 0  # every used entry moved
    torch.testing.assert_close(after[7:], before[name][7:], rtol=0, atol=0)
    if cls == "HybridEncoding":
        assert enc.scale.item() != before["scale"].item()
    assert F.mse_loss(enc(x), target) < loss


def test_torch_resized_keeps_dtype_and_mode():
    enc = pt.LearnedEncoding(10, 4).to(torch.bfloat16).eval()
    longer = enc.resized(15)
    assert longer.table.dtype == torch.bfloat16 and not longer.training
    assert longer.table.requires_grad


# ---------------------------------------------------------------------------
# Keras specifics.

KERAS_CASES = [("LearnedEncoding", {"max_len": 12, "dim": 6, "init_std": 0.1}),
               ("HybridEncoding", {"max_len": 12, "dim": 6, "base": 50.0, "layout": "concat",
                                   "scale": 2.0})]


@pytest.mark.parametrize("cls, kwargs", KERAS_CASES)
@pytest.mark.keras
def test_keras_fit_changes_used_rows(cls, kwargs):
    keras.utils.set_random_seed(0)
    layer = getattr(pk, cls)(**kwargs)
    model = keras.Sequential([keras.Input((7, 6)), layer])
    model.compile(optimizer=keras.optimizers.SGD(0.5), loss="mse")
    name = "table" if cls == "LearnedEncoding" else "offset"
    weight = {w.path.split("/")[-1]: w for w in layer.weights}[name]
    before = numpy(weight).copy()
    rng = np.random.default_rng(8)
    x, y = (rng.normal(size=(4, 7, 6)).astype("float32") for _ in range(2))
    model.fit(x, y, batch_size=4, epochs=1, verbose=0)
    after = numpy(weight)
    assert np.abs(after[:7] - before[:7]).min() > 0
    np.testing.assert_array_equal(after[7:], before[7:])


# ---------------------------------------------------------------------------
# Tables from elsewhere: from_table, extended, the low-rank approximation.


def test_learned_from_table_copies_the_table(face):
    table = np.random.default_rng(0).normal(size=(6, 4)).astype(np.float32)
    source = tensor(face, table)
    enc = FACES[face].LearnedEncoding.from_table(source, init_std=0.5)
    assert (enc.max_len, enc.dim, enc.init_std) == (6, 4, 0.5)
    np.testing.assert_array_equal(numpy(enc.table), table)
    np.testing.assert_array_equal(numpy(enc.encoding(tensor(face, np.array([5, 0])))),
                                  table[[5, 0]])
    # a copy: changing the module leaves the source alone
    randomize(face, enc.table, seed=1)
    np.testing.assert_array_equal(numpy(source), table)
    # from a NumPy array and from another module's weight
    np.testing.assert_array_equal(numpy(FACES[face].LearnedEncoding.from_table(table).table), table)
    again = FACES[face].LearnedEncoding.from_table(enc.table)
    np.testing.assert_array_equal(numpy(again.table), numpy(enc.table))


def test_learned_from_table_errors(face):
    cls = FACES[face].LearnedEncoding
    with pytest.raises(ValueError, match=r"LearnedEncoding.from_table: table must have rank 2"):
        cls.from_table(tensor(face, np.zeros((2, 3, 4), np.float32)))
    with pytest.raises(ValueError, match=r"LearnedEncoding.from_table: table must be a "
                                         r"floating-point tensor, got dtype int"):
        cls.from_table(tensor(face, np.zeros((3, 4), np.int32)))
    with pytest.raises(ValueError, match="init_std must be a finite number greater than 0"):
        cls.from_table(tensor(face, np.zeros((3, 4), np.float32)), init_std=0.0)


def test_learned_extended_keeps_trained_rows(face):
    enc = seeded(face, FACES[face].LearnedEncoding, 8, 64, init_std=0.1)
    trained = randomize(face, enc.table)
    longer = enc.extended(200, seed=3)
    assert (longer.max_len, longer.dim, longer.init_std) == (200, 64, 0.1)
    table = numpy(longer.table)
    np.testing.assert_array_equal(table[:8], trained)          # exactly the trained rows
    new = table[8:]                                            # drawn like a fresh table
    assert np.abs(new).max() <= 2 * 0.1 + 1e-6
    assert abs(new.std() - 0.1 * 0.88) < 0.01   # std of N(0, s) cut at 2s is 0.88 s
    np.testing.assert_array_equal(numpy(enc.extended(200, seed=3).table), table)  # seeded
    assert not np.array_equal(numpy(enc.extended(200, seed=4).table)[8:], new)
    np.testing.assert_array_equal(numpy(enc.extended(8).table), trained)  # same length: a copy


def test_learned_extended_errors(face):
    enc = FACES[face].LearnedEncoding(8, 4)
    with pytest.raises(ValueError, match=r"new_max_len must be at least max_len=8 .* got "
                                         r"new_max_len=5; .*enc.resized\(5\).*table\[:5\]"):
        enc.extended(5)
    with pytest.raises(ValueError, match="new_max_len must be a positive integer"):
        enc.extended(2.5)
    with pytest.raises(ValueError, match="seed must be None or a non-negative integer"):
        enc.extended(9, seed=-1)


def test_torch_extended_and_from_table_keep_dtype_device_and_mode():
    enc = pt.LearnedEncoding(4, 8).to(torch.bfloat16).eval()
    longer = enc.extended(6, seed=0)
    assert longer.table.dtype == torch.bfloat16 and not longer.training
    assert torch.equal(longer.table[:4], enc.table)
    copy = pt.LearnedEncoding.from_table(enc.table.detach())
    assert copy.table.dtype == torch.bfloat16 and copy.table.requires_grad


def test_low_rank_from_table_is_the_truncated_svd(face):
    rng = np.random.default_rng(0)
    table = rng.normal(size=(12, 7)).astype(np.float32)
    u, s, vt = np.linalg.svd(table.astype(np.float64), full_matrices=False)
    for rank in (1, 3, 7):
        enc = FACES[face].LowRankEncoding.from_table(tensor(face, table), rank)
        assert (enc.max_len, enc.dim, enc.rank) == (12, 7, rank)
        best = (u[:, :rank] * s[:rank]) @ vt[:rank]
        np.testing.assert_allclose(numpy(enc.encoding(12)), best, atol=1e-5)
        # the balanced split: both factors carry sqrt(S)
        np.testing.assert_allclose(np.linalg.norm(numpy(enc.left), axis=0), np.sqrt(s[:rank]),
                                   rtol=1e-5)
        np.testing.assert_allclose(np.linalg.norm(numpy(enc.right), axis=1), np.sqrt(s[:rank]),
                                   rtol=1e-5)
        # Eckart-Young: the error is the discarded singular values
        err = np.linalg.norm(numpy(enc.encoding(12)) - table)
        np.testing.assert_allclose(err, np.sqrt((s[rank:] ** 2).sum()), atol=1e-4)
    with pytest.raises(ValueError, match=r"LowRankEncoding.from_table: rank=8 exceeds "
                                         r"min\(max_len, dim\)=7"):
        FACES[face].LowRankEncoding.from_table(tensor(face, table), 8)


@pytest.mark.keras
def test_plumbing_faces_agree():
    rng = np.random.default_rng(1)
    table = rng.normal(size=(10, 6)).astype(np.float32)
    t = pt.LowRankEncoding.from_table(torch.as_tensor(table), 2)
    k = pk.LowRankEncoding.from_table(ops.convert_to_tensor(table), 2)
    for name in ("left", "right"):
        np.testing.assert_allclose(numpy(getattr(t, name)), numpy(getattr(k, name)), atol=1e-6)
    t = pt.LearnedEncoding.from_table(table).extended(12, seed=0)
    k = pk.LearnedEncoding.from_table(table).extended(12, seed=0)
    np.testing.assert_array_equal(numpy(t.table)[:10], numpy(k.table)[:10])
    message = same_error(["torch", "keras"], lambda face: {"torch": t, "keras": k}[face].extended(3))
    assert "new_max_len must be at least max_len=12" in message
    message = same_error(["torch", "keras"], lambda face: FACES[face].LowRankEncoding.from_table(
        tensor(face, table), 0))
    assert "LowRankEncoding.from_table: rank must be at least 1" in message


# --------------------------------------------------------------------------- reading past the end

def past_the_table_error(face: str, encode) -> str:
    """The message of the ValueError that ``encode(encoding, positions)`` raises when six
    positions are read from a 4-row table ("" when it raises nothing)."""
    enc = seeded(face, FACES[face].LearnedEncoding, 4, 8)
    if face == "keras":
        enc.build((1, 4, 8))
    try:
        encode(enc, tensor(face, np.arange(6)))
    except ValueError as error:
        return str(error)
    return ""


@pytest.mark.parametrize("face", ["torch", pytest.param("keras", marks=pytest.mark.keras)])
@and_the_bugs("short-table")
def test_positions_past_the_table_raise(face, impl):
    encode = ((lambda enc, positions: enc.encoding(positions)) if impl == "posenc"
              else wrong_code(impl, face))
    message = past_the_table_error(face, encode)
    assert "max_len=4" in message, message


# --------------------------------------------------------------------------- low rank

@pytest.mark.parametrize("face", FACES)
def test_low_rank_parameter_count_and_rank(face):
    enc = FACES[face].LowRankEncoding(40, 24, rank=5)
    count = (sum(p.numel() for p in enc.parameters()) if face == "torch"
             else enc.count_params())
    assert count == 5 * (40 + 24)
    table = np32(enc.encoding(40))
    assert table.shape == (40, 24)
    assert np.linalg.matrix_rank(table.astype(np.float64), tol=1e-6) == 5
    np.testing.assert_allclose(table, np32(enc.left) @ np32(enc.right), atol=1e-6)
    # gathered rows equal the table's rows
    pos = np.array([[3, 0, 39], [7, 7, 1]])
    np.testing.assert_allclose(np32(enc.encoding(tensor(face, pos))), table[pos], atol=1e-6)

@pytest.mark.parametrize("face", FACES)
def test_low_rank_initial_scale_matches_a_learned_table(face):
    table = np32(FACES[face].LowRankEncoding(512, 256, rank=16).encoding(512))
    assert abs(table.std() - 0.02) < 0.02 * 0.15
