"""The lab's statistics over seeds, and the rule that turns them into a verdict (NumPy only).

A result of the lab is a number per seed (a loss, an accuracy). Over ``n`` seeds it is
reported as a mean with a 95 % Student-t interval (:func:`mean_interval`); two schemes are
compared by their *paired* differences, seed by seed, on the same batches and validation
text (:func:`paired_difference`), which removes what the seeds share.

Units. A loss is in nats per character; :func:`bits_per_char` divides it by ``ln 2``. A
perplexity ratio is not unit-free (per word it is the per-character ratio raised to the
characters per word), but the relative change of log-perplexity,
:func:`relative_log_perplexity_change`, ``loss_long / loss_short - 1``, is: compare it, and the
direction of an effect, with a paper, never a perplexity ratio.

The verdict rule (:func:`verdict`), stated once:

* ``"inconclusive"`` (reason ``"not learned"``) when a scheme compared did not reach its
  in-distribution criterion: the comparison does not test the claim;
* ``"inconclusive"`` (reason ``"interval includes zero"``) when the interval of the effect
  contains zero;
* otherwise ``"agree"`` when the effect has the sign the paper reports, ``"disagree"`` when
  it has the other.

A paper that reports *no* difference (``expected="none"``) is judged against a ``margin``, the
largest effect its statement allows: ``"agree"`` when the whole interval lies within it,
``"disagree"`` when the interval lies wholly outside it, ``"inconclusive"`` otherwise.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from posenc._checks import _error, check_float

__all__ = ["Interval", "Verdict", "VERDICTS", "t_quantile", "mean_interval",
           "paired_difference", "bits_per_char", "relative_log_perplexity_change",
           "verdict"]

#: The verdict words :func:`verdict` returns.
VERDICTS = ("agree", "disagree", "inconclusive")


# --------------------------------------------------------------------------- Student's t


def _beta_fraction(a: float, b: float, x: float) -> float:
    """The continued fraction of the regularised incomplete beta function (modified Lentz)."""
    tiny, c, d = 1e-300, 1.0, 1.0 - (a + b) * x / (a + 1.0)
    d = 1.0 / (d if abs(d) > tiny else tiny)
    result = d
    for m in range(1, 300):
        for numerator in (m * (b - m) * x / ((a + 2 * m - 1) * (a + 2 * m)),
                          -(a + m) * (a + b + m) * x / ((a + 2 * m) * (a + 2 * m + 1))):
            d = 1.0 + numerator * d
            d = 1.0 / (d if abs(d) > tiny else tiny)
            c = 1.0 + numerator / c
            c = c if abs(c) > tiny else tiny
            result *= c * d
        if abs(c * d - 1.0) < 1e-15:
            break
    return result


def _incomplete_beta(a: float, b: float, x: float) -> float:
    """The regularised incomplete beta function ``I_x(a, b)``."""
    if x <= 0.0:
        return 0.0
    if x >= 1.0:
        return 1.0
    log_front = (math.lgamma(a + b) - math.lgamma(a) - math.lgamma(b)
                 + a * math.log(x) + b * math.log1p(-x))
    if x < (a + 1.0) / (a + b + 2.0):
        return math.exp(log_front) * _beta_fraction(a, b, x) / a
    return 1.0 - math.exp(log_front) * _beta_fraction(b, a, 1.0 - x) / b


def _t_cdf(t: float, df: float) -> float:
    tail = 0.5 * _incomplete_beta(df / 2.0, 0.5, df / (df + t * t))
    return 1.0 - tail if t > 0 else tail


def t_quantile(p: float, df: float) -> float:
    """The ``p`` quantile of Student's t distribution with ``df`` degrees of freedom.

    Computed from the t distribution's CDF (the regularised incomplete beta function) by
    bisection, to about ``1e-12``; ``df=inf`` gives the normal quantile.

    Args:
        p: a probability strictly between 0 and 1 (``0.975`` for a two-sided 95 % interval).
        df: degrees of freedom, above 0 (``n - 1`` for a mean of ``n`` values), or ``inf``.

    Returns:
        The quantile, a float.

    Example:
        >>> round(t_quantile(0.975, 4), 4), round(t_quantile(0.975, 1), 4)
        (2.7764, 12.7062)
    """
    p = check_float("p", p, above=0.0, below=1.0, what="t_quantile")
    if not (isinstance(df, (int, float)) and not isinstance(df, bool) and df > 0):
        raise _error("t_quantile", f"df must be a number above 0, got df={df!r}",
                     "pass n - 1 for a mean of n values (at least 2)")
    if p < 0.5:
        return -t_quantile(1.0 - p, df)
    if p == 0.5:
        return 0.0
    if math.isinf(df):
        cdf = lambda t: 0.5 * (1.0 + math.erf(t / math.sqrt(2.0)))  # noqa: E731
    else:
        cdf = lambda t: _t_cdf(t, float(df))  # noqa: E731
    low, high = 0.0, 1.0
    while cdf(high) < p:
        low, high = high, 2.0 * high
    for _ in range(200):
        mid = 0.5 * (low + high)
        if cdf(mid) < p:
            low = mid
        else:
            high = mid
        if high - low < 1e-13 * max(1.0, high):
            break
    return 0.5 * (low + high)


# --------------------------------------------------------------------------- intervals


@dataclass(frozen=True)
class Interval:
    """A mean and its confidence interval over ``n`` values (seeds).

    Attributes:
        mean: the mean.
        low, high: the interval's ends (``-inf``/``inf`` with fewer than two values).
        n: the number of values.
        level: the confidence level (``0.95``).
        sd: the sample standard deviation (``nan`` with fewer than two values).
    """

    mean: float
    low: float
    high: float
    n: int
    level: float = 0.95
    sd: float = float("nan")

    @property
    def half_width(self) -> float:
        """Half the interval's width (``inf`` with fewer than two values)."""
        return (self.high - self.low) / 2.0

    def includes(self, value: float = 0.0) -> bool:
        """Whether ``value`` lies in the closed interval."""
        return self.low <= value <= self.high

    def as_dict(self) -> dict:
        """The fields as a plain dict (for JSON)."""
        return {"mean": self.mean, "low": self.low, "high": self.high, "n": self.n,
                "level": self.level, "sd": self.sd, "half_width": self.half_width}

    def format(self, digits: int = 2, scale: float = 1.0, unit: str = "") -> str:
        """``"mean [low, high]"`` with ``digits`` decimals, every number times ``scale``
        (``100`` and ``unit="%"`` for percentages).

        Example:
            >>> Interval(0.5, 0.25, 0.75, 5).format(1, 100, "%")
            '50.0% [25.0%, 75.0%]'
        """
        def text(v):
            return f"{v * scale:.{digits}f}{unit}"

        return f"{text(self.mean)} [{text(self.low)}, {text(self.high)}]"

    def __str__(self) -> str:
        return self.format()


