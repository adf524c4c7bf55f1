"""Vision RoPE (posenc/vision.py and its faces): axial 2D RoPE at any resolution and
RoPE-Mixed, against timm and torchtune (marker ``reference``), PyTorch against Keras, the
2D relative-offset property, the conventions that differ between libraries, and the errors.

The generic layer checks (config round trip, saving, shapes, training, mixed precision,
compilers) are the rows of ``tests/test_layers.py``.
"""

from __future__ import annotations

import importlib
import importlib.util
import sys
import types

import keras
import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

import posenc.keras as pk
import posenc.torch as pt
from faces import np32, same_error, tensor
from posenc import vision

FACES = {"torch": pt, "keras": pk}
reference = pytest.mark.reference


def rng_q(shape, seed=0):
    return np.random.default_rng(seed).normal(size=shape).astype(np.float32)


def rope_fn(face, x, grid, **kw):
    return np32(FACES[face].apply_vision_rope(tensor(face, x), grid, **kw))


# --------------------------------------------------------------------------- timm, loaded alone

def _timm_sincos():
    """timm's ``timm/layers/pos_embed_sincos.py`` (or a skip when timm is not installed).

    ``import timm`` imports torchvision, which this machine may lack; the module needs only
    torch and three helper modules of ``timm.layers``, so it is loaded on its own from
    timm's installed files where the package import fails: timm's own code either way.
    """
    spec = importlib.util.find_spec("timm")
    if spec is None:
        pytest.skip("timm is not installed: pip install -r requirements-reference.txt")
    try:
        return importlib.import_module("timm.layers.pos_embed_sincos")
    except Exception:   # torchvision missing, or built for another torch
        pass
    names = ("timm", "timm.layers", "timm.layers._fx", "timm.layers.grid",
             "timm.layers.trace_utils", "timm.layers.pos_embed_sincos")
    saved = {name: sys.modules.pop(name) for name in names if name in sys.modules}
    try:
        root = spec.submodule_search_locations[0]
        for name, path in (("timm", root), ("timm.layers", f"{root}/layers")):
            package = types.ModuleType(name)
            package.__path__ = [path]
            sys.modules[name] = package
        return importlib.import_module("timm.layers.pos_embed_sincos")
    finally:
        for name in names:
            sys.modules.pop(name, None)
        sys.modules.update(saved)


def _timm_axial(q_patches, grid, head_dim, *, base, ref_grid, half):
    """timm's EVA path: ``RotaryEmbeddingCat(in_pixels=False)`` then ``apply_rot_embed_cat``."""
    m = _timm_sincos()
    emb = m.RotaryEmbeddingCat(head_dim, temperature=base, in_pixels=False,
                               ref_feat_shape=None if ref_grid is None else list(ref_grid),
                               rotate_half=half)
    pos = emb.get_embed(list(grid))
    return m.apply_rot_embed_cat(torch.as_tensor(q_patches), pos, half=half).numpy()


# (grid, ref_grid, prefix_tokens): ViT-B/16 at 224 px with a CLS token, fine-tuned at 384 px
# (EVA-02's rescaling), a non-square grid with 4 registers, one shrunk below its reference.
AXIAL_CASES = [((14, 14), None, 1), ((24, 24), (14, 14), 1), ((6, 11), None, 4),
               ((5, 7), (8, 3), 0)]


@reference
@pytest.mark.parametrize("face", FACES)
@pytest.mark.parametrize("layout", ["interleaved", "half"])
@pytest.mark.parametrize("grid, ref_grid, prefix_tokens", AXIAL_CASES)
def test_axial_rope_equals_timm_rotary_embedding_cat(grid, ref_grid, prefix_tokens, layout,
                                                     face):
    head_dim, base = 32, 100.0
    q = rng_q((2, 3, prefix_tokens + grid[0] * grid[1], head_dim))
    got = rope_fn(face, q, grid, prefix_tokens=prefix_tokens, ref_grid=ref_grid, base=base,
                  layout=layout)
    want = _timm_axial(q[..., prefix_tokens:, :], grid, head_dim, base=base, ref_grid=ref_grid,
                       half=layout == "half")
    np.testing.assert_allclose(got[..., prefix_tokens:, :], want, rtol=1e-5, atol=2e-5)
    # EVA leaves the prefix as it is: so do we, bit for bit
    np.testing.assert_array_equal(got[..., :prefix_tokens, :], q[..., :prefix_tokens, :])


