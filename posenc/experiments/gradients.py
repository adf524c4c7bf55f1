"""``gradients``: does the positional table get its share of the gradient?

For every scheme of the lab's Transformer that has positional weights (learned, hybrid, t5,
shaw) and every seed, a character language model trains on the Python reference as in
:mod:`posenc.experiments.lm_extrapolation`, while a gradient monitor records, at every step,
the gradient norm of the positional weights and of the rest of the model (PyTorch: tensor
hooks, :class:`posenc.torch.diagnostics.GradientMonitor`; Keras: the backend's autodiff in a
custom loop, :class:`posenc.keras.diagnostics.GradientMonitor`). Controls break the learned
table's gradient on purpose (PyTorch only): ``learned-scaled-1e-2``, ``learned-scaled-1e-3``
and ``learned-scaled``, whose table enters the model multiplied by ``1e-2``, ``1e-3`` or
``1e-4`` (so its gradient is too); ``learned-detached``, whose table is detached from the
graph (no gradient at all); and ``learned-boosted``, whose forward pass is unchanged but whose
gradient is multiplied by ``1e4`` on its way back (a gradient out of scale the other way).

:func:`validate` turns the runs into a test of the monitor as a detector: it derives the
healthy range (pooled, and one band per scheme) from some seeds' healthy runs and scores the
runs it was not derived from (held-out seeds, the controls, another framework), counting hits
and false alarms.

One row per (scheme, seed, step): both norms, the per-weight RMS ratio
(:attr:`posenc.diagnostics.GradientLog.ratios`) and the loss. The metadata hold a summary per
scheme (median and percentiles of the ratio, :func:`posenc.diagnostics.gradient_health`) and
the healthy range these measurements give by :func:`healthy_range`, the rule behind
:data:`posenc.diagnostics.GRADIENT_RATIO_RANGE`.
"""

from __future__ import annotations

import math

import numpy as np

from posenc.diagnostics import GRADIENT_RATIO_RANGE, gradient_health
from posenc.experiments import data
from posenc.experiments.cli import add_training_arguments, sizes

NAME = "gradients"

#: The schemes of the lab's Transformer that have positional weights.
GRADIENT_SCHEMES = ("learned", "hybrid", "t5", "shaw")
#: Starved on purpose (PyTorch only): control -> the factor the learned table enters the
#: model with (0: detached).
STARVED = {"learned-scaled-1e-2": 1e-2, "learned-scaled-1e-3": 1e-3, "learned-scaled": 1e-4,
           "learned-detached": 0.0}
#: Boosted on purpose (PyTorch only): control -> the factor its gradient is multiplied by.
BOOSTED = {"learned-boosted": 1e4}
#: Every control (PyTorch only) -> its factor.
CONTROLS = {**STARVED, **BOOSTED}
#: The verdict a detector should give each control.
EXPECTED = {**{name: "starved" for name in STARVED}, **{name: "dominant" for name in BOOSTED}}

QUICK = dict(train_len=32, steps=60, batch_size=16, dim=64, depth=2, heads=4, lr=3e-3)
DEFAULT = dict(train_len=128, steps=1000, batch_size=64, dim=256, depth=4, heads=8, lr=1e-3)

#: The seeds the committed healthy range is derived from, and those held out to test it (one
#: result file each: ``--seed N --tag seedN``).
DERIVE_SEEDS = (0, 1, 2)
HELD_OUT_SEEDS = (3, 4, 5)

#: The healthy range is the measured span of the healthy schemes' ratios (their 1st to 99th
#: percentile over all steps and seeds) widened by this factor on each side, then rounded out
#: to powers of ten.
WIDEN = 10.0


def healthy_range(ratios) -> tuple[float, float]:
    """The healthy range that measured ratios of healthy runs give (see :data:`WIDEN`).

    Example:
        >>> healthy_range([0.04, 0.2, 3.9])
        (0.001, 100.0)
    """
    ratios = np.asarray(ratios, dtype=np.float64)
    ratios = ratios[np.isfinite(ratios) & (ratios > 0)]
    low, high = np.percentile(ratios, [1, 99])
    return (float(10.0 ** math.floor(math.log10(low / WIDEN))),
            float(10.0 ** math.ceil(math.log10(high * WIDEN))))


