"""posenc.experiments.stats: t quantiles, intervals over seeds, paired differences, units and
the verdict rule, on cases that can be checked by hand."""

from __future__ import annotations

import math

import numpy as np
import pytest

from posenc.experiments import stats
from posenc.experiments.stats import (Interval, bits_per_char, mean_interval, paired_difference,
                                      relative_log_perplexity_change, t_quantile, verdict)

# Student's t quantiles from the standard tables (Abramowitz & Stegun 26.10, 6+ digits).
T_TABLE = [(0.975, 1, 12.706205), (0.975, 2, 4.302653), (0.975, 3, 3.182446),
           (0.975, 4, 2.776445), (0.975, 5, 2.570582), (0.975, 9, 2.262157),
           (0.975, 29, 2.045230), (0.975, 120, 1.979930), (0.995, 4, 4.604095),
           (0.95, 10, 1.812461), (0.975, math.inf, 1.959964)]


@pytest.mark.parametrize("p, df, expect", T_TABLE)
def test_t_quantile_matches_the_tables(p, df, expect):
    assert t_quantile(p, df) == pytest.approx(expect, abs=2e-6)
    assert t_quantile(1 - p, df) == pytest.approx(-expect, abs=2e-6)


def test_t_quantile_of_one_degree_is_the_cauchy_quantile():
    # df = 1 is the Cauchy distribution: the p quantile is tan(pi (p - 1/2)), exactly.
    for p in (0.6, 0.9, 0.975, 0.999):
        assert t_quantile(p, 1) == pytest.approx(math.tan(math.pi * (p - 0.5)), rel=1e-9)
    assert t_quantile(0.5, 3) == 0.0


@pytest.mark.parametrize("p, df", [(0.0, 3), (1.0, 3), (0.5, 0), (0.9, -1), (0.9, "3")])
def test_t_quantile_refuses_bad_arguments(p, df):
    with pytest.raises(ValueError, match="t_quantile"):
        t_quantile(p, df)


def test_mean_interval_by_hand():
    # values 1, 2, 3: mean 2, sd 1, n 3, half-width t(0.975, 2) / sqrt(3) = 2.48414
    got = mean_interval([1.0, 2.0, 3.0])
    assert got.mean == 2.0 and got.sd == pytest.approx(1.0) and got.n == 3
    assert got.half_width == pytest.approx(4.302653 / math.sqrt(3), abs=1e-5)
    assert got.low == pytest.approx(2 - 2.484138, abs=1e-5)
    assert got.high == pytest.approx(2 + 2.484138, abs=1e-5)
    # two seeds: the half-width is t(0.975, 1) * |a - b| / 2 = 6.35 times the range
    two = mean_interval([4.0, 6.0])
    assert two.half_width == pytest.approx(12.706205, abs=1e-5)
    # no spread: a point
    assert mean_interval([5.0] * 5).half_width == 0.0


def test_mean_interval_of_one_seed_is_unbounded():
    one = mean_interval([3.0])
    assert one.mean == 3.0 and one.low == -math.inf and one.high == math.inf
    assert one.includes(0.0)


def test_mean_interval_refuses_empty_and_nan():
    with pytest.raises(ValueError, match="values must hold at least one value"):
        mean_interval([])
    with pytest.raises(ValueError, match="values must be finite"):
        mean_interval([1.0, float("nan")])


def test_paired_difference_pairs_by_seed():
    # per-seed differences 1, 2, 3 whatever the order the dicts were written in
    a = {0: 11.0, 1: 22.0, 2: 33.0}
    b = {2: 30.0, 0: 10.0, 1: 20.0}
    got = paired_difference(a, b)
    assert got.mean == pytest.approx(2.0) and got.sd == pytest.approx(1.0)
    # the pairing removes the seed effect the unpaired spread keeps
    assert got.half_width < mean_interval(list(a.values())).half_width
    assert paired_difference([11.0, 22.0, 33.0], [10.0, 20.0, 30.0]) == got


