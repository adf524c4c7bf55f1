"""The generic checks every layer gets, in both faces (after keras-hub's ``run_layer_test``).

A :class:`Case` says how to build one public class in both faces, the shape of the
embeddings it is called on, the per-token arguments that follow them and how to draw
valid ones, and how to run it deterministically. Each ``check_*`` function below takes a
case and asserts one property; ``tests/test_layers.py`` holds the table of cases and
runs every check on every row. A new scheme gets all of them by adding a row.

Deterministic runs: the value checks call every case in ``case.training`` mode
(``module.train(mode)`` in PyTorch, ``layer(..., training=mode)`` in Keras). A
regulariser row is either run in inference mode (``training=False``: the identity) or
in training mode with its rates at 0. A row with ``stochastic=True`` also runs the
checks whose outcome does not depend on the random draws (dtypes, shapes, empty input,
errors) in training mode with the row's own rates. The training step always trains in
training mode (as ``fit`` does) and measures the loss in the deterministic mode.

Attention biases (``Case(..., bias=True)``): the class is called as ``layer(q_len, k_len)``
and returns a ``(1, heads, q_len, k_len)`` bias. The harness uses it the way attention
does: ``x`` holds attention scores ``(batch, heads, q_len, k_len)`` and the output is
``softmax(x + bias)`` over the keys (:func:`attend`), which has ``x``'s shape, so every
generic check applies; a Keras model holds the bias layer in :class:`AttendWithBias`.

Rotary embeddings (``Case(..., rotary=True)``): the class is called as
``layer(q, k, positions=...)`` and returns the rotated ``(q, k)``. The harness passes
``q = x`` and ``k = x`` with its features reversed, and returns ``q_rot + k_rot``
(:func:`rotate_pair`), which has ``x``'s shape; a Keras model holds the layer in
:class:`RotatePair`.
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
from typing import Callable

import keras
import numpy as np
import torch
import torch.nn.functional as F

import posenc.keras as pk
import posenc.torch as pt
from faces import dtype_name, np32, same_error, tensor
from posenc.interop import copy_weights

FACES = {"torch": pt, "keras": pk}

# Tolerances: same weights, float32, both faces (a relative bound, floored at 1e-6).
PARITY = {"rtol": 1e-5, "atol": 1e-6}
# bfloat16 keeps 8 significant bits (relative step 2^-8 = 0.4%); float16 keeps 11.
LOW_PRECISION = {"bfloat16": {"rtol": 2e-2, "atol": 5e-2},
                 "float16": {"rtol": 4e-3, "atol": 1e-2},
                 "float32": {"rtol": 1e-5, "atol": 1e-6}}


# --------------------------------------------------------------------------- the table's types

@dataclasses.dataclass(frozen=True)
class Arg:
    """A per-token call argument: one value per token of ``x``, plus ``trailing`` axes.

    ``draw(rng, (batch, seq))`` returns valid values of shape ``(batch, seq, *trailing)``.
    """

    name: str
    draw: Callable[[np.random.Generator, tuple[int, int]], np.ndarray]
    trailing: tuple[int, ...] = ()

    def sample(self, rng, lead) -> np.ndarray:
        out = np.asarray(self.draw(rng, tuple(lead)))
        assert out.shape == (*lead, *self.trailing), (self.name, out.shape)
        return out

    def is_integer(self) -> bool:
        return np.issubdtype(self.sample(np.random.default_rng(0), (1, 1)).dtype, np.integer)


#: Names of the classes that return an attention bias (filled by the cases).
BIAS_CLASSES: set[str] = set()
#: Names of the classes that rotate queries and keys (filled by the cases).
ROTARY_CLASSES: set[str] = set()


@dataclasses.dataclass(frozen=True)
class Case:
    """One row of the table: a public class of both faces and how to exercise it.

    Fields:
        id: the test id.
        cls: the class name, the same in ``posenc.torch`` and ``posenc.keras``.
        args, kwargs: constructor arguments; a ``Case`` among them is built first, in
            the same face (the encoding a ``RegularizedEncoding`` wraps).
        shape: ``(batch, seq, dim)`` of the embeddings ``x``; batch != seq, seq > 1. For a
            bias, ``(batch, heads, q_len, k_len)`` of the attention scores.
        extras: per-token arguments passed positionally after ``x`` (timestamps, paths,
            modality ids).
        positions: the optional ``positions=`` keyword and how to draw valid ones, or
            ``None`` when the class takes no positions.
        training: the mode every value check runs in; it must be deterministic.
        stochastic: also run the draw-independent checks in training mode.
        bias: the class is an attention bias, called as ``layer(q_len, k_len)``.
        empty: whether the class accepts an empty sequence (a Swin window does not).
        parity: the tolerance of the cross-face check, ``PARITY`` unless the output sums
            many products (attention: float32 matmuls summed in another order).
        rotary: the class rotates queries and keys, called as ``layer(q, k, positions=...)``.
    """

    id: str
    cls: str
    args: tuple = ()
    kwargs: dict = dataclasses.field(default_factory=dict)
    shape: tuple[int, int, int] = (3, 10, 16)
    extras: tuple[Arg, ...] = ()
    positions: Arg | None = None
    training: bool = False
    stochastic: bool = False
    bias: bool = False
    empty: bool = True
    parity: dict | None = None
    rotary: bool = False

    def __post_init__(self):
        batch, seq = self.shape[0], self.shape[-2]
        assert batch != seq and seq > 1, "shape errors must be told apart from (batch, seq)"
        assert len(self.shape) == (4 if self.bias else 3), self.shape
        if self.bias:
            BIAS_CLASSES.add(self.cls)
        if self.rotary:
            ROTARY_CLASSES.add(self.cls)

    @property
    def modes(self) -> tuple[bool, ...]:
        """Modes for the checks that do not depend on random draws."""
        return (self.training, True) if self.stochastic and not self.training else (self.training,)


# --------------------------------------------------------------------------- building and calling

def build(face: str, case: Case, *, seed: int = 0, **layer_kwargs):
    """The case's module/layer in ``face``, its weights drawn from ``seed`` (not the
    initial values: a zero-initialised table would hide a wrong gather)."""
    def arg(a):
        return build(face, a, seed=seed, **layer_kwargs) if isinstance(a, Case) else a

    args = [arg(a) for a in case.args]
    kwargs = {k: arg(v) for k, v in case.kwargs.items()}
    if face == "keras":
        kwargs.update(layer_kwargs)
    layer = getattr(FACES[face], case.cls)(*args, **kwargs)
    randomize(face, layer, seed)
    return layer


def randomize(face: str, layer, seed: int) -> None:
    rng = np.random.default_rng(seed)
    if face == "torch":
        with torch.no_grad():
            for _, p in sorted(layer.named_parameters()):
                p.copy_(torch.as_tensor(0.5 * rng.normal(size=tuple(p.shape))))
        return
    for w in sorted(layer.weights, key=lambda w: w.path):
        w.assign((0.5 * rng.normal(size=tuple(w.shape))).astype(w.dtype))


@dataclasses.dataclass
class Inputs:
    x: np.ndarray
    extras: list
    positions: np.ndarray | None


def inputs(case: Case, *, seed: int = 0) -> Inputs:
    """x ``(batch, seq, dim)`` from N(0, 1), and valid per-token arguments of shape
    ``(batch, seq, ...)`` (positions too, when the case takes them)."""
    batch, seq = case.shape[0], case.shape[-2]
    rng = np.random.default_rng(seed)
    x = rng.normal(size=case.shape).astype(np.float32)
    extras = [a.sample(rng, (batch, seq)) for a in case.extras]
    positions = None if case.positions is None else case.positions.sample(rng, (batch, seq))
    return Inputs(x, extras, positions)


def call(face: str, layer, x, extras=(), positions=None, *, training: bool, dtype=None):
    """``layer(x, *extras, positions=...)`` in ``training`` mode, NumPy in, tensor out."""
    x = tensor(face, x, dtype) if isinstance(x, np.ndarray) else x
    if type(layer).__name__ in BIAS_CLASSES:
        if face == "torch":
            layer.train(training)
        return attend(face, layer, x)
    extras = [tensor(face, e) if isinstance(e, np.ndarray) else e for e in extras]
    kwargs = {}
    if positions is not None:
        kwargs["positions"] = (tensor(face, positions) if isinstance(positions, np.ndarray)
                               else positions)
    if type(layer).__name__ in ROTARY_CLASSES:
        return rotate_pair(face, layer, x, training=training, **kwargs)
    if face == "torch":
        layer.train(training)
        return layer(x, *extras, **kwargs)
    return layer(x, *extras, training=training, **kwargs)


def attend(face: str, layer, scores):
    """``softmax(scores + layer(q_len, k_len))`` over the keys, in the dtype of ``scores``
    (PyTorch) or of the layer's compute dtype (Keras): how attention uses a bias."""
    q_len, k_len = scores.shape[-2], scores.shape[-1]
    if face == "torch":
        return torch.softmax(scores + layer(q_len, k_len).to(scores.dtype), dim=-1)
    dtype = layer.compute_dtype
    return keras.ops.softmax(keras.ops.cast(scores, dtype)
                             + keras.ops.cast(layer(q_len, k_len), dtype), axis=-1)


