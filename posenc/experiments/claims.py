"""The papers' claims the lab tests, and the lab's verdict on each, computed in one place.

:data:`CLAIMS` lists every published claim the lab's study holds up against its own runs: the
paper, what it reports (in words and in its own figures), the lab's measure of the same
effect, and the direction the paper reports. :func:`load_study` reads the study's committed
runs (five seeds or more each, from clean commits, with their data hashes);
:func:`decide` applies the rule of :func:`posenc.experiments.stats.verdict` to one claim and
:func:`verdicts` to all of them. Chapter 10 shows each verdict beside its paper, and chapter
13's guide grades its evidence by the same verdicts, so a verdict is computed once.

The measures (every one per seed, then a 95 % Student-t interval over the seeds):

* ``"lm-change"``: the relative change of the loss of one scheme from the training length
  ``L`` to ``factor * L``, ``loss(factor L) / loss(L) - 1`` (unit-free, so it is compared with
  the same quantity computed from the paper's perplexities; below zero, the longer windows
  help);
* ``"lm-relative"``: one scheme's loss over a reference scheme's at one length, minus one
  (unit-free; above zero, the scheme is worse);
* ``"lm-paired"``: the paired difference of two schemes' losses (nats per character) at one
  length;
* ``"lg-beyond"``: the paired difference of two schemes' exact match past the training length
  on one task, decided only where every seed of both schemes learned the task in
  distribution (otherwise "inconclusive (not learned)").

A verdict judges the *direction* of an effect. Where a paper's claim is also about its size
("slightly worse"), :func:`size_ratio` sets the lab's effect beside the paper's, and a chapter
says when the two are far apart.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from posenc._checks import _error

__all__ = ["STUDY_SEEDS", "TASKS", "Claim", "CLAIMS", "claim", "load_study", "decide",
           "verdicts", "OPTIONAL_PARTS", "BEYOND_TASKS", "BEYOND_PARTS", "available", "paper_change", "size_ratio", "table_rows", "TABLE_HEADER"]

#: The seeds of the committed study (one result file per seed, ``--tag seedN``).
STUDY_SEEDS = (0, 1, 2, 3, 4)

#: The length-generalisation tasks of the study (one result file per task and seed,
#: ``--tag TASK-seedN``).
TASKS = ("copy", "reverse", "sort", "addition")

#: The tasks of the optional task runs of the newer schemes (files
#: ``results-beyond-TASK-seedN.json``, ``--tag beyond-TASK-seedN``), read by :func:`load_study`
#: into ``study["beyond"][TASK]`` when all their seeds are committed.
BEYOND_TASKS = ("copy", "reverse", "sort")
#: The parts of those task runs, each the tag prefix of its files: ``beyond`` (the newer
#: schemes) and ``beyond-fireL`` (FIRE with its threshold from the training length,
#: ``fire-L``, run apart), each read into ``study[part][TASK]``.
BEYOND_PARTS = ("beyond", "beyond-fireL")


def paper_change(short: float, long: float) -> float:
    """The relative change of log-perplexity between two published perplexities,
    ``ln long / ln short - 1``: the paper's figure in the lab's unit-free measure.

    Example:
        >>> round(paper_change(20.05, 43.54), 4)      # Press et al., sinusoidal, 512 -> 1012
        0.2586
    """
    return math.log(long) / math.log(short) - 1.0


@dataclass(frozen=True)
class Claim:
    """One published claim and how the lab measures it.

    Attributes:
        key: the claim's name (chapters glue ``verdict_KEY``).
        source: the bibliography key of the paper, or ``None`` for an explanation the book
            itself offers (then the verdict tests the book).
        statement: what the paper reports, in words.
        published: the paper's figures, as printed (with the table).
        measure: the lab's measure (a kind of this module's docstring).
        options: the measure's arguments (schemes, lengths, task, which runs).
        expected: the direction the paper reports (``"positive"``, ``"negative"``, or
            ``"none"`` with a ``margin``).
        margin: the largest effect a claim of no difference allows, else ``None``.
        paper_effect: the paper's effect in the lab's measure where it can be computed from
            its figures (unit-free), else ``None``.
    """

    key: str
    source: str | None
    statement: str
    published: str
    measure: str
    options: dict = field(default_factory=dict)
    expected: str = "positive"
    margin: float | None = None
    paper_effect: float | None = None


def _press(scheme, name, factor, short, long, tokens, expected):
    word = "improves" if expected == "negative" else "degrades"
    return Claim(
        key=f"press-{scheme}-{factor}L", source="press2022alibi",
        statement=f"{name} {word} from the training length (512 tokens) to {tokens} tokens "
                  f"({tokens / 512:.1f} times it); the lab measures at {factor} L",
        published=f"{short} at 512 tokens, {long} at {tokens} (WikiText-103, Table 2)",
        measure="lm-change", options={"scheme": scheme, "factor": factor},
        expected=expected, paper_effect=paper_change(short, long))


# Vaswani et al.'s "nearly identical": both 4.92 to the printed digits, so the relative loss
# difference can be at most what rounding to 0.01 leaves room for.
_VASWANI_MARGIN = (math.log(4.925) - math.log(4.915)) / math.log(4.92)

_KAZEMNEJAD = ("their ranking over ten tasks: NoPE and T5's bias best, ALiBi in the middle, "
               "rotary and absolute (sinusoidal) poorest")
_KAZEMNEJAD_COPY = ("on copy, NoPE and T5 near 1.0 well past the training length, ALiBi "
                    "dropping near length 25, rotary and absolute falling to about 0")

# The length-extrapolation biases' papers, as their abstracts put it (the lab's runs are
# characters at L = 64; the papers' are tokens at L = 512 or 2048).
_KERPLE = ("'the logarithmic variant achieves excellent extrapolation performance on three "
           "large language modeling datasets' (abstract; OpenWebText2, GitHub, ArXiv, "
           "trained on 512 tokens)")
_SANDWICH = ("Sandwich is 'the first parameter-free relative positional embedding design that "
             "truly length information uses longer than the training sequence' (abstract)")
_FIRE = ("'FIRE models have better generalization to longer contexts on both zero-shot "
         "language modeling and long text benchmarks' (abstract; it is compared with T5's "
         "bias, ALiBi and Kerple, which it can represent)")
_FOX = ("'FoX outperforms the Transformer on long-context language modeling, length "
        "extrapolation, and short-context downstream tasks' (abstract; the Transformer there "
        "uses RoPE)")
_COPE = ("'CoPE ... improves perplexity on language modeling and coding tasks' (abstract)")
_COPE_TASKS = ("'CoPE can solve the selective copy, counting and Flip-Flop tasks where "
               "popular position embeddings fail' (abstract; the lab's copy, reverse and "
               "sort are not those tasks)")
_ON_TASKS = " (a claim about language modelling; the lab asks it of its tasks)"
_XPOS = ("'our model achieves strong performance in both interpolation and extrapolation "
         "settings' (abstract; with blockwise causal attention at inference, which the lab "
         "does not use)")

#: Every claim of the study, in the order chapter 10 discusses them.
CLAIMS = (
    _press("sinusoidal", "The sinusoid", 2, 20.05, 43.54, 1012, "positive"),
    _press("rope", "Rotary", 2, 20.07, 21.37, 1012, "positive"),
    _press("rope", "Rotary", 4, 20.07, 31.58, 2512, "positive"),
    _press("t5", "T5's bias", 2, 19.65, 18.79, 1012, "negative"),
    _press("t5", "T5's bias", 4, 19.65, 20.41, 2512, "positive"),
    _press("alibi", "ALiBi", 2, 19.73, 18.73, 1012, "negative"),
    _press("alibi", "ALiBi", 4, 19.73, 18.41, 2512, "negative"),
    Claim(key="t5-clamp-4L", source=None,
          statement="T5's bias fails past the training length because the buckets of the "
                    "longer distances were never trained: clamping them to the last trained "
                    "bucket lowers the loss at 4L",
          published="the book's explanation (chapter 10)", measure="lm-relative",
          options={"scheme": "t5-clamped", "reference": "t5", "factor": 4},
          expected="negative"),
    Claim(key="haviv-nope-alibi", source="haviv2022nopos",
          statement="a causal model without positions is worse than ALiBi at the training "
                    "length (slightly, in the paper; the verdict judges the direction)",
          published="20.97 without positions, 19.71 with ALiBi (WikiText-103, 512 tokens)",
          measure="lm-relative", options={"scheme": "none", "reference": "alibi", "factor": 1},
          expected="positive", paper_effect=paper_change(19.71, 20.97)),
    Claim(key="haviv-nope-learned", source="haviv2022nopos",
          statement="a causal model without positions is worse than a learned table at the "
                    "training length (slightly, in the paper; the verdict judges the direction)",
          published="20.97 without positions, 20.42 learned (WikiText-103, 512 tokens)",
          measure="lm-relative", options={"scheme": "none", "reference": "learned",
                                          "factor": 1},
          expected="positive", paper_effect=paper_change(20.42, 20.97)),
    Claim(key="vaswani-equal", source="vaswani2017attention",
          statement="a learned table and the sinusoid give nearly identical results",
          published="development perplexity 4.92 for both (Table 3, rows (E) and base)",
          measure="lm-relative",
          options={"scheme": "sinusoidal", "reference": "learned", "factor": 1},
          expected="none", margin=_VASWANI_MARGIN, paper_effect=0.0),
    Claim(key="vaswani-equal-matched", source="vaswani2017attention",
          statement="the same, with the characters, the sinusoid and the learned table all "
                    "starting equally loud (RMS 1/sqrt(2))",
          published="development perplexity 4.92 for both (Table 3, rows (E) and base)",
          measure="lm-relative",
          options={"scheme": "sinusoidal", "reference": "learned", "factor": 1,
                   "runs": "matched", "reference_runs": "matched-table"},
          expected="none", margin=_VASWANI_MARGIN, paper_effect=0.0),
    *(Claim(key=f"kazemnejad-{scheme}-{reference}-{task}", source="kazemnejad2023nope",
            statement=f"past the training length, {name} answers {task} exactly more often "
                      f"than {other}",
            published=published, measure="lg-beyond",
            options={"task": task, "scheme": scheme, "reference": reference})
      for task in TASKS
      for scheme, reference, name, other in (
          ("none", "rope", "no encoding", "RoPE"),
          ("none", "sinusoidal", "no encoding", "the sinusoid"),
          ("t5", "rope", "T5's bias", "RoPE"),
          ("none", "alibi", "no encoding", "ALiBi"),
          ("t5", "alibi", "T5's bias", "ALiBi"))
      for published in [_KAZEMNEJAD_COPY if task == "copy" else _KAZEMNEJAD]),
    *(Claim(key=f"yang-irope-{factor}L", source="yang2025ropenope",
            statement=f"a stack that interleaves NoPE layers with RoPE layers limited to local "
                      f"spans has a lower loss past the training length than RoPE on every "
                      f"layer (the lab: Llama 4's mix at depth 4, at {factor} L)",
            published="the hybrid 'surpasses conventional RoPE-based transformer models with "
                      "full attention' on long-context tasks (abstract; needle-in-a-haystack "
                      "and RULER, not perplexity)",
            measure="lm-relative",
            options={"scheme": "irope", "reference": "rope", "factor": factor,
                     "runs": "stacks"},
            expected="negative")
      for factor in (4, 8)),
    *(Claim(key=f"local-global-{factor}L", source=None,
            statement=f"a stack of sliding-window RoPE layers with one global layer has a lower "
                      f"loss past the training length than RoPE on every layer, as its local "
                      f"layers never meet a distance longer than their window (the lab tests the "
                      f"sign, not the cause: a 3:1 local/global mix like Gemma 3's, at depth 4, "
                      f"at {factor} L)",
            published="the book's explanation (chapter 17)", measure="lm-relative",
            options={"scheme": "local-global", "reference": "rope", "factor": factor,
                     "runs": "stacks"},
            expected="negative")
      for factor in (4, 8)),
    *(Claim(key=f"yang-rnope-swa-{factor}L", source="yang2025ropenope",
            statement=f"Yang et al.'s own hybrid, RoPE layers with a sliding window and a NoPE "
                      f"layer over every key, has a lower loss past the training length than "
                      f"RoPE on every layer (the lab: at depth 4, at {factor} L)",
            published="the hybrid 'surpasses conventional RoPE-based transformer models with "
                      "full attention' on long-context tasks (abstract; needle-in-a-haystack "
                      "and RULER, not perplexity)",
            measure="lm-relative",
            options={"scheme": "rnope-swa", "reference": "rope", "factor": factor,
                     "runs": "stacks-ablation", "reference_runs": "stacks"},
            expected="negative")
      for factor in (4, 8)),
    Claim(key="llama4-temperature-8L", source="meta2025llama4",
          statement="the temperature of the NoPE layer's queries lowers the hybrid's loss past "
                    "the training length (the lab: irope with and without it, trained with it, "
                    "at 8 L)",
          published="Llama 4 uses 'inference time temperature scaling of attention to enhance "
                    "length generalization' (Meta's announcement)",
          measure="lm-relative",
          options={"scheme": "irope", "reference": "irope-notemp", "factor": 8,
                   "runs": "stacks", "reference_runs": "stacks-ablation"},
          expected="negative"),
    Claim(key="local-global-windows-4L", source=None,
          statement="the windows alone account for the local/global stack's lower loss past "
                    "the training length: with the global layer at RoPE's usual base it is "
                    "still below RoPE on every layer (the lab: at 4 L)",
          published="the book's explanation (chapter 17)", measure="lm-relative",
          options={"scheme": "local-global-1e4", "reference": "rope", "factor": 4,
                   "runs": "stacks-ablation", "reference_runs": "stacks"},
          expected="negative"),
    *(Claim(key=f"base-{name}-{L}", source=None,
            statement=f"trained on {L} characters, RoPE with base {base:,} has a {word} loss at "
                      f"4 L than with the usual 10,000, because {why}",
            published="the book's own reading (chapter 17) of the count of whole periods; "
                      "Liu et al. report that a larger base, as a smaller one, extrapolates "
                      "better after fine-tuning", measure="lm-relative",
            options={"scheme": f"rope-base{base:g}", "reference": "rope", "factor": 4,
                     "runs": f"bases{L}"},
            expected=expected)
      for L in (32, 64)
      for name, base, word, expected, why in (
          ("100", 100, "lower", "negative",
           "more of its pairs turn through a whole period within the training length, so "
           "fewer of its angles are new past it"),
          ("1e6", 1_000_000, "higher", "positive",
           "fewer of its pairs turn through a whole period within the training length"))),
    *(Claim(key=f"{key}-{factor}L", source=source,
            statement=f"past the training length, {name} has a lower loss than {other} (the "
                      f"lab: at {factor} L, paired by seed with "
                      f"{'the main study' if runs == 'lm' else 'the lab'}'s {other})",
            published=published, measure="lm-relative",
            options={"scheme": scheme, "reference": reference, "factor": factor,
                     "runs": side, "reference_runs": runs},
            expected="negative")
      for key, source, scheme, side, name, reference, other, runs, published in (
          ("kerple-log-rope", "chi2022kerple", "kerple_log", "biases",
           "Kerple's logarithmic bias", "rope", "RoPE", "lm", _KERPLE),
          ("kerple-power-rope", "chi2022kerple", "kerple_power", "biases",
           "Kerple's power bias", "rope", "RoPE", "lm", _KERPLE),
          ("sandwich-rope", "chi2023sandwich", "sandwich", "biases", "Sandwich", "rope",
           "RoPE", "lm", _SANDWICH),
          # FIRE with its threshold started at the training length (``fire-L``): with the
          # package's 512 the lab's lengths never reach it and nothing is interpolated
          ("fire-alibi", "li2024fire", "fire-L", "fireL", "FIRE", "alibi", "ALiBi", "lm",
           _FIRE),
          ("fire-kerple", "li2024fire", "fire-L", "fireL", "FIRE", "kerple_log",
           "Kerple's logarithmic bias", "biases", _FIRE),
          ("xpos-rope", "sun2023xpos", "xpos", "biases", "xPos", "rope", "RoPE", "lm", _XPOS))
      for factor in (4, 8)),
    *(Claim(key=f"{key}-{factor}L", source=source,
            statement=f"past the training length, {name} has a lower loss than RoPE (the lab: "
                      f"at {factor} L, paired by seed with the main study's RoPE)",
            published=published, measure="lm-relative",
            options={"scheme": scheme, "reference": "rope", "factor": factor,
                     "runs": "content", "reference_runs": "lm"},
            expected="negative")
      for key, source, scheme, name, published in (
          ("fox-rope", "lin2025fox", "fox", "the Forgetting Transformer (FoX)", _FOX),
          ("cope-rope", "golovneva2024cope", "cope", "CoPE", _COPE))
      for factor in (4, 8)),
    *(Claim(key=f"fox-alibi-{factor}L", source=None,
            statement=f"FoX's forget gates are a decay like ALiBi's whose slope each token "
                      f"chooses, so past the training length FoX has a lower loss than ALiBi "
                      f"(the lab: at {factor} L, paired by seed with the main study's ALiBi)",
            published="the book's explanation (chapter 19); Lin et al.'s baselines are "
                      "Transformers with RoPE, and no comparison with ALiBi is quoted here",
            measure="lm-relative",
            options={"scheme": "fox", "reference": "alibi", "factor": factor,
                     "runs": "content", "reference_runs": "lm"},
            expected="negative")
      for factor in (4, 8)),
    *(Claim(key=f"beyond-{key}-{task}", source=source,
            statement=f"past the training length, {name} answers {task} exactly more often "
                      f"than {other} (the lab: trained on 8, tested to 16, paired by seed with "
                      f"the main study's {other})",
            published=published, measure="lg-beyond",
            options={"task": task, "scheme": scheme, "reference": reference,
                     "runs": "beyond-fireL" if scheme == "fire-L" else "beyond",
                     "reference_runs": "tasks"})
      for task in BEYOND_TASKS
      for key, source, scheme, name, reference, other, published in (
          ("fire-rope", "li2024fire", "fire-L", "FIRE", "rope", "RoPE", _FIRE + _ON_TASKS),
          ("fire-alibi", "li2024fire", "fire-L", "FIRE", "alibi", "ALiBi",
           _FIRE + _ON_TASKS),
          ("kerple-rope", "chi2022kerple", "kerple_log", "Kerple's logarithmic bias", "rope",
           "RoPE", _KERPLE + _ON_TASKS),
          ("kerple-alibi", "chi2022kerple", "kerple_log", "Kerple's logarithmic bias",
           "alibi", "ALiBi", _KERPLE + _ON_TASKS),
          ("cope-rope", "golovneva2024cope", "cope", "CoPE", "rope", "RoPE", _COPE_TASKS),
          ("cope-alibi", "golovneva2024cope", "cope", "CoPE", "alibi", "ALiBi",
           _COPE_TASKS))),
)

#: The optional parts of the study: ``(name, framework, tag prefix)``; each is read when its
#: files are committed (:func:`load_study`), and claims that need an absent part are left out.
OPTIONAL_PARTS = (("matched", "torch", "matched-"), ("matched-table", "torch", "matched-table-"),
                  ("keras", "keras", ""), ("stacks", "torch", "stacks-"),
                  ("stacks-ablation", "torch", "stacks-ablation-"),
                  ("bases32", "torch", "bases32-"), ("bases64", "torch", "bases64-"),
                  ("biases", "torch", "biases-"), ("content", "torch", "content-"),
                  ("fireL", "torch", "fireL-"))


def claim(key: str) -> Claim:
    """The claim of :data:`CLAIMS` named ``key``."""
    for c in CLAIMS:
        if c.key == key:
            return c
    raise _error("claim", f"key must name a claim of CLAIMS, got key={key!r}",
                 "pass one of " + ", ".join(c.key for c in CLAIMS[:4]) + ", ...")


def load_study(folder=None, *, seeds=STUDY_SEEDS, require_clean: bool = True) -> dict:
    """The study's runs, each read with :func:`~posenc.experiments.analysis.load_seed_runs`.

    Returns:
        A dict of combined runs (each ``{"meta": ..., "rows": [...]}``): ``"lm"`` (the
        language model), ``"matched"`` (the sinusoid and the learned table with the characters
        drawn as loud as the sinusoid), ``"matched-table"`` (the learned table drawn as loud
        too), ``"keras"`` (the Keras runs), ``"stacks"`` (stacks whose layers differ, at
        depth 4), ``"stacks-ablation"`` (their single-change arms), ``"bases32"`` and ``"bases64"`` (RoPE's base against the training length),
        ``"biases"`` (xPos, Kerple, Sandwich, FIRE and the dynamic bias at the main study's
        settings), ``"content"`` (FoX and CoPE at those settings), ``"beyond"`` (a dict from
        each task of :data:`BEYOND_TASKS` whose runs are committed to the run of the newer
        schemes on it; absent when none is),
        ``"ablation"``, and ``"tasks"``, a dict from each
        task to its run. The parts of :data:`OPTIONAL_PARTS` are absent when their files
        are. The tasks' test examples are drawn from the seed, so their
        ``meta["data_sha256"]`` maps each seed to its hash; the language model's runs share
        one corpus and one hash.

    Raises:
        ValueError: a run of the study is missing, partial, from a dirty commit, or of other
            settings than the other seeds.
    """
    from posenc.experiments.analysis import load_seed_runs

    tags = [f"seed{n}" for n in seeds]
    study = {"lm": load_seed_runs("lm-extrapolation", folder=folder, tags=tags,
                                  require_clean=require_clean),
             "ablation": load_seed_runs("ablation", folder=folder, tags=tags,
                                        require_clean=require_clean),
             "tasks": {}}
    for name, framework, prefix in OPTIONAL_PARTS:
        try:
            study[name] = load_seed_runs("lm-extrapolation", folder=folder,
                                         framework=framework,
                                         tags=[f"{prefix}{t}" for t in tags],
                                         require_clean=require_clean)
        except ValueError as error:
            if "no results" not in str(error):
                raise
    for task in TASKS:
        study["tasks"][task] = load_seed_runs("length-generalization", folder=folder,
                                              tags=[f"{task}-{t}" for t in tags],
                                              require_clean=require_clean, same_data=False)
    for part in BEYOND_PARTS:
        for task in BEYOND_TASKS:
            try:
                run = load_seed_runs("length-generalization", folder=folder,
                                     tags=[f"{part}-{task}-{t}" for t in tags],
                                     require_clean=require_clean, same_data=False)
            except ValueError as error:
                if "no results" not in str(error):
                    raise
                continue
            study.setdefault(part, {})[task] = run
    return study


def available(c: Claim, study: dict) -> bool:
    """Whether ``study`` holds the runs claim ``c`` reads (the optional parts may be absent)."""
    if c.measure == "lg-beyond" and c.options.get("runs") in BEYOND_PARTS:
        return c.options["task"] in study.get(c.options["runs"], {})
    if c.measure == "lg-beyond":
        return True
    return all(p in study for p in _runs(c.options))


_TASK_SETTINGS = ("train_len", "test_len", "steps", "batch_size", "dim", "depth", "heads", "lr",
                  "bos", "criterion", "eval_examples")


def _task_rows(c: Claim, study: dict) -> tuple:
    """The rows and training records an ``lg-beyond`` claim reads: the main study's run of its
    task, with the newer schemes' run of it added where ``runs`` is ``"beyond"`` (both of one
    setting, so that they pair by seed)."""
    task = c.options["task"]
    main = study["tasks"][task]
    if c.options.get("runs") not in BEYOND_PARTS:
        return main["rows"], _training(main)
    extra = study[c.options["runs"]][task]
    a, b = (tuple(r["meta"]["settings"].get(k) for k in _TASK_SETTINGS)
            for r in (extra, main))
    if a != b:
        raise _error("decide", f"claim {c.key!r} pairs task runs of other settings "
                     f"({dict(zip(_TASK_SETTINGS, a))} against {dict(zip(_TASK_SETTINGS, b))})",
                     "run the newer schemes at the main study's settings")
    schemes = {c.options["scheme"]}
    rows = [r for r in main["rows"] if r["scheme"] not in schemes]
    rows += [r for r in extra["rows"] if r["scheme"] in schemes]
    training = [t for t in _training(main) if t["scheme"] not in schemes]
    training += [t for t in _training(extra) if t["scheme"] in schemes]
    return rows, training


def _runs(options) -> tuple:
    """The study parts a language-model claim reads: the scheme's and the reference's."""
    side = options.get("runs", "lm")
    return side, options.get("reference_runs", side)


def _losses(study, part, scheme, length) -> dict:
    return {r["seed"]: float(r["loss"]) for r in study[part]["rows"]
            if r["scheme"] == scheme and r["eval_len"] == length}


def decide(c: Claim, study: dict):
    """The lab's :class:`~posenc.experiments.stats.Verdict` on claim ``c`` from ``study``
    (:func:`load_study`)."""
    from posenc.experiments import analysis
    from posenc.experiments.stats import mean_interval, verdict

    o = c.options
    if c.measure == "lg-beyond":
        rows, training = _task_rows(c, study)
        return analysis.beyond_verdict(rows, o["task"], o["scheme"], o["reference"],
                                       c.expected, training=training)
    side, reference_side = _runs(o)
    run = study[side]
    L = run["meta"]["settings"]["train_len"]
    if c.measure == "lm-change":
        effect = analysis.lm_log_ratio(run["rows"], o["scheme"], o["factor"] * L, L)
    else:
        n = o["factor"] * L
        if study[reference_side]["meta"]["settings"]["train_len"] != L:
            raise _error("decide", f"claim {c.key!r} compares runs of other training lengths",
                         "compare runs of one training length")
        a = _losses(study, side, o["scheme"], n)
        b = _losses(study, reference_side, o["reference"], n)
        seeds = sorted(set(a) & set(b))
        if c.measure == "lm-relative":
            effect = mean_interval([a[s] / b[s] - 1.0 for s in seeds])
        elif c.measure == "lm-paired":
            effect = mean_interval([a[s] - b[s] for s in seeds])
        else:
            raise _error("decide", f"claim {c.key!r} has measure={c.measure!r}",
                         "use lm-change, lm-relative, lm-paired or lg-beyond")
    return verdict(effect, c.expected, margin=c.margin)


def _training(run):
    """The ``meta["training"]`` entries of every run combined (each knows if it learned)."""
    return [t for meta in run["meta"]["runs"] for t in meta.get("training", [])]


def verdicts(study: dict | None = None) -> dict:
    """``{key: Verdict}`` for every claim of :data:`CLAIMS`, from ``study`` (default: the
    committed study, :func:`load_study`). Claims whose runs are absent (the matched control)
    are left out."""
    study = load_study() if study is None else study
    return {c.key: decide(c, study) for c in CLAIMS if available(c, study)}


#: The header of :func:`table_rows`' rows.
TABLE_HEADER = ["claim", "published", "paper's effect", "lab's effect (95 % interval)",
                "verdict (direction)", "lab / paper"]


def size_ratio(c: Claim, v) -> float | None:
    """The lab's effect over the paper's (both in the claim's unit-free measure), or ``None``
    where the paper's effect is not computed or is zero. The verdict judges the direction
    only; this says whether the sizes are alike (about 1), or the lab's far larger or smaller.

    Example:
        >>> from posenc.experiments.stats import Interval, verdict
        >>> c = claim("haviv-nope-alibi")
        >>> round(size_ratio(c, verdict(Interval(0.1, 0.08, 0.12, 5), "positive")), 1)
        4.8
    """
    if not c.paper_effect:
        return None
    return float(v.interval.mean / c.paper_effect)


def table_rows(keys, found: dict, *, percent: bool = True, digits: int = 1) -> list:
    """Rows of a table of claims and verdicts (header :data:`TABLE_HEADER`), one per key.

    Args:
        keys: the claims' keys, in the table's order.
        found: ``{key: Verdict}`` (:func:`verdicts`).
        percent: show the effects as percentages (the unit-free measures; exact match
            differences are fractions of answers, shown as percentage points). Default ``True``.
        digits: decimals.
    """
    scale, unit = (100.0, "%") if percent else (1.0, "")
    rows = []
    for key in keys:
        c, v = claim(key), found[key]
        paper = "-" if c.paper_effect is None else f"{c.paper_effect * scale:+.{digits}f}{unit}"
        ratio = size_ratio(c, v)
        rows.append([c.statement, c.published, paper, v.interval.format(digits, scale, unit),
                     v.label, "-" if ratio is None else f"{ratio:.1f}"])
    return rows
