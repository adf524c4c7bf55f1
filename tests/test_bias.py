"""The bias family's own properties: ALiBi's slopes and bias, T5's buckets, Swin's index and
table, and the bias as an additive mask of scaled dot-product attention in both faces.

(The generic checks of ``ALiBiBias``, ``T5RelativeBias`` and ``SwinRelativeBias`` are rows
of ``tests/test_layers.py``; their bad inputs are rows of ``tests/test_errors.py``.)
"""

from __future__ import annotations

import keras
import numpy as np
import pytest
import torch
import torch.nn.functional as F
from hypothesis import given, settings
from hypothesis import strategies as st

import posenc.keras as pk
import posenc.torch as pt
from faces import numpy, tensor
from mutants import and_the_bugs, bug_param, wrong_code
from posenc import bias as nb
from posenc.interop import copy_weights

FACES = {"torch": pt, "keras": pk}


# --------------------------------------------------------------------------- ALiBi

@pytest.mark.keras
def test_slopes_of_eight_heads_are_the_powers_one_half_to_one_256th():
    want = 2.0 ** -np.arange(1, 9)
    np.testing.assert_array_equal(nb.alibi_slopes(8), want)
    for face in FACES.values():
        np.testing.assert_array_equal(numpy(face.alibi_slopes(8)), want)


@pytest.mark.parametrize("num_heads, exponents", [
    (1, [-8]),
    (2, [-4, -8]),
    (3, [-4, -8, -2]),                        # 2 heads, then the 1st of 4
    (6, [-2, -4, -6, -8, -1, -3]),            # 4 heads, then the 1st and 3rd of 8
    (12, [-1, -2, -3, -4, -5, -6, -7, -8, -0.5, -1.5, -2.5, -3.5]),   # 8, then odd ones of 16
])
@pytest.mark.keras
def test_slopes_follow_the_papers_recipe_for_any_head_count(num_heads, exponents):
    np.testing.assert_allclose(nb.alibi_slopes(num_heads), 2.0 ** np.array(exponents),
                               rtol=1e-15)
    for face in FACES.values():
        np.testing.assert_array_equal(numpy(face.alibi_slopes(num_heads)),
                                      nb.alibi_slopes(num_heads).astype(np.float32))


def test_slopes_are_distinct_and_in_the_unit_interval():
    for n in range(1, 70):
        slopes = nb.alibi_slopes(n)
        assert slopes.shape == (n,) and len(set(slopes)) == n
        assert (slopes > 0).all() and (slopes < 1).all()


def test_alibi_bias_values():
    slope = 2.0 ** -8
    np.testing.assert_array_equal(nb.alibi_bias(1, 3, 3)[0], np.array(
        [[0, -np.inf, -np.inf], [-slope, 0, -np.inf], [-2 * slope, -slope, 0]], np.float32))
    np.testing.assert_array_equal(nb.alibi_bias(1, 3, 3, causal=False)[0], np.array(
        [[0, -slope, -2 * slope], [-slope, 0, -slope], [-2 * slope, -slope, 0]], np.float32))


@settings(max_examples=40, deadline=None)
@given(num_heads=st.integers(1, 12), q_len=st.integers(0, 9), extra=st.integers(0, 9),
       causal=st.booleans())
@pytest.mark.keras
def test_alibi_bias_is_minus_slope_times_distance_with_the_queries_last(num_heads, q_len,
                                                                        extra, causal):
    k_len = q_len + extra
    slopes = nb.alibi_slopes(num_heads)
    i = np.arange(k_len - q_len, k_len)[:, None]        # query positions: the last q_len
    j = np.arange(k_len)[None, :]
    want = -slopes[:, None, None] * np.abs(i - j)
    if causal:
        want = np.where(j > i, -np.inf, want)
    for got in (nb.alibi_bias(num_heads, q_len, k_len, causal=causal),
                *[numpy(f.alibi_bias(num_heads, q_len, k_len, causal=causal))
                  for f in FACES.values()],
                *[numpy(f.ALiBiBias(num_heads, causal=causal)(q_len, k_len))[0]
                  for f in FACES.values()]):
        assert got.shape == (num_heads, q_len, k_len)
        np.testing.assert_allclose(got, want, rtol=1e-6)