def _values(name: str, values, what: str) -> np.ndarray:
    array = np.asarray(values, dtype=np.float64).reshape(-1)
    if array.size == 0:
        raise _error(what, f"{name} must hold at least one value, got {name}={values!r}",
                     "pass one value per seed")
    if not np.all(np.isfinite(array)):
        raise _error(what, f"{name} must be finite, got {name}={values!r}",
                     "drop or rerun the seeds that diverged")
    return array


def mean_interval(values, level: float = 0.95) -> Interval:
    """The mean of ``values`` (one per seed) and its two-sided Student-t interval.

    ``mean +- t_quantile((1 + level) / 2, n - 1) * sd / sqrt(n)``, ``sd`` the sample standard
    deviation (``ddof=1``). With one value the interval is ``(-inf, inf)``: one seed says
    nothing about the spread.

    Example:
        >>> mean_interval([1.0, 2.0, 3.0]).format(3)
        '2.000 [-0.484, 4.484]'
    """
    level = check_float("level", level, above=0.0, below=1.0, what="mean_interval")
    array = _values("values", values, "mean_interval")
    n, mean = array.size, float(array.mean())
    if n < 2:
        return Interval(mean, -math.inf, math.inf, n, level)
    sd = float(array.std(ddof=1))
    half = t_quantile((1.0 + level) / 2.0, n - 1) * sd / math.sqrt(n)
    return Interval(mean, mean - half, mean + half, n, level, sd)


def paired_difference(a, b, level: float = 0.95) -> Interval:
    """The mean of ``a - b`` over the same seeds, with its Student-t interval.

    Args:
        a, b: one value per seed each: two dicts ``{seed: value}`` with the same seeds, or two
            sequences in the same seed order.
        level: the confidence level. Default ``0.95``.

    Returns:
        The :class:`Interval` of the per-seed differences.

    Example:
        >>> paired_difference({0: 3.0, 1: 5.0}, {1: 4.0, 0: 2.0}).mean
        1.0
    """
    if isinstance(a, dict) or isinstance(b, dict):
        if not (isinstance(a, dict) and isinstance(b, dict)) or set(a) != set(b):
            raise _error("paired_difference", f"a and b must have the same seeds, got "
                         f"{sorted(a) if isinstance(a, dict) else a!r} and "
                         f"{sorted(b) if isinstance(b, dict) else b!r}",
                         "pair only the seeds both schemes ran")
        seeds = sorted(a)
        a, b = [a[s] for s in seeds], [b[s] for s in seeds]
    a = _values("a", a, "paired_difference")
    b = _values("b", b, "paired_difference")
    if a.shape != b.shape:
        raise _error("paired_difference", f"a and b must have one value per seed each, got "
                     f"{a.size} and {b.size} values", "pair only the seeds both schemes ran")
    return mean_interval(a - b, level)


# --------------------------------------------------------------------------- units


def bits_per_char(loss):
    """A loss in nats per character as bits per character: ``loss / ln 2``.

    Example:
        >>> round(bits_per_char(math.log(4)), 12)
        2.0
    """
    bits = np.asarray(loss, dtype=np.float64) / math.log(2.0)
    return float(bits) if bits.ndim == 0 else bits