def add_arguments(parser) -> None:
    group = parser.add_argument_group(NAME)
    add_training_arguments(
        group, GRADIENT_SCHEMES,
        schemes_help=(f"schemes and controls (default: {' '.join(GRADIENT_SCHEMES)} "
                      f"and, in PyTorch, {' '.join(CONTROLS)})"))


def settings(args) -> dict:
    default = GRADIENT_SCHEMES + (tuple(CONTROLS) if args.framework == "torch" else ())
    chosen = sizes(args, QUICK, DEFAULT, default)
    controls = [scheme for scheme in chosen["schemes"] if scheme in CONTROLS]
    if controls and args.framework != "torch":
        raise ValueError(f"gradients: schemes={controls} are PyTorch controls "
                         f"(torch.nn.utils.parametrize), got framework={args.framework!r}; "
                         "run them with --framework torch or leave them out.")
    return chosen


def starve(model, factor: float):
    """Cut a PyTorch Transformer's learned table off from the gradient (a control).

    ``factor > 0``: the table enters the model multiplied by ``factor`` (its gradient too);
    ``factor == 0``: the table is detached (no gradient). Uses ``torch.nn.utils.parametrize``,
    so the model's code is unchanged and ``model.position_weights()`` still lists the table.
    """
    import torch.nn.utils.parametrize as parametrize
    from torch import nn

    class _Starve(nn.Module):
        def forward(self, table):
            return table.detach() if factor == 0 else table * factor

    parametrize.register_parametrization(model.position_encoding, "table", _Starve())
    return model


def boost(model, factor: float):
    """Multiply the gradient of a PyTorch Transformer's learned table by ``factor`` (a control).

    The forward pass is unchanged (the table enters the model as it is); only the gradient
    that flows back into it is scaled, through a ``torch.nn.utils.parametrize``
    parametrization, as in :func:`starve`.
    """
    import torch
    import torch.nn.utils.parametrize as parametrize
    from torch import nn

    class _Scale(torch.autograd.Function):
        @staticmethod
        def forward(ctx, table):
            return table.view_as(table)

        @staticmethod
        def backward(ctx, grad):
            return grad * factor

    class _Boost(nn.Module):
        def forward(self, table):
            return _Scale.apply(table)

    parametrize.register_parametrization(model.position_encoding, "table", _Boost())
    return model


def _train(scheme, seed, s, ctx, train_ids, vocab_size):
    """Train one model under the face's gradient monitor; returns ``(log, losses)``."""
    base = "learned" if scheme in CONTROLS else scheme
    model = ctx.runner.make_model(base, vocab_size, dim=s["dim"], depth=s["depth"],
                                  heads=s["heads"], max_len=s["train_len"], seed=seed)
    if scheme in STARVED:
        starve(model, STARVED[scheme])
    elif scheme in BOOSTED:
        boost(model, BOOSTED[scheme])
    return ctx.runner.fit_monitored(model, lambda step: _batch(train_ids, s, seed, step),
                                    steps=s["steps"], lr=s["lr"], desc=f"{scheme} seed {seed}")


def _batch(train_ids, s, seed, step):
    return data.lm_batch(train_ids, s["batch_size"], s["train_len"],
                         seed=seed * 1_000_003 + step)


def summarize(log) -> dict:
    """Median, spread and verdict of one run's ratios."""
    ratios = log.ratios
    p1, p50, p99 = np.percentile(ratios, [1, 50, 99])
    return {"median": float(p50), "p1": float(p1), "p99": float(p99),
            "min": float(ratios.min()), "max": float(ratios.max()), "health": log.health()}


def run_medians(rows) -> dict:
    """``{(scheme, seed): median ratio}`` of each run in ``rows`` (the experiment's rows)."""
    ratios = {}
    for row in rows:
        ratios.setdefault((row["scheme"], row["seed"]), []).append(row["ratio"])
    return {key: float(np.nanmedian(values)) for key, values in ratios.items()}