@pytest.mark.parametrize("face", FACES)
def test_alibi_module_caches_grows_and_slices(face):
    alibi = FACES[face].ALiBiBias(3)
    first = numpy(alibi(2, 5))
    long = numpy(alibi(1, 100))                    # grows the cache past 16
    np.testing.assert_array_equal(numpy(alibi(2, 5)), first)
    np.testing.assert_array_equal(long[0], nb.alibi_bias(3, 1, 100))
    np.testing.assert_array_equal(first[0], nb.alibi_bias(3, 2, 5))
    assert tuple(alibi(0, 4).shape) == (1, 3, 0, 4)
    cache = alibi._cache
    assert tuple(cache.shape) == (3, 2 * 128 - 1)  # every offset up to the next power of two
    if face == "torch":
        assert set(alibi.state_dict()) == set()     # the cache is not saved


def test_causal_alibi_is_also_the_causal_mask():
    q = torch.randn(2, 4, 7, 8)
    k, v = torch.randn(2, 4, 7, 8), torch.randn(2, 4, 7, 8)
    weights = torch.softmax(q @ k.transpose(-1, -2) + pt.ALiBiBias(4)(7), dim=-1)
    assert (weights.triu(1) == 0).all()
    no_alibi = F.scaled_dot_product_attention(q, k, v, is_causal=True)
    zero = torch.where(torch.isinf(pt.ALiBiBias(4)(7)), float("-inf"), 0.0)
    torch.testing.assert_close(F.scaled_dot_product_attention(q, k, v, attn_mask=zero), no_alibi)


# --------------------------------------------------------------------------- T5

CONFIGS = [(True, 32, 128), (False, 32, 128), (True, 16, 20), (False, 8, 9), (True, 4, 3)]


@pytest.mark.parametrize("bidirectional, num_buckets, max_distance", CONFIGS)
def test_t5_buckets_properties(bidirectional, num_buckets, max_distance):
    rel = np.arange(-400, 401)
    buckets = nb.t5_buckets(rel, bidirectional=bidirectional, num_buckets=num_buckets,
                            max_distance=max_distance)
    per_direction = num_buckets // 2 if bidirectional else num_buckets
    max_exact = per_direction // 2
    past, future = buckets[rel <= 0][::-1], buckets[rel >= 0]      # by growing |distance|
    # exact for small distances
    np.testing.assert_array_equal(past[:max_exact], np.arange(max_exact))
    # monotone in |distance|, within 0 .. per_direction - 1, last bucket from max_distance on
    assert (np.diff(past) >= 0).all()
    assert past.min() == 0 and past.max() == per_direction - 1
    assert (past[max_distance:] == per_direction - 1).all()
    # logarithmic beyond: max_exact + (n - max_exact) * log(d / max_exact) / log(max_distance /
    # max_exact), truncated (in float64 here; distances within 1e-4 of a bucket edge, where
    # float32 rounding may fall either way, are left out)
    d = np.arange(max_exact, max_distance)
    exact = max_exact + ((per_direction - max_exact) * np.log(d / max_exact)
                         / np.log(max_distance / max_exact))
    clear = np.abs(exact - np.round(exact)) > 1e-4
    np.testing.assert_array_equal(past[d][clear], np.floor(exact[clear]).astype(int))
    if bidirectional:
        assert (np.diff(future) >= 0).all()
        np.testing.assert_array_equal(future[1:max_exact], per_direction + np.arange(1, max_exact))
        assert future.max() == num_buckets - 1
        # every bucket is used but the future's "distance 0", which only the past has
        assert set(buckets) == set(range(num_buckets)) - {per_direction}
    else:
        assert (future == 0).all()                  # every future key shares bucket 0


@pytest.mark.parametrize("face", FACES)
@pytest.mark.parametrize("bidirectional, num_buckets, max_distance", CONFIGS)
def test_t5_buckets_equal_in_every_face(face, bidirectional, num_buckets, max_distance):
    rel = np.arange(-3000, 3001)
    kwargs = dict(bidirectional=bidirectional, num_buckets=num_buckets, max_distance=max_distance)
    for dtype in ("int32", "int64"):
        got = FACES[face].t5_buckets(tensor(face, rel, dtype), **kwargs)
        np.testing.assert_array_equal(numpy(got), nb.t5_buckets(rel, **kwargs))