def relative_log_perplexity_change(loss_long, loss_short):
    """``ln PPL(long) / ln PPL(short) - 1 = loss_long / loss_short - 1`` (unit-free).

    Positive: the longer windows are worse. Take it per seed, then the interval over seeds.

    Example:
        >>> relative_log_perplexity_change(1.5, 1.0)
        0.5
    """
    long, short = np.asarray(loss_long, dtype=np.float64), np.asarray(loss_short,
                                                                      dtype=np.float64)
    if np.any(short <= 0):
        raise _error("relative_log_perplexity_change", f"loss_short must be above 0, got "
                     f"loss_short={loss_short!r}", "pass losses in nats, not accuracies")
    change = long / short - 1.0
    return float(change) if change.ndim == 0 else change


# --------------------------------------------------------------------------- verdicts


@dataclass(frozen=True)
class Verdict:
    """What :func:`verdict` decided, and on what.

    Attributes:
        word: ``"agree"``, ``"disagree"`` or ``"inconclusive"`` (:data:`VERDICTS`).
        interval: the :class:`Interval` of the effect it was decided on.
        reason: ``""``, ``"interval includes zero"``, ``"not learned"`` or ``"interval
            overlaps the margin"``.
        expected: the sign the paper reports, ``+1`` or ``-1``; ``0`` for no difference.
    """

    word: str
    interval: Interval
    reason: str = ""
    expected: int = 1

    @property
    def label(self) -> str:
        """The word, with the reason when there is one (``"inconclusive (not learned)"``)."""
        return f"{self.word} ({self.reason})" if self.reason else self.word

    def as_dict(self) -> dict:
        return {"word": self.word, "reason": self.reason, "expected": self.expected,
                **{f"interval_{k}": v for k, v in self.interval.as_dict().items()}}


def verdict(interval: Interval, expected: str | int, *, learned=True,
            margin: float | None = None) -> Verdict:
    """The lab's verdict on a paper's claim, by the rule of this module.

    Args:
        interval: the :class:`Interval` of the effect (e.g. the paired difference
            ``scheme - reference`` of a loss, or a relative change of log-perplexity).
        expected: the direction the paper reports for that effect: ``"positive"`` (or ``+1``,
            ``">"``) or ``"negative"`` (``-1``, ``"<"``); or ``"none"`` (``0``, ``"="``) when
            the paper reports no difference, judged against ``margin``.
        learned: ``True``, ``False``, or an iterable of booleans (every scheme and seed
            compared): whether each reached its in-distribution criterion.
        margin: with ``expected="none"`` (and only then), the largest effect the paper's
            "no difference" allows (for a published "equal to the printed digits", the effect
            those digits' rounding leaves room for). ``"agree"`` when the whole interval lies
            within ``[-margin, margin]``, ``"disagree"`` when it lies wholly outside, else
            ``"inconclusive"`` (reason ``"interval overlaps the margin"``).

    Returns:
        A :class:`Verdict`.

    Example:
        >>> verdict(Interval(0.3, 0.1, 0.5, 5), "positive").word
        'agree'
        >>> verdict(Interval(0.3, -0.1, 0.7, 5), "positive").label
        'inconclusive (interval includes zero)'
    """
    if not isinstance(interval, Interval):
        raise _error("verdict", f"interval must be an Interval, got interval={interval!r}",
                     "build it with mean_interval or paired_difference")
    signs = {"positive": 1, "+": 1, ">": 1, 1: 1, "negative": -1, "-": -1, "<": -1, -1: -1,
             "none": 0, "=": 0, 0: 0}
    if isinstance(expected, bool) or expected not in signs:
        raise _error("verdict", f"expected must be one of 'positive', 'negative', 'none', 1, "
                     f"-1, 0, got expected={expected!r}",
                     "pass the sign of the effect the paper reports")
    sign = signs[expected]
    if (sign == 0) != (margin is not None):
        raise _error("verdict", f"margin goes with expected='none' and only with it, got "
                     f"expected={expected!r}, margin={margin!r}",
                     "pass margin=... for a claim of no difference, and no margin otherwise")
    if sign == 0:
        margin = check_float("margin", margin, above=0.0, what="verdict")
    all_learned = bool(learned) if isinstance(learned, bool) else all(bool(v) for v in learned)
    if not all_learned:
        return Verdict("inconclusive", interval, "not learned", sign)
    if sign == 0:
        if -margin <= interval.low and interval.high <= margin:
            return Verdict("agree", interval, "", 0)
        if interval.low > margin or interval.high < -margin:
            return Verdict("disagree", interval, "", 0)
        return Verdict("inconclusive", interval, "interval overlaps the margin", 0)
    if interval.includes(0.0):
        return Verdict("inconclusive", interval, "interval includes zero", sign)
    return Verdict("agree" if sign * interval.mean > 0 else "disagree", interval, "", sign)

