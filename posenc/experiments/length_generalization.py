"""``length-generalization``: train on short examples, test on longer ones (Kazemnejad et al.).

For every task (copy, reverse, sort, addition; :mod:`posenc.experiments.data`), every
positional scheme and every seed, a causal Transformer is trained on examples of lengths
``1 .. train_len`` and tested at lengths ``1 .. test_len`` (twice ``train_len`` by default).
A row per (task, scheme, seed, length) holds the exact-match accuracy (the whole output right)
and the token accuracy. Every scheme sees the same training batches and the same test
examples for a given seed.
"""

from __future__ import annotations

from posenc.experiments import data
from posenc.experiments.cli import SCHEMES, add_training_arguments, sizes
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


def settings(args) -> dict:
    """The sizes in force: the options given, else the quick or default ones."""
    chosen = sizes(args, QUICK, DEFAULT, SCHEMES)
    if chosen["test_len"] is None:
        chosen["test_len"] = 2 * chosen["train_len"]
    if chosen["test_len"] < chosen["train_len"]:
        raise ValueError(f"length-generalization: test_len={chosen['test_len']} is shorter "
                         f"than train_len={chosen['train_len']}; test at least as long.")
    return chosen


def _data_seed(seed: int, task: str) -> int:
    return 1_000 * seed + list(data.TASKS).index(task)


def run(args, ctx) -> dict:
    s = settings(args)
    rows, training = [], []
    for task in s["tasks"]:
        vocab = data.task_vocab_size(task)
        width = data.sequence_width(task, s["train_len"])
        max_len = data.sequence_width(task, s["test_len"])
        for seed in ctx.seeds:
            base = _data_seed(seed, task)

            def batch_fn(step, base=base, task=task, width=width):
                rng_seed = base * 100_003 + step
                import numpy as np

                lengths = np.random.default_rng(rng_seed).integers(
                    1, s["train_len"] + 1, size=s["batch_size"])
                return data.task_batch(task, lengths, seed=rng_seed + 1, width=width)

            tests = {n: data.task_batch(task, [n] * s["eval_examples"],
                                        seed=10_000_000 + 1_000 * base + n)
                     for n in range(1, s["test_len"] + 1)}
            for scheme in s["schemes"]:
                model = ctx.runner.make_model(scheme, vocab, dim=s["dim"], depth=s["depth"],
                                              heads=s["heads"], max_len=max_len, seed=seed)
                label = f"{task} {scheme} seed {seed}"
                result = ctx.runner.fit(model, batch_fn, steps=s["steps"], lr=s["lr"],
                                        desc=label)
                total, position = ctx.runner.count_parameters(model)
                training.append({"task": task, "scheme": scheme, "seed": seed,
                                 "first_loss": result["losses"][0],
                                 "final_loss": result["losses"][-1],
                                 "seconds": round(result["seconds"], 2),
                                 "parameters": total, "position_parameters": position})
                for n, batch in tests.items():
                    got = ctx.runner.evaluate(model, split_rows(batch, 256),
                                              desc=f"{label} len {n}")
                    rows.append({"task": task, "scheme": scheme, "seed": seed, "length": n,
                                 "in_distribution": n <= s["train_len"],
                                 "exact_match": round(got["exact_match"], 6),
                                 "token_accuracy": round(got["token_accuracy"], 6)})
                ind = [r["exact_match"] for r in rows[-len(tests):] if r["in_distribution"]]
                out = [r["exact_match"] for r in rows[-len(tests):] if not r["in_distribution"]]
                ctx.log(f"{label}: loss {result['losses'][-1]:.3f}, exact match "
                        f"{sum(ind) / len(ind):.3f} up to L, {sum(out) / len(out):.3f} beyond "
                        f"({result['seconds']:.0f} s)")
                ctx.write_results(rows, {"settings": s, "training": training, "partial": True})
    path = ctx.write_results(rows, {"settings": s, "training": training, "partial": False})
    return {"results": path, "rows": len(rows)}
