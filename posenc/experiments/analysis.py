"""Reading the lab's results: means and intervals over seeds, paired comparisons, tables.

The chapters plot and tabulate the rows that :func:`posenc.experiments.load_results` returns;
the few summaries they need live here, so that a number in a chapter is computed one way.
Framework-free.

**Per-seed runs.** A study runs each seed as its own command (``--seed N --tag seedN``, one
result file per seed); :func:`load_seed_runs` reads them back as one set of rows, and refuses
files that do not belong together (other settings, another corpus hash, a seed twice, a
commit with uncommitted changes).

**Units and averages** (see :mod:`posenc.experiments.stats`). Over seeds, the lab averages
*losses* (nats or bits per character), never perplexities: the mean perplexity it reports is
``exp(mean loss)``, the geometric mean. A ratio between two lengths or two schemes is taken
*per seed*, then summarised with its interval: :func:`lm_log_ratio` (the relative change of
log-perplexity, unit-free) and :func:`paired_differences` (scheme minus a reference scheme,
seed by seed on the same batches and text).

**Verdicts.** :func:`paired_verdict` (a paired difference of schemes) and
:func:`beyond_verdict` (accuracy past the training length, only where both schemes learned
the task) apply the rule of :func:`posenc.experiments.stats.verdict`; a chapter glues the
verdict's ``label`` and its ``interval.format()``, never a word of its own.

A study of five seeds, one command per seed (the same options each time, from a committed
tree), then read back::

    for N in 0 1 2 3 4; do
        python -m posenc.experiments lm-extrapolation [options] --seed $N --tag seed$N --out runs
    done

    runs = load_seed_runs("lm-extrapolation", folder="runs")
    lm_log_ratios(runs["rows"], 128, 64)["alibi"].format(3)
"""

from __future__ import annotations

from collections import defaultdict

import numpy as np

__all__ = ["over_seeds", "markdown_table", "lm_ratio", "ranking", "meta_summary",
           "load_seed_runs", "combine_runs", "seed_values", "intervals", "paired_differences",
           "lm_log_ratio", "lm_log_ratios", "lm_bits", "paired_verdict", "learned_cells",
           "beyond_training", "beyond_verdict"]


def _is_perplexity(value: str) -> bool:
    return value.endswith("perplexity")


def over_seeds(rows, keys, value, *, geometric: bool | None = None) -> dict:
    """Mean, minimum and maximum of ``value`` over the seeds, per combination of ``keys``.

    Args:
        rows: the result rows (dicts).
        keys: tuple of column names to group by (e.g. ``("scheme", "eval_len")``).
        value: the column to summarise (e.g. ``"perplexity"``).
        geometric: take the geometric mean (``exp`` of the mean ``log``). Default: ``True``
            for a column whose name ends in ``perplexity`` (the mean of the losses, as the
            lab averages), else ``False``.

    Returns:
        ``{key tuple: {"mean": ..., "min": ..., "max": ..., "n": number of seeds}}`` (a
        one-column key is a plain value, not a tuple).

    Example:
        >>> rows = [{"s": "a", "v": 1.0}, {"s": "a", "v": 3.0}]
        >>> over_seeds(rows, ("s",), "v")["a"]["mean"]
        2.0
        >>> rows = [{"s": "a", "perplexity": 2.0}, {"s": "a", "perplexity": 8.0}]
        >>> round(over_seeds(rows, ("s",), "perplexity")["a"]["mean"], 12)   # exp(mean loss)
        4.0
    """
    geometric = _is_perplexity(value) if geometric is None else geometric
    groups = defaultdict(list)
    for row in rows:
        key = tuple(row[k] for k in keys)
        groups[key[0] if len(keys) == 1 else key].append(float(row[value]))

    def mean(v):
        return float(np.exp(np.mean(np.log(v)))) if geometric else float(np.mean(v))

    return {k: {"mean": mean(v), "min": float(np.min(v)), "max": float(np.max(v)),
                "n": len(v)} for k, v in groups.items()}