@pytest.mark.parametrize("a, b", [({0: 1.0, 1: 2.0}, {0: 1.0, 2: 2.0}),
                                  ({0: 1.0}, [1.0]), ([1.0, 2.0], [1.0])])
def test_paired_difference_needs_the_same_seeds(a, b):
    with pytest.raises(ValueError, match="paired_difference: a and b must"):
        paired_difference(a, b)


def test_units():
    assert bits_per_char(math.log(2.0)) == pytest.approx(1.0)
    assert bits_per_char(np.array([0.0, math.log(8.0)])).tolist() == pytest.approx([0.0, 3.0])
    # ln PPL is the loss: PPL 4 -> 8 is ln 8 / ln 4 - 1 = 0.5, whatever the base of the logs
    assert relative_log_perplexity_change(math.log(8.0), math.log(4.0)) == pytest.approx(0.5)
    assert relative_log_perplexity_change(np.array([2.0, 1.0]),
                                          np.array([1.0, 2.0])).tolist() == [1.0, -0.5]
    with pytest.raises(ValueError, match="loss_short must be above 0"):
        relative_log_perplexity_change(1.0, 0.0)


def test_each_verdict_comes_out():
    above = mean_interval([0.2, 0.3, 0.4])          # excludes zero, positive
    below = mean_interval([-0.2, -0.3, -0.4])       # excludes zero, negative
    across = mean_interval([-0.5, 0.1, 0.7])        # includes zero
    assert verdict(above, "positive").word == "agree"
    assert verdict(below, "negative").word == "agree"
    assert verdict(above, "negative").word == "disagree"
    assert verdict(below, +1).word == "disagree"
    got = verdict(across, "positive")
    assert (got.word, got.reason) == ("inconclusive", "interval includes zero")
    assert got.interval == across
    learned = verdict(above, "positive", learned=[True, False, True])
    assert (learned.word, learned.reason) == ("inconclusive", "not learned")
    assert learned.label == "inconclusive (not learned)"
    assert verdict(above, "positive", learned=[True, True]).label == "agree"
    assert set(stats.VERDICTS) == {"agree", "disagree", "inconclusive"}


def test_a_bound_at_zero_is_inconclusive():
    assert verdict(Interval(1.0, 0.0, 2.0, 5), "positive").word == "inconclusive"


def test_a_claim_of_no_difference_is_judged_against_its_margin():
    inside = Interval(0.001, -0.002, 0.004, 5)
    outside = Interval(0.02, 0.011, 0.03, 5)
    straddle = Interval(0.008, 0.001, 0.015, 5)
    assert verdict(inside, "none", margin=0.005).label == "agree"
    assert verdict(Interval(-0.02, -0.03, -0.011, 5), "none", margin=0.01).word == "disagree"
    assert verdict(outside, 0, margin=0.01).word == "disagree"
    assert verdict(straddle, "=", margin=0.01).label == \
        "inconclusive (interval overlaps the margin)"
    assert verdict(inside, "none", margin=0.005, learned=[True, False]).reason == "not learned"
    with pytest.raises(ValueError, match="margin goes with expected='none'"):
        verdict(inside, "none")
    with pytest.raises(ValueError, match="margin goes with expected='none'"):
        verdict(inside, "positive", margin=0.1)
    with pytest.raises(ValueError, match="margin"):
        verdict(inside, "none", margin=-1.0)


def test_verdict_refuses_bad_arguments():
    with pytest.raises(ValueError, match="verdict: expected must be one of"):
        verdict(mean_interval([1.0, 2.0]), "up")
    with pytest.raises(ValueError, match="verdict: interval must be an Interval"):
        verdict((0.1, 0.2), "positive")


def test_interval_and_verdict_serialise():
    got = verdict(mean_interval([0.2, 0.3, 0.4]), "positive").as_dict()
    assert got["word"] == "agree" and got["interval_n"] == 3
    assert Interval(0.5, 0.25, 0.75, 5).format(1, 100, "%") == "50.0% [25.0%, 75.0%]"


