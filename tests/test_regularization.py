"""Regularised positional encodings (dropout, channel dropout, noise), in both faces."""

import math

import keras
import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from keras import ops

import posenc.keras.regularization as kr
import posenc.torch.regularization as tr
from posenc.regularization import PARTS
from posenc.interop import copy_weights
from posenc.keras.sinusoidal import SinusoidalEncoding as KerasSinusoidal
from posenc.keras.learned import LowRankEncoding as KerasLowRank
from posenc.torch.sinusoidal import SinusoidalEncoding as TorchSinusoidal
from posenc.torch.learned import LowRankEncoding as TorchLowRank
import faces
from faces import dtype_name, np32, same_error

FACES = {"torch": tr, "keras": kr}
REGULARIZERS = [("EncodingDropout", 0.3), ("ChannelDropout", 0.3), ("GaussianNoise", 0.5)]
Z = 5.0  # tolerance in standard errors; the seeds are fixed, so the tests are deterministic


def tensor(face, array, dtype="float32"):
    return faces.tensor(face, np.asarray(array, np.float32), dtype)


def apply(face, layer, value, *, training: bool):
    """Run a regulariser in training or inference mode, the way each face does it."""
    if face == "torch":
        layer.train(training)
        return layer(value)
    return layer(value, training=training)


def wrapped(face, inner, *, training, x, positions=None):
    if face == "torch":
        inner.train(training)
        return inner(x) if positions is None else inner(x, positions)
    return inner(x, positions, training=training)


# --------------------------------------------------------------------------- identity at inference

@pytest.mark.parametrize("face", FACES)
@pytest.mark.parametrize("name,arg", REGULARIZERS)
@pytest.mark.parametrize("dtype", ["float32", "bfloat16"])
def test_identity_at_inference_and_when_switched_off(face, name, arg, dtype):
    pe = tensor(face, np.random.default_rng(0).normal(size=(3, 7, 8)), dtype)
    kwargs = {"dtype": dtype} if face == "keras" else {}  # a Keras layer computes in its dtype
    layer = getattr(FACES[face], name)(arg, seed=1, **kwargs)
    out = apply(face, layer, pe, training=False)
    np.testing.assert_array_equal(np32(out), np32(pe))
    if face == "keras":  # no training flag at all means inference
        np.testing.assert_array_equal(np32(layer(pe)), np32(pe))
    off = getattr(FACES[face], name)(0.0, seed=1, **kwargs)
    np.testing.assert_array_equal(np32(apply(face, off, pe, training=True)), np32(pe))
    trained = apply(face, layer, pe, training=True)
    assert not np.array_equal(np32(trained), np32(pe))
    assert tuple(trained.shape) == tuple(pe.shape)
    assert dtype_name(trained) == dtype


# --------------------------------------------------------------------------- statistics

@pytest.mark.parametrize("face", FACES)
@pytest.mark.parametrize("rate", [0.1, 0.5])
def test_encoding_dropout_statistics(face, rate):
    shape = (32, 64, 16)
    n = math.prod(shape)
    layer = FACES[face].EncodingDropout(rate, seed=0)
    out = np32(apply(face, layer, tensor(face, np.ones(shape)), training=True))
    kept = out != 0
    np.testing.assert_allclose(out[kept], 1.0 / (1.0 - rate), rtol=1e-6)  # inverted dropout
    assert abs((~kept).mean() - rate) < Z * math.sqrt(rate * (1 - rate) / n)
    # each entry is 0 or 1/(1-rate): mean 1, variance rate/(1-rate)
    assert abs(out.mean() - 1.0) < Z * math.sqrt(rate / (1 - rate) / n)
    # entries are dropped independently: positions of one example differ
    assert not (kept == kept[:, :1]).all()