@keras.saving.register_keras_serializable(package="posenc_tests")
class AttendWithBias(keras.layers.Layer):
    """A Keras layer that holds a bias layer and applies :func:`attend` to its scores."""

    def __init__(self, bias_layer, **kwargs):
        super().__init__(**kwargs)
        self.bias_layer = bias_layer

    def call(self, scores):
        return attend("keras", self.bias_layer, scores)

    def get_config(self):
        return {**super().get_config(),
                "bias_layer": keras.saving.serialize_keras_object(self.bias_layer)}

    @classmethod
    def from_config(cls, config):
        config = dict(config)
        config["bias_layer"] = keras.saving.deserialize_keras_object(config["bias_layer"])
        return cls(**config)


def rotate_pair(face: str, layer, x, *, training: bool, **kwargs):
    """``q_rot + k_rot`` for ``q = x`` and ``k = x`` with its features reversed: both
    outputs of a rotary layer in one tensor of ``x``'s shape."""
    if face == "torch":
        layer.train(training)
        return pair_sum(layer, x, **kwargs)
    q, k = layer(x, keras.ops.flip(x, -1), training=training, **kwargs)
    return q + k


def pair_sum(module, x, **kwargs):
    """The PyTorch half of :func:`rotate_pair`, without setting the mode (compiled as is)."""
    q, k = module(x, torch.flip(x, (-1,)), **kwargs)
    return q + k


