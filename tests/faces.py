"""Helpers the test modules share: move arrays in and out of either face."""

from __future__ import annotations

import keras
import numpy as np
import pytest
import torch
from keras import ops


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


def same_error(faces, call) -> str:
    """The ValueError message of ``call(face)`` for each face in ``faces``; they must agree."""
    messages = []
    for face in faces:
        with pytest.raises(ValueError) as info:
            call(face)
        messages.append(str(info.value))
    assert messages[0] in messages[1]  # Keras wraps the message in the layer's call context
    return messages[0]
