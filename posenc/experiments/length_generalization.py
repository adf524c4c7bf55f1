"""``length-generalization``: train on short examples, test on longer ones (Kazemnejad et al.).

For every task (copy, reverse, sort, addition; :mod:`posenc.experiments.data`), every
positional scheme and every seed, a causal Transformer is trained on examples of lengths
``1 .. train_len`` and tested at lengths ``1 .. test_len`` (twice ``train_len`` by default).
A row per (task, scheme, seed, length) holds the exact-match accuracy (the whole output right)
and the token accuracy, beside the chance levels of a uniform guess (``chance``, per token;
``chance_exact``, of the whole output). Every scheme sees the same training batches and the
same test examples for a given seed.

Options that make the experiment test the claim (none is on by default, so that the committed
runs repeat):

* ``--bos``: every example starts with a beginning-of-sequence token, from which a model
  without positions can count (Kazemnejad et al. use one).
* ``--criterion X`` (e.g. ``0.95``): every ``--check-every`` steps the exact match on a
  held-out set of the trained lengths (``--heldout-examples`` per length, drawn apart from the
  training and test examples) is measured, and training stops when it reaches ``X`` (at most
  ``--steps`` steps). ``meta["training"]`` records ``learned``, ``heldout_exact`` and
  ``steps_run``; a model that never reaches ``X`` is recorded as not learned, and
  :func:`posenc.experiments.analysis.beyond_training` reports accuracy past ``L`` only for the
  learned ones.
* ``--eval-examples N``: test examples per length (256 or more for intervals of about
  ``+-0.06`` on an accuracy near one half).
* ``--t5-clamp``: each ``t5`` model is tested a second time with the buckets past the longest
  trained distance set to that distance's bias
  (:func:`posenc.experiments.controls.clamp_t5_buckets`); its rows have scheme
  ``"t5-clamped"``.
* ``--loss-history``: every training step's loss in ``meta["training"]``.
"""

from __future__ import annotations

import hashlib

import numpy as np

from posenc.experiments import data
from posenc.experiments.cli import SCHEMES, add_training_arguments, sizes
from posenc.experiments.lm_extrapolation import history
from posenc.experiments.runners import split_rows

NAME = "length-generalization"

#: Sizes: the quick setting (2 CPU cores, minutes) and the default (one GPU).
QUICK = dict(tasks=["copy", "reverse"], train_len=8, test_len=None, steps=400, batch_size=32,
             dim=64, depth=2, heads=4, lr=3e-3, eval_examples=64)
DEFAULT = dict(tasks=["copy", "reverse", "sort", "addition"], train_len=20, test_len=None,
               steps=4000, batch_size=64, dim=128, depth=4, heads=4, lr=1e-3,
               eval_examples=256)


def add_arguments(parser) -> None:
    """Options of this experiment (each default depends on ``--quick``)."""
    group = parser.add_argument_group(NAME)
    group.add_argument("--tasks", nargs="+", choices=list(data.TASKS), default=None)
    add_training_arguments(group, SCHEMES)
    group.add_argument("--test-len", type=int, default=None, help="longest test length (2L)")
    group.add_argument("--eval-examples", type=int, default=None,
                       help="test examples per length")
    group.add_argument("--bos", action="store_true",
                       help="start every example with a beginning-of-sequence token")
    group.add_argument("--criterion", type=float, default=None,
                       help="train until the exact match on held-out examples of the trained "
                            "lengths reaches this (e.g. 0.95), else record 'not learned'")
    group.add_argument("--check-every", type=int, default=None,
                       help="steps between two checks of the criterion (default: steps / 20)")
    group.add_argument("--heldout-examples", type=int, default=32,
                       help="held-out examples per trained length for the criterion")
    group.add_argument("--loss-history", action="store_true",
                       help="record every training step's loss in meta['training']")
    group.add_argument("--t5-clamp", action="store_true",
                       help="also test each t5 model with the buckets past the trained "
                            "distances clamped to the last trained one (scheme t5-clamped)")