@keras.saving.register_keras_serializable(package="posenc_tests")
class RotatePair(keras.layers.Layer):
    """A Keras layer that holds a rotary layer and applies :func:`rotate_pair` to ``x``."""

    def __init__(self, rope_layer, **kwargs):
        super().__init__(**kwargs)
        self.rope_layer = rope_layer

    def call(self, x, training=None):
        return rotate_pair("keras", self.rope_layer, x, training=training)

    def compute_output_shape(self, input_shape):
        return input_shape

    def get_config(self):
        return {**super().get_config(),
                "rope_layer": keras.saving.serialize_keras_object(self.rope_layer)}

    @classmethod
    def from_config(cls, config):
        config = dict(config)
        config["rope_layer"] = keras.saving.deserialize_keras_object(config["rope_layer"])
        return cls(**config)


def encoding_args(face: str, case: Case, data: "Inputs", example: int = 0) -> list:
    """The arguments of ``layer.encoding(...)`` for one example of ``data``: its
    per-token arguments, then its positions."""
    args = [e[example] for e in data.extras]
    if data.positions is not None:
        args.append(data.positions[example])
    return [tensor(face, a) for a in args]


def parity_pair(case: Case, *, source: str = "torch"):
    """A module and a layer holding the same (random) weights, copied from ``source``."""
    t, k = build("torch", case, seed=1), build("keras", case, seed=2)
    copy_weights(*((t, k) if source == "torch" else (k, t)))
    return t, k


