"""The lab's records: where results live, what a run writes about itself, and reading it back.

* :data:`RESULTS_DIR` and :func:`results_path`: the committed results (package data) and the
  name of a run's files, ``<folder>/<name>/results[-keras][-tag].json``.
* :func:`metadata`: the command, git commit, hardware, versions, start and wall time of a run
  (an experiment's, through :meth:`~posenc.experiments.context.ExperimentContext.metadata`,
  or a benchmark's, through ``benchmarks/record.py``).
* :func:`write_results` / :func:`read_results`: ``{"meta": ..., "rows": [...]}`` as JSON, the
  rows also as CSV.

Framework-free: it imports neither PyTorch nor Keras.
"""

from __future__ import annotations

import csv
import json
import os
import platform
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

__all__ = ["RESULTS_DIR", "results_path", "metadata", "git_commit", "hardware", "versions",
           "without_out", "write_results", "read_results"]

#: Where the committed results live (package data).
RESULTS_DIR = Path(__file__).resolve().parent / "results"


def results_path(name: str, *, framework: str = "torch", tag=None, folder=None) -> Path:
    """Path of an experiment's results JSON: ``<folder>/<name>/results[-keras][-tag].json``;
    ``folder`` defaults to the committed results (package data).

    Example:
        >>> results_path("probe", framework="keras", tag="s1", folder="runs").as_posix()
        'runs/probe/results-keras-s1.json'
    """
    stem = "results" if framework == "torch" else f"results-{framework}"
    stem += f"-{tag}" if tag else ""
    return Path(folder or RESULTS_DIR) / name / f"{stem}.json"


# --------------------------------------------------------------------------- metadata


def git_commit(path=None) -> str:
    """The current commit of the repository holding ``path`` (``+dirty`` when files changed),
    or ``"unknown"`` outside a git checkout."""
    cwd = Path(path or Path(__file__).resolve().parent)
    try:
        commit = subprocess.run(["git", "rev-parse", "HEAD"], cwd=cwd, capture_output=True,
                                text=True, timeout=10, check=True).stdout.strip()
        dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"],
                               cwd=cwd, capture_output=True, text=True, timeout=10).stdout
    except (OSError, subprocess.SubprocessError):
        return "unknown"
    return commit + ("+dirty" if dirty.strip() else "")


def _cpu_name() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def hardware(device=None) -> dict:
    """CPU model and core count, the OS, the load average when it is called (a run's
    metadata is written at its end), the GPU name when ``device`` is CUDA, PyTorch's threads."""
    info = {"cpu": _cpu_name(), "cpu_cores": os.cpu_count(), "platform": platform.platform()}
    if hasattr(os, "getloadavg"):       # how busy the machine was over the last 1, 5, 15 minutes
        info["load_average"] = [round(x, 2) for x in os.getloadavg()]
    if device is not None and getattr(device, "type", None) == "cuda":
        import torch

        info["gpu"] = torch.cuda.get_device_name(device)
    if "torch" in sys.modules:
        info["torch_threads"] = sys.modules["torch"].get_num_threads()
    return info


#: The libraries whose versions a run records when it imported them: the frameworks, and
#: the libraries the benchmarks compare posenc with (Hugging Face transformers, keras-hub).
RECORDED_LIBRARIES = ("torch", "keras", "tensorflow", "jax", "transformers", "keras_hub")


def versions() -> dict:
    """Python, posenc, NumPy and the versions of the libraries of ``RECORDED_LIBRARIES``
    this process imported (the frameworks and the benchmarks' comparators)."""
    import posenc

    found = {"python": platform.python_version(), "posenc": posenc.__version__,
             "numpy": np.__version__}
    for name in RECORDED_LIBRARIES:
        if name in sys.modules:
            found[name] = getattr(sys.modules[name], "__version__", "?")
    if "keras" in sys.modules:
        found["keras_backend"] = sys.modules["keras"].backend.backend()
    return found


def without_out(argv) -> list:
    """``argv`` without ``--out DIR``: where the files went is not how they were made, and a
    folder of one machine has no place in a committed result.

    Example:
        >>> without_out(["probe", "--out", "/tmp/x", "--quick", "--out=y"])
        ['probe', '--quick']
    """
    kept, skip = [], False
    for arg in argv:
        if skip:
            skip = False
        elif arg == "--out":
            skip = True
        elif not arg.startswith("--out="):
            kept.append(arg)
    return kept


def metadata(command: str, *, started: float, device=None, commit: str | None = None,
             **fields) -> dict:
    """Everything needed to rerun and judge a result.

    Args:
        command: the command line of the run (without ``--out``, see :func:`without_out`).
        started: the run's start, as ``time.time()``.
        device: the ``torch.device`` it ran on (``None``: none, or Keras).
        commit: the code's commit when the run started (default: :func:`git_commit` now).
        **fields: more fields, after the command, commit, hardware and versions.

    Returns:
        A dict: ``command``, ``commit``, ``hardware``, ``versions``, the ``fields``,
        ``started_utc`` and ``wall_seconds``.
    """
    return {"command": command, "commit": git_commit() if commit is None else commit,
            "hardware": hardware(device), "versions": versions(), **fields,
            "started_utc": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(started)),
            "wall_seconds": round(time.time() - started, 1)}


# --------------------------------------------------------------------------- results


def _plain(value):
    if isinstance(value, (np.integer,)):
        return int(value)
    if isinstance(value, (np.floating,)):
        return float(value)
    return value


def write_results(folder, stem: str, rows: list, meta: dict) -> Path:
    """``folder/stem.json`` (``{"meta": ..., "rows": [...]}``) and ``folder/stem.csv`` (rows)."""
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    rows = [{k: _plain(v) for k, v in row.items()} for row in rows]
    path = folder / f"{stem}.json"
    path.write_text(json.dumps({"meta": meta, "rows": rows}, indent=1) + "\n")
    columns = list(dict.fromkeys(k for row in rows for k in row))
    with open(folder / f"{stem}.csv", "w", newline="") as handle:
        writer = csv.DictWriter(handle, fieldnames=columns)
        writer.writeheader()
        writer.writerows(rows)
    return path


def read_results(path) -> dict:
    """A results JSON file as ``{"meta": dict, "rows": list of dicts}``."""
    return json.loads(Path(path).read_text())