def markdown_table(header, body, *, digits: int = 2) -> str:
    """A Markdown table: ``header`` (list of column titles) and ``body`` (list of rows);
    floats are written with ``digits`` decimals."""
    def cell(v):
        return f"{v:.{digits}f}" if isinstance(v, float) else str(v)

    lines = ["| " + " | ".join(map(str, header)) + " |",
             "|" + "|".join([":--"] + ["--:"] * (len(header) - 1)) + "|"]
    lines += ["| " + " | ".join(cell(v) for v in row) + " |" for row in body]
    return "\n".join(lines)


def _loss(row: dict, value: str = "loss") -> float:
    """A row's loss in nats: its ``value`` column, else the log of its perplexity."""
    if value in row:
        return float(row[value])
    return float(np.log(row["perplexity" if value == "loss" else value.replace("loss",
                                                                            "perplexity")]))


def _per_seed_loss(rows, scheme, length) -> dict:
    found = {r["seed"]: _loss(r) for r in rows
             if r["scheme"] == scheme and r["eval_len"] == length}
    if not found:
        raise ValueError(f"lm_ratio: no rows of scheme={scheme!r} at eval_len={length}; "
                         "pass a scheme and a length the run evaluated.")
    return found


def lm_ratio(rows, scheme: str, long_len: int, short_len: int) -> float:
    """Perplexity at ``long_len`` over perplexity at ``short_len`` of one scheme, the
    geometric mean over seeds of each seed's own ratio: ``exp(mean(loss_long - loss_short))``
    (below 1: longer windows help; far above 1: the scheme fails to extrapolate).

    A perplexity ratio is per character here: compare its direction with a paper's per-word
    one, not its size (:func:`lm_log_ratio` is the unit-free measure).

    Example:
        >>> rows = [{"scheme": "a", "seed": s, "eval_len": n, "perplexity": p}
        ...         for s, pair in enumerate([(2.0, 8.0), (4.0, 4.0)])
        ...         for n, p in zip((8, 16), pair)]
        >>> round(lm_ratio(rows, "a", 16, 8), 12)      # ratios 4 and 1, geometric mean 2
        2.0
    """
    short = _per_seed_loss(rows, scheme, short_len)
    long = _per_seed_loss(rows, scheme, long_len)
    seeds = sorted(set(short) & set(long))
    return float(np.exp(np.mean([long[s] - short[s] for s in seeds])))


def ranking(rows, value: str = "token_accuracy", *, where=None) -> list:
    """Schemes ordered best first by the mean of ``value`` over the rows that ``where(row)``
    keeps (default: every row). Returns ``[(scheme, mean), ...]``."""
    kept = [r for r in rows if where is None or where(r)]
    means = over_seeds(kept, ("scheme",), value)
    return sorted(((s, m["mean"]) for s, m in means.items()), key=lambda p: -p[1])


def meta_summary(meta: dict) -> dict:
    """The few metadata fields a reader needs to judge and rerun a result."""
    hw = meta.get("hardware", {})
    machine = f"{hw.get('cpu', '?')}, {hw.get('cpu_cores', '?')} cores"
    if "gpu" in hw:
        machine += f", {hw['gpu']}"
    versions = meta.get("versions", {})
    commit = str(meta.get("commit", ""))
    short = commit[:12] + ("+dirty" if commit.endswith("+dirty") else "")  # never hide it
    return {"command": meta.get("command", ""), "commit": short,
            "machine": machine, "seeds": ", ".join(map(str, meta.get("seeds", []))),
            "minutes": round(meta.get("wall_seconds", 0) / 60, 1),
            "versions": ", ".join(f"{k} {v}" for k, v in versions.items()
                                  if k in ("python", "torch", "keras", "numpy"))}


# --------------------------------------------------------------------------- per-seed runs


def _settings_key(meta: dict) -> dict:
    settings = dict(meta.get("settings", {}))
    settings.pop("seeds", None)
    return settings


