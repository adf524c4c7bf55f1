"""What the test modules share: move arrays in and out of either face, compare errors."""

from __future__ import annotations

import contextlib

import keras
import numpy as np
import torch
from keras import ops

FACE_NAMES = ("torch", "keras")


def tensor(face: str, array, dtype: str | None = None):
    """``array`` as a tensor of ``face`` ("torch" or "keras"), optionally cast to ``dtype``."""
    if face == "torch":
        out = torch.as_tensor(np.asarray(array))
        return out if dtype is None else out.to(getattr(torch, dtype))
    out = ops.convert_to_tensor(np.asarray(array))
    return out if dtype is None else ops.cast(out, dtype)


def numpy(t) -> np.ndarray:
    """float64 NumPy copy of a tensor or variable of either face (any backend)."""
    if isinstance(t, keras.Variable):
        t = t.value
    if torch.is_tensor(t) and not isinstance(t, keras.Variable):
        return t.detach().cpu().to(torch.float64).numpy()
    return np.asarray(ops.convert_to_numpy(ops.cast(t, "float32")), dtype=np.float64)


def np32(t) -> np.ndarray:
    """float32 NumPy copy of a tensor of either face."""
    return numpy(t).astype(np.float32)


def dtype_name(t) -> str:
    """The dtype of a tensor of either face, as a string ("float32", "bfloat16", ...)."""
    if torch.is_tensor(t):
        return str(t.dtype).replace("torch.", "")
    return keras.backend.standardize_dtype(t.dtype)


@contextlib.contextmanager
def _plain_keras_errors():
    """Keras adds the layer's call arguments to an error's message; switch that off here."""
    was = keras.config.is_traceback_filtering_enabled()
    keras.config.disable_traceback_filtering()
    try:
        yield
    finally:
        if was:
            keras.config.enable_traceback_filtering()


def _raised(call, face):
    with _plain_keras_errors():
        try:
            call(face)
        except Exception as error:  # noqa: BLE001 -- the point is to compare what was raised
            return type(error), str(error)
    return None


def same_error(faces, call, *, kind: type[Exception] = ValueError) -> str:
    """The one cross-face error check: ``call(face)`` must raise in every face of ``faces``
    (names, e.g. ``("torch", "keras")`` or a dict keyed by them), with the same exception
    type, a subclass of ``kind``, and the same message. Returns the message."""
    raised = {face: _raised(call, face) for face in faces}
    silent = [face for face, got in raised.items() if got is None]
    assert not silent, f"no error raised by {silent}; the other faces raised {raised}"
    kinds = {face: got[0].__name__ for face, got in raised.items()}
    assert len(set(kinds.values())) == 1, f"the faces raise different types: {raised}"
    first, (error_type, message) = next(iter(raised.items()))
    assert issubclass(error_type, kind), \
        f"expected {kind.__name__}, got {error_type.__name__}: {message}"
    messages = {face: got[1] for face, got in raised.items()}
    assert len(set(messages.values())) == 1, f"the faces' messages differ: {messages}"
    return message
