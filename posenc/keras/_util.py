"""What every layer of the Keras face shares: tensor helpers and :class:`AdditiveEncoding`.

Mirrors ``posenc/torch/_util.py`` name for name, with ``keras.ops`` and
``keras.backend`` only (no backend is imported here). The data-dependent
checks follow the policy stated once in the API reference ("Checks that read
the data"): they read values back only from an eager CPU tensor.
"""

from __future__ import annotations

import numbers

import keras
import numpy as np
from keras import ops

from posenc._checks import (
    check_embeddings,
    check_index_range,
    check_integer_dtype,
    check_length,
    check_numeric_dtype,
    check_per_token,
    check_positive_int,
)


def dtype_of(t) -> str:
    """The dtype of a tensor as a string: ``"float32"``, ``"int64"``, ``"bool"``, ..."""
    return keras.backend.standardize_dtype(t.dtype)


def is_float(dtype: str) -> bool:
    return "float" in dtype


def as_positions(positions, *, name: str = "positions", what: str = ""):
    """An ``int`` n becomes ``arange(n)``; anything else becomes a numeric tensor."""
    if isinstance(positions, numbers.Integral) and not isinstance(positions, bool):
        n = check_positive_int(name, positions, what=what,
                               fix="pass a sequence length of at least 1")
        return ops.arange(n, dtype="int32")
    positions = ops.convert_to_tensor(positions)
    check_numeric_dtype(name, dtype_of(positions), what=what)
    return positions


def as_indices(t, *, name: str = "positions", what: str = ""):
    """``t`` as an int32 tensor (one index dtype on every backend), refusing other dtypes."""
    t = ops.convert_to_tensor(t)
    check_integer_dtype(name, dtype_of(t), what=what)
    return ops.cast(t, "int32")


def can_inspect(t) -> bool:
    """Whether a data-dependent check may read ``t``: a non-empty eager CPU tensor.

    Symbolic tensors (functional models), tensors inside a traced function
    (``tf.function``, ``jax.jit``: they have no value, and no device or none
    named) and tensors on an accelerator (a read would stop the host until the
    device catches up) are not read.
    """
    if keras.backend.is_keras_tensor(t) or any(d == 0 for d in t.shape):
        return False
    try:
        device = str(t.device)
    except Exception:  # a traced JAX array has no device
        return False
    return "cpu" in device.lower()


def read_back(*scalars):
    """Scalar tensors (a min, a max, a flag) as Python ints; ``None`` if they have no value yet.

    A tensor placed on the CPU inside ``tf.function`` can pass
    :func:`can_inspect` and still be symbolic: then there is nothing to read
    and the check is skipped, as the policy says for traced functions.
    """
    try:
        return tuple(int(ops.convert_to_numpy(s)) for s in scalars)
    except (NotImplementedError, TypeError):  # a symbolic TensorFlow tensor, a JAX tracer
        return None


def check_indices(t, limit: int, *, name: str = "positions", limit_name: str = "max_len",
                  what: str = "", fix: str = "") -> None:
    """``0 <= t < limit``, checked when :func:`can_inspect` allows it."""
    values = read_back(ops.min(t), ops.max(t)) if can_inspect(t) else None
    if values is not None:
        check_index_range(name, *values, limit, limit_name=limit_name, what=what, fix=fix)


def as_numpy(array):
    """A tensor or variable as a NumPy array, floats as float64; anything else as it is.

    The input of the framework-free code that runs once on the host (graph positions).
    """
    if not (isinstance(array, keras.Variable) or ops.is_tensor(array)):
        return array
    if is_float(dtype_of(array)):
        array = ops.cast(array, "float64")
    return ops.convert_to_numpy(array)


def wide_dtype() -> str:
    """float64 for the angles, except on JAX without x64 (float32 there)."""
    if keras.backend.backend() != "jax":
        return "float64"
    return dtype_of(ops.convert_to_tensor(np.zeros((), np.float64)))