def combine_runs(results, *, require_clean: bool = True, same_data: bool = True) -> dict:
    """One set of rows from several runs of one experiment (one file per seed, say).

    Args:
        results: a list of ``{"meta": ..., "rows": [...]}`` (what
            :func:`posenc.experiments.records.read_results` returns).
        require_clean: refuse a run whose commit has uncommitted changes (``+dirty``) or is
            unknown. Default ``True``.
        same_data: refuse runs whose ``data_sha256`` differ (one corpus for every seed).
            ``False`` for experiments whose data are drawn from the seed (the test examples of
            ``length-generalization``): then every run must have a hash, and the combined
            ``data_sha256`` is ``{seed: hash}``. Default ``True``.

    Returns:
        A dict ``{"meta": meta, "rows": rows}``: ``rows`` holds every row of every run, and
        ``meta`` has ``runs`` (each run's meta), ``seeds``, ``settings``, ``data_sha256``
        (or ``None``) and ``commits``.

    Raises:
        ValueError: the runs are of different experiments, settings or corpora
            (``data_sha256``), a seed appears in two runs, or (``require_clean``) a run is
            not from a clean commit.
    """
    results = list(results)
    if not results:
        raise ValueError("combine_runs: results must hold at least one run, got none; pass "
                         "the result files of the seeds.")
    first = results[0]["meta"]
    seen, rows, commits = {}, [], []
    for index, result in enumerate(results):
        meta = result["meta"]
        for field in ("experiment", "framework"):
            if meta.get(field) != first.get(field):
                raise ValueError(f"combine_runs: run {index} has {field}="
                                 f"{meta.get(field)!r}, run 0 {first.get(field)!r}; combine "
                                 "runs of one experiment and framework.")
        if _settings_key(meta) != _settings_key(first):
            raise ValueError(f"combine_runs: run {index} has other settings than run 0 "
                             f"({_settings_key(meta)} against {_settings_key(first)}); "
                             "combine runs made with the same options.")
        if not same_data:
            if not meta.get("data_sha256"):
                raise ValueError(f"combine_runs: run {index} has no data_sha256; rerun it with "
                                 "the current code, which records the hash of its data.")
        elif meta.get("data_sha256") != first.get("data_sha256"):
            raise ValueError(f"combine_runs: run {index} has data_sha256="
                             f"{meta.get('data_sha256')!r}, run 0 "
                             f"{first.get('data_sha256')!r}; combine runs on the same corpus.")
        commit = str(meta.get("commit", "unknown"))
        if require_clean and (commit.endswith("+dirty") or commit in ("", "unknown")):
            raise ValueError(f"combine_runs: run {index} has commit={commit!r}, not a clean "
                             "commit; rerun it from a committed tree, or pass "
                             "require_clean=False.")
        if meta.get("partial"):
            raise ValueError(f"combine_runs: run {index} is partial (it stopped early); "
                             "rerun it to the end.")
        for seed in meta.get("seeds", sorted({r["seed"] for r in result["rows"]})):
            if seed in seen:
                raise ValueError(f"combine_runs: seed {seed} is in runs {seen[seed]} and "
                                 f"{index}; keep one run per seed.")
            seen[seed] = index
        commits.append(commit)
        rows.extend(result["rows"])
    digest = first.get("data_sha256") if same_data else {
        seed: results[index]["meta"]["data_sha256"] for seed, index in sorted(seen.items())}
    return {"meta": {"runs": [r["meta"] for r in results], "seeds": sorted(seen),
                     "settings": _settings_key(first), "data_sha256": digest,
                     "commits": commits}, "rows": rows}


def load_seed_runs(name: str, *, folder=None, framework: str = "torch", tags=None,
                   require_clean: bool = True, same_data: bool = True) -> dict:
    """The per-seed runs of experiment ``name`` as one set of rows (:func:`combine_runs`).

    Args:
        name: the experiment (``"lm-extrapolation"``, ...).
        folder: where the runs were written (their ``--out``); default the committed results.
        framework: ``"torch"`` or ``"keras"``.
        tags: the runs' ``--tag`` values (default: every file ``results[-keras]-seed*.json``,
            the files of ``--seed N --tag seedN``, and the untagged ``results[-keras].json``
            when it holds a seed those files do not).
        require_clean, same_data: see :func:`combine_runs`.
    """
    from posenc.experiments.records import read_results, results_path

    untagged = None
    if tags is None:
        stem = results_path(name, framework=framework, folder=folder)
        paths = sorted(stem.parent.glob(f"{stem.stem}-seed*.json"),
                       key=lambda p: int("".join(c for c in p.stem.rsplit("seed", 1)[1]
                                                 if c.isdigit()) or 0))
        if stem.exists():       # a run without --tag (the committed seed 0, for one)
            untagged = read_results(stem)
    else:
        paths = [results_path(name, framework=framework, tag=t, folder=folder) for t in tags]
    missing = [str(p.name) for p in paths if not p.exists()]
    runs = [read_results(p) for p in paths if p.exists()]
    if untagged is not None and not set(untagged["meta"].get("seeds", [])) & {
            seed for run in runs for seed in run["meta"].get("seeds", [])}:
        runs.insert(0, untagged)
    if missing or not runs:
        raise ValueError(f"load_seed_runs: no results for name={name!r} in "
                         f"{results_path(name, framework=framework, folder=folder).parent} "
                         f"(missing: {missing or 'results-seed*.json'}); run "
                         f"`python -m posenc.experiments {name} --seed N --tag seedN --out "
                         "DIR` for each seed and pass folder=DIR.")
    return combine_runs(runs, require_clean=require_clean, same_data=same_data)