def validate(derive_rows, test_rows) -> dict:
    """Score the monitor as a detector of a cut-off gradient on runs it was not derived from.

    From the healthy runs of ``derive_rows`` it derives, by :func:`healthy_range`, a pooled
    range (all schemes together, the rule of :data:`posenc.diagnostics.GRADIENT_RATIO_RANGE`)
    and a band per scheme (each scheme's own runs). It then gives every run of ``test_rows`` a
    verdict (:func:`posenc.diagnostics.gradient_health` of its median ratio) under both, a
    control judged by the band of ``learned``, the scheme it breaks.

    Returns:
        ``{"pooled": (low, high), "bands": {scheme: (low, high)}, "runs": [...]}``, one run
        per ``(scheme, seed)`` of ``test_rows``: ``scheme``, ``seed``, ``median``,
        ``expected`` (``"healthy"``, or the control's :data:`EXPECTED`), ``pooled`` and
        ``per_scheme`` (the two verdicts); a verdict equal to ``expected`` is a hit for a
        control, a verdict other than ``"healthy"`` a false alarm for a healthy run.

    Example:
        >>> rows = [{"scheme": "learned", "seed": 0, "ratio": r} for r in (3.0, 5.0)]
        >>> test = [{"scheme": "learned-scaled-1e-2", "seed": 3, "ratio": 0.04}]
        >>> got = validate(rows, test)
        >>> got["pooled"], got["runs"][0]["pooled"], got["runs"][0]["per_scheme"]
        ((0.1, 100.0), 'starved', 'starved')
    """
    healthy = [row for row in derive_rows if row["scheme"] not in CONTROLS]
    pooled = healthy_range([row["ratio"] for row in healthy])
    bands = {}
    for scheme in dict.fromkeys(row["scheme"] for row in healthy):
        bands[scheme] = healthy_range([row["ratio"] for row in healthy
                                       if row["scheme"] == scheme])
    runs = []
    for (scheme, seed), median in run_medians(test_rows).items():
        base = "learned" if scheme in CONTROLS else scheme
        runs.append({"scheme": scheme, "seed": seed, "median": median,
                     "expected": EXPECTED.get(scheme, "healthy"),
                     "pooled": gradient_health(median, pooled),
                     "per_scheme": gradient_health(median, bands[base])})
    return {"pooled": pooled, "bands": bands, "runs": runs}


def run(args, ctx) -> dict:
    s = settings(args)
    vocab, train_ids, _ = data.split("pydoc")
    rows, summary, healthy_ratios = [], {}, []
    for seed in ctx.seeds:
        for scheme in s["schemes"]:
            log, losses = _train(scheme, seed, s, ctx, train_ids, len(vocab))
            ratios = log.ratios
            for step in range(log.steps):
                rows.append({"scheme": scheme, "seed": seed, "step": step,
                             "position_norm": log.position_norms[step],
                             "rest_norm": log.rest_norms[step], "ratio": float(ratios[step]),
                             "loss": losses[step]})
            summary[f"{scheme}/{seed}"] = {**summarize(log),
                                           "position_weights": log.position_count,
                                           "other_weights": log.rest_count}
            if scheme not in CONTROLS:
                healthy_ratios.extend(ratios.tolist())
            ctx.log(f"{scheme} seed {seed}: median ratio {summary[f'{scheme}/{seed}']['median']:.3g}"
                    f" ({summary[f'{scheme}/{seed}']['health']})")
            ctx.write_results(rows, {"settings": s, "summary": summary, "partial": True})
    measured = healthy_range(healthy_ratios) if healthy_ratios else None
    extra = {"settings": s, "summary": summary,
             "healthy_range_measured": measured,
             "healthy_range_rule": "1st-99th percentile of the healthy schemes' ratios, "
                                   f"widened {WIDEN:g}x each side, rounded out to powers of 10",
             "healthy_range_used": list(GRADIENT_RATIO_RANGE),
             "verdicts": {key: gradient_health(value["median"])
                          for key, value in summary.items()},
             "expected": {key: EXPECTED.get(key.split("/")[0], "healthy") for key in summary},
             "partial": False}
    path = ctx.write_results(rows, extra)
    return {"results": path, "rows": len(rows)}
