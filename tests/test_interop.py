"""copy_weights between the faces, and PyTorch/Keras parity of the absolute encodings."""

import keras
import numpy as np
import pytest
import torch

from posenc.keras import SinusoidalEncoding as KerasSinusoidal
import posenc.keras.learned as pk
from posenc.torch import SinusoidalEncoding as TorchSinusoidal
import posenc.torch.learned as pt
from posenc.interop import copy_weights
from faces import numpy

CASES = [
    ("LearnedEncoding", (24, 8), {"init_std": 0.5}),
    ("HybridEncoding", (24, 8), {"base": 200.0, "layout": "concat", "scale": 0.7}),
]


def keras_weights(layer) -> dict:
    return {w.path.split("/")[-1]: numpy(w) for w in layer.weights}


def torch_weights(module) -> dict:
    return {n: numpy(p) for n, p in module.named_parameters()}


def perturb_torch(module, seed: int) -> None:
    gen = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for p in module.parameters():
            p.add_(torch.randn(p.shape, generator=gen))


def inputs(seed: int = 0):
    rng = np.random.default_rng(seed)
    x = rng.normal(size=(3, 10, 8)).astype(np.float32)
    positions = rng.integers(0, 24, size=(3, 10))
    return x, positions


def outputs(torch_module, keras_layer, x, positions):
    a = torch_module(torch.as_tensor(x), torch.as_tensor(positions))
    b = keras_layer(keras.ops.convert_to_tensor(x), keras.ops.convert_to_tensor(positions))
    return numpy(a), numpy(b)


@pytest.mark.parametrize("cls, args, kwargs", CASES)
@pytest.mark.keras
def test_torch_to_keras(cls, args, kwargs):
    torch.manual_seed(0)
    keras.utils.set_random_seed(1)
    t, k = getattr(pt, cls)(*args, **kwargs), getattr(pk, cls)(*args, **kwargs)
    perturb_torch(t, seed=2)
    x, positions = inputs()
    a, b = outputs(t, k, x, positions)
    assert np.abs(a - b).max() > 1e-2  # different weights: the check below can fail
    assert copy_weights(t, k) is k
    assert keras_weights(k).keys() == torch_weights(t).keys()
    for name, value in torch_weights(t).items():
        np.testing.assert_array_equal(keras_weights(k)[name], value)
    a, b = outputs(t, k, x, positions)
    np.testing.assert_allclose(a, b, atol=1e-5)
    a, b = outputs(t, k, x, positions[0])  # shared (seq,) positions
    np.testing.assert_allclose(a, b, atol=1e-5)
    np.testing.assert_allclose(numpy(t(torch.as_tensor(x))), numpy(k(x)), atol=1e-5)


@pytest.mark.parametrize("cls, args, kwargs", CASES)
@pytest.mark.keras
def test_keras_to_torch(cls, args, kwargs):
    torch.manual_seed(3)
    keras.utils.set_random_seed(4)
    t, k = getattr(pt, cls)(*args, **kwargs), getattr(pk, cls)(*args, **kwargs)
    rng = np.random.default_rng(5)
    for w in k.weights:
        w.assign(rng.normal(size=tuple(w.shape)).astype(np.float32))
    assert copy_weights(k, t) is t
    for name, value in keras_weights(k).items():
        np.testing.assert_array_equal(torch_weights(t)[name], value)
    x, positions = inputs(1)
    a, b = outputs(t, k, x, positions)
    np.testing.assert_allclose(a, b, atol=1e-5)


@pytest.mark.parametrize("cls, args, kwargs", CASES)
@pytest.mark.keras
def test_round_trip_and_same_face_copies(cls, args, kwargs):
    torch.manual_seed(6)
    src = getattr(pt, cls)(*args, **kwargs)
    perturb_torch(src, seed=7)
    middle, again = getattr(pk, cls)(*args, **kwargs), getattr(pk, cls)(*args, **kwargs)
    back = getattr(pt, cls)(*args, **kwargs)
    copy_weights(copy_weights(copy_weights(src, middle), again), back)  # torch->keras->keras->torch
    for name, value in src.state_dict().items():
        torch.testing.assert_close(back.state_dict()[name], value, rtol=0, atol=0)
    twin = copy_weights(src, getattr(pt, cls)(*args, **kwargs))  # torch -> torch
    x = torch.randn(2, 5, 8)
    torch.testing.assert_close(twin(x), src(x), rtol=0, atol=0)


@pytest.mark.keras
def test_layer_inside_a_keras_model():
    torch.manual_seed(8)
    t = pt.LearnedEncoding(12, 8)
    inputs_ = keras.Input((12, 8))
    model = keras.Model(inputs_, pk.LearnedEncoding(12, 8)(inputs_))
    copy_weights(t, model.layers[-1])
    x = np.random.default_rng(9).normal(size=(2, 12, 8)).astype(np.float32)
    np.testing.assert_allclose(numpy(model(x)), numpy(t(torch.as_tensor(x))), atol=1e-5)


@pytest.mark.keras
def test_resized_modules_agree():
    torch.manual_seed(10)
    t = pt.LearnedEncoding(1 + 9, 8)
    k = copy_weights(t, pk.LearnedEncoding(1 + 9, 8))
    for t_new, k_new in ((t.resized(31, mode="cubic"), k.resized(31, mode="cubic")),
                         (t.resized_2d((3, 3), (4, 5), prefix_tokens=1),
                          k.resized_2d((3, 3), (4, 5), prefix_tokens=1))):
        np.testing.assert_allclose(numpy(t_new.table), numpy(k_new.table), atol=1e-6)


@pytest.mark.keras
def test_sinusoidal_modules_are_weightless_on_both_faces():
    t, k = TorchSinusoidal(8), KerasSinusoidal(8)
    assert copy_weights(t, k) is k and copy_weights(k, t) is t
    x = np.ones((1, 4, 8), np.float32)
    np.testing.assert_allclose(numpy(t(torch.as_tensor(x))), numpy(k(x)), atol=1e-5)


# ---------------------------------------------------------------------------
# Errors.


@pytest.mark.keras
def test_mismatched_classes():
    with pytest.raises(ValueError, match=r"copy_weights: LearnedEncoding -> HybridEncoding: the "
                                         r"weights do not match: source has \['table'\], "
                                         r"destination has \['offset', 'scale'\]"):
        copy_weights(pt.LearnedEncoding(8, 4), pk.HybridEncoding(8, 4))


@pytest.mark.keras
def test_mismatched_shapes():
    with pytest.raises(ValueError, match=r"weight 'table' has shape \(16, 4\), source 'table' "
                                         r"has \(8, 4\)"):
        copy_weights(pt.LearnedEncoding(8, 4), pk.LearnedEncoding(16, 4))
    with pytest.raises(ValueError, match=r"weight 'table' has shape \(16, 4\), source 'table' "
                                         r"has \(8, 4\)"):
        copy_weights(pk.LearnedEncoding(8, 4), pt.LearnedEncoding(16, 4))


@pytest.mark.keras
def test_unbuilt_keras_layer():
    with pytest.raises(ValueError, match=r"the Keras layer is not built; call it once"):
        copy_weights(torch.nn.Linear(3, 4), keras.layers.Dense(4))


def test_not_a_module():
    with pytest.raises(TypeError, match=r"src must be a torch.nn.Module or a keras Layer"):
        copy_weights({"table": np.zeros((8, 4))}, pt.LearnedEncoding(8, 4))
    with pytest.raises(TypeError, match=r"dst must be a torch.nn.Module or a keras Layer"):
        copy_weights(pt.LearnedEncoding(8, 4), {"table": np.zeros((8, 4))})