# --------------------------------------------------------------------------- intervals


def _key(row, keys):
    key = tuple(row[k] for k in keys)
    return key[0] if len(keys) == 1 else key


def seed_values(rows, keys, value) -> dict:
    """``{key: {seed: value}}``: the value of each seed, per combination of ``keys``.

    A ``value`` of ``"loss"`` (or ``"long_loss"``) is read from the row's perplexity when the
    row has no loss column (``loss = ln perplexity``).

    Raises:
        ValueError: two rows have the same key and seed (combine runs with
            :func:`combine_runs`, which refuses a seed twice).
    """
    found = defaultdict(dict)
    for row in rows:
        key = _key(row, keys)
        if row["seed"] in found[key]:
            raise ValueError(f"seed_values: seed {row['seed']} appears twice for {key!r}; "
                             "pass each seed's rows once.")
        found[key][row["seed"]] = (_loss(row, value) if value.endswith("loss")
                                   else float(row[value]))
    return dict(found)


def intervals(rows, keys, value, *, level: float = 0.95) -> dict:
    """``{key: Interval}``: the mean of ``value`` over the seeds, with its Student-t interval
    (:func:`posenc.experiments.stats.mean_interval`), per combination of ``keys``.

    Average losses (``value="loss"``) rather than perplexities; ``value="bits_per_char"``, or
    :func:`lm_bits`, gives bits per character.

    Example:
        >>> rows = [{"scheme": "a", "seed": s, "loss": v} for s, v in enumerate([1., 2., 3.])]
        >>> intervals(rows, ("scheme",), "loss")["a"].format(3)
        '2.000 [-0.484, 4.484]'
    """
    from posenc.experiments.stats import mean_interval

    return {k: mean_interval([v[s] for s in sorted(v)], level)
            for k, v in seed_values(rows, keys, value).items()}


def paired_differences(rows, value, reference: str, *, keys=(), level: float = 0.95,
                       scheme_key: str = "scheme") -> dict:
    """Each scheme minus ``reference``, seed by seed, with the interval of the differences.

    Args:
        rows: the result rows.
        value: the column compared (``"loss"``, ``"exact_match"``, ...).
        reference: the scheme subtracted.
        keys: the other columns a comparison is made within (e.g. ``("eval_len",)``).
        level: the confidence level. Default ``0.95``.
        scheme_key: the column naming the scheme. Default ``"scheme"``.

    Returns:
        ``{scheme or (scheme, *keys): Interval}``, without the reference itself; only the
        seeds both schemes ran are paired.

    Example:
        >>> rows = [{"scheme": k, "seed": s, "loss": v + (0.5 if k == "b" else 0.0)}
        ...         for s, v in enumerate([1.0, 2.0, 4.0]) for k in ("a", "b")]
        >>> paired_differences(rows, "loss", "a")["b"].format(2)
        '0.50 [0.50, 0.50]'
    """
    from posenc.experiments.stats import paired_difference

    keys = tuple(keys)
    values = seed_values(rows, (scheme_key, *keys), value)
    schemes = {k[0] if keys else k for k in values}
    if reference not in schemes:
        raise ValueError(f"paired_differences: reference={reference!r} is not in the rows "
                         f"(schemes: {sorted(schemes)}); pass one of them.")
    out = {}
    for key, per_seed in values.items():
        scheme, rest = (key[0], key[1:]) if keys else (key, ())
        if scheme == reference:
            continue
        base = values[(reference, *rest) if keys else reference]
        seeds = sorted(set(per_seed) & set(base))
        out[key] = paired_difference([per_seed[s] for s in seeds], [base[s] for s in seeds],
                                     level)
    return out


