"""Continuous time (framework-free): the family's argument rule.

The encodings of timestamps (``ContinuousTimeEncoding``, ``Time2Vec``) are the
sinusoid of :mod:`posenc.sinusoidal` read at real-valued times, and learned
periodic features; what both faces share beyond the sinusoid is the rule for
the unit of time, here.
"""

from __future__ import annotations

from posenc._checks import check_float

__all__: list[str] = []


def check_time_scale(time_scale, *, what: str = "") -> float:
    """The unit of time, a finite number greater than 0."""
    return check_float("time_scale", time_scale, above=0.0,
                       meaning="timestamps are divided by it", what=what,
                       fix="use the typical gap between events, or 1.0 to use the timestamps "
                           "as they are")