@pytest.mark.parametrize("bidirectional", [True, False])
@pytest.mark.keras
def test_t5_relative_bias_reads_the_table_at_the_buckets(bidirectional):
    torch_bias = pt.T5RelativeBias(3, bidirectional=bidirectional)
    keras_bias = pk.T5RelativeBias(3, bidirectional=bidirectional)
    copy_weights(torch_bias, keras_bias)
    table = torch_bias.relative_attention_bias.detach().numpy()
    buckets = nb.t5_buckets(nb.relative_positions(4, 50), bidirectional=bidirectional)
    want = table[buckets].transpose(2, 0, 1)[None]
    np.testing.assert_array_equal(numpy(torch_bias(4, 50)), want)
    np.testing.assert_array_equal(numpy(keras_bias(4, 50)), want)
    # decoding one token at a time reads the last row of the full bias
    np.testing.assert_array_equal(numpy(torch_bias(1, 50))[..., 0, :], want[..., -1, :])


# --------------------------------------------------------------------------- Swin

def assert_swin_index(index, h: int, w: int) -> None:
    """Swin's index of an ``h x w`` window: one 2D offset per table row, every row used,
    the centre on the diagonal, ``(dy, dx)`` and ``(-dy, -dx)`` symmetric about it."""
    size = (2 * h - 1) * (2 * w - 1)
    center = size // 2                                    # the offset (0, 0)
    assert index.shape == (h * w, h * w)
    assert (np.diag(index) == center).all()
    np.testing.assert_array_equal(index + index.T, 2 * center)   # (dy, dx) -> (-dy, -dx)
    rows, cols = np.divmod(np.arange(h * w), w)
    offsets = {}
    for a in range(h * w):
        for b in range(h * w):
            offsets.setdefault(index[a, b], set()).add((rows[a] - rows[b], cols[a] - cols[b]))
    assert all(len(o) == 1 for o in offsets.values())      # one offset per index
    assert sorted(offsets) == list(range(size))             # every table row is used


@pytest.mark.parametrize("window, impl", [
    *(((h, w), "posenc") for h, w in [(1, 1), (2, 2), (3, 5), (7, 7), (4, 1)]),
    *(bug_param("swin-unscaled", window) for window in [(2, 2), (3, 5), (7, 7)])])
@pytest.mark.keras
def test_swin_index_has_no_collisions_and_a_symmetric_structure(window, impl):
    h, w = window
    index = (nb.swin_relative_index if impl == "posenc" else wrong_code(impl))(h, w)
    assert_swin_index(index, h, w)
    for face in FACES.values():
        np.testing.assert_array_equal(numpy(face.swin_relative_index(h, w)), index)


@pytest.mark.keras
def test_swin_bias_reads_the_table_at_the_index():
    torch_bias, keras_bias = pt.SwinRelativeBias(2, (3, 4)), pk.SwinRelativeBias(2, (3, 4))
    copy_weights(torch_bias, keras_bias)
    table = torch_bias.relative_position_bias_table.detach().numpy()
    want = table[nb.swin_relative_index(3, 4)].transpose(2, 0, 1)[None]
    np.testing.assert_array_equal(numpy(torch_bias(12)), want)
    np.testing.assert_array_equal(numpy(keras_bias(12, 12)), want)


