"""Argument validation shared by both faces, so both raise the same messages.

Every error names the argument, the value it got, and how to fix it.
"""

from __future__ import annotations

import math
import numbers

_LAYOUTS = ("interleaved", "concat")


def check_positive_int(name: str, value, *, fix: str = "") -> int:
    """Return ``value`` as an int, or raise if it is not a positive integer."""
    import numbers

    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        raise ValueError(
            f"{name} must be a positive integer, got {name}={value!r}."
            + (f" {fix}" if fix else "")
        )
    value = int(value)
    if value <= 0:
        raise ValueError(
            f"{name} must be a positive integer, got {name}={value}."
            + (f" {fix}" if fix else "")
        )
    return value


def check_even_dim(dim, *, multiple: int = 2, what: str = "sinusoidal") -> int:
    """Check a feature dimension that must be a positive multiple of ``multiple``."""
    dim = check_positive_int("dim", dim)
    if dim % multiple:
        lower = dim - dim % multiple
        upper = lower + multiple
        hint = f"use dim={upper}" + (f" or dim={lower}" if lower > 0 else "")
        reason = (
            "sines and cosines come in pairs"
            if multiple == 2
            else f"each axis gets dim/2 channels of sine/cosine pairs, so dim must be a multiple of {multiple}"
        )
        raise ValueError(
            f"{what}: dim must be a multiple of {multiple} ({reason}), got dim={dim}; "
            f"{hint}, or project the encoding to the model width with a linear layer."
        )
    return dim


def check_base(base) -> float:
    """The wavelength base must be a finite number greater than 1."""
    try:
        value = float(base)
    except (TypeError, ValueError):
        raise ValueError(f"base must be a number greater than 1, got base={base!r}.") from None
    if not math.isfinite(value) or value <= 1.0:
        raise ValueError(
            f"base must be a finite number greater than 1, got base={base!r}; "
            "the usual value is 10000.0 (Vaswani et al.)."
        )
    return value


def check_layout(layout, allowed=_LAYOUTS) -> str:
    if layout not in allowed:
        raise ValueError(
            f"layout must be one of {', '.join(repr(a) for a in allowed)}, got layout={layout!r}."
        )
    return layout


def check_rank(name: str, shape, ranks, *, what: str = "") -> None:
    """Raise if ``len(shape)`` is not in ``ranks``."""
    ranks = (ranks,) if isinstance(ranks, int) else tuple(ranks)
    if len(shape) not in ranks:
        want = " or ".join(str(r) for r in ranks)
        raise ValueError(
            f"{what + ': ' if what else ''}{name} must have rank {want}, got shape {tuple(shape)} "
            f"(rank {len(shape)})."
        )


def check_embeddings(what: str, shape, dim: int) -> None:
    """Raise unless ``shape`` is ``(..., seq, dim)``; a ``None`` (symbolic) last axis passes."""
    shape = tuple(shape)
    if len(shape) < 2:
        raise ValueError(
            f"{what}: x must be (..., seq, dim) with dim={dim}, got x.shape={shape} "
            f"(rank {len(shape)}); add a sequence axis, e.g. x[None] for a single token."
        )
    if shape[-1] is not None and shape[-1] != dim:
        raise ValueError(
            f"{what}: x must be (..., seq, dim) with dim={dim}, got x.shape={shape}; "
            f"build the encoding with dim={shape[-1]} or project x to the model width first."
        )


def check_positions_shape(what: str, positions_shape, x_shape) -> None:
    """Positions for ``x`` of shape ``(..., seq, dim)``: ``(seq,)`` or ``(batch, seq)``.

    Any shape that broadcasts to ``x.shape[:-1]`` without changing it is
    accepted; unknown (``None``) sizes pass.
    """
    pos, lead = tuple(positions_shape), tuple(x_shape)[:-1]
    ok = 1 <= len(pos) <= len(lead) and all(
        p is None or q is None or p == q or (p == 1 and i > 0)
        for i, (p, q) in enumerate(zip(reversed(pos), reversed(lead)))
    )
    if not ok:
        raise ValueError(
            f"{what}: positions must have shape (seq,) or (batch, seq) matching x's "
            f"(..., seq, dim), got positions.shape={pos} for x.shape={tuple(x_shape)}; "
            "pass one position per token."
        )


def check_numeric_positions(dtype: str) -> None:
    """Positions are numbers: booleans are a mistake (a mask passed as positions)."""
    if dtype == "bool":
        raise ValueError(
            "positions must be integers or floats, got dtype bool; a boolean tensor is a "
            "mask, not positions: pass the positions themselves (e.g. an arange)."
        )


def check_number(name: str, value, *, what: str = "") -> float:
    """``value`` as a finite float; booleans and non-numbers are refused."""
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise ValueError(f"{what + ': ' if what else ''}{name} must be a number, got {name}={value!r}.")
    value = float(value)
    if not math.isfinite(value):
        raise ValueError(f"{what + ': ' if what else ''}{name} must be finite, got {name}={value!r}.")
    return value


def check_index_values(name: str, lowest: int, highest: int, limit: int, *, what: str,
                       fix: str) -> None:
    """Integer indices into a table of ``limit`` rows."""
    if lowest < 0 or highest >= limit:
        bad = lowest if lowest < 0 else highest
        raise ValueError(
            f"{what}: {name} must lie in 0 .. {limit - 1}, got {bad}; {fix}."
        )


def check_length(length: int, max_len: int, *, what: str,
                 fix: str = "build it with a larger max_len") -> None:
    """A sequence of ``length`` positions fits a table of ``max_len`` rows."""
    if length > max_len:
        raise ValueError(
            f"{what}: sequence length {length} exceeds the table's max_len={max_len}; {fix}."
        )


def integer_positions_error(name: str, dtype: str, *, what: str) -> ValueError:
    return ValueError(
        f"{what}: {name} index a table, so they must be integers, got dtype {dtype}; "
        "round them to integers, or use a sinusoidal encoding for fractional positions."
    )


def check_hw(name: str, hw, *, what: str) -> tuple[int, int]:
    """A ``(height, width)`` pair of positive integers."""
    ok = (isinstance(hw, (tuple, list)) and len(hw) == 2
          and all(isinstance(v, numbers.Integral) and not isinstance(v, bool) and v > 0
                  for v in hw))
    if not ok:
        raise ValueError(
            f"{what}: {name} must be a (height, width) pair of positive integers, "
            f"got {name}={hw!r}."
        )
    return int(hw[0]), int(hw[1])


def check_seed(seed, *, what: str):
    """``None`` or a non-negative integer."""
    if seed is None:
        return None
    if isinstance(seed, bool) or not isinstance(seed, numbers.Integral) or seed < 0:
        raise ValueError(
            f"{what}: seed must be None or a non-negative integer, got seed={seed!r}."
        )
    return int(seed)