@pytest.mark.parametrize("face", FACES)
@pytest.mark.parametrize("rate", [0.2, 0.5])
def test_channel_dropout_drops_whole_channels_per_example(face, rate):
    batch, seq, dim = 64, 9, 32
    n = batch * dim  # independent draws: one per example and channel
    layer = FACES[face].ChannelDropout(rate, seed=0)
    out = np32(apply(face, layer, tensor(face, np.ones((batch, seq, dim))), training=True))
    kept = out != 0
    assert (kept == kept[:, :1]).all()          # the same channels at every position
    assert len({row.tobytes() for row in kept[:, 0]}) > 1  # but a mask per example
    np.testing.assert_allclose(out[kept], 1.0 / (1.0 - rate), rtol=1e-6)
    assert abs((~kept[:, 0]).mean() - rate) < Z * math.sqrt(rate * (1 - rate) / n)
    assert abs(out[:, 0].mean() - 1.0) < Z * math.sqrt(rate / (1 - rate) / n)


@pytest.mark.parametrize("face", FACES)
def test_channel_dropout_drops_half_pairs_not_frequency_bands(face):
    # A channel of a sinusoidal code is the sine or the cosine of one frequency: the two halves
    # of a pair are dropped independently, and the docstring says so (it used to promise "a
    # whole frequency band").
    drop = FACES[face].ChannelDropout(0.5, seed=1)
    out = np32(apply(face, drop, tensor(face, np.ones((256, 1, 16))), training=True))
    dropped = (out[:, 0] == 0).reshape(256, 8, 2)  # (example, pair, sin/cos) as interleaved
    half = dropped[..., 0] != dropped[..., 1]
    both = dropped[..., 0] & dropped[..., 1]
    assert abs(half.mean() - 0.5) < 0.05 and abs(both.mean() - 0.25) < 0.05
    text = " ".join(FACES[face].ChannelDropout.__doc__.split())
    assert "frequency band" not in text and "half of a sine/cosine pair" in text


@pytest.mark.parametrize("face", FACES)
def test_channel_dropout_on_an_unbatched_encoding_draws_one_mask(face):
    layer = FACES[face].ChannelDropout(0.5, seed=3)
    out = np32(apply(face, layer, tensor(face, np.ones((6, 40))), training=True))
    assert (out == out[:1]).all() and (out == 0).any() and (out != 0).any()


@pytest.mark.parametrize("face", FACES)
def test_gaussian_noise_statistics(face):
    std, shape = 0.3, (16, 64, 32)
    n = math.prod(shape)
    pe = np.random.default_rng(1).normal(size=shape)
    layer = FACES[face].GaussianNoise(std, seed=0)
    noise = np32(apply(face, layer, tensor(face, pe), training=True)) - pe.astype(np.float32)
    assert abs(noise.mean()) < Z * std / math.sqrt(n)
    assert abs(noise.std() - std) < Z * std / math.sqrt(2 * n)


@pytest.mark.parametrize("face", FACES)
@pytest.mark.parametrize("name,arg", REGULARIZERS)
def test_seeds_make_masks_reproducible(face, name, arg):
    pe = tensor(face, np.ones((4, 5, 8)))
    cls = getattr(FACES[face], name)
    first, second = cls(arg, seed=7), cls(arg, seed=7)
    a = np32(apply(face, first, pe, training=True))
    np.testing.assert_array_equal(a, np32(apply(face, second, pe, training=True)))
    assert not np.array_equal(a, np32(apply(face, cls(arg, seed=8), pe, training=True)))
    assert not np.array_equal(a, np32(apply(face, first, pe, training=True)))  # stream moves on


@settings(max_examples=15, deadline=None)
@given(lead=st.lists(st.integers(1, 3), min_size=0, max_size=2), seq=st.integers(1, 6),
       dim=st.integers(1, 8), seed=st.integers(0, 1000))
@pytest.mark.keras
def test_shapes_are_kept_and_channel_masks_span_the_sequence(lead, seq, dim, seed):
    shape = (*lead, seq, dim)
    for face, mod in FACES.items():
        pe = tensor(face, np.ones(shape))
        for name, arg in REGULARIZERS:
            out = apply(face, getattr(mod, name)(arg, seed=seed), pe, training=True)
            assert tuple(out.shape) == shape
        out = np32(apply(face, mod.ChannelDropout(0.5, seed=seed), pe, training=True))
        assert (out == out[..., :1, :]).all()


# Bad arguments: tests/test_errors.py.


# --------------------------------------------------------------------------- the wrapper

def _sinusoidal(face, dim=16):
    return TorchSinusoidal(dim) if face == "torch" else KerasSinusoidal(dim)


