"""Save a benchmark's table with the metadata of its run, beside the lab's results.

The rows go to ``posenc/experiments/results/<name>/results.json`` (and ``.csv``), or
``results-cuda.json`` for a GPU run, through the lab's own records
(:mod:`posenc.experiments.records`: :func:`~posenc.experiments.records.metadata` and
:func:`~posenc.experiments.records.write_results`): the command, the commit, the hardware, the
versions, the start time and the wall time. ``posenc.experiments.load_results(name)`` reads
them back (the Performance chapter does). ``--out DIR`` writes elsewhere, ``--no-save``
nowhere.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

from posenc.experiments.records import RESULTS_DIR, metadata, without_out, write_results


def add_arguments(parser) -> None:
    """The options every benchmark shares for its results."""
    parser.add_argument("--out", default=None,
                        help="folder of the results (default: the committed results)")
    parser.add_argument("--no-save", action="store_true", help="print the table only")


def save(name: str, rows: list, args, *, started: float, **extra) -> Path | None:
    """Write ``rows`` (one flat dict per measurement) with the run's metadata."""
    if args.no_save:
        return None
    import torch

    device = torch.device(args.device)
    command = " ".join(["python", f"benchmarks/{Path(sys.argv[0]).name}",
                        *without_out(sys.argv[1:])])       # no folder of one machine
    meta = {"benchmark": name, **metadata(command, started=started, device=device, **extra),
            "device": device.type}
    stem = "results" if device.type == "cpu" else f"results-{device.type}"
    path = write_results(Path(args.out or RESULTS_DIR) / name, stem, rows, meta)
    print(f"results: {os.path.relpath(path)}")
    return path
