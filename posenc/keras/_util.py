"""Small helpers for the Keras face (``keras.ops`` only)."""

from __future__ import annotations

import numbers

import keras
from keras import ops

from posenc._checks import check_numeric_positions, check_positive_int


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
