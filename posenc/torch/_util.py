"""Small helpers for the PyTorch face."""

from __future__ import annotations

import numbers

import torch

from posenc._checks import (
    check_index_values,
    check_length,
    check_numeric_positions,
    check_positive_int,
    integer_positions_error,
)


def as_positions(positions, *, device=None, name: str = "positions") -> torch.Tensor:
    """An ``int`` n becomes ``arange(n)``; anything else becomes a tensor."""
    if isinstance(positions, numbers.Integral) and not isinstance(positions, bool):
        n = check_positive_int(name, positions, fix="Pass a sequence length of at least 1.")
        return torch.arange(n, device=device)
    if not torch.is_tensor(positions):
        positions = torch.as_tensor(positions, device=device)
    check_numeric_positions(str(positions.dtype).replace("torch.", ""))
    return positions


def wide_dtype(device: torch.device) -> torch.dtype:
    """float64 where the device has it (CPU, CUDA); float32 on MPS."""
    return torch.float32 if device.type == "mps" else torch.float64


def result_dtype(positions: torch.Tensor) -> torch.dtype:
    """Float positions keep their dtype; integer positions give float32."""
    return positions.dtype if positions.is_floating_point() else torch.float32


# Data-dependent checks (ranges of indices) read numbers back from the tensor, so they
# run on CPU tensors only: on an accelerator they would stop the host once per forward
# (and break a compiled graph). There an out-of-range index stops the gather with a
# device-side error instead.

is_compiling = getattr(torch.compiler, "is_compiling", lambda: False)


def can_inspect(t: torch.Tensor) -> bool:
    """Whether data-dependent checks may read ``t``: a non-empty CPU tensor, not compiling."""
    return t.numel() > 0 and t.device.type == "cpu" and not is_compiling()


def as_indices(t, name: str, what: str) -> torch.Tensor:
    """``t`` as an int64 tensor (so uint8 is never read as a mask), refusing other dtypes."""
    t = t if torch.is_tensor(t) else torch.as_tensor(t)
    if t.is_floating_point() or t.is_complex() or t.dtype == torch.bool:
        raise integer_positions_error(name, str(t.dtype).replace("torch.", ""), what=what)
    return t.to(torch.long)


def check_indices(t: torch.Tensor, name: str, limit: int, *, what: str, fix: str) -> None:
    if can_inspect(t):
        lo, hi = torch.aminmax(t)
        check_index_values(name, int(lo), int(hi), limit, what=what, fix=fix)


def table_positions(positions, max_len: int, what: str, device) -> torch.Tensor:
    """Integer positions (int64, on ``device``) for a table of ``max_len`` rows, checked."""
    if isinstance(positions, numbers.Integral) and not isinstance(positions, bool):
        n = check_positive_int("positions", positions, fix="Pass a sequence length of at least 1.")
        check_length(n, max_len, what=what)
        return torch.arange(n, device=device)
    pos = as_indices(as_positions(positions), "positions", what)
    check_indices(pos, "positions", max_len, what=what,
                 fix="build it with a larger max_len, or restart positions per modality "
                     "with modality_positions(...)")
    return pos.to(device)