def _weights(face: str, layer) -> dict[str, tuple]:
    if face == "torch":
        return {n.split(".")[-1]: tuple(p.shape) for n, p in layer.named_parameters()}
    return {w.path.split("/")[-1]: tuple(w.shape) for w in layer.weights}


def _close(actual, expected, tol, message=""):
    np.testing.assert_allclose(np32(actual), np32(expected), err_msg=message, **tol)


@contextlib.contextmanager
def keras_policy(name: str):
    keras.mixed_precision.set_global_policy(name)
    try:
        yield
    finally:
        keras.mixed_precision.set_global_policy("float32")


def _keras_model(case: Case, layer, *, batch=None, seq=None, project=False):
    """A functional model: ``x`` (and the per-token arguments) -> ``layer``."""
    dim = case.shape[-1]
    if case.bias:   # the scores' shape is static: the bias needs q_len and k_len
        x_in = keras.Input(case.shape[1:], batch_size=batch)
        h = keras.layers.Dense(dim, name="proj")(x_in) if project else x_in
        return keras.Model([x_in], AttendWithBias(layer)(h))
    x_in = keras.Input((seq, dim), batch_size=batch)
    extra_in = [keras.Input((seq, *a.trailing), batch_size=batch,
                            dtype="int32" if a.is_integer() else "float32") for a in case.extras]
    h = keras.layers.Dense(dim, name="proj")(x_in) if project else x_in
    if case.rotary:
        return keras.Model([x_in], RotatePair(layer)(h))
    return keras.Model([x_in, *extra_in], layer(h, *extra_in))


# --------------------------------------------------------------------------- (a) parity

def check_parity(case: Case) -> None:
    """PyTorch equals Keras on the same weights, copied either way, with and without
    positions; the weights have the same names and shapes in both faces."""
    data = inputs(case)
    for source in ("torch", "keras"):
        t, k = parity_pair(case, source=source)
        assert _weights("torch", t) == _weights("keras", k)
        for positions in (None, data.positions) if case.positions else (None,):
            _close(call("keras", k, data.x, data.extras, positions, training=case.training),
                   call("torch", t, data.x, data.extras, positions, training=case.training),
                   case.parity or PARITY,
                   f"copied from {source}, positions={positions is not None}")


# --------------------------------------------------------------------------- (b) round trips

def check_keras_config_round_trip(case: Case) -> None:
    """``from_config(get_config())`` rebuilds the layer: same config, the constructor
    arguments in it, the same outputs on the same weights."""
    layer = build("keras", case)
    config = layer.get_config()
    plain = {k: v for k, v in case.kwargs.items() if not isinstance(v, Case)}
    assert plain.items() <= config.items(), (plain, config)
    clone = type(layer).from_config(config)
    assert clone.get_config() == config
    clone.set_weights(layer.get_weights())
    data = inputs(case)
    np.testing.assert_array_equal(
        np32(call("keras", clone, data.x, data.extras, training=case.training)),
        np32(call("keras", layer, data.x, data.extras, training=case.training)))


def check_keras_save_and_load(case: Case, tmp_path) -> None:
    """``model.save`` then ``keras.models.load_model``: the same class, config, weights
    and outputs."""
    batch, seq = case.shape[0], case.shape[-2]
    layer = build("keras", case)
    model = _keras_model(case, layer, seq=seq)
    data = inputs(case)
    feed = [data.x, *data.extras]
    expected = np32(model.predict(feed, batch_size=batch, verbose=0))
    path = tmp_path / "m.keras"
    model.save(path)
    loaded = keras.models.load_model(path)
    restored = loaded.layers[-1]
    restored = (restored.bias_layer if case.bias
                else restored.rope_layer if case.rotary else restored)
    assert type(restored) is type(layer)
    assert restored.get_config() == layer.get_config()
    for a, b in zip(restored.weights, layer.weights, strict=True):
        np.testing.assert_array_equal(np32(a), np32(b))
    np.testing.assert_array_equal(np32(loaded.predict(feed, batch_size=batch, verbose=0)),
                                  expected)


