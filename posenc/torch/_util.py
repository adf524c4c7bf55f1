"""What every module of the PyTorch face shares: tensor helpers and :class:`AdditiveEncoding`.

Mirrors ``posenc/keras/_util.py`` name for name. The data-dependent checks
follow the policy stated once in the API reference ("Checks that read the
data"): they read values back only from an eager CPU tensor.
"""

from __future__ import annotations

import numbers

import torch
from torch import nn

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
    return str(t.dtype).replace("torch.", "")


def is_compiling() -> bool:
    """Whether ``torch.compile`` is tracing the current call (PyTorch 2.2 has no such flag)."""
    check = getattr(torch.compiler, "is_compiling", None)
    return bool(check is not None and check())


def as_positions(positions, *, name: str = "positions", what: str = "") -> torch.Tensor:
    """An ``int`` n becomes ``arange(n)``; anything else becomes a numeric tensor."""
    if isinstance(positions, numbers.Integral) and not isinstance(positions, bool):
        n = check_positive_int(name, positions, what=what,
                               fix="pass a sequence length of at least 1")
        return torch.arange(n)
    if not torch.is_tensor(positions):
        positions = torch.as_tensor(positions)
    check_numeric_dtype(name, dtype_of(positions), what=what)
    return positions


def as_indices(t, *, name: str = "positions", what: str = "") -> torch.Tensor:
    """``t`` as an int64 tensor (so uint8 is never read as a mask), refusing other dtypes."""
    t = t if torch.is_tensor(t) else torch.as_tensor(t)
    check_integer_dtype(name, dtype_of(t), what=what)
    return t.to(torch.long)


def can_inspect(t: torch.Tensor) -> bool:
    """Whether a data-dependent check may read ``t``: a non-empty eager CPU tensor.

    On an accelerator the read would stop the host until the device catches
    up, and inside ``torch.compile`` it would break the graph, so there the
    check is skipped.
    """
    return t.numel() > 0 and t.device.type == "cpu" and not is_compiling()


def read_back(*scalars):
    """Scalar tensors (a min, a max, a flag) as Python ints."""
    return tuple(int(s) for s in scalars)


def check_indices(t: torch.Tensor, limit: int, *, name: str = "positions",
                  limit_name: str = "max_len", what: str = "", fix: str = "") -> None:
    """``0 <= t < limit``, checked when :func:`can_inspect` allows it."""
    values = read_back(*torch.aminmax(t)) if can_inspect(t) else None
    if values is not None:
        check_index_range(name, *values, limit, limit_name=limit_name, what=what, fix=fix)


def as_numpy(array):
    """A tensor (on any device) as a NumPy array, floats as float64; anything else as it is.

    The input of the framework-free code that runs once on the host (graph positions).
    """
    if not torch.is_tensor(array):
        return array
    array = array.detach().cpu()
    return (array.double() if array.is_floating_point() else array).numpy()


def wide_dtype(device: torch.device) -> torch.dtype:
    """float64 where the device has it (CPU, CUDA); float32 on MPS."""
    return torch.float32 if device.type == "mps" else torch.float64


def result_dtype(positions: torch.Tensor) -> torch.dtype:
    """Float positions keep their dtype; integer positions give float32."""
    return positions.dtype if positions.is_floating_point() else torch.float32


class SeededDraws:
    """Random draws for a module with a ``seed``: the global RNG without one, otherwise one
    ``torch.Generator`` per device, seeded on first use (Keras has ``SeedGenerator``).

    The module sets ``seed`` and ``_generators = {}``.
    """

    seed: int | None
    _generators: dict

    def _generator(self, device: torch.device):
        """``None`` (the global RNG) without a seed; otherwise this device's generator."""
        if self.seed is None:
            return None
        key = str(device)
        if key not in self._generators:
            generator = torch.Generator(device=device)
            generator.manual_seed(self.seed)
            self._generators[key] = generator
        return self._generators[key]

    def _uniform(self, shape, device) -> torch.Tensor:
        return torch.rand(shape, generator=self._generator(device), device=device)


class AdditiveEncoding(nn.Module):
    """Base of the modules that add an encoding to token embeddings: ``x + P``.

    It owns :meth:`forward`: ``x`` must be ``(..., seq, dim)``, an empty
    sequence is returned as it is, ``positions`` default to ``0 .. seq-1`` and
    must give one position per token, and ``P`` is cast to ``x``'s dtype and
    added. A subclass sets ``dim`` and writes ``encoding(positions)``, which
    takes an int ``n`` (meaning ``0 .. n-1``) or a tensor of positions and
    returns ``P`` (float32 unless float positions ask for another dtype).
    Subclasses whose call takes other inputs (timestamps, paths) write their
    own ``forward`` from the same helpers.
    """

    dim: int

    def __init__(self):
        super().__init__()
        # Where arange(n) goes: moves with module.to(device), never saved.
        self.register_buffer("_anchor", torch.empty(0), persistent=False)

    def encoding(self, positions) -> torch.Tensor:  # pragma: no cover - abstract
        raise NotImplementedError

    def forward(self, x: torch.Tensor, positions=None) -> torch.Tensor:
        positions = self._positions_for(x, positions)
        if positions is None:
            return x
        return self._add(x, self._encode(positions))

    # The helpers below have the same names and arguments in posenc/keras/_util.py.

    def _what(self) -> str:
        return type(self).__name__

    def _encode(self, positions) -> torch.Tensor:
        """``P`` for :meth:`forward`: :meth:`encoding`, unless a subclass has a cheaper read."""
        return self.encoding(positions)

    def _arange(self, n: int) -> torch.Tensor:
        """``0 .. n-1`` on the module's device."""
        return torch.arange(n, device=self._anchor.device)

    def _positions_for(self, x, positions):
        """Check ``x`` and ``positions``; ``None`` for an empty sequence without positions.

        Without positions, the sequence length (an int: a table checks it
        against ``max_len`` with no data-dependent check); otherwise the
        positions as a tensor of one position per token.
        """
        check_embeddings(x.shape, self.dim, what=self._what())
        if positions is None:
            return None if x.shape[-2] == 0 else int(x.shape[-2])
        positions = as_positions(positions, what=self._what())
        self._per_token("positions", positions, x)
        return positions

    def _per_token(self, name: str, t, x, *, each: str = "position", trailing: str = "") -> None:
        check_per_token(name, t.shape, x.shape, what=self._what(), each=each, trailing=trailing)

    def _positions(self, positions) -> torch.Tensor:
        """Positions as a tensor on the module's device (an int n: ``0 .. n-1``)."""
        if isinstance(positions, numbers.Integral) and not isinstance(positions, bool):
            return self._arange(check_positive_int("positions", positions, what=self._what(),
                                                   fix="pass a sequence length of at least 1"))
        return as_positions(positions, what=self._what()).to(self._anchor.device)

    def _table_positions(self, positions, max_len: int, *, fix: str) -> torch.Tensor:
        """Integer positions for a table of ``max_len`` rows, on the module's device.

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

    def _add(self, x: torch.Tensor, pe: torch.Tensor) -> torch.Tensor:
        """``x + P``, with ``P`` cast to ``x``'s device and dtype last."""
        return x + pe.to(device=x.device, dtype=x.dtype)
