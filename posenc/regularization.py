"""Regularised encodings (framework-free): what both faces share.

Dropout, channel dropout and Gaussian noise on an encoding ``P`` have no
formula beyond the framework's own random draws. What both faces share is the
order :class:`RegularizedEncoding` applies its parts in, the seeds it gives
them, and the shape of a channel-dropout mask; the argument rules (a rate in
``[0, 1)``, a standard deviation ``>= 0``, a seed) live in
:mod:`posenc._checks` with all the others.
"""

from __future__ import annotations

__all__ = ["PARTS", "part_seeds", "channel_mask_shape"]

#: The parts of ``RegularizedEncoding`` in the order they are applied to ``P``.
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
