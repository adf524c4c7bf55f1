"""Regularised encodings (framework-free): what both faces share.

Dropout, channel dropout and Gaussian noise on an encoding ``P`` have no
formula beyond the framework's own random draws. What both faces share is the
order :class:`RegularizedEncoding` applies its parts in, the seeds it gives
them, and the shape of a channel-dropout mask; and the family's argument rules
(``check_*``: a standard deviation ``>= 0``, a regularisable input), which both
faces call so that they raise the same errors. A drop rate in ``[0, 1)`` is
:func:`posenc._checks.check_rate`, shared with attention dropout.
"""

from __future__ import annotations

from posenc._checks import _error, check_float, check_float_dtype, check_rate, check_seed

__all__ = ["PARTS", "part_seeds", "channel_mask_shape"]

#: The parts of ``RegularizedEncoding`` in the order they are applied to ``P``;
#: each face's ``RegularizedEncoding`` holds them under these attribute names
#: and applies them in this order.
PARTS = ("noise", "dropout", "channel_dropout")


def part_seeds(seed: int | None) -> tuple:
    """The seeds of the parts, in the order of :data:`PARTS`: ``seed``, ``seed + 1``, ...

    Example:
        >>> part_seeds(7)
        (7, 8, 9)
        >>> part_seeds(None)
        (None, None, None)
    """
    return tuple(None if seed is None else seed + i for i in range(len(PARTS)))


def channel_mask_shape(shape) -> tuple:
    """One channel-dropout mask per example, shared by every position: ``(..., 1, dim)``.

    Unknown sizes (``None``) stay unknown.

    Example:
        >>> channel_mask_shape((2, 5, 8))
        (2, 1, 8)
    """
    shape = tuple(shape)
    return (*shape[:-2], 1, shape[-1])


# ---------------------------------------------------------------------------
# The family's argument rules.


def check_std(name: str, value, *, what: str = "") -> float:
    """A noise standard deviation, ``>= 0``."""
    return check_float(name, value, at_least=0.0, meaning="a standard deviation", what=what,
                       fix="use a small positive value such as 0.02, or 0 to switch the "
                           "noise off")


def check_regularized(dropout, channel_dropout, noise_std, seed, *,
                      what: str = "") -> tuple:
    """``RegularizedEncoding``'s two rates, its noise and its seed, in that order."""
    return (check_rate("dropout", dropout, what=what),
            check_rate("channel_dropout", channel_dropout, what=what),
            check_std("noise_std", noise_std, what=what),
            check_seed(seed, what=what))


def check_encoding(shape, dtype: str, *, got: str = "", what: str = "") -> None:
    """A regulariser's input: a floating-point tensor ``P`` of shape ``(..., seq, dim)``.

    ``shape`` is ``None`` when the input is not a tensor at all (``got`` names
    its type).
    """
    if shape is None:
        raise _error(what, f"the encoding must be a tensor P of shape (..., seq, dim), got {got}",
                     "pass the output of an encoding(...) method")
    if len(shape) < 2:
        raise _error(what, f"the encoding must be (..., seq, dim), got shape {tuple(shape)}",
                     "add a sequence axis first")
    check_float_dtype("the encoding", dtype, what=what,
                      fix="pass the encoding P itself (float32, bfloat16, ...), or cast it first")


def check_wrappable(ok: bool, got: str, *, kind: str, what: str = "") -> None:
    """``RegularizedEncoding`` wraps an absolute encoding: one with an ``encoding`` method."""
    if not ok:
        raise _error(what, f"encoding must be {kind} with an encoding(positions) method (e.g. "
                           f"SinusoidalEncoding), got {got}",
                     "relative schemes (RoPE, biases) have no P to add and cannot be wrapped")
