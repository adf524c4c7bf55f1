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


def _lm_run(losses, L=8, factors=(1, 2, 4)):
    """A combined lm run: ``losses[scheme] = (loss at L, loss at 2L, loss at 4L)`` (or at
    ``factors`` times L) plus a per-seed wobble, so that intervals are finite."""
    rows = []
    for seed in STUDY_SEEDS:
        wobble = 0.001 * (seed - 2)
        for scheme, values in losses.items():
            for factor, value in zip(factors, values):
                rows.append({"scheme": scheme, "seed": seed, "eval_len": factor * L,
                             "loss": value + wobble * (1 + factor)})
    return {"meta": {"settings": {"train_len": L}, "runs": []}, "rows": rows}


def _task_run(task, exact_beyond, learned, settings=None):
    rows, training = [], []
    for seed in STUDY_SEEDS:
        for scheme, value in exact_beyond.items():
            ok = learned.get(scheme, True)
            training.append({"task": task, "scheme": scheme, "seed": seed, "learned": ok})
            for n, inside in ((1, True), (2, False)):
                rows.append({"task": task, "scheme": scheme, "seed": seed, "length": n,
                             "in_distribution": inside,
                             "exact_match": 1.0 if inside else value + 0.01 * seed})
    settings = {"train_len": 1, "test_len": 2} if settings is None else settings
    return {"meta": {"runs": [{"training": training}], "settings": settings}, "rows": rows}


def _study():
    lm = _lm_run({"sinusoidal": (1.0, 1.5, 2.0), "learned": (0.9, 1.4, 1.9),
                  "rope": (0.8, 0.85, 1.2), "t5": (0.85, 0.84, 0.9), "t5-clamped": (0.85, 0.84, 0.8),
                  "alibi": (0.85, 0.83, 0.82), "none": (0.95, 0.96, 0.97)})
    matched = _lm_run({"sinusoidal": (0.9, 1.4, 1.9), "learned": (0.8, 1.3, 1.8)})
    table = _lm_run({"learned": (0.9, 1.3, 1.8)})
    tasks = {t: _task_run(t, {"none": 0.5, "rope": 0.1, "sinusoidal": 0.0, "t5": 0.4,
                              "alibi": 0.3}, {"t5": t != "sort"}) for t in TASKS}
    stacks = _lm_run({"rope": (1.0, 2.0, 3.0), "irope": (1.1, 1.2, 1.3),
                      "local-global": (1.0, 2.5, 3.5)}, L=16, factors=(1, 4, 8))
    ablation = _lm_run({"rnope-swa": (1.1, 1.3, 1.4), "irope-notemp": (1.1, 1.3, 1.25),
                        "local-global-1e4": (1.0, 2.2, 3.2)}, L=16, factors=(1, 4, 8))
    bases = {f"bases{L}": _lm_run({"rope": (1.0, 2.0, 3.0), "rope-base100": (1.0, 1.5, 2.0),
                                   "rope-base1e+06": (1.0, 2.0, 2.5)}, L=L)
             for L in (32, 64)}
    lm["rows"] += _lm_run({"rope": (1.5,), "alibi": (0.81,)}, factors=(8,))["rows"]
    # the biases' runs at 4 L and 8 L; their own "rope" is a decoy the claims must not read
    biases = _lm_run({"kerple_log": (0.9, 1.0), "kerple_power": (1.3, 1.6),
                      "sandwich": (1.0, 1.6), "fire": (0.5, 0.5), "xpos": (1.25, 1.4),
                      "rope": (0.5, 0.5)}, factors=(4, 8))
    # FIRE with its threshold from L, run apart; the biases' "fire" above is a decoy
    fire_l = _lm_run({"fire-L": (0.8, 0.95)}, factors=(4, 8))
    # the content schemes' runs; their own "alibi" is a decoy as well
    content = _lm_run({"fox": (0.9, 0.79), "cope": (1.3, 1.6), "alibi": (2.0, 2.0)},
                      factors=(4, 8))
    # the newer schemes on copy and reverse (sort not run yet); their "rope" is a decoy, and
    # CoPE did not learn reverse
    beyond = {t: _task_run(t, {"fire": 0.9, "kerple_log": 0.05, "cope": 0.6, "rope": 0.9},
                           {"cope": t != "reverse"}) for t in ("copy", "reverse")}
    beyond_fire_l = {t: _task_run(t, {"fire-L": 0.35}, {}) for t in ("copy", "reverse")}
    return {"lm": lm, "matched": matched, "matched-table": table, "tasks": tasks,
            "stacks": stacks, "stacks-ablation": ablation, **bases, "biases": biases,
            "fireL": fire_l, "content": content, "beyond": beyond,
            "beyond-fireL": beyond_fire_l}