def settings(args) -> dict:
    """The sizes in force: the options given, else the quick or default ones."""
    chosen = sizes(args, QUICK, DEFAULT, SCHEMES)
    if chosen["test_len"] is None:
        chosen["test_len"] = 2 * chosen["train_len"]
    if chosen["test_len"] < chosen["train_len"]:
        raise ValueError(f"length-generalization: test_len={chosen['test_len']} is shorter "
                         f"than train_len={chosen['train_len']}; test at least as long.")
    if getattr(args, "bos", False):
        chosen["bos"] = True
    criterion = getattr(args, "criterion", None)
    if criterion is not None:
        if not 0.0 < criterion <= 1.0:
            raise ValueError(f"length-generalization: criterion must be in (0, 1], got "
                             f"criterion={criterion}; pass an exact match such as 0.95.")
        every = args.check_every or max(1, chosen["steps"] // 20)
        if every < 1 or args.heldout_examples < 1:
            raise ValueError(f"length-generalization: check_every and heldout_examples must "
                             f"be positive, got check_every={every}, heldout_examples="
                             f"{args.heldout_examples}; pass positive integers.")
        chosen.update(criterion=criterion, check_every=every,
                      heldout_examples=args.heldout_examples)
    if getattr(args, "t5_clamp", False):
        chosen["t5_clamp"] = True
    if getattr(args, "loss_history", False):
        chosen["loss_history"] = True
    return chosen


def _data_seed(seed: int, task: str) -> int:
    return 1_000 * seed + list(data.TASKS).index(task)


def _evaluate_lengths(ctx, model, tests, label, base_row):
    rows = []
    for n, batch in tests.items():
        got = ctx.runner.evaluate(model, split_rows(batch, 256), desc=f"{label} len {n}")
        rows.append({**base_row(n), "exact_match": round(got["exact_match"], 6),
                     "token_accuracy": round(got["token_accuracy"], 6)})
    return rows


def _criterion_stop(ctx, model, heldout, s, record):
    """The ``stop`` of :meth:`Runner.fit`: every ``check_every`` steps, the held-out exact
    match (pooled over the trained lengths) against ``criterion``."""
    def stop(step, losses):
        if (step + 1) % s["check_every"] and step + 1 != s["steps"]:
            return False
        got = ctx.runner.evaluate(model, split_rows(heldout, 256), desc="held out")
        if ctx.runner.framework == "torch":
            model.train()
        record.update(heldout_exact=round(float(got["exact_match"]), 6), steps_run=step + 1,
                      learned=bool(got["exact_match"] >= s["criterion"]))
        return record["learned"]

    return stop


def run(args, ctx) -> dict:
    from posenc.experiments.controls import clamp_t5_buckets

    s = settings(args)
    bos = s.get("bos", False)
    rows, training = [], []
    digest = hashlib.sha256()           # of every test example, the run's data_sha256
    for task in s["tasks"]:
        vocab = data.task_vocab_size(task, bos=bos)
        width = data.sequence_width(task, s["train_len"], bos=bos)
        max_len = data.sequence_width(task, s["test_len"], bos=bos)
        chance = data.task_chance(task)
        for seed in ctx.seeds:
            base = _data_seed(seed, task)

            def batch_fn(step, base=base, task=task, width=width):
                rng_seed = base * 100_003 + step
                lengths = np.random.default_rng(rng_seed).integers(
                    1, s["train_len"] + 1, size=s["batch_size"])
                return data.task_batch(task, lengths, seed=rng_seed + 1, width=width, bos=bos)

            tests = {n: data.task_batch(task, [n] * s["eval_examples"],
                                        seed=10_000_000 + 1_000 * base + n, bos=bos)
                     for n in range(1, s["test_len"] + 1)}
            for batch in tests.values():
                for array in batch:
                    digest.update(np.ascontiguousarray(array).tobytes())
            heldout = None
            if "criterion" in s:
                lengths = [n for n in range(1, s["train_len"] + 1)
                           for _ in range(s["heldout_examples"])]
                heldout = data.task_batch(task, lengths, seed=20_000_000 + 1_000 * base,
                                          width=width, bos=bos)
            for scheme in s["schemes"]:
                model = ctx.runner.make_model(scheme, vocab, dim=s["dim"], depth=s["depth"],
                                              heads=s["heads"], max_len=max_len, seed=seed,
                                              train_len=s["train_len"])
                label = f"{task} {scheme} seed {seed}"
                record = {}
                stop = None if heldout is None else _criterion_stop(ctx, model, heldout, s,
                                                                    record)
                result = ctx.runner.fit(model, batch_fn, steps=s["steps"], lr=s["lr"],
                                        desc=label, stop=stop)
                total, position = ctx.runner.count_parameters(model)
                training.append({"task": task, "scheme": scheme, "seed": seed,
                                 "first_loss": result["losses"][0],
                                 "final_loss": result["losses"][-1],
                                 "seconds": round(result["seconds"], 2),
                                 "parameters": total, "position_parameters": position,
                                 **record, **history(result, s)})

                def base_row(n, scheme=scheme):
                    out_len = n + 1 if task == "addition" else n
                    return {"task": task, "scheme": scheme, "seed": seed, "length": n,
                            "in_distribution": n <= s["train_len"], "chance": chance,
                            "chance_exact": chance ** out_len}

                got = _evaluate_lengths(ctx, model, tests, label, base_row)
                rows += got
                if s.get("t5_clamp") and scheme == "t5":
                    clamp_t5_buckets(model, width - 1)
                    rows += _evaluate_lengths(ctx, model, tests, f"{label} clamped",
                                              lambda n: base_row(n, "t5-clamped"))
                ind = [r["exact_match"] for r in got if r["in_distribution"]]
                out = [r["exact_match"] for r in got if not r["in_distribution"]]
                beyond = f"{sum(out) / len(out):.3f}" if out else "-"
                learned = ("" if not record else
                           f", {'learned' if record['learned'] else 'NOT learned'} "
                           f"(held out {record['heldout_exact']:.3f} after "
                           f"{record['steps_run']} steps)")
                ctx.log(f"{label}: loss {result['losses'][-1]:.3f}, exact match "
                        f"{sum(ind) / len(ind):.3f} up to L, {beyond} beyond "
                        f"({result['seconds']:.0f} s){learned}")
                ctx.write_results(rows, {"settings": s, "training": training, "partial": True})
    path = ctx.write_results(rows, {"settings": s, "training": training, "partial": False,
                                    "data_sha256": digest.hexdigest()})
    return {"results": path, "rows": len(rows)}