def on_host(*tensors):
    """The tensors as float64 NumPy arrays where the backend computes no float64, else ``None``.

    On JAX without x64 every float is float32, so the float64 arithmetic of the
    angles and resampling runs in NumPy instead, for tensors that have values.
    ``None`` on the other backends (they compute float64 themselves) and for
    traced tensors (``jax.jit``, as inside ``fit`` and ``predict``): there the
    arithmetic stays in float32.
    """
    if wide_dtype() == "float64":
        return None
    try:
        return [np.asarray(ops.convert_to_numpy(t) if ops.is_tensor(t)
                           or isinstance(t, keras.Variable) else t, np.float64)
                for t in tensors]
    except (TypeError, NotImplementedError):  # a JAX tracer has no value
        return None


def result_dtype(positions) -> str:
    """Float positions keep their dtype; integer positions give float32."""
    dtype = dtype_of(positions)
    return dtype if is_float(dtype) else "float32"


class AdditiveEncoding(keras.layers.Layer):
    """Base of the layers that add an encoding to token embeddings: ``x + P``.

    It owns :meth:`call`: ``x`` must be ``(..., seq, dim)``, an empty
    sequence is returned as it is, ``positions`` default to ``0 .. seq-1`` and
    must give one position per token, and ``P`` is cast to the compute dtype
    and added. A subclass sets ``dim`` and writes ``encoding(positions)``,
    which takes an int ``n`` (meaning ``0 .. n-1``) or a tensor of positions
    and returns ``P`` (float32 unless float positions ask for another dtype).
    Subclasses whose call takes other inputs (timestamps, paths) write their
    own ``call`` from the same helpers.
    """

    dim: int

    def encoding(self, positions):  # pragma: no cover - abstract
        raise NotImplementedError

    def call(self, x, positions=None):
        positions = self._positions_for(x, positions)
        if positions is None:
            return ops.cast(x, self.compute_dtype)
        return self._add(x, self._encode(positions))

    def compute_output_shape(self, input_shape):
        return input_shape

    # The helpers below have the same names and arguments in posenc/torch/_util.py.

    def _what(self) -> str:
        return type(self).__name__

    def _encode(self, positions):
        """``P`` for :meth:`call`: :meth:`encoding`, unless a subclass has a cheaper read."""
        return self.encoding(positions)

    def _arange(self, n):
        """``0 .. n-1`` (``n`` an int or a dynamic length)."""
        return ops.arange(n, dtype="int32")

    def _positions_for(self, x, positions):
        """Check ``x`` and ``positions``; ``None`` for an empty sequence without positions.

        Without positions, the sequence length (an int when it is static: a
        table checks it against ``max_len`` with no data-dependent check; an
        ``arange`` when it is only known at run time); otherwise the positions
        as a tensor of one position per token.
        """
        check_embeddings(x.shape, self.dim, what=self._what())
        if positions is None:
            seq = x.shape[-2]
            if seq is None:
                return self._arange(ops.shape(x)[-2])
            return None if seq == 0 else int(seq)
        positions = as_positions(positions, what=self._what())
        self._per_token("positions", positions, x)
        return positions

    def _per_token(self, name: str, t, x, *, each: str = "position", trailing: str = "") -> None:
        check_per_token(name, t.shape, x.shape, what=self._what(), each=each, trailing=trailing)

    def _positions(self, positions):
        """Positions as a tensor (an int n: ``0 .. n-1``)."""
        if isinstance(positions, numbers.Integral) and not isinstance(positions, bool):
            return self._arange(check_positive_int("positions", positions, what=self._what(),
                                                   fix="pass a sequence length of at least 1"))
        return as_positions(positions, what=self._what())

    def _table_positions(self, positions, max_len: int, *, fix: str):
        """Integer positions for a table of ``max_len`` rows.

        An int ``n`` is checked against ``max_len`` (``fix`` says what to do
        about a longer sequence); a tensor's values are checked when the
        policy allows it.
        """
        what = self._what()
        if isinstance(positions, numbers.Integral) and not isinstance(positions, bool):
            check_length(positions, max_len, what=what, fix=fix)
            return self._positions(positions)
        positions = as_indices(self._positions(positions), what=what)
        check_indices(positions, max_len, what=what, fix=fix)
        return positions

    def _add(self, x, pe):
        """``x + P`` in the layer's compute dtype (``P`` is cast last)."""
        return ops.cast(x, self.compute_dtype) + ops.cast(pe, self.compute_dtype)