def test_each_claim_is_decided_by_the_rule():
    study = _study()
    got = {c.key: decide(c, study) for c in CLAIMS if claims.available(c, study)}
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
    assert got["yang-irope-4L"].word == "agree"                        # 1.2 against 2.0
    assert got["yang-irope-8L"].interval.mean == pytest.approx(1.3 / 3.0 - 1, abs=1e-2)
    assert got["local-global-8L"].word == "disagree"                   # 3.5 against 3.0
    assert got["yang-rnope-swa-4L"].word == "agree"                    # 1.3 against 2.0
    assert got["llama4-temperature-8L"].word == "disagree"             # 1.3 against 1.25
    assert got["local-global-windows-4L"].word == "disagree"           # 2.2 against 2.0
    assert got["base-100-32"].word == "agree"                          # 2.0 against 3.0 at 4L
    assert got["base-1e6-64"].word == "disagree"                       # lower, not higher
    row = claims.table_rows(["press-sinusoidal-2L"], got)[0]
    assert len(row) == len(claims.TABLE_HEADER) and row[4] == "agree"


def test_the_biases_claims_pair_the_new_runs_with_the_main_study():
    study = _study()
    keys = [c.key for c in CLAIMS if c.options.get("runs") in ("biases", "fireL")]
    assert len(keys) == 12 and all(claims.claim(k).source for k in keys)
    # FIRE's claims read FIRE with its threshold from L, not the biases' default FIRE
    assert {c.options["scheme"] for c in CLAIMS if c.options.get("runs") == "fireL"} \
        == {"fire-L"}
    got = {k: decide(claims.claim(k), study) for k in keys}
    assert got["kerple-log-rope-4L"].word == "agree"               # 0.9 against RoPE's 1.2
    assert got["kerple-log-rope-8L"].interval.mean == pytest.approx(1.0 / 1.5 - 1, abs=1e-2)
    assert got["kerple-power-rope-8L"].word == "disagree"          # 1.6 against 1.5
    assert got["sandwich-rope-4L"].word == "agree"
    assert got["sandwich-rope-8L"].word == "disagree"
    assert got["fire-alibi-4L"].word == "agree"                    # 0.8 against 0.82
    assert got["fire-alibi-8L"].word == "disagree"                 # 0.95 against 0.81
    assert got["fire-kerple-8L"].word == "agree"                   # fire-L against the biases. Kerple
    assert got["fire-kerple-4L"].interval.mean == pytest.approx(0.8 / 0.9 - 1, abs=1e-2)
    assert got["xpos-rope-4L"].word == "disagree"                  # 1.25 against 1.2
    assert got["xpos-rope-8L"].word == "agree"
    del study["biases"], study["fireL"]
    assert not set(keys) & set(claims.verdicts(study))


def test_the_content_claims_pair_fox_and_cope_with_the_main_study():
    study = _study()
    keys = [c.key for c in CLAIMS if c.options.get("runs") == "content"]
    assert sorted(keys) == sorted(f"{k}-{f}L" for k in ("fox-rope", "cope-rope", "fox-alibi")
                                  for f in (4, 8))
    got = {k: decide(claims.claim(k), study) for k in keys}
    assert got["fox-rope-4L"].word == "agree"                      # 0.9 against RoPE's 1.2
    assert got["fox-rope-8L"].interval.mean == pytest.approx(0.79 / 1.5 - 1, abs=1e-2)
    assert got["cope-rope-4L"].word == "disagree"                  # 1.3 against 1.2
    assert got["fox-alibi-4L"].word == "disagree"                  # 0.9 against ALiBi's 0.82
    assert got["fox-alibi-8L"].word == "agree"                     # 0.79 against 0.81
    assert claims.claim("fox-alibi-4L").source is None
    del study["content"]
    assert not set(keys) & set(claims.verdicts(study))