def lm_log_ratio(rows, scheme: str, long_len: int, short_len: int, *,
                 level: float = 0.95):
    """The relative change of log-perplexity from ``short_len`` to ``long_len`` of one scheme,
    ``loss_long / loss_short - 1``, per seed, with its interval over the seeds.

    Unit-free (the same per character and per word), so it is the number to set beside a
    paper's; below 0: longer windows help.

    Example:
        >>> rows = [{"scheme": "a", "seed": s, "eval_len": n, "loss": v}
        ...         for s, pair in enumerate([(1.0, 1.5), (2.0, 2.5), (1.0, 1.4)])
        ...         for n, v in zip((8, 16), pair)]
        >>> round(lm_log_ratio(rows, "a", 16, 8).mean, 6)     # (0.5 + 0.25 + 0.4) / 3
        0.383333
    """
    from posenc.experiments.stats import mean_interval, relative_log_perplexity_change

    short = _per_seed_loss(rows, scheme, short_len)
    long = _per_seed_loss(rows, scheme, long_len)
    seeds = sorted(set(short) & set(long))
    return mean_interval([relative_log_perplexity_change(long[s], short[s]) for s in seeds],
                         level)


def lm_log_ratios(rows, long_len: int, short_len: int, *, level: float = 0.95) -> dict:
    """``{scheme: lm_log_ratio(rows, scheme, long_len, short_len)}`` for every scheme."""
    schemes = list(dict.fromkeys(r["scheme"] for r in rows))
    return {s: lm_log_ratio(rows, s, long_len, short_len, level=level) for s in schemes}


def lm_bits(rows, keys=("scheme", "eval_len"), *, level: float = 0.95) -> dict:
    """``{key: Interval}`` of bits per character (the loss over ``ln 2``) over the seeds."""
    from posenc.experiments.stats import bits_per_char, mean_interval

    return {k: mean_interval([bits_per_char(v[s]) for s in sorted(v)], level)
            for k, v in seed_values(rows, keys, "loss").items()}


def paired_verdict(rows, value, scheme: str, reference: str, expected, *, where=None,
                   learned=True, level: float = 0.95):
    """The verdict (:func:`posenc.experiments.stats.verdict`) on the paired difference
    ``scheme - reference`` of ``value`` over the seeds, among the rows ``where(row)`` keeps.

    Args:
        rows: the result rows.
        value: the column compared (``"loss"``, ...).
        scheme, reference: the two schemes.
        expected: the sign of ``scheme - reference`` that the paper reports (``"positive"``
            or ``"negative"``).
        where: keeps the rows of one setting (e.g. ``lambda r: r["eval_len"] == 128``);
            default every row, which must then hold one row per scheme and seed.
        learned: passed to :func:`~posenc.experiments.stats.verdict`.
        level: the confidence level. Default ``0.95``.

    Returns:
        A :class:`~posenc.experiments.stats.Verdict`: ``.word``, ``.label`` and ``.interval``
        are what a chapter glues.

    Example:
        >>> rows = [{"scheme": k, "seed": s, "loss": v + (0.5 if k == "b" else 0.0)}
        ...         for s, v in enumerate([1.0, 2.0, 4.0]) for k in ("a", "b")]
        >>> paired_verdict(rows, "loss", "b", "a", "positive").word
        'agree'
    """
    from posenc.experiments.stats import verdict

    kept = [r for r in rows if (where is None or where(r)) and r["scheme"] in (scheme,
                                                                             reference)]
    diff = paired_differences(kept, value, reference, level=level)
    if scheme not in diff:
        raise ValueError(f"paired_verdict: scheme={scheme!r} has no rows here; pass a "
                         "scheme of the rows.")
    return verdict(diff[scheme], expected, learned=learned)


# --------------------------------------------------------------------------- length generalisation


