"""What an experiment's ``run(args, ctx)`` gets besides its arguments: :class:`ExperimentContext`.

**Distributed runs.** Under ``torchrun --nproc_per_node N`` every process builds the same
global batch from the seed (:mod:`posenc.experiments.data` is deterministic NumPy) and keeps
the rows ``rank, rank + N, ...`` (the split of ``torch.utils.data.DistributedSampler`` without
shuffling). Each process divides its summed loss by the weight of the *global* batch and
multiplies by ``N``; DistributedDataParallel averages the gradients over the processes, so the
step is the gradient of the global batch's mean loss, the same step one process takes on the
whole batch. Evaluation sums losses and counts over the processes (``all_reduce``). Rank 0
alone logs, shows progress bars and writes results. What matches the single-process run: the
data, the initial weights, the initial loss (to float rounding) and every count of the
evaluation; the losses after training agree to float rounding of the summation order (about
``1e-5`` relative after a short run), not bit for bit.
"""

from __future__ import annotations

import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from posenc.experiments import records

__all__ = ["ExperimentContext"]


@dataclass
class ExperimentContext:
    """What an experiment's ``run(args, ctx)`` gets besides its arguments.

    Attributes:
        name: the experiment's name (``"length-generalization"``, ...).
        framework: ``"torch"`` or ``"keras"``.
        device: the ``torch.device`` (``None`` for Keras).
        rank, world_size: this process's rank and the number of processes (1 without
            ``torchrun``).
        seeds: the seeds to run, a list of ints.
        out: the folder results are written to (``<out>/<name>/``).
        quick: the small setting.
        progress_bars: show tqdm bars (rank 0 only).
        command: the command line as the user typed it.
        tag: added to the result files' names (``results-<tag>.json``).
        arguments: the parsed options, recorded in the metadata.
        commit: the code's git commit when the run started.
        runner: how models are built, trained and read in ``framework``
            (:class:`~posenc.experiments.runners.TorchRunner` or
            :class:`~posenc.experiments.runners.KerasRunner`), chosen once by the command line.
    """

    name: str
    framework: str = "torch"
    device: object = None
    rank: int = 0
    world_size: int = 1
    seeds: list = field(default_factory=lambda: [0])
    out: Path = Path("runs")
    quick: bool = False
    progress_bars: bool = True
    command: str = ""
    tag: str | None = None
    arguments: dict = field(default_factory=dict)
    started: float = field(default_factory=time.time)
    commit: str = field(default_factory=lambda: records.git_commit())
    runner: object = field(default=None, repr=False)

    @property
    def is_main(self) -> bool:
        """True on rank 0, the process that logs and writes."""
        return self.rank == 0

    @property
    def distributed(self) -> bool:
        return self.world_size > 1

    def log(self, message: str) -> None:
        """Print ``message`` on rank 0 (to stderr, so that stdout stays for results)."""
        if self.is_main:
            print(message, file=sys.stderr, flush=True)

    def progress(self, iterable=None, **kwargs):
        """A tqdm progress bar over ``iterable`` on rank 0; a silent one elsewhere."""
        from tqdm.auto import tqdm

        kwargs.setdefault("leave", False)
        kwargs.setdefault("dynamic_ncols", True)
        if not sys.stderr.isatty():
            kwargs.setdefault("mininterval", 10.0)
        return tqdm(iterable, disable=not (self.is_main and self.progress_bars), **kwargs)

    def shard(self, array: np.ndarray) -> np.ndarray:
        """This process's rows of a global batch: ``array[rank::world_size]``."""
        return array[self.rank::self.world_size] if self.distributed else array

    def all_reduce(self, values) -> np.ndarray:
        """Sum a float64 vector over the processes (the vector itself in one process)."""
        values = np.asarray(values, dtype=np.float64)
        if not self.distributed:
            return values
        import torch
        import torch.distributed as dist

        tensor = torch.tensor(values, dtype=torch.float64, device=self._reduce_device())
        dist.all_reduce(tensor)
        return tensor.cpu().numpy()

    def _reduce_device(self):
        import torch.distributed as dist

        return self.device if dist.get_backend() == "nccl" else "cpu"

    def metadata(self) -> dict:
        """:func:`posenc.experiments.records.metadata` of this run, with the experiment, its
        arguments, the framework, the seeds, the world size and the setting."""
        return {"experiment": self.name,
                **records.metadata(self.command, started=self.started, device=self.device,
                                   commit=self.commit, arguments=self.arguments,
                                   framework=self.framework, seeds=list(self.seeds),
                                   world_size=self.world_size, quick=self.quick)}

    def write_results(self, rows: list, extra_meta: dict | None = None, *,
                      stem: str | None = None) -> Path | None:
        """Write ``rows`` (a list of flat dicts) with :meth:`metadata` as JSON and CSV.

        Files: ``<out>/<name>/<stem>.json`` and ``.csv``; ``stem`` defaults to ``"results"``
        for PyTorch and ``"results-keras"`` for Keras, followed by ``-<tag>`` when the run has
        a tag. Only rank 0 writes; the others return ``None``.
        """
        if not self.is_main:
            return None
        stem = stem or records.results_path(self.name, framework=self.framework,
                                            tag=self.tag).stem
        meta = self.metadata()
        meta.update(extra_meta or {})
        return records.write_results(Path(self.out) / self.name, stem, rows, meta)
