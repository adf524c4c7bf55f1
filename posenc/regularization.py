"""Regularised encodings (framework-free): the rules both faces share.

Dropout, channel dropout and Gaussian noise on an encoding ``P`` have no
formula beyond the framework's own random draws; what both faces share is the
argument rules (a rate in ``[0, 1)``, a standard deviation ``>= 0``, a seed),
the order :class:`RegularizedEncoding` applies its parts in, and the seeds it
gives them.
"""

from __future__ import annotations

from posenc._checks import check_number

#: The parts of ``RegularizedEncoding`` in the order they are applied to ``P``.
PARTS = ("noise", "dropout", "channel_dropout")


def part_seeds(seed):
    """The seeds of the three parts: ``seed``, ``seed + 1``, ``seed + 2`` (or ``None``)."""
    return tuple(None if seed is None else seed + i for i in range(len(PARTS)))


def check_rate(name: str, value, *, what: str) -> float:
    """A drop probability in ``[0, 1)``."""
    rate = check_number(name, value, what=what)
    if not 0.0 <= rate < 1.0:
        raise ValueError(
            f"{what}: {name} must be in [0, 1) (the probability of dropping an entry), "
            f"got {name}={value!r}; use a small value such as 0.1, or 0 to switch it off."
        )
    return rate


def check_std(name: str, value, *, what: str) -> float:
    """A noise standard deviation, ``>= 0``."""
    std = check_number(name, value, what=what)
    if std < 0.0:
        raise ValueError(
            f"{what}: {name} must be >= 0 (a standard deviation), got {name}={value!r}; "
            "use a small positive value such as 0.02, or 0 to switch the noise off."
        )
    return std


def check_float_encoding(what: str, dtype: str) -> None:
    """A regulariser scales and perturbs ``P``: an integer ``P`` would be truncated."""
    if "float" not in dtype:
        raise ValueError(
            f"{what}: the encoding must be a floating-point tensor, got dtype {dtype}; "
            "pass the encoding P itself (float32, bfloat16, ...), or cast it first."
        )
