"""The command line of the lab: ``python -m posenc.experiments NAME [options]``.

Common options (every experiment): ``--quick``, ``--seed N`` or ``--seeds N [N ...]``,
``--out DIR``, ``--framework torch|keras``, ``--init-from-torch`` (Keras starting from
PyTorch's weights of the same seed), ``--device``, ``--no-progress``. Each experiment
adds its own (``python -m posenc.experiments NAME --help``).

The framework's runner (:data:`posenc.experiments.runners.RUNNERS`) is chosen here, once,
and reaches the experiment as ``ctx.runner``.

Under ``torchrun`` (the environment holds ``WORLD_SIZE`` > 1) the process group is started
(NCCL on CUDA, else gloo), each process takes the device of its ``LOCAL_RANK``, and rank 0
alone logs and writes.
"""

from __future__ import annotations

import argparse
import os
import shlex
import sys
from pathlib import Path

from posenc.experiments import EXPERIMENTS, experiment
from posenc.experiments.context import ExperimentContext
from posenc.experiments.records import without_out

__all__ = ["SCHEMES", "add_training_arguments", "sizes", "build_parser", "parse_args", "main"]

FRAMEWORKS = ("torch", "keras")

#: Positional schemes the lab compares by default (a subset of the Transformer's ``POSITIONS``).
SCHEMES = ("none", "sinusoidal", "learned", "t5", "alibi", "rope")


def add_training_arguments(group, schemes, *, schemes_help: str | None = None) -> None:
    """The options every lab experiment shares: ``--schemes``, ``--train-len`` (the training
    length L; the longest one for tasks of several lengths), ``--steps``, ``--batch-size``,
    ``--dim``, ``--depth``, ``--heads``, ``--lr``. Their defaults are ``None``: the ``--quick``
    or default size (see :func:`sizes`)."""
    group.add_argument("--schemes", nargs="+", default=None,
                       help=schemes_help or f"positional schemes (default: {' '.join(schemes)})")
    group.add_argument("--train-len", type=int, default=None, help="training length L")
    for option in ("steps", "batch-size", "dim", "depth", "heads"):
        group.add_argument(f"--{option}", type=int, default=None)
    group.add_argument("--lr", type=float, default=None)


def sizes(args, quick: dict, default: dict, schemes) -> dict:
    """The settings in force: each option given, else its ``quick`` or ``default`` value, and
    the schemes asked for, else ``schemes``."""
    base = quick if args.quick else default
    chosen = {k: (getattr(args, k) if getattr(args, k, None) is not None else v)
              for k, v in base.items()}
    chosen["schemes"] = list(getattr(args, "schemes", None) or schemes)
    return chosen


def _top_parser() -> argparse.ArgumentParser:
    return argparse.ArgumentParser(
        prog="python -m posenc.experiments",
        description="Run one of the lab's experiments and save its results as JSON and CSV.",
        epilog="experiments: " + ", ".join(EXPERIMENTS)
        + ". `python -m posenc.experiments NAME --help` lists NAME's options.")


def build_parser(name: str) -> argparse.ArgumentParser:
    """The parser of experiment ``name``: the common options plus the experiment's own."""
    module = experiment(name)
    parser = _top_parser()
    parser.prog = f"python -m posenc.experiments {name}"
    parser.add_argument("--quick", action="store_true",
                        help="the small setting (the committed quick runs' metadata give its time)")
    seeds = parser.add_mutually_exclusive_group()
    seeds.add_argument("--seed", type=int, default=None, help="one seed (default 0)")
    seeds.add_argument("--seeds", type=int, nargs="+", default=None,
                       help="several seeds, to report the spread")
    parser.add_argument("--out", type=Path, default=Path("runs"),
                        help="results go to OUT/NAME/ (default: runs)")
    parser.add_argument("--tag", default=None,
                        help="add -TAG to the result files' names (e.g. a second set of seeds)")
    parser.add_argument("--framework", choices=FRAMEWORKS, default="torch",
                        help="torch (default) or keras (the same recipe through Keras' train_on_batch)")
    parser.add_argument("--device", default="auto",
                        help="auto (CUDA, MPS, CPU), cpu, cuda, ... (PyTorch only)")
    parser.add_argument("--threads", type=int, default=None,
                        help="PyTorch CPU threads (default: posenc.pick_device's choice)")
    parser.add_argument("--init-from-torch", action="store_true",
                        help="Keras only: start every Keras model from the weights PyTorch "
                             "draws for the same scheme, sizes and seed")
    parser.add_argument("--no-progress", action="store_true", help="no progress bars")
    module.add_arguments(parser)
    return parser


def parse_args(argv=None) -> argparse.Namespace:
    """Parse ``NAME [options]``; ``args.name`` is the experiment and ``args.seeds`` a list."""
    argv = list(sys.argv[1:] if argv is None else argv)
    if not argv or argv[0].startswith("-"):
        top = _top_parser()
        top.add_argument("name", choices=list(EXPERIMENTS), help="the experiment to run")
        top.parse_args(argv)           # prints help or the error and exits
        raise SystemExit(2)
    name = argv[0]
    if name not in EXPERIMENTS:
        _top_parser().error(f"unknown experiment {name!r}; choose one of "
                            + ", ".join(EXPERIMENTS))
    args = build_parser(name).parse_args(argv[1:])
    args.name = name
    if args.seeds is None:
        args.seeds = [0 if args.seed is None else args.seed]
    if any(seed < 0 for seed in args.seeds):
        build_parser(name).error(f"seeds must be non-negative, got {args.seeds}")
    args.seed = args.seeds[0]
    if args.init_from_torch and args.framework != "keras":
        build_parser(name).error(f"--init-from-torch needs --framework keras, got --framework "
                                 f"{args.framework}; add --framework keras or drop "
                                 "--init-from-torch")
    return args


def _command(argv) -> str:
    """The command line as typed (``--out`` left out), with ``torchrun`` when under it."""
    argv = without_out(argv)
    launcher = "python -m posenc.experiments"
    world = int(os.environ.get("WORLD_SIZE", 1))
    if world > 1:
        launcher = f"torchrun --nproc_per_node {os.environ.get('LOCAL_WORLD_SIZE', world)} " \
                   "-m posenc.experiments"
    return " ".join([launcher, *map(shlex.quote, argv)])


def main(argv=None) -> int:
    """Run the experiment named in ``argv`` and print where its results went."""
    argv = list(sys.argv[1:] if argv is None else argv)
    args = parse_args(argv)
    world_size = int(os.environ.get("WORLD_SIZE", 1))
    from posenc.experiments.runners import RUNNERS

    runner = RUNNERS[args.framework]          # the one choice of framework
    device, rank = runner.setup(args, world_size)
    arguments = {k: v for k, v in vars(args).items() if k != "out"}
    ctx = ExperimentContext(name=args.name, framework=args.framework, device=device, rank=rank,
                            world_size=world_size, seeds=list(args.seeds), out=args.out,
                            quick=args.quick, progress_bars=not args.no_progress, tag=args.tag,
                            command=_command(argv), arguments=arguments)
    options = {"init_from_torch": True} if args.init_from_torch else {}
    ctx.runner = runner(ctx, **options)
    try:
        summary = experiment(args.name).run(args, ctx)
    finally:
        runner.teardown(world_size)
    if ctx.is_main and summary:
        for key, value in summary.items():
            print(f"{key}: {value}")
    return 0
