"""The package's shape: family modules, one base per face, no backend imports in the Keras face,
the same bad argument refused the same way in both faces."""

from __future__ import annotations

import inspect

import keras
import pytest

import posenc.keras as pk
import posenc.torch as pt


def test_family_module_names_are_shadowed_by_their_functions():
    # ``posenc.torch.sinusoidal`` is the function; the module is reached by its full name.
    import importlib

    for face in (pt, pk):
        assert callable(face.sinusoidal) and not inspect.ismodule(face.sinusoidal)
        module = importlib.import_module(f"{face.__name__}.sinusoidal")
        assert inspect.ismodule(module) and module.sinusoidal is face.sinusoidal


# --------------------------------------------------------------------------- one shape for both faces

from pathlib import Path  # noqa: E402

import numpy as np  # noqa: E402

import posenc.keras._util as keras_util  # noqa: E402
import posenc.torch._util as torch_util  # noqa: E402
from faces import same_error, tensor  # noqa: E402

PACKAGE = Path(__file__).resolve().parents[1] / "posenc"


@pytest.mark.parametrize("base", [None, "abc", "10000", 1.0, float("nan")])
@pytest.mark.keras
def test_a_bad_base_gets_the_same_error_in_both_faces(base):
    faces = {"torch": pt, "keras": pk}
    calls = [lambda f: faces[f].sinusoidal(4, 8, base=base),
             lambda f: faces[f].sinusoidal_2d(2, 2, 8, base=base),
             lambda f: faces[f].SinusoidalEncoding(8, base=base),
             lambda f: faces[f].HybridEncoding(4, 8, base=base),
             lambda f: faces[f].ContinuousTimeEncoding(8, base=base)]
    for call in calls:
        message = same_error(["torch", "keras"], call)
        assert f"base must be a finite number greater than 1, got base={base!r}" in message


# Keras has no backend-neutral gradient: the Keras GradientMonitor takes the gradient with the
# running backend's own autodiff, importing it inside the function that needs it.
BACKEND_IMPORTS_ALLOWED = {("diagnostics.py", "tensorflow"), ("diagnostics.py", "torch"),
                           ("diagnostics.py", "jax")}


def test_the_keras_face_imports_no_backend():
    import ast

    for path in sorted((PACKAGE / "keras").glob("*.py")):
        tree = ast.parse(path.read_text())
        top_level = set(tree.body)
        for node in ast.walk(tree):
            names = ([a.name for a in node.names] if isinstance(node, ast.Import)
                     else [node.module or ""] if isinstance(node, ast.ImportFrom) else [])
            for name in names:
                root = name.split(".")[0]
                if root not in ("tensorflow", "jax", "torch"):
                    continue
                assert node not in top_level, f"{path.name} imports {name} at import time"
                assert (path.name, root) in BACKEND_IMPORTS_ALLOWED, f"{path.name} imports {name}"


def test_private_helpers_have_the_same_names_and_arguments():
    def functions(module):
        return {name: inspect.signature(obj) for name, obj in vars(module).items()
                if inspect.isfunction(obj) and obj.__module__ == module.__name__}

    def methods(cls):
        return {name: inspect.signature(obj) for name, obj in vars(cls).items()
                if inspect.isfunction(obj) and name.startswith("_") and name != "__init__"}

    torch_functions, keras_functions = functions(torch_util), functions(keras_util)
    # the frameworks differ here: torch.compile's flag, MPS's float64, JAX's float64 (on_host)
    only_torch, only_keras = {"is_compiling"}, {"is_float", "on_host"}
    assert set(torch_functions) - only_torch == set(keras_functions) - only_keras
    for name in set(torch_functions) - only_torch - {"wide_dtype"}:
        assert list(torch_functions[name].parameters) == list(keras_functions[name].parameters), name
    assert {n: list(s.parameters) for n, s in methods(torch_util.AdditiveEncoding).items()} == \
           {n: list(s.parameters) for n, s in methods(keras_util.AdditiveEncoding).items()}


@pytest.mark.parametrize("name", [n for n in pt.__all__ if inspect.isclass(getattr(pt, n))
                                  and hasattr(getattr(pt, n), "encoding")])
def test_every_additive_encoding_has_the_shared_base(name):
    assert issubclass(getattr(pt, name), torch_util.AdditiveEncoding)
    assert issubclass(getattr(pk, name), keras_util.AdditiveEncoding)