@pytest.mark.parametrize("face", FACES)
@pytest.mark.parametrize("dtype", ["float32", "bfloat16"])
def test_wrapper_at_inference_equals_the_wrapped_encoding(face, dtype):
    x = tensor(face, np.random.default_rng(0).normal(size=(2, 6, 16)), dtype)
    inner = _sinusoidal(face)
    enc = FACES[face].RegularizedEncoding(inner, dropout=0.5, channel_dropout=0.5,
                                          noise_std=1.0, seed=0)
    if face == "keras" and dtype == "bfloat16":
        inner = KerasSinusoidal(16, dtype="bfloat16")
        enc = kr.RegularizedEncoding(inner, dropout=0.5, channel_dropout=0.5, noise_std=1.0,
                                     seed=0, dtype="bfloat16")
    out = wrapped(face, enc, training=False, x=x)
    assert dtype_name(out) == dtype
    np.testing.assert_array_equal(np32(out), np32(inner(x)))
    positions = tensor(face, np.array([[3.0, 1, 4, 1, 5, 9], [2, 6, 5, 3, 5, 8]]))
    at_inference = wrapped(face, enc, training=False, x=x, positions=positions)
    np.testing.assert_array_equal(np32(at_inference), np32(inner(x, positions)))
    np.testing.assert_array_equal(np32(enc.encoding(6)), np32(inner.encoding(6)))
    assert not np.array_equal(np32(wrapped(face, enc, training=True, x=x)), np32(inner(x)))


@pytest.mark.parametrize("face", FACES)
def test_wrapper_preserves_the_expected_value(face):
    batch, seq, dim = 2048, 6, 8
    p_drop, p_chan, std = 0.2, 0.3, 0.5
    enc = FACES[face].RegularizedEncoding(_sinusoidal(face, dim), dropout=p_drop,
                                          channel_dropout=p_chan, noise_std=std, seed=0)
    x = tensor(face, np.zeros((batch, seq, dim)))
    positions = tensor(face, np.arange(1, seq + 1))  # no exact zeros in P
    out = np32(wrapped(face, enc, training=True, x=x, positions=positions))
    pe = np32(enc.encoding(positions)).astype(np.float64)
    # out = (P + n) * m1 * m2 / ((1-p1)(1-p2)): mean P, variance below
    keep = (1 - p_drop) * (1 - p_chan)
    var = (pe**2 + std**2) / keep - pe**2
    err = np.abs(out.mean(axis=0) - pe)
    assert (err < Z * np.sqrt(var / batch)).all(), err.max()
    # every example draws its own masks: the zero patterns differ across the batch
    zeros = out == 0
    assert len({z.tobytes() for z in zeros[:64]}) > 1


@pytest.mark.parametrize("face", FACES)
def test_wrapper_channel_dropout_spans_the_sequence(face):
    enc = FACES[face].RegularizedEncoding(_sinusoidal(face), channel_dropout=0.5, seed=4)
    x = tensor(face, np.zeros((8, 5, 16)))
    out = np32(wrapped(face, enc, training=True, x=x, positions=tensor(face, np.arange(1, 6))))
    dropped = out == 0
    assert (dropped == dropped[:, :1]).all()
    assert dropped.any() and (~dropped).any()


@pytest.mark.parametrize("face", FACES)
@pytest.mark.parametrize("order", [PARTS, tuple(reversed(PARTS))])
def test_wrapper_applies_its_parts_in_the_order_of_parts(face, order, monkeypatch):
    # PARTS is the one statement of the order: a face that hard-codes it ignores a new one.
    monkeypatch.setattr(FACES[face], "PARTS", order)
    make = lambda: FACES[face].RegularizedEncoding(  # noqa: E731
        _sinusoidal(face), dropout=0.5, channel_dropout=0.5, noise_std=1.0, seed=3)
    x = tensor(face, np.zeros((2, 5, 16)))
    positions = tensor(face, np.arange(1, 6))
    out = np32(wrapped(face, make(), training=True, x=x, positions=positions))
    by_hand = make()
    pe = by_hand.encoding(positions)
    pe = (pe.expand(2, 5, 16) if face == "torch" else ops.broadcast_to(pe, (2, 5, 16)))
    for part in order:
        pe = apply(face, getattr(by_hand, part), pe, training=True)
    np.testing.assert_array_equal(out, np32(pe))