@pytest.mark.parametrize("old, new", [(7, 12), ((3, 4), (5, 2)), (6, 3)])
@pytest.mark.keras
def test_swin_table_resize_is_bicubic_interpolation_of_the_offset_grid(old, new):
    old_h, old_w = (old, old) if isinstance(old, int) else old
    new_h, new_w = (new, new) if isinstance(new, int) else new
    table = torch.randn((2 * old_h - 1) * (2 * old_w - 1), 3, dtype=torch.float64)
    grid = table.T.reshape(1, 3, 2 * old_h - 1, 2 * old_w - 1)
    want = F.interpolate(grid, size=(2 * new_h - 1, 2 * new_w - 1), mode="bicubic",
                         align_corners=False)[0].reshape(3, -1).T
    got = pt.resize_swin_bias_table(table, old, new)
    torch.testing.assert_close(got, want, rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(numpy(pk.resize_swin_bias_table(table.numpy(), old, new)),
                               want.numpy(), rtol=1e-6, atol=1e-7)
    torch.testing.assert_close(pt.resize_swin_bias_table(table, old, old), table, rtol=0, atol=0)


@pytest.mark.keras
def test_swin_resized_module_keeps_the_centre_and_agrees_across_faces():
    torch_bias, keras_bias = pt.SwinRelativeBias(2, 4), pk.SwinRelativeBias(2, 4)
    copy_weights(torch_bias, keras_bias)
    t, k = torch_bias.resized(6), keras_bias.resized(6)
    assert t.window_size == k.window_size == (6, 6)
    np.testing.assert_allclose(numpy(k(36)), numpy(t(36)), rtol=1e-6, atol=1e-7)
    same = torch_bias.resized(4)
    torch.testing.assert_close(same(16), torch_bias(16))


# --------------------------------------------------------------------------- attention

def explicit_attention(q, k, v, bias):
    """softmax(q k^T / sqrt(d) + bias) v in float64, (batch, heads, seq, head_dim)."""
    logits = q @ np.swapaxes(k, -1, -2) / np.sqrt(q.shape[-1]) + bias
    logits = logits - logits.max(-1, keepdims=True)
    weights = np.exp(logits)
    return weights / weights.sum(-1, keepdims=True) @ v


def qkv(q_len, k_len, heads=4, head_dim=16, batch=2, seed=0):
    rng = np.random.default_rng(seed)
    return (rng.normal(size=(batch, heads, q_len, head_dim)),
            rng.normal(size=(batch, heads, k_len, head_dim)),
            rng.normal(size=(batch, heads, k_len, head_dim)))


BIASES = {
    "alibi_causal": lambda f: f.ALiBiBias(4),
    "alibi_symmetric": lambda f: f.ALiBiBias(4, causal=False),
    "t5_bidirectional": lambda f: f.T5RelativeBias(4, num_buckets=16, max_distance=20),
    "t5_causal": lambda f: f.T5RelativeBias(4, bidirectional=False),
}


def bias_pair(name):
    t, k = BIASES[name](pt), BIASES[name](pk)
    if t.state_dict():
        with torch.no_grad():  # biases large enough to change the attention visibly
            t.relative_attention_bias.normal_(std=2.0, generator=torch.Generator().manual_seed(0))
        copy_weights(t, k)
    return t, k


@pytest.mark.parametrize("q_len, k_len", [(9, 9), (3, 30), (1, 17)])
@pytest.mark.parametrize("name", BIASES)
@pytest.mark.keras
def test_sdpa_with_the_bias_as_float_mask_equals_an_explicit_softmax(name, q_len, k_len):
    module, _ = bias_pair(name)
    q, k, v = qkv(q_len, k_len)
    bias = module(q_len, k_len)
    want = explicit_attention(q, k, v, numpy(bias))
    got = F.scaled_dot_product_attention(*(torch.as_tensor(a, dtype=torch.float32)
                                           for a in (q, k, v)), attn_mask=bias)
    np.testing.assert_allclose(numpy(got), want, rtol=1e-4, atol=1e-5)
    ignored = F.scaled_dot_product_attention(*(torch.as_tensor(a, dtype=torch.float32)
                                               for a in (q, k, v)))
    assert not np.allclose(numpy(ignored), want, atol=1e-3)     # the bias matters
    # bfloat16 inputs: the bias cast to the queries' dtype, as SDPA wants
    low = [torch.as_tensor(a, dtype=torch.bfloat16) for a in (q, k, v)]
    got16 = F.scaled_dot_product_attention(*low, attn_mask=bias.to(torch.bfloat16))
    assert got16.dtype == torch.bfloat16
    np.testing.assert_allclose(numpy(got16), want, rtol=5e-2, atol=5e-2)


@pytest.mark.keras
@pytest.mark.parametrize("q_len, k_len", [(9, 9), (3, 30)])
@pytest.mark.parametrize("name", BIASES)
def test_keras_dot_product_attention_with_the_bias_equals_an_explicit_softmax(name, q_len,
                                                                              k_len):
    module, layer = bias_pair(name)
    q, k, v = qkv(q_len, k_len)
    bias = layer(q_len, k_len)
    np.testing.assert_array_equal(numpy(bias), numpy(module(q_len, k_len)))   # both faces
    want = explicit_attention(q, k, v, numpy(bias))

    def heads_second(a):   # keras.ops.dot_product_attention takes (batch, seq, heads, dim)
        return keras.ops.convert_to_tensor(np.swapaxes(a, 1, 2).astype(np.float32))

    got = keras.ops.dot_product_attention(*(heads_second(a) for a in (q, k, v)), bias=bias)
    np.testing.assert_allclose(np.swapaxes(numpy(got), 1, 2), want, rtol=1e-4, atol=1e-5)
    low = [keras.ops.cast(heads_second(a), "bfloat16") for a in (q, k, v)]
    got16 = keras.ops.dot_product_attention(*low, bias=keras.ops.cast(bias, "bfloat16"))
    assert keras.backend.standardize_dtype(got16.dtype) == "bfloat16"
    np.testing.assert_allclose(np.swapaxes(numpy(got16), 1, 2), want, rtol=5e-2, atol=5e-2)


@pytest.mark.parametrize("face", FACES)
def test_the_bias_is_float32_under_low_precision(face):
    if face == "torch":
        module = pt.T5RelativeBias(2).to(torch.bfloat16)
        with torch.autocast("cpu", dtype=torch.bfloat16):
            assert module(3, 5).dtype == torch.float32
        assert pt.SwinRelativeBias(2, 2).to(torch.bfloat16)(4).dtype == torch.float32
        alibi = pt.ALiBiBias(2)
        alibi(4)
        alibi.to(torch.bfloat16)                    # casts the cache too: it is rebuilt
        assert alibi(4).dtype == torch.float32
        return
    keras.mixed_precision.set_global_policy("mixed_bfloat16")
    try:
        for layer in (pk.T5RelativeBias(2), pk.SwinRelativeBias(2, 2), pk.ALiBiBias(2)):
            assert keras.backend.standardize_dtype(layer(4, 4).dtype) == "float32"
    finally:
        keras.mixed_precision.set_global_policy("float32")


@pytest.mark.keras
def test_alibi_module_compiles_with_and_without_a_warm_cache():
    torch._dynamo.reset()
    alibi = pt.ALiBiBias(4)
    compiled = torch.compile(lambda q, k: alibi(q, k), fullgraph=True, backend="eager")
    cold = compiled(3, 40)                        # cache too short: computed in the graph
    assert alibi._cache.shape[-1] == 0            # and the cache is left alone while tracing
    alibi(1, 64)                                  # eager: the cache grows to 64
    torch._dynamo.reset()
    compiled = torch.compile(lambda q, k: alibi(q, k), fullgraph=True, backend="eager")
    warm = compiled(3, 40)                        # a slice of the cache
    torch.testing.assert_close(cold, warm, rtol=0, atol=0)
    np.testing.assert_array_equal(numpy(warm)[0], nb.alibi_bias(4, 3, 40))


@pytest.mark.parametrize("face", FACES)
@pytest.mark.parametrize("q_len, k_len", [(0, 0), (0, 5), (1, 1)])
def test_the_smallest_lengths(face, q_len, k_len):
    for layer in (FACES[face].ALiBiBias(2), FACES[face].T5RelativeBias(2),
                  FACES[face].ALiBiBias(2, causal=False)):
        assert tuple(layer(q_len, k_len).shape) == (1, 2, q_len, k_len)


@pytest.mark.keras
def test_one_relative_position_map_serves_numpy_and_both_faces():
    from functools import partial

    from posenc import positions

    expected = nb.relative_positions(3, 7)
    np.testing.assert_array_equal(positions.relative_positions(3, 7), expected)
    np.testing.assert_array_equal(
        positions.relative_positions(3, 7, partial(torch.arange)).numpy(), expected)
    np.testing.assert_array_equal(keras.ops.convert_to_numpy(
        positions.relative_positions(3, 7, partial(keras.ops.arange, dtype="int32"))), expected)
    import posenc.keras.bias as keras_bias
    import posenc.torch.bias as torch_bias

    # the faces keep no copy of the map, nor of ALiBi's product
    assert not hasattr(torch_bias, "_relative") and not hasattr(keras_bias, "_relative")
    assert not hasattr(torch_bias, "_alibi")


@pytest.mark.parametrize("face", FACES)
def test_bias_layers_expose_the_same_attributes_in_both_faces(face):
    alibi = FACES[face].ALiBiBias(6)
    np.testing.assert_array_equal(numpy(alibi.slopes), nb.alibi_slopes(6).astype(np.float32))
    swin = FACES[face].SwinRelativeBias(2, (2, 3))
    np.testing.assert_array_equal(numpy(swin.relative_position_index),
                                  nb.swin_relative_index(2, 3))


@pytest.mark.parametrize("face", FACES)
def test_alibi_module_caches_no_square_for_one_decoding_query(face):
    # 8 heads, 1,000 keys: a square cache would hold 8 * 1024 * 1024 numbers (8 GiB at
    # 10,000 keys); one row per head of the 2 * 1024 - 1 offsets is all the bias needs
    alibi = FACES[face].ALiBiBias(8)
    np.testing.assert_array_equal(numpy(alibi(1, 1000))[0], nb.alibi_bias(8, 1, 1000))
    if face == "torch":
        held = sum(b.numel() for b in alibi.buffers())
    else:
        held = sum(v.size for v in vars(alibi).values() if isinstance(v, np.ndarray))
    assert held <= 8 * 2 * 1024 + 8
    for causal in (True, False):                  # every block of a warm cache is exact
        alibi = FACES[face].ALiBiBias(3, causal=causal)
        alibi(40)
        for q_len, k_len in [(1, 40), (5, 17), (17, 17), (0, 3)]:
            np.testing.assert_array_equal(numpy(alibi(q_len, k_len))[0],
                                          nb.alibi_bias(3, q_len, k_len, causal=causal))


def test_alibi_slopes_docstring_says_decreasing_only_for_powers_of_two():
    for n in range(1, 33):
        decreasing = bool(np.all(np.diff(nb.alibi_slopes(n)) < 0))
        assert decreasing == (n & (n - 1) == 0), n
    assert nb.alibi_slopes(6)[4] > nb.alibi_slopes(6)[0]     # the first appended is steepest
    returns = nb.alibi_slopes.__doc__.split("Returns:")[1].split("Example")[0]
    assert "decreasing only when" in returns and "power of two" in returns


def bf16_alibi_gap(face, bias_fn, num_heads=8, q_len=64, k_len=4096):
    """Mean total variation between attention rows whose scores and bias are added in
    bfloat16 (as a bfloat16 model adds them) and the float64 rows of ALiBi's bias.

    ``bias_fn(num_heads, q_len, k_len)`` is a face's ALiBi bias ``(heads, q_len, k_len)``; the
    queries are the last ``q_len`` of ``k_len`` positions (a long context)."""
    def softmax(s):
        e = np.exp(s - s.max(-1, keepdims=True))
        return e / e.sum(-1, keepdims=True)

    scores = np.random.default_rng(0).normal(size=(num_heads, q_len, k_len)).astype(np.float32)
    want = softmax(scores.astype(np.float64) + nb.alibi_bias(num_heads, q_len, k_len))
    bias = bias_fn(num_heads, q_len, k_len)
    if face == "torch":
        low = tensor(face, scores, "bfloat16") + bias.to(torch.bfloat16)
    else:
        low = tensor(face, scores, "bfloat16") + keras.ops.cast(bias, "bfloat16")
    return float(0.5 * np.abs(softmax(numpy(low)) - want).sum(-1).mean())


@pytest.mark.parametrize("face", FACES)
@and_the_bugs("alibi-key-only")
def test_alibi_bias_added_in_bfloat16_keeps_the_attention_of_float64(face, impl):
    bias_fn = FACES[face].alibi_bias if impl == "posenc" else wrong_code(impl, face)
    assert bf16_alibi_gap(face, bias_fn) < 0.01


@pytest.mark.parametrize("face", ["torch", "keras"])
def test_swin_table_is_truncated_at_two_std_as_its_docstring_says(face):
    # The docstring once credited Swin with the truncation; Swin's bounds are absolute (+-2).
    import posenc.keras as pk
    import posenc.torch as pt

    cls = (pt if face == "torch" else pk).SwinRelativeBias
    layer = cls(64, (7, 7))
    if face == "keras":
        layer.build(None)
    table = np.asarray(layer.relative_position_bias_table.detach() if face == "torch"
                       else layer.relative_position_bias_table.numpy())
    assert np.abs(table).max() <= 0.04 + 1e-7 and table.std() < 0.02
    text = " ".join(cls.__doc__.split())
    assert "truncated at 2 std (0.04)" in text and "truncated at 2 std (Swin)" not in text


@pytest.mark.parametrize("face", FACES)
def test_alibi_full_passes_slice_a_cached_square_and_decoding_gathers(face):
    # A full pass caches its own square and later blocks that fit are slices of it (the
    # cost chapter 14 measures); a decoding query past it is gathered from the row cache.
    alibi = FACES[face].ALiBiBias(4)
    full = alibi(64)
    again, block = alibi(64), alibi(3, 50)
    if face == "torch":
        assert again.data_ptr() == full.data_ptr() == alibi._square.data_ptr()
        assert block.untyped_storage().data_ptr() == alibi._square.untyped_storage().data_ptr()
    assert tuple(alibi._square.shape) == (4, 64, 64)
    np.testing.assert_array_equal(numpy(block)[0], nb.alibi_bias(4, 3, 50))
    step = alibi(1, 1000)                          # past the square: no square of 1000
    np.testing.assert_array_equal(numpy(step)[0], nb.alibi_bias(4, 1, 1000))
    assert tuple(alibi._square.shape) == (4, 64, 64)