def check_torch_state_dict_round_trip(case: Case) -> None:
    """``load_state_dict(state_dict())`` into a fresh module gives the same outputs; the
    state dict holds exactly the parameters (caches are not saved)."""
    src, dst = build("torch", case, seed=1), build("torch", case, seed=2)
    assert set(src.state_dict()) == {n for n, _ in src.named_parameters()}
    dst.load_state_dict(src.state_dict())
    data = inputs(case)
    torch.testing.assert_close(
        call("torch", dst, data.x, data.extras, data.positions, training=case.training),
        call("torch", src, data.x, data.extras, data.positions, training=case.training),
        rtol=0, atol=0)


# --------------------------------------------------------------------------- (c) symbolic shapes

def check_keras_symbolic_shapes(case: Case) -> None:
    """On ``keras.Input``: unknown batch and length, known ones, and
    ``compute_output_shape``."""
    if case.bias:   # the bias is built from the static q_len and k_len; the batch may vary
        for b in (None, case.shape[0]):
            model = _keras_model(case, build("keras", case), batch=b)
            assert tuple(model.output.shape) == (b, *case.shape[1:]), b
        return
    batch, seq, dim = case.shape
    for training in case.modes:
        layer = build("keras", case)
        for b, s in ((None, None), (None, seq), (batch, seq)):
            x_in = keras.Input((s, dim), batch_size=b)
            extra_in = [keras.Input((s, *a.trailing), batch_size=b,
                                    dtype="int32" if a.is_integer() else "float32")
                        for a in case.extras]
            if case.rotary:
                outs = layer(x_in, keras.ops.flip(x_in, -1), training=training)
                assert [tuple(o.shape) for o in outs] == [(b, s, dim)] * 2, (b, s, training)
                continue
            out = layer(x_in, *extra_in, training=training)
            assert tuple(out.shape) == (b, s, dim), (b, s, training)
        for shape in ((None, seq, dim), (batch, seq, dim)):
            want = (shape, shape) if case.rotary else shape
            got = layer.compute_output_shape(*((shape, shape) if case.rotary else (shape,)))
            assert (tuple(map(tuple, got)) if case.rotary else tuple(got)) == want


# --------------------------------------------------------------------------- (d) training step

def check_torch_training_step(case: Case) -> None:
    """Behind a linear layer: gradients reach every parameter and the input, and one SGD
    step (taken in training mode) changes the loss measured in the deterministic mode."""
    dim = case.shape[-1]
    torch.manual_seed(0)
    module, proj = build("torch", case), torch.nn.Linear(dim, dim)
    data = inputs(case)
    x = torch.as_tensor(data.x)
    target = torch.as_tensor(np.random.default_rng(1).normal(size=data.x.shape), dtype=torch.float32)

    def loss(training):
        return F.mse_loss(call("torch", module, proj(x), data.extras, training=training), target)

    with torch.no_grad():
        before = loss(case.training).item()
    loss(True).backward()
    named = [*module.named_parameters(), *(("proj." + n, p) for n, p in proj.named_parameters())]
    for name, p in named:
        assert p.grad is not None and p.grad.abs().sum() > 0, f"no gradient reaches {name}"
    weights = {n: p.detach().clone() for n, p in named}
    torch.optim.SGD([p for _, p in named], lr=0.1).step()
    for name, p in named:
        assert not torch.equal(weights[name], p), f"{name} did not move"
    with torch.no_grad():
        after = loss(case.training).item()
    assert np.isfinite(after) and after != before, (before, after)