def _ramp_encodings():
    """A subclass that writes only ``encoding``: P[p, c] = p + c / 10, in both faces."""
    import torch
    from keras import ops

    class Ramp(torch_util.AdditiveEncoding):
        dim = 4

        def encoding(self, positions):
            pos = self._positions(positions).float()
            return pos[..., None] + torch.arange(4.0) / 10

    torch_ramp = Ramp()

    class Ramp(keras_util.AdditiveEncoding):  # noqa: F811  (the same name in both faces)
        dim = 4

        def encoding(self, positions):
            pos = ops.cast(self._positions(positions), "float32")
            return ops.expand_dims(pos, -1) + ops.arange(4, dtype="float32") / 10

    return {"torch": torch_ramp, "keras": Ramp()}


@pytest.mark.keras
def test_a_subclass_that_writes_only_its_encoding_gets_the_whole_call():
    from faces import numpy

    encs = _ramp_encodings()
    x = np.random.default_rng(0).normal(size=(2, 3, 4)).astype(np.float32)
    want = x + (np.arange(3)[:, None] + np.arange(4) / 10)
    for face, enc in encs.items():
        np.testing.assert_allclose(numpy(enc(tensor(face, x))), want, atol=1e-6)
        np.testing.assert_allclose(numpy(enc(tensor(face, x), tensor(face, np.array([2, 1, 0])))),
                                   x + (np.array([2, 1, 0])[:, None] + np.arange(4) / 10),
                                   atol=1e-6)
        assert tuple(enc(tensor(face, x[:, :0])).shape) == (2, 0, 4)
    message = same_error(list(encs), lambda f: encs[f](tensor(f, x), tensor(f, np.arange(4))))
    assert message.startswith("Ramp: positions must have shape (seq,) or (batch, seq)")
    message = same_error(list(encs), lambda f: encs[f](tensor(f, x[..., :3])))
    assert "x must be (..., seq, dim) with dim=4, got x.shape=(2, 3, 3)" in message


def test_torch_compile_flag_is_read_in_one_place(monkeypatch):
    import torch

    sources = [p.read_text() for p in (PACKAGE / "torch").glob("*.py")]
    assert sum(s.count("torch.compiler.is_compiling") for s in sources) == 0
    assert sum(s.count("torch.compiler") for s in sources) == 1   # in _util.is_compiling
    assert torch_util.is_compiling() is False
    monkeypatch.delattr(torch.compiler, "is_compiling")          # PyTorch 2.2
    assert torch_util.is_compiling() is False


@pytest.mark.keras
def test_keras_data_checks_read_eager_cpu_tensors_only():
    from types import SimpleNamespace

    from keras import ops

    assert keras_util.can_inspect(ops.convert_to_tensor(np.arange(3)))
    assert not keras_util.can_inspect(ops.zeros((0,)))
    assert not keras_util.can_inspect(keras.Input((3,)))
    on_gpu = SimpleNamespace(shape=(3,), device="/job:localhost/replica:0/task:0/device:GPU:0")
    assert not keras_util.can_inspect(on_gpu)
    assert not keras_util.can_inspect(SimpleNamespace(shape=(3,), device="cuda:0"))

    class Traced:  # a traced array: its device cannot be read
        shape = (3,)

        @property
        def device(self):
            raise RuntimeError("no device while tracing")

    assert not keras_util.can_inspect(Traced())


@pytest.mark.keras
def test_keras_data_checks_skip_symbolic_tensors_placed_on_the_cpu():
    if keras.backend.backend() != "tensorflow":
        pytest.skip("tf.function and tf.device belong to the TensorFlow backend")
    import tensorflow as tf

    enc = pk.LearnedEncoding(4, 8)
    paths_enc = pk.HierarchicalEncoding(2, 3, 8)

    @tf.function(autograph=False)
    def traced(x, positions, paths):
        with tf.device("/CPU:0"):        # gives the symbolic tensors a CPU device name
            return enc(x, positions + 0) + paths_enc(x, paths + 0)

    x = tf.zeros((1, 3, 8))
    out = traced(x, tf.constant([0, 1, 3]), tf.constant([[0, -1], [1, 2], [2, 0]]))
    assert tuple(out.shape) == (1, 3, 8)        # the check steps aside inside the graph
    with pytest.raises(ValueError, match=r"positions must lie in 0 \.\. 3, got 7"):
        enc(x, tf.constant([0, 1, 7]))           # the same call, eager: checked