def test_the_beyond_claims_pair_the_new_task_runs_with_the_main_study():
    study = _study()
    keys = [c.key for c in CLAIMS if c.options.get("runs") in claims.BEYOND_PARTS]
    assert len(keys) == 6 * len(claims.BEYOND_TASKS)
    assert {c.options["scheme"] for c in CLAIMS if c.options.get("runs") == "beyond-fireL"} \
        == {"fire-L"}
    got = claims.verdicts(study)
    assert {k for k in keys if k in got} == {k for k in keys if not k.endswith("-sort")}
    # FIRE-L 0.35 (not the default FIRE's 0.9) against the main study's RoPE 0.1 and ALiBi 0.3
    # (not the decoy's 0.9)
    assert got["beyond-fire-rope-copy"].word == "agree"
    assert got["beyond-fire-rope-copy"].interval.mean == pytest.approx(0.25)
    assert got["beyond-fire-alibi-copy"].interval.mean == pytest.approx(0.05)
    assert got["beyond-kerple-alibi-copy"].word == "disagree"       # 0.05 against 0.3
    assert got["beyond-cope-rope-copy"].word == "agree"
    assert got["beyond-cope-rope-reverse"].label == "inconclusive (not learned)"
    # the main study's claims still read the main study's rows alone
    assert got["kazemnejad-none-rope-copy"].interval.mean == pytest.approx(0.4)
    # runs of other settings do not pair
    for part, key in (("beyond", "beyond-kerple-rope-copy"),
                      ("beyond-fireL", "beyond-fire-rope-copy")):
        study[part]["copy"]["meta"]["settings"] = {"train_len": 1, "test_len": 3}
        with pytest.raises(ValueError, match="other settings"):
            decide(claims.claim(key), study)
    del study["beyond"], study["beyond-fireL"]
    assert not set(keys) & set(claims.verdicts(study))


def test_verdicts_leave_out_claims_whose_runs_are_absent():
    study = _study()
    del study["matched-table"]
    got = claims.verdicts(study)
    assert "vaswani-equal-matched" not in got and "vaswani-equal" in got


def test_the_committed_study_holds_five_clean_seeds_with_their_hashes():
    study = load_study()            # refuses dirty commits, partial runs, mixed settings
    runs = [study["lm"], study["ablation"], *study["tasks"].values()]
    runs += [study[k] for k in ("matched", "matched-table", "keras") if k in study]
    runs += [study[name] for name, _, _ in claims.OPTIONAL_PARTS if name in study]
    for run in runs:
        assert run["meta"]["seeds"] == list(STUDY_SEEDS)
        digest = run["meta"]["data_sha256"]
        hashes = list(digest.values()) if isinstance(digest, dict) else [digest]
        assert all(isinstance(h, str) and len(h) == 64 for h in hashes)
        assert all(not c.endswith("+dirty") for c in run["meta"]["commits"])
    assert isinstance(study["lm"]["meta"]["data_sha256"], str)          # one corpus
    assert sorted(study["tasks"]["copy"]["meta"]["data_sha256"]) == list(STUDY_SEEDS)
    got = claims.verdicts(study)
    assert {"matched", "matched-table", "keras"} <= set(study)
    parts = {c.key: claims._runs(c.options) for c in CLAIMS if c.measure != "lg-beyond"}
    beyond = {c.key: (c.options["runs"], c.options["task"]) for c in CLAIMS
              if c.options.get("runs") in claims.BEYOND_PARTS}
    assert set(got) == {c.key for c in CLAIMS
                        if (c.key in beyond and beyond[c.key][1] in study.get(beyond[c.key][0],
                                                                              {}))
                        or (c.key not in beyond and (c.key not in parts
                                                     or all(p in study for p in parts[c.key])))}
    for part in claims.BEYOND_PARTS:
        for run in study.get(part, {}).values():
            assert run["meta"]["seeds"] == list(STUDY_SEEDS)
    assert all(v.word in ("agree", "disagree", "inconclusive") for v in got.values())
    assert all(v.interval.n == len(STUDY_SEEDS) for v in got.values())
