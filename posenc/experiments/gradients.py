"""``gradients``: does the positional table get its share of the gradient?

For every scheme of the lab's Transformer that has positional weights (learned, hybrid, t5,
shaw) and every seed, a character language model trains on the Python reference as in
:mod:`posenc.experiments.lm_extrapolation`, while a gradient monitor records, at every step,
the gradient norm of the positional weights and of the rest of the model (PyTorch: tensor
hooks, :class:`posenc.torch.diagnostics.GradientMonitor`; Keras: the backend's autodiff in a
custom loop, :class:`posenc.keras.diagnostics.GradientMonitor`). Two controls reproduce a
starved table on purpose (PyTorch only): ``learned-scaled``, whose table enters the model
multiplied by ``1e-4`` (so its gradient is too), and ``learned-detached``, whose table is
detached from the graph (no gradient at all).

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
from posenc.experiments.common import add_training_arguments, fit, make_model, sizes

NAME = "gradients"

#: The schemes of the lab's Transformer that have positional weights.
GRADIENT_SCHEMES = ("learned", "hybrid", "t5", "shaw")
#: Starved on purpose (PyTorch only): control name -> how the learned table is cut off.
CONTROLS = {"learned-scaled": 1e-4, "learned-detached": 0.0}

QUICK = dict(train_len=32, steps=60, batch_size=16, dim=64, depth=2, heads=4, lr=3e-3)
DEFAULT = dict(train_len=128, steps=1000, batch_size=64, dim=256, depth=4, heads=8, lr=1e-3)

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
    return sizes(args, QUICK, DEFAULT, default)


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


def _train_torch(scheme, seed, s, ctx, train_ids, vocab_size):
    from posenc.torch.diagnostics import GradientMonitor

    base = "learned" if scheme in CONTROLS else scheme
    model = make_model(base, vocab_size, dim=s["dim"], depth=s["depth"], heads=s["heads"],
                       max_len=s["train_len"], seed=seed)
    if scheme in CONTROLS:
        starve(model, CONTROLS[scheme])
    monitor = GradientMonitor(model)      # steps itself at every training forward pass
    result = fit(model, lambda step: _batch(train_ids, s, seed, step), steps=s["steps"],
                 ctx=ctx, lr=s["lr"], desc=f"{scheme} seed {seed}")
    monitor.remove()
    return monitor.log, result["losses"]


def _train_keras(scheme, seed, s, ctx, train_ids, vocab_size):
    import keras

    from posenc.keras.diagnostics import GradientMonitor

    model = make_model(scheme, vocab_size, framework="keras", dim=s["dim"], depth=s["depth"],
                       heads=s["heads"], max_len=s["train_len"], seed=seed)
    monitor = GradientMonitor(model)
    optimizer = keras.optimizers.AdamW(s["lr"], beta_2=0.98, weight_decay=0.01, clipnorm=1.0)
    loss_fn = keras.losses.SparseCategoricalCrossentropy(from_logits=True)
    losses = []
    for step in ctx.progress(range(s["steps"]), desc=f"{scheme} seed {seed}"):
        inputs, targets, _ = _batch(train_ids, s, seed, step)
        inputs, targets = inputs.astype("int32"), targets.astype("int32")
        value = {}

        def loss():
            value["loss"] = loss_fn(targets, model(inputs, training=True))
            return value["loss"]

        optimizer.apply(monitor.gradients(loss), model.trainable_variables)
        losses.append(float(keras.ops.convert_to_numpy(value["loss"])))
    return monitor.log, losses


def _batch(train_ids, s, seed, step):
    return data.lm_batch(train_ids, s["batch_size"], s["train_len"],
                         seed=seed * 1_000_003 + step)


def summarize(log) -> dict:
    """Median, spread and verdict of one run's ratios."""
    ratios = log.ratios
    p1, p50, p99 = np.percentile(ratios, [1, 50, 99])
    return {"median": float(p50), "p1": float(p1), "p99": float(p99),
            "min": float(ratios.min()), "max": float(ratios.max()), "health": log.health()}


def run(args, ctx) -> dict:
    s = settings(args)
    vocab, train_ids, _ = data.split("pydoc")
    train = _train_torch if ctx.framework == "torch" else _train_keras
    rows, summary, healthy_ratios = [], {}, []
    for seed in ctx.seeds:
        for scheme in s["schemes"]:
            log, losses = train(scheme, seed, s, ctx, train_ids, len(vocab))
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
             "partial": False}
    path = ctx.write_results(rows, extra)
    return {"results": path, "rows": len(rows)}
