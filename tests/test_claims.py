"""posenc.experiments.claims: the papers' claims, the study that tests them, the verdicts."""

from __future__ import annotations

import math
import re
from pathlib import Path

import pytest

from posenc.experiments import claims
from posenc.experiments.claims import CLAIMS, STUDY_SEEDS, TASKS, decide, load_study

ROOT = Path(__file__).resolve().parents[1]


def test_claims_are_named_once_and_cite_the_bibliography():
    keys = [c.key for c in CLAIMS]
    assert len(keys) == len(set(keys))
    bib = set(re.findall(r"@\w+\{([^,]+),", (ROOT / "book" / "references.bib").read_text()))
    for c in CLAIMS:
        assert c.source is None or c.source in bib, c.key
        assert c.measure in ("lm-change", "lm-relative", "lm-paired", "lg-beyond"), c.key
        assert (c.expected == "none") == (c.margin is not None), c.key
    assert claims.claim("press-alibi-2L").paper_effect == pytest.approx(
        math.log(18.73) / math.log(19.73) - 1)
    with pytest.raises(ValueError, match="key must name a claim"):
        claims.claim("press-alibi-3L")


def _lm_run(losses, L=8):
    """A combined lm run: ``losses[scheme] = (loss at L, loss at 2L, loss at 4L)`` plus a
    per-seed wobble, so that intervals are finite."""
    rows = []
    for seed in STUDY_SEEDS:
        wobble = 0.001 * (seed - 2)
        for scheme, values in losses.items():
            for factor, value in zip((1, 2, 4), values):
                rows.append({"scheme": scheme, "seed": seed, "eval_len": factor * L,
                             "loss": value + wobble * (1 + factor)})
    return {"meta": {"settings": {"train_len": L}, "runs": []}, "rows": rows}


def _task_run(task, exact_beyond, learned):
    rows, training = [], []
    for seed in STUDY_SEEDS:
        for scheme, value in exact_beyond.items():
            ok = learned.get(scheme, True)
            training.append({"task": task, "scheme": scheme, "seed": seed, "learned": ok})
            for n, inside in ((1, True), (2, False)):
                rows.append({"task": task, "scheme": scheme, "seed": seed, "length": n,
                             "in_distribution": inside,
                             "exact_match": 1.0 if inside else value + 0.01 * seed})
    return {"meta": {"runs": [{"training": training}]}, "rows": rows}


def _study():
    lm = _lm_run({"sinusoidal": (1.0, 1.5, 2.0), "learned": (0.9, 1.4, 1.9),
                  "rope": (0.8, 0.85, 1.2), "t5": (0.85, 0.84, 0.9), "t5-clamped": (0.85, 0.84, 0.8),
                  "alibi": (0.85, 0.83, 0.82), "none": (0.95, 0.96, 0.97)})
    matched = _lm_run({"sinusoidal": (0.9, 1.4, 1.9), "learned": (0.8, 1.3, 1.8)})
    table = _lm_run({"learned": (0.9, 1.3, 1.8)})
    tasks = {t: _task_run(t, {"none": 0.5, "rope": 0.1, "sinusoidal": 0.0, "t5": 0.4,
                              "alibi": 0.3}, {"t5": t != "sort"}) for t in TASKS}
    return {"lm": lm, "matched": matched, "matched-table": table, "tasks": tasks}


def test_each_claim_is_decided_by_the_rule():
    study = _study()
    got = {c.key: decide(c, study) for c in CLAIMS}
    assert got["press-sinusoidal-2L"].label == "agree"                 # +50 %, as Press
    assert got["press-sinusoidal-2L"].interval.mean == pytest.approx(0.5, abs=0.01)
    assert got["press-t5-2L"].word == "agree"                          # 0.85 -> 0.84
    assert got["press-t5-4L"].word == "agree"                          # 0.85 -> 0.90, worse
    assert got["press-alibi-4L"].word == "agree"
    assert got["t5-clamp-4L"].word == "agree"                          # 0.9 -> 0.8
    assert got["t5-clamp-4L"].interval.mean == pytest.approx(0.8 / 0.9 - 1, abs=1e-3)
    assert got["haviv-nope-alibi"].word == "agree"
    assert got["vaswani-equal"].word == "disagree"                     # 11 % apart
    assert got["vaswani-equal-matched"].label == "agree"    # the table run's learned: equal
    assert got["kazemnejad-none-rope-copy"].word == "agree"
    assert got["kazemnejad-none-rope-copy"].interval.mean == pytest.approx(0.4)
    assert got["kazemnejad-t5-rope-sort"].label == "inconclusive (not learned)"
    assert got["kazemnejad-t5-rope-copy"].word == "agree"
    assert got["kazemnejad-t5-alibi-copy"].word == "agree"                 # 0.4 against 0.3
    ratio = claims.size_ratio(claims.claim("press-sinusoidal-2L"), got["press-sinusoidal-2L"])
    assert ratio == pytest.approx(got["press-sinusoidal-2L"].interval.mean
                                  / claims.claim("press-sinusoidal-2L").paper_effect)
    assert claims.size_ratio(claims.claim("t5-clamp-4L"), got["t5-clamp-4L"]) is None
    row = claims.table_rows(["press-sinusoidal-2L"], got)[0]
    assert len(row) == len(claims.TABLE_HEADER) and row[4] == "agree"


def test_verdicts_leave_out_claims_whose_runs_are_absent():
    study = _study()
    del study["matched-table"]
    got = claims.verdicts(study)
    assert "vaswani-equal-matched" not in got and "vaswani-equal" in got


def test_the_committed_study_holds_five_clean_seeds_with_their_hashes():
    study = load_study()            # refuses dirty commits, partial runs, mixed settings
    runs = [study["lm"], study["ablation"], *study["tasks"].values()]
    runs += [study[k] for k in ("matched", "matched-table", "keras")]
    for run in runs:
        assert run["meta"]["seeds"] == list(STUDY_SEEDS)
        digest = run["meta"]["data_sha256"]
        hashes = list(digest.values()) if isinstance(digest, dict) else [digest]
        assert all(isinstance(h, str) and len(h) == 64 for h in hashes)
        assert all(not c.endswith("+dirty") for c in run["meta"]["commits"])
    assert isinstance(study["lm"]["meta"]["data_sha256"], str)          # one corpus
    assert sorted(study["tasks"]["copy"]["meta"]["data_sha256"]) == list(STUDY_SEEDS)
    got = claims.verdicts(study)
    assert set(got) == {c.key for c in CLAIMS}
    assert all(v.word in ("agree", "disagree", "inconclusive") for v in got.values())
    assert all(v.interval.n == len(STUDY_SEEDS) for v in got.values())


def test_docstring_examples():
    import doctest

    result = doctest.testmod(claims, optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE)
    assert result.attempted > 0 and result.failed == 0
