"""Small helpers for the Keras face (``keras.ops`` only)."""

from __future__ import annotations

import numbers

import keras
from keras import ops

from posenc._checks import (
    check_index_values,
    check_length,
    check_numeric_positions,
    check_positive_int,
    integer_positions_error,
)


def as_positions(positions, *, name: str = "positions"):
    """An ``int`` n becomes ``arange(n)``; anything else becomes a tensor."""
    if isinstance(positions, numbers.Integral) and not isinstance(positions, bool):
        n = check_positive_int(name, positions, fix="Pass a sequence length of at least 1.")
        return ops.arange(n, dtype="int32")
    positions = ops.convert_to_tensor(positions)
    check_numeric_positions(dtype_of(positions))
    return positions


def dtype_of(x) -> str:
    return keras.backend.standardize_dtype(x.dtype)


def is_float(dtype: str) -> bool:
    return "float" in dtype


def result_dtype(positions) -> str:
    """Float positions keep their dtype; integer positions give float32."""
    dtype = dtype_of(positions)
    return dtype if is_float(dtype) else "float32"


def wide_dtype() -> str:
    """float64 for the angles, except on JAX without x64 (float32 there)."""
    if keras.backend.backend() == "jax":
        import jax

        if not jax.config.jax_enable_x64:
            return "float32"
    return "float64"


class AdditiveEncoding(keras.layers.Layer):
    """Base of the layers that add an encoding to token embeddings: ``x + P``, of x's shape."""

    def add_encoding(self, x, pe):
        """``x + pe`` in the layer's compute dtype (P is computed in float32 and cast last)."""
        return ops.cast(x, self.compute_dtype) + ops.cast(pe, self.compute_dtype)

    def compute_output_shape(self, input_shape):
        return input_shape


def can_inspect(t) -> bool:
    """Whether the values of ``t`` can be read now (not symbolic, traced or empty)."""
    if isinstance(t, keras.KerasTensor) or any(d == 0 for d in t.shape):
        return False
    backend = keras.backend.backend()
    if backend == "tensorflow":
        import tensorflow as tf

        return tf.executing_eagerly()
    if backend == "jax":
        import jax

        return not isinstance(t, jax.core.Tracer)
    if backend == "torch":
        import torch

        compiling = getattr(torch.compiler, "is_compiling", lambda: False)()
        return t.device.type != "meta" and not compiling
    return True


def item(t) -> int:
    """A scalar (a min, a max, a flag) read back as a Python int."""
    return int(ops.convert_to_numpy(t))


def as_indices(t, name: str, what: str):
    """``t`` as an int32 tensor (one index dtype on every backend), refusing other dtypes."""
    t = ops.convert_to_tensor(t)
    dtype = dtype_of(t)
    if "int" not in dtype:
        raise integer_positions_error(name, dtype, what=what)
    return ops.cast(t, "int32")


def check_indices(t, name: str, limit: int, *, what: str, fix: str) -> None:
    if can_inspect(t):
        check_index_values(name, item(ops.min(t)), item(ops.max(t)), limit,
                              what=what, fix=fix)


def table_positions(positions, max_len: int, what: str):
    """Integer positions (int32) for a table of ``max_len`` rows, checked."""
    if isinstance(positions, numbers.Integral) and not isinstance(positions, bool):
        n = check_positive_int("positions", positions, fix="Pass a sequence length of at least 1.")
        check_length(n, max_len, what=what)
        return ops.arange(n, dtype="int32")
    pos = as_indices(as_positions(positions), "positions", what)
    check_indices(pos, "positions", max_len, what=what,
                 fix="build it with a larger max_len, or restart positions per modality "
                     "with modality_positions(...)")
    return pos


def default_positions(x, max_len: int | None, what: str):
    """``0 .. seq-1`` for ``x`` (checked against ``max_len`` when the length is known)."""
    seq = x.shape[-2]
    if seq is not None:
        if max_len is not None:
            check_length(seq, max_len, what=what)
        return seq
    return ops.arange(ops.shape(x)[-2], dtype="int32")
