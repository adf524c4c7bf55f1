"""The lab's experiments: one Transformer, every positional scheme, measured and saved.

Run one from a shell::

    python -m posenc.experiments NAME [--quick] [--seed N | --seeds N ...] [--out DIR]
                                      [--framework torch|keras] [options of NAME]
    torchrun --nproc_per_node 2 -m posenc.experiments NAME ...   # DistributedDataParallel

``python -m posenc.experiments NAME --help`` lists an experiment's options.
:data:`EXPERIMENTS` maps each name to the module that implements it; every such module has
``add_arguments(parser)`` (its own options) and ``run(args, ctx) -> dict`` (``ctx`` an
:class:`~posenc.experiments.context.ExperimentContext`). The shared pieces: the data
(:mod:`posenc.experiments.data`), the context (:mod:`posenc.experiments.context`), the model,
its training and reading in either framework (:mod:`posenc.experiments.runners`, one runner
per framework, ``ctx.runner``), the metadata and results (:mod:`posenc.experiments.records`)
and the shared options (:mod:`posenc.experiments.cli`).

After every trained model the results so far are written (``meta["partial"]`` is true until
the run ends), so a run that stops early leaves what it measured.

The results of the runs the book shows are package data in
``posenc/experiments/results/<name>/``; :func:`load_results` reads them.
"""

from __future__ import annotations

import importlib

from posenc.experiments.records import read_results, results_path

__all__ = ["EXPERIMENTS", "experiment", "load_results", "results_path"]

#: Experiment name -> module (imported only when the experiment runs). One entry per line.
EXPERIMENTS = {
    "length-generalization": "posenc.experiments.length_generalization",
    "lm-extrapolation": "posenc.experiments.lm_extrapolation",
    "ablation": "posenc.experiments.ablation",
    "probe": "posenc.experiments.probe",
    "gradients": "posenc.experiments.gradients",
}


def experiment(name: str):
    """The module of experiment ``name`` (it has ``add_arguments`` and ``run``)."""
    from posenc._checks import check_choice

    check_choice("name", name, EXPERIMENTS, what="posenc.experiments",
                 fix="run `python -m posenc.experiments --help` for the list")
    return importlib.import_module(EXPERIMENTS[name])


def load_results(name: str, *, framework: str = "torch", tag=None, folder=None) -> dict:
    """The saved results of experiment ``name``: ``{"meta": {...}, "rows": [...]}``.

    ``meta`` holds the command, commit, hardware, versions, seeds and wall time of the run;
    ``rows`` one flat dict per measurement. ``tag``: the run's ``--tag``. ``folder`` defaults
    to the committed results.

    Example:
        >>> results = load_results("lm-extrapolation")          # doctest: +SKIP
        >>> sorted(results) == ["meta", "rows"]                   # doctest: +SKIP
        True
    """
    path = results_path(name, framework=framework, tag=tag, folder=folder)
    if not path.exists():
        raise ValueError(f"load_results: no results for name={name!r} (framework="
                         f"{framework!r}) in {path.parent}; run `python -m posenc.experiments "
                         f"{name} --out DIR` and pass folder=DIR.")
    return read_results(path)