@reference
def test_timm_default_in_pixels_is_another_encoding():
    """timm's ``RotaryEmbeddingCat`` defaults to ``in_pixels=True``: positions spread over
    ``[-1, 1]`` and frequencies ``pi * 2^linspace(0, log2(max_res) - 1)``, not RoPE's
    ``index * base^(-4j/d)``. EVA-02 passes ``in_pixels=False``; the references above do."""
    m = _timm_sincos()
    head_dim, grid = 32, (6, 5)
    sin_cos = m.RotaryEmbeddingCat(head_dim).get_embed(list(grid)).numpy()
    rows = np.repeat(np.linspace(-1, 1, grid[0]), grid[1])
    cols = np.tile(np.linspace(-1, 1, grid[1]), grid[0])
    bands = np.pi * 2 ** np.linspace(0, np.log2(224) - 1, head_dim // 4)
    angles = np.concatenate([rows[:, None] * bands, cols[:, None] * bands], -1)
    np.testing.assert_allclose(sin_cos[:, :head_dim], np.repeat(np.sin(angles), 2, -1),
                               atol=2e-4)
    ours = np.sin(vision.axial_angles(grid, head_dim))
    assert np.abs(np.repeat(ours, 2, -1) - sin_cos[:, :head_dim]).max() > 0.5


@reference
@pytest.mark.parametrize("face", FACES)
@pytest.mark.parametrize("grid, layer_index", [((7, 9), 0), ((14, 14), 2), ((3, 16), 1)])
def test_mixed_rope_equals_timm_rotary_embedding_mixed(grid, layer_index, face):
    """timm's ``RotaryEmbeddingMixed`` (its own random initialisation), its ``freqs`` copied
    into ours: the same rotated q for every layer, with a CLS token left unrotated."""
    m = _timm_sincos()
    head_dim, heads, depth = 16, 4, 3
    torch.manual_seed(0)
    timm_rope = m.RotaryEmbeddingMixed(head_dim * heads, depth, heads)
    q = rng_q((2, heads, 1 + grid[0] * grid[1], head_dim))
    want = m.apply_rot_embed_cat(torch.as_tensor(q[:, :, 1:]),
                                 timm_rope.get_embed(list(grid))[layer_index]).detach().numpy()
    layer = FACES[face].MixedRotaryEmbedding(head_dim, heads, depth=depth, prefix_tokens=1)
    freqs = timm_rope.freqs.detach().numpy()
    if face == "torch":
        with torch.no_grad():
            layer.freqs.copy_(torch.as_tensor(freqs))
    else:
        layer.freqs.assign(freqs)
    x = tensor(face, q)
    got = np32(layer(x, x, grid=grid, layer_index=layer_index)[0])
    np.testing.assert_allclose(got[:, :, 1:], want, rtol=1e-5, atol=2e-5)
    np.testing.assert_array_equal(got[:, :, :1], q[:, :, :1])


@reference
def test_mixed_initialisation_follows_timm():
    """Magnitudes ``base^(-4j/d)`` with timm's default temperature 10, one direction per
    head and layer, the second half of the pairs perpendicular to the first; with
    ``rotate=False`` the axes, exactly timm's."""
    m = _timm_sincos()
    head_dim, heads, depth = 32, 6, 2
    ours = vision.mixed_frequencies(head_dim, heads, depth=depth, seed=3)
    theirs = m.init_random_2d_freqs(head_dim, depth, heads).numpy()   # temperature=10.0
    assert ours.shape == theirs.shape == (2, depth, heads, head_dim // 2)
    np.testing.assert_allclose(np.hypot(*ours), np.hypot(*theirs), rtol=1e-6)
    q = head_dim // 4
    for f in (ours, theirs):   # (fx, fy) of the second half = the first turned by +pi/2
        np.testing.assert_allclose(f[0, ..., q:], -f[1, ..., :q], atol=1e-6)
        np.testing.assert_allclose(f[1, ..., q:], f[0, ..., :q], atol=1e-6)
    directions = np.arctan2(ours[1, ..., 0], ours[0, ..., 0])
    assert len(np.unique(directions.round(6))) == depth * heads   # one per head and layer
    np.testing.assert_allclose(vision.mixed_frequencies(head_dim, heads, depth=depth,
                                                        rotate=False),
                               m.init_random_2d_freqs(head_dim, depth, heads, rotate=False),
                               atol=1e-7)


@reference
@pytest.mark.parametrize("face", FACES)
def test_torchtune_convention_is_offset_one_columns_first(face):
    """torchtune's ``VisionRotaryPositionalEmbeddings`` counts patches from 1, puts the
    column on the first pairs and zeroes the CLS token's angles: ``offset=1.0,
    axis_order="wh"`` with one unrotated prefix token is the same rotation."""
    from torchtune.modules import VisionRotaryPositionalEmbeddings

    head_dim, side, heads = 32, 5, 2
    tt = VisionRotaryPositionalEmbeddings(patch_size=1, tile_size=side, max_num_tiles=1,
                                          dim=head_dim // 2, base=100, append_cls_token=False)
    q = rng_q((2, heads, 1 + side * side, head_dim))
    want = tt(torch.as_tensor(q).transpose(1, 2)).transpose(1, 2).numpy()
    got = rope_fn(face, q, (side, side), prefix_tokens=1, offset=1.0, axis_order="wh",
                  base=100.0)
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=2e-5)
    # the posenc default (offset 0, rows first) is not torchtune's
    assert np.abs(rope_fn(face, q, (side, side), prefix_tokens=1, base=100.0) - want).max() > 0.1


@reference
@pytest.mark.parametrize("face", FACES)
def test_keras_hub_sam3_convention_is_columns_first_interleaved(face):
    """keras-hub's ``SAM3ViTRotaryEmbedding`` (Heo et al.'s convention, in Keras): patches
    counted from 0, the column on the first pairs, interleaved pairs, base ``rope_theta``:
    ``axis_order="wh"`` with ``base=rope_theta``, applied as SAM3's attention applies it."""
    sam3 = pytest.importorskip("keras_hub.src.models.sam3.sam3_vision_encoder")
    head_dim, (h, w), theta = 16, (3, 5), 100.0
    layer = sam3.SAM3ViTRotaryEmbedding(theta, head_dim, end_x=w, end_y=h)
    layer.build(None)
    cos, sin = (np.asarray(keras.ops.convert_to_numpy(t), np.float64) for t in layer(None))
    q = rng_q((2, 2, h * w, head_dim))
    pairs = q.reshape(*q.shape[:-1], head_dim // 2, 2)
    turned = np.stack((-pairs[..., 1], pairs[..., 0]), -1).reshape(q.shape)   # SAM3's pairwise
    want = q * cos + turned * sin
    got = rope_fn(face, q, (h, w), axis_order="wh", base=theta)
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=2e-5)
    assert np.abs(rope_fn(face, q, (h, w), base=theta) - want).max() > 0.1   # rows first: not SAM3


@reference
@pytest.mark.parametrize("face", FACES)
def test_torchtune_default_puts_cls_last_which_prefix_tokens_cannot_express(face):
    """torchtune's default ``append_cls_token=True`` expects the CLS token *after* the
    patches: the same rotation as ``posenc`` on the patches alone with the CLS token appended
    unrotated, and not what ``prefix_tokens=1`` (a CLS token first) computes."""
    import inspect

    from torchtune.modules import VisionRotaryPositionalEmbeddings

    params = inspect.signature(VisionRotaryPositionalEmbeddings).parameters
    assert params["append_cls_token"].default is True
    head_dim, side, heads = 32, 5, 2
    tt = VisionRotaryPositionalEmbeddings(patch_size=1, tile_size=side, max_num_tiles=1,
                                          dim=head_dim // 2, base=100)
    q = rng_q((2, heads, side * side + 1, head_dim), seed=3)
    want = tt(torch.as_tensor(q).transpose(1, 2)).transpose(1, 2).numpy()
    patches = rope_fn(face, q[:, :, :-1], (side, side), offset=1.0, axis_order="wh",
                      base=100.0)
    np.testing.assert_allclose(np.concatenate([patches, q[:, :, -1:]], axis=2), want,
                               rtol=1e-5, atol=2e-5)
    as_prefix = rope_fn(face, q, (side, side), prefix_tokens=1, offset=1.0, axis_order="wh",
                        base=100.0)
    assert np.abs(as_prefix - want).max() > 0.1


# --------------------------------------------------------------------------- conventions inside posenc

def test_interleaved_equals_apply_rope_2d_and_half_is_another_pairing():
    """``apply_rope_2d`` (the rotary family) and ``apply_vision_rope`` agree in the
    interleaved layout; in the half layout ``apply_rope_2d`` pairs within each axis' half
    of the head, ``apply_vision_rope`` over the whole head (timm's ``rotate_half``): the
    same rotation after a permutation of the features, not the same tensor."""
    head_dim, grid = 16, (4, 6)
    q = torch.as_tensor(rng_q((2, 3, 24, head_dim)))
    inv_freq, _ = pt.rope_frequencies(head_dim // 2, base=100.0)
    torch.testing.assert_close(pt.apply_vision_rope(q, grid, base=100.0),
                               pt.apply_rope_2d(q, *grid, inv_freq, layout="interleaved"))
    ours = pt.apply_vision_rope(q, grid, base=100.0, layout="half")
    theirs = pt.apply_rope_2d(q, *grid, inv_freq, layout="half")
    assert (ours - theirs).abs().max() > 0.1
    # rope_2d half: [rows a | rows b | cols a | cols b]; whole-head half: [rows a | cols a | rows b | cols b]
    n = head_dim // 4
    perm = np.r_[0:n, 2 * n:3 * n, n:2 * n, 3 * n:4 * n]
    torch.testing.assert_close(pt.apply_vision_rope(q[..., perm], grid, base=100.0,
                                                    layout="half"), theirs[..., perm])


@pytest.mark.parametrize("face", FACES)
def test_ref_grid_maps_a_finer_grid_onto_the_trained_range(face):
    """With ``ref_grid=(h, w)`` the ``(2h, 2w)`` grid's patch ``(2i, 2j)`` gets the angles of
    patch ``(i, j)`` of the trained grid; ``ref_grid`` equal to the grid changes nothing."""
    head_dim, small, big = 16, (3, 4), (6, 8)
    q_small, q_big = rng_q((1, 2, 12, head_dim)), np.zeros((1, 2, 48, head_dim), np.float32)
    q_big.reshape(1, 2, 6, 8, head_dim)[:, :, ::2, ::2] = q_small.reshape(1, 2, 3, 4, head_dim)
    got = rope_fn(face, q_big, big, ref_grid=small).reshape(1, 2, 6, 8, head_dim)
    np.testing.assert_allclose(got[:, :, ::2, ::2].reshape(1, 2, 12, head_dim),
                               rope_fn(face, q_small, small), rtol=1e-6, atol=1e-6)
    np.testing.assert_array_equal(rope_fn(face, q_small, small, ref_grid=small),
                                  rope_fn(face, q_small, small))
    assert np.abs(rope_fn(face, q_big, big) - rope_fn(face, q_big, big, ref_grid=small)).max() > 0.1


@pytest.mark.parametrize("face", FACES)
def test_axial_is_mixed_with_frequencies_on_the_axes(face):
    """``axial_as_mixed`` in a mixed layer rotates as the axial layer (one formula)."""
    head_dim, heads, grid = 16, 3, (5, 4)
    layer = FACES[face].MixedRotaryEmbedding(head_dim, heads, prefix_tokens=2)
    freqs = vision.axial_as_mixed(head_dim, heads, base=100.0)
    if face == "torch":
        with torch.no_grad():
            layer.freqs.copy_(torch.as_tensor(freqs))
    else:
        layer.freqs.assign(freqs)
    q = tensor(face, rng_q((2, heads, 22, head_dim)))
    want = FACES[face].VisionRotaryEmbedding(head_dim, prefix_tokens=2, base=100.0)(q, q, grid=grid)
    got = layer(q, q, grid=grid)
    for a, b in zip(got, want):
        np.testing.assert_allclose(np32(a), np32(b), rtol=1e-5, atol=1e-5)


@pytest.mark.keras
def test_prefix_token_unrotated_is_rotated_at_the_origin():
    """A CLS token left unrotated scores against the patches as a patch at ``(0, 0)``
    would: the rotation by angle 0 is the identity."""
    head_dim, grid = 16, (3, 5)
    q = rng_q((1, 1, 16, head_dim))
    with_cls = rope_fn("torch", q, grid, prefix_tokens=1)
    as_patch = rope_fn("torch", q[:, :, :1].repeat(16, 2)[:, :, :15], grid)
    np.testing.assert_allclose(with_cls[:, :, 0], as_patch[:, :, 0], rtol=1e-6, atol=1e-7)


# --------------------------------------------------------------------------- the property

def _scores(face, grid, head_dim, kind, seed):
    """``q_m . k_n`` for one query vector and one key vector placed at every patch."""
    h, w = grid
    rng = np.random.default_rng(seed)
    q = np.broadcast_to(rng.normal(size=head_dim), (1, 2, h * w, head_dim)).astype(np.float32)
    k = np.broadcast_to(rng.normal(size=head_dim), (1, 2, h * w, head_dim)).astype(np.float32)
    m = FACES[face]
    if kind == "axial":
        layer = m.VisionRotaryEmbedding(head_dim, base=10.0)
    else:
        layer = m.MixedRotaryEmbedding(head_dim, 2, seed=seed)
    qr, kr = (np32(t).astype(np.float64) for t in layer(tensor(face, q), tensor(face, k), grid=grid))
    return qr[0, 1] @ kr[0, 1].T


@settings(max_examples=15, deadline=None)
@given(h=st.integers(2, 6), w=st.integers(2, 6), seed=st.integers(0, 10_000),
       kind=st.sampled_from(["axial", "mixed"]))
@pytest.mark.keras
def test_scores_depend_only_on_the_2d_offset(h, w, seed, kind):
    head_dim = 16
    scores = _scores("torch", (h, w), head_dim, kind, seed)
    rows, cols = np.divmod(np.arange(h * w), w)
    dy, dx = rows[:, None] - rows[None, :], cols[:, None] - cols[None, :]
    for oy in range(-(h - 1), h):
        for ox in range(-(w - 1), w):
            same = scores[(dy == oy) & (dx == ox)]
            np.testing.assert_allclose(same, same[0], rtol=1e-4, atol=1e-4,
                                       err_msg=f"offset ({oy}, {ox})")
    # and the score does vary with the offset (a position-blind rotation would pass above)
    assert np.ptp(scores) > 1e-3


@pytest.mark.keras
def test_keras_scores_depend_only_on_the_2d_offset():
    h, w, head_dim = 4, 5, 16
    for kind in ("axial", "mixed"):
        scores = _scores("keras", (h, w), head_dim, kind, 7)
        rows, cols = np.divmod(np.arange(h * w), w)
        key = (rows[:, None] - rows[None, :]) * 100 + cols[:, None] - cols[None, :]
        for offset in np.unique(key):
            same = scores[key == offset]
            np.testing.assert_allclose(same, same[0], rtol=1e-4, atol=1e-4)
        np.testing.assert_allclose(scores, _scores("torch", (h, w), head_dim, kind, 7),
                                   rtol=1e-4, atol=1e-4)


# --------------------------------------------------------------------------- the two faces

def _copy_mixed(src, dst):
    values = np32(src.freqs)
    if isinstance(dst, torch.nn.Module):
        with torch.no_grad():
            dst.freqs.copy_(torch.as_tensor(values))
    else:
        dst.freqs.assign(values)


PARITY_CASES = [
    ("VisionRotaryEmbedding", {"prefix_tokens": 1, "ref_grid": (7, 7)}, (2, 6, 1 + 9 * 11, 32),
     (9, 11), {}),
    ("VisionRotaryEmbedding", {"prefix_tokens": 4, "layout": "half", "axis_order": "wh",
                               "offset": 1.0, "base": 100.0}, (2, 3, 4 + 5 * 8, 16), (5, 8), {}),
    ("MixedRotaryEmbedding", (4,), (2, 4, 1 + 6 * 6, 32), (6, 6),
     {"depth": 3, "prefix_tokens": 1, "seed": 5, "ref_grid": (4, 4)}),
    ("MixedRotaryEmbedding", (2,), (3, 2, 7 * 3, 16), (7, 3), {"layout": "half", "seed": 1}),
]


@pytest.mark.keras
@pytest.mark.parametrize("dtype", ["float32", "bfloat16"])
@pytest.mark.parametrize("cls, extra, shape, grid, kwargs", PARITY_CASES)
def test_torch_equals_keras(cls, extra, shape, grid, kwargs, dtype):
    if cls == "VisionRotaryEmbedding":
        args, kwargs = (shape[-1],), extra
    else:
        args = (shape[-1], *extra)
    t = getattr(pt, cls)(*args, **kwargs)
    k = getattr(pk, cls)(*args, **kwargs, dtype=dtype)
    if cls == "MixedRotaryEmbedding":   # the same seed: the same weights
        np.testing.assert_array_equal(np32(t.freqs), np32(k.freqs))
        assert str(k.freqs.dtype).endswith("float32")
    q, kk = rng_q(shape, 1), rng_q(shape, 2)
    call = {} if cls == "VisionRotaryEmbedding" else {"layer_index": kwargs.get("depth", 1) - 1}
    got_t = t(tensor("torch", q, dtype), tensor("torch", kk, dtype), grid=grid, **call)
    got_k = k(tensor("keras", q), tensor("keras", kk), grid=grid, **call)
    tol = {"rtol": 1e-5, "atol": 2e-6} if dtype == "float32" else {"rtol": 2e-2, "atol": 3e-2}
    for a, b in zip(got_t, got_k):
        assert str(a.dtype).endswith(dtype) and keras.backend.standardize_dtype(b.dtype) == dtype
        np.testing.assert_allclose(np32(a), np32(b), **tol)


@pytest.mark.keras
@pytest.mark.parametrize("face", FACES)
def test_grid_per_call_overrides_the_constructor_and_any_resolution_runs(face):
    m = FACES[face]
    layer = m.VisionRotaryEmbedding(16, grid=(3, 3), prefix_tokens=1)
    for grid in ((3, 3), (5, 2), (1, 17), (30, 40)):
        q = tensor(face, rng_q((1, 2, 1 + grid[0] * grid[1], 16)))
        out = layer(q, q, grid=grid) if grid != (3, 3) else layer(q, q)
        np.testing.assert_allclose(np32(out[0]), rope_fn(face, np32(q), grid, prefix_tokens=1),
                                   rtol=1e-6, atol=1e-6)


@pytest.mark.keras
def test_keras_mixed_frequencies_learn_under_mixed_precision():
    """The frequencies are a float32 weight, not autocast, and gradients reach them."""
    with keras.mixed_precision.policy_scope("mixed_bfloat16") if hasattr(
            keras.mixed_precision, "policy_scope") else _policy("mixed_bfloat16"):
        layer = pk.MixedRotaryEmbedding(16, 2, seed=0, grid=(3, 4))
        assert layer.compute_dtype == "bfloat16"
        assert keras.backend.standardize_dtype(layer.freqs.dtype) == "float32"
    x = np.ones((1, 2, 12, 16), np.float32)
    full = pk.MixedRotaryEmbedding(16, 2, seed=0, grid=(3, 4))
    np.testing.assert_array_equal(np32(layer.freqs), np32(full.freqs))
    np.testing.assert_allclose(np32(layer(x, x)[0]), np32(full(x, x)[0]), rtol=2e-2, atol=3e-2)


class _policy:
    def __init__(self, name):
        self.name = name

    def __enter__(self):
        keras.mixed_precision.set_global_policy(self.name)

    def __exit__(self, *exc):
        keras.mixed_precision.set_global_policy("float32")


def test_torch_mixed_frequencies_get_gradients_through_the_rotation():
    layer = pt.MixedRotaryEmbedding(16, 2, depth=2, seed=0, grid=(3, 4))
    q = torch.as_tensor(rng_q((2, 2, 12, 16)))
    qr, kr = layer(q, q, layer_index=1)
    (qr @ kr.transpose(-1, -2)).square().sum().backward()
    assert layer.freqs.grad[:, 1].abs().sum() > 0
    assert layer.freqs.grad[:, 0].abs().sum() == 0   # layer 0 was not used


# --------------------------------------------------------------------------- errors

def _q(on, *shape):
    return tensor(on, np.zeros(shape, np.float32))


ERRORS = [
    # the grid does not match the sequence
    (lambda m, f: m.apply_vision_rope(_q(f, 2, 3, 197, 32), (14, 14)),
     ["apply_vision_rope: x must hold prefix_tokens + height * width = 0 + 14 * 14 = 196 "
      "tokens, got 197", "prefix_tokens=1 and grid=(14, 14)"]),
    (lambda m, f: m.VisionRotaryEmbedding(32, prefix_tokens=1)(
        _q(f, 2, 3, 50, 32), _q(f, 2, 3, 50, 32), grid=(6, 6)),
     ["VisionRotaryEmbedding: q must hold prefix_tokens + height * width = 1 + 6 * 6 = 37",
      "grid=(7, 7) for 49 square patches"]),
    (lambda m, f: m.VisionRotaryEmbedding(32)(_q(f, 2, 3, 49, 32), _q(f, 2, 3, 49, 32)),
     ["VisionRotaryEmbedding: grid is None", "pass grid=(height, width)"]),
    # head_dim not divisible by 4
    (lambda m, f: m.VisionRotaryEmbedding(30),
     ["VisionRotaryEmbedding: head_dim must be a multiple of 4", "got head_dim=30",
      "use head_dim=32 or head_dim=28"]),
    (lambda m, f: m.apply_vision_rope(_q(f, 2, 3, 12, 18), (3, 4)),
     ["apply_vision_rope: x.shape[-1] must be a multiple of 4", "got x.shape[-1]=18"]),
    (lambda m, f: m.MixedRotaryEmbedding(6, 2),
     ["MixedRotaryEmbedding: head_dim must be a multiple of 4", "got head_dim=6"]),
    # wrong ranks and widths
    (lambda m, f: m.apply_vision_rope(_q(f, 12), (3, 4)),
     ["apply_vision_rope: x must have rank", "(rank 1)", "(batch, heads, seq, head_dim)"]),
    (lambda m, f: m.VisionRotaryEmbedding(16)(_q(f, 2, 12, 32), _q(f, 2, 12, 32), grid=(3, 4)),
     ["VisionRotaryEmbedding: q must be (..., seq, head_dim) with head_dim=16",
      "build the layer with head_dim=32"]),
    (lambda m, f: m.MixedRotaryEmbedding(16, 4)(_q(f, 2, 3, 12, 16), _q(f, 2, 3, 12, 16),
                                                grid=(3, 4)),
     ["MixedRotaryEmbedding: q must be (batch, heads, seq, head_dim) with heads=num_heads=4",
      "build the layer with num_heads=3"]),
    (lambda m, f: m.apply_mixed_rope(_q(f, 2, 2, 12, 16), (3, 4), np.zeros((2, 2, 4))),
     ["apply_mixed_rope: freqs must be (2, heads, 8)", "got freqs.shape=(2, 2, 4)"]),
    (lambda m, f: m.MixedRotaryEmbedding(16, 2, depth=3)(
        _q(f, 1, 2, 12, 16), _q(f, 1, 2, 12, 16), grid=(3, 4), layer_index=3),
     ["MixedRotaryEmbedding: layer_index must be below depth=3, got layer_index=3",
      "pass a layer 0 .. 2"]),
    # bad arguments
    (lambda m, f: m.VisionRotaryEmbedding(16, prefix_tokens=-1),
     ["prefix_tokens must be a non-negative integer, got prefix_tokens=-1"]),
    (lambda m, f: m.VisionRotaryEmbedding(16, ref_grid=(14,)),
     ["VisionRotaryEmbedding: ref_grid must be a (height, width) pair"]),
    (lambda m, f: m.VisionRotaryEmbedding(16, axis_order="xy"),
     ["axis_order must be one of 'hw', 'wh', got axis_order='xy'", "torchtune"]),
    (lambda m, f: m.apply_vision_rope(_q(f, 1, 12, 16), (3, 4), layout="rotate_half"),
     ["layout must be one of 'half', 'interleaved'"]),
]


@pytest.mark.keras
@pytest.mark.parametrize("call, parts", ERRORS)
def test_errors_name_the_argument_and_the_fix(call, parts):
    message = same_error(FACES, lambda face: call(FACES[face], face))
    for part in parts:
        assert part in message, (part, message)


# --------------------------------------------------------------------------- the chapter's scratch lines

@pytest.mark.keras
@pytest.mark.parametrize("face", FACES)
def test_scratch_lines_equal_the_package(face):
    import posenc.keras.scratch as sk
    import posenc.torch.scratch as st

    s = {"torch": st, "keras": sk}[face]
    q = rng_q((2, 3, 1 + 5 * 6, 16))
    got = np32(s.axial_rope(tensor(face, q), 5, 6, prefix_tokens=1, base=100.0, ref_grid=(3, 3)))
    np.testing.assert_allclose(got, rope_fn(face, q, (5, 6), prefix_tokens=1, base=100.0,
                                            ref_grid=(3, 3)), rtol=1e-5, atol=1e-5)
    freqs = vision.mixed_frequencies(16, 3, seed=4)[:, 0]
    got = np32(s.mixed_rope(tensor(face, q[:, :, 1:]), 5, 6, tensor(face, freqs)))
    want = np32(FACES[face].apply_mixed_rope(tensor(face, q[:, :, 1:]), (5, 6), freqs))
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)