# --------------------------------------------------------------------------- wrapper + weights

def _low_rank_pair():
    t = tr.RegularizedEncoding(TorchLowRank(8, 16, rank=3), dropout=0.1,
                               channel_dropout=0.1, noise_std=0.1, seed=0)
    k = kr.RegularizedEncoding(KerasLowRank(8, 16, rank=3), dropout=0.1,
                               channel_dropout=0.1, noise_std=0.1, seed=0)
    return t, k


@pytest.mark.keras
def test_weightless_parts_add_no_weights():
    t, k = _low_rank_pair()
    assert {n for n, _ in t.named_parameters()} == {"inner.left", "inner.right"}
    assert sorted(w.path.split("/")[-1] for w in k.weights) == ["left", "right"]
    assert set(t.state_dict()) == {"inner.left", "inner.right"}


def test_torch_deepcopy_keeps_the_seeded_stream():
    import copy

    drop = tr.EncodingDropout(0.5, seed=0)
    pe = torch.ones(3, 4, 5)
    drop(pe)
    clone = copy.deepcopy(drop)
    torch.testing.assert_close(clone(pe), drop(pe))


@pytest.mark.parametrize("name,arg", REGULARIZERS)
@pytest.mark.keras
def test_keras_config_round_trip_of_the_parts(name, arg):
    layer = getattr(kr, name)(arg, seed=3)
    clone = type(layer).from_config(layer.get_config())
    assert clone.get_config() == layer.get_config()
    pe = ops.ones((2, 3, 4))
    np.testing.assert_array_equal(np32(clone(pe, training=True)), np32(layer(pe, training=True)))


@pytest.mark.keras
def test_keras_training_step_runs_the_regularisers():
    enc = _low_rank_pair()[1]
    x_in = keras.Input((6, 16))
    model = keras.Model(x_in, enc(x_in))
    model.compile(optimizer=keras.optimizers.SGD(0.1), loss="mse")
    x = np.zeros((4, 6, 16), np.float32)
    target = np.random.default_rng(1).normal(size=x.shape).astype(np.float32)
    before = [np.array(w.numpy()) for w in enc.weights]
    history = model.fit(x, target, epochs=1, batch_size=4, verbose=0)
    assert np.isfinite(history.history["loss"][0])
    assert all(not np.allclose(b, w.numpy()) for b, w in zip(before, enc.weights))
    # fit sets training=True: the encoding seen in training is not the clean one
    trained = np32(enc(ops.convert_to_tensor(x), training=True))
    np.testing.assert_array_equal(np32(model.predict(x, verbose=0)), x + np32(enc.encoding(6)))
    assert not np.allclose(trained, x + np32(enc.encoding(6)))


# --------------------------------------------------------------------------- inputs at the edges

def _inner(face, name):
    mod = {"torch": (TorchSinusoidal, TorchLowRank), "keras": (KerasSinusoidal, KerasLowRank)}[face]
    return mod[0](16) if name == "sinusoidal" else mod[1](8, 16, rank=2)


@pytest.mark.keras
def test_wrapper_checks_the_width_of_x():
    def call(face):
        enc = FACES[face].RegularizedEncoding(_inner(face, "sinusoidal"), noise_std=0.1)
        return wrapped(face, enc, training=True, x=tensor(face, np.zeros((2, 3, 8))))

    message = same_error(FACES, call)
    assert message.startswith(r"RegularizedEncoding: x must be (..., seq, dim) with dim=16, "
                              r"got x.shape=(2, 3, 8)")


@pytest.mark.parametrize("name,arg", REGULARIZERS)
@pytest.mark.parametrize("training", [False, True])
@pytest.mark.keras
def test_integer_encodings_are_refused(name, arg, training):
    # an integer P would be truncated by the scaling (torch) or refused by one backend only
    message = same_error(FACES, lambda face: apply(face, getattr(FACES[face], name)(arg, seed=0),
                                        faces.tensor(face, np.ones((2, 3, 4), np.int32)),
                                        training=training))
    assert message.startswith(f"{name}: the encoding must be a floating-point tensor, got "
                              "dtype int32")
