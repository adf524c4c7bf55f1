"""Save a benchmark's table with the metadata of its run, beside the lab's results.

The rows go to ``posenc/experiments/results/<name>/results.json`` (and ``.csv``), or
``results-cuda.json`` for a GPU run, through the lab's own writer and metadata helpers
(:mod:`posenc.experiments.common`): the command, the commit, the hardware, the versions, the
start time and the wall time. ``posenc.experiments.load_results(name)`` reads them back (the
Performance chapter does). ``--out DIR`` writes elsewhere, ``--no-save`` nowhere.
"""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path

from posenc.experiments.common import RESULTS_DIR, git_commit, hardware, versions, write_results


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
    argv = [a for a in sys.argv[1:]]
    if "--out" in argv:                                   # no folder of one machine
        i = argv.index("--out")
        del argv[i:i + 2]
    meta = {"benchmark": name,
            "command": " ".join(["python", f"benchmarks/{Path(sys.argv[0]).name}", *argv]),
            "commit": git_commit(),
            "hardware": hardware(device),
            "versions": versions(),
            "device": device.type,
            "started_utc": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(started)),
            "wall_seconds": round(time.time() - started, 1),
            **extra}
    stem = "results" if device.type == "cpu" else f"results-{device.type}"
    path = write_results(Path(args.out or RESULTS_DIR) / name, stem, rows, meta)
    print(f"results: {os.path.relpath(path)}")
    return path
