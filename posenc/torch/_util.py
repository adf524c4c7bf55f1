"""Small helpers for the PyTorch face."""

from __future__ import annotations

import numbers

import torch

from posenc._checks import check_numeric_positions, check_positive_int


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