def check_keras_training_step(case: Case) -> None:
    """``fit`` for one step behind a Dense layer moves every weight of the layer and of
    the Dense layer (so gradients reach them), and changes the evaluated loss."""
    batch, seq = case.shape[0], case.shape[-2]
    keras.utils.set_random_seed(0)
    layer = build("keras", case)
    model = _keras_model(case, layer, seq=seq, project=True)
    model.compile(optimizer=keras.optimizers.SGD(0.1), loss="mse")
    data = inputs(case)
    feed = [data.x, *data.extras]
    target = np.random.default_rng(1).normal(size=data.x.shape).astype(np.float32)
    watched = [*layer.trainable_weights, *model.get_layer("proj").trainable_weights]
    before = [np32(w) for w in watched]
    loss_before = model.evaluate(feed, target, batch_size=batch, verbose=0)
    model.fit(feed, target, batch_size=batch, epochs=1, verbose=0)   # one step
    for w, b in zip(watched, before):
        assert not np.array_equal(np32(w), b), f"{w.path} did not move"
    loss_after = model.evaluate(feed, target, batch_size=batch, verbose=0)
    assert np.isfinite(loss_after) and loss_after != loss_before, (loss_before, loss_after)


# --------------------------------------------------------------------------- (e) mixed precision

def check_torch_mixed_precision(case: Case) -> None:
    """Under ``torch.autocast("cpu", bfloat16)`` behind a linear layer, and on a bfloat16
    input: the output is bfloat16 and within bfloat16 rounding of float32."""
    dim = case.shape[-1]
    torch.manual_seed(0)
    module, proj = build("torch", case), torch.nn.Linear(dim, dim)
    data = inputs(case)
    x = torch.as_tensor(data.x)
    with torch.no_grad():
        expected = call("torch", module, proj(x), data.extras, training=case.training)
        with torch.autocast("cpu", dtype=torch.bfloat16):
            out = call("torch", module, proj(x), data.extras, training=case.training)
            pe = (module.encoding(*encoding_args("torch", case, data))
                  if hasattr(module, "encoding") else None)
        assert out.dtype == torch.bfloat16
        _close(out, expected, LOW_PRECISION["bfloat16"], "autocast")
        if pe is not None:  # P alone stays float32 (the docs' promise), autocast or not
            assert pe.dtype == torch.float32
            torch.testing.assert_close(pe, module.encoding(*encoding_args("torch", case, data)),
                                       rtol=0, atol=0)
        for training in case.modes:
            out = call("torch", module, x.bfloat16(), data.extras, training=training)
            assert out.dtype == torch.bfloat16 and tuple(out.shape) == data.x.shape
            if training == case.training:
                _close(out, call("torch", module, x, data.extras, training=training),
                       LOW_PRECISION["bfloat16"], "bfloat16 input")


def check_keras_mixed_precision(case: Case) -> None:
    """Under the ``mixed_bfloat16`` policy: float32 weights, bfloat16 compute and output,
    within bfloat16 rounding of the float32 layer with the same weights."""
    full = build("keras", case)
    data = inputs(case)
    expected = call("keras", full, data.x, data.extras, training=case.training)
    with keras_policy("mixed_bfloat16"):
        mixed = build("keras", case)
        assert mixed.compute_dtype == "bfloat16"
        assert all(dtype_name(w) == "float32" for w in mixed.weights)
        copy_weights(full, mixed)
        for training in case.modes:
            out = call("keras", mixed, data.x, data.extras, training=training)
            assert dtype_name(out) == "bfloat16" and tuple(out.shape) == data.x.shape
            if training == case.training:
                _close(out, expected, LOW_PRECISION["bfloat16"])
        if hasattr(mixed, "encoding"):  # P alone stays float32 (the docs' promise)
            pe = mixed.encoding(*encoding_args("keras", case, data))
            assert dtype_name(pe) == "float32"
            np.testing.assert_array_equal(
                np32(pe), np32(full.encoding(*encoding_args("keras", case, data))))


# --------------------------------------------------------------------------- (f) input dtypes

FLOAT_DTYPES = ("float16", "bfloat16", "float32")