def learned_cells(rows, *, criterion: float = 0.95, training=None) -> dict:
    """``{(task, scheme, seed): bool}``: whether each model learned its task in distribution.

    With ``training`` (the run's ``meta["training"]``) whose entries carry ``"learned"`` (runs
    with ``--criterion``, judged on held-out examples of the trained lengths), that is used.
    Otherwise: the mean exact match over the rows with ``in_distribution`` true reaches
    ``criterion``.

    Example:
        >>> rows = [{"task": "copy", "scheme": "a", "seed": 0, "in_distribution": True,
        ...          "exact_match": m} for m in (1.0, 0.8)]
        >>> learned_cells(rows, criterion=0.95)
        {('copy', 'a', 0): False}
    """
    if training is not None and all("learned" in t for t in training):
        return {(t["task"], t["scheme"], t["seed"]): bool(t["learned"]) for t in training}
    exact = defaultdict(list)
    for row in rows:
        if row["in_distribution"]:
            exact[(row["task"], row["scheme"], row["seed"])].append(float(row["exact_match"]))
    return {k: float(np.mean(v)) >= criterion for k, v in exact.items()}


def beyond_training(rows, value: str = "exact_match", *, criterion: float = 0.95,
                    training=None, level: float = 0.95) -> dict:
    """Accuracy past the training length, only over the models that learned the task.

    Returns:
        A dict keyed by ``(task, scheme)`` whose values have ``interval`` (an Interval, or
        ``None``), ``learned`` (the seeds that learned), ``seeds`` (the seeds run) and
        ``chance`` (the chance level, or ``None``): the interval over the
        learned seeds of each seed's mean ``value`` over the lengths past ``L`` (``None``
        when no seed learned: report it as not learned). ``chance`` is the rows' ``chance``
        column when they have one (the token-level chance of the task).
    """
    from posenc.experiments.stats import mean_interval

    learned = learned_cells(rows, criterion=criterion, training=training)
    per_seed, chance = defaultdict(lambda: defaultdict(list)), {}
    for row in rows:
        if not row["in_distribution"]:
            per_seed[(row["task"], row["scheme"])][row["seed"]].append(float(row[value]))
            if "chance" in row:
                chance[(row["task"], row["scheme"])] = float(row["chance"])
    out = {}
    for key, seeds in per_seed.items():
        kept = [s for s in sorted(seeds) if learned.get((*key, s), False)]
        out[key] = {"interval": mean_interval([np.mean(seeds[s]) for s in kept], level)
                    if kept else None, "learned": kept, "seeds": sorted(seeds),
                    "chance": chance.get(key)}
    return out


def beyond_verdict(rows, task: str, scheme: str, reference: str, expected, *,
                   value: str = "exact_match", criterion: float = 0.95, training=None,
                   level: float = 0.95):
    """The verdict on ``scheme - reference`` of the accuracy past the training length on one
    task, paired by seed; ``"inconclusive (not learned)"`` unless every seed of both schemes
    learned the task in distribution (:func:`learned_cells`).

    Example:
        >>> rows = [{"task": "copy", "scheme": k, "seed": s, "length": n,
        ...          "in_distribution": n == 1, "exact_match": 1.0 if n == 1 else a + s / 10}
        ...         for s in range(3) for k, a in (("a", 0.2), ("b", 0.5)) for n in (1, 2)]
        >>> got = beyond_verdict(rows, "copy", "b", "a", "positive")
        >>> got.word, round(got.interval.mean, 6)
        ('agree', 0.3)
    """
    from posenc.experiments.stats import verdict

    learned = learned_cells(rows, criterion=criterion, training=training)
    per_seed = defaultdict(lambda: defaultdict(list))
    for row in rows:
        if row["task"] == task and row["scheme"] in (scheme, reference) \
                and not row["in_distribution"]:
            per_seed[row["scheme"]][row["seed"]].append(float(row[value]))
    if scheme not in per_seed or reference not in per_seed:
        raise ValueError(f"beyond_verdict: task={task!r} has no rows past the training length "
                         f"for scheme={scheme!r} and reference={reference!r}; pass schemes "
                         "and a task of the rows.")
    seeds = sorted(set(per_seed[scheme]) & set(per_seed[reference]))
    diff = [{"scheme": k, "seed": s, value: float(np.mean(per_seed[k][s]))}
            for k in (scheme, reference) for s in seeds]
    flags = [learned.get((task, k, s), False) for k in (scheme, reference) for s in seeds]
    return verdict(paired_differences(diff, value, reference, level=level)[scheme], expected,
                   learned=flags)