def check_torch_dtypes(case: Case, dtype: str) -> None:
    """Embeddings of ``dtype`` give ``dtype`` out, within its rounding of float32; also
    with the module itself cast to ``dtype``."""
    module = build("torch", case)
    data = inputs(case)
    expected = call("torch", module, data.x, data.extras, training=case.training)
    for training in case.modes:
        out = call("torch", module, data.x, data.extras, training=training, dtype=dtype)
        assert dtype_name(out) == dtype and tuple(out.shape) == data.x.shape
        if training == case.training:
            _close(out, expected, LOW_PRECISION[dtype])
    module.to(getattr(torch, dtype))
    out = call("torch", module, data.x, data.extras, training=case.training, dtype=dtype)
    assert dtype_name(out) == dtype and np.isfinite(np32(out)).all()


def check_keras_dtypes(case: Case, dtype: str) -> None:
    """A layer built with ``dtype=`` computes and returns ``dtype``, within its rounding
    of the float32 layer with the same weights."""
    full = build("keras", case)
    data = inputs(case)
    expected = call("keras", full, data.x, data.extras, training=case.training)
    layer = build("keras", case, dtype=dtype)
    copy_weights(full, layer)
    for training in case.modes:
        out = call("keras", layer, data.x, data.extras, training=training, dtype=dtype)
        assert dtype_name(out) == dtype and tuple(out.shape) == data.x.shape
        if training == case.training:
            _close(out, expected, LOW_PRECISION[dtype])


def integer_args(case: Case) -> list[str]:
    """Names of the case's integer per-token arguments (positions, ids, paths)."""
    args = [*case.extras, *([case.positions] if case.positions else [])]
    return [a.name for a in args if a.is_integer()]


def check_index_dtypes(case: Case, face: str) -> None:
    """int32 and int64 per-token integer arguments give the same output."""
    layer = build(face, case)
    data = inputs(case)
    outs = []
    for dtype in ("int32", "int64"):
        def cast(arg, value):
            return tensor(face, value, dtype if arg.is_integer() else None)
        extras = [cast(a, e) for a, e in zip(case.extras, data.extras)]
        positions = None if case.positions is None else cast(case.positions, data.positions)
        outs.append(np32(call(face, layer, data.x, extras, positions, training=case.training)))
    np.testing.assert_array_equal(outs[0], outs[1])


# --------------------------------------------------------------------------- (g) empty input

def check_empty_sequence(case: Case, face: str) -> None:
    """``seq = 0`` returns x unchanged: its shape, its dtype, its (no) values."""
    layer = build(face, case)
    x = np.zeros((*case.shape[:-2], 0, case.shape[-1]), np.float32)
    extras = [np.zeros((0, *a.trailing), e.dtype)
              for a, e in zip(case.extras, inputs(case).extras)]
    for training in case.modes:
        out = call(face, layer, x, extras, training=training)
        assert tuple(out.shape) == x.shape and dtype_name(out) == "float32"
        np.testing.assert_array_equal(np32(out), x)


# --------------------------------------------------------------------------- (h) per-token shapes

def check_per_token_shapes(case: Case, face: str) -> None:
    """Per-token arguments shared by the batch, ``(seq, ...)``, ``(1, seq, ...)`` or
    tiled ``(batch, seq, ...)``, give the same result; it is ``x + encoding(...)``; with
    one row per example, example ``i`` gets the encoding of row ``i``; explicit
    positions ``0 .. seq-1`` equal the default ones."""
    batch, seq, dim = case.shape
    layer = build(face, case)
    data = inputs(case)
    shared = [e[0] for e in data.extras]
    positions = None if data.positions is None else data.positions[0]
    out = np32(call(face, layer, data.x, shared, positions, training=case.training))
    for lead in ((1, seq), (batch, seq)):
        def widen(a):
            return np.broadcast_to(a, (*lead, *a.shape[1:])).copy()
        got = call(face, layer, data.x, [widen(e) for e in shared],
                   None if positions is None else widen(positions), training=case.training)
        np.testing.assert_array_equal(np32(got), out, err_msg=str(lead))
    if hasattr(layer, "encoding"):
        pe = layer.encoding(*encoding_args(face, case, data))
        np.testing.assert_allclose(out - data.x, np.broadcast_to(np32(pe), out.shape),
                                   rtol=1e-6, atol=1e-6)
        per_example = np32(call(face, layer, data.x, data.extras, data.positions,
                                training=case.training))
        for i in range(batch):
            pe = np32(layer.encoding(*encoding_args(face, case, data, example=i)))
            np.testing.assert_allclose(per_example[i] - data.x[i], pe, rtol=1e-6, atol=1e-6,
                                       err_msg=f"example {i}")
    if case.positions is not None:
        default = np32(call(face, layer, data.x, data.extras, training=case.training))
        for arange in (np.arange(seq), np.tile(np.arange(seq), (batch, 1))):
            explicit = call(face, layer, data.x, data.extras, arange, training=case.training)
            np.testing.assert_array_equal(np32(explicit), default, err_msg=str(arange.shape))


def wrong_position_shapes(case: Case) -> list[tuple[int, ...]]:
    batch, seq = case.shape[0], case.shape[-2]
    return [(seq + 1,), (seq, seq), (batch, 1), (batch + 1, seq), (1, batch, seq)]


def check_wrong_positions_shape(case: Case, shape: tuple[int, ...]) -> None:
    """Positions of a shape that is not ``(seq,)`` or ``(batch, seq)`` for x: the same
    ValueError in both faces, naming both shapes."""
    data = inputs(case)
    positions = np.zeros(shape, np.int32)
    for training in case.modes:
        message = same_error(FACES, lambda face: call(
            face, build(face, case), data.x, data.extras, positions, training=training))
        assert message.startswith(f"{case.cls}: positions must have shape (seq,) or "
                                  "(batch, seq)"), message
        x_name = "q" if case.rotary else "x"
        assert f"got positions.shape={shape} for {x_name}.shape={data.x.shape}" in message, \
            message


# --------------------------------------------------------------------------- (i, j) compilers

def check_torch_compile(case: Case) -> None:
    """``torch.compile(fullgraph=True)`` traces the forward without a graph break (the
    eager backend: no code generation) and gives the same outputs."""
    torch._dynamo.reset()
    module = build("torch", case)
    module.train(case.training)
    compiled = torch.compile(module, fullgraph=True, backend="eager")
    data = inputs(case)
    if case.bias:
        x = torch.as_tensor(data.x)
        compiled = torch.compile(lambda scores: attend("torch", module, scores), fullgraph=True,
                                 backend="eager")
        torch.testing.assert_close(compiled(x), attend("torch", module, x), rtol=1e-6, atol=1e-6)
        return
    if case.rotary:
        compiled = torch.compile(functools.partial(pair_sum, module), fullgraph=True,
                                 backend="eager")
        module = functools.partial(pair_sum, module)
    for positions in (None, data.positions) if case.positions else (None,):
        extras = [torch.as_tensor(e) for e in data.extras]
        kwargs = {} if positions is None else {"positions": torch.as_tensor(positions)}
        x = torch.as_tensor(data.x)
        torch.testing.assert_close(compiled(x, *extras, **kwargs), module(x, *extras, **kwargs),
                                   rtol=1e-6, atol=1e-6)


def check_keras_jit_compile(case: Case) -> None:
    """A functional model compiled with ``jit_compile=True`` (XLA) predicts what the
    eager layer computes."""
    batch, seq = case.shape[0], case.shape[-2]
    layer = build("keras", case)
    model = _keras_model(case, layer, batch=batch, seq=seq)
    model.compile(jit_compile=True)
    data = inputs(case)
    expected = call("keras", layer, data.x, data.extras, training=False)
    got = model.predict([data.x, *data.extras], batch_size=batch, verbose=0)
    _close(got, expected, {"rtol": 1e-5, "atol": 1e-5})


