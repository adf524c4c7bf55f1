"""What every experiment of the lab shares: the context, the model, the loops, the results.

* :class:`ExperimentContext`: device, rank and world size, seeds, output folder, progress
  bars, :meth:`~ExperimentContext.log` and :meth:`~ExperimentContext.write_results`.
* :func:`make_model`: the lab's Transformer (:class:`posenc.torch.attention.Transformer` or its
  Keras twin) for one positional scheme.
* :func:`train_torch` / :func:`evaluate_torch`: the PyTorch loops, correct under
  ``torchrun`` with DistributedDataParallel; :func:`fit_keras` / :func:`evaluate_keras`: the
  Keras ones (``model.fit``).
* :func:`metadata`: command, git commit, hardware, versions, seeds, wall time.

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

import csv
import json
import math
import os
import platform
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

__all__ = ["SCHEMES", "ExperimentContext", "make_model", "count_parameters", "train_torch",
           "evaluate_torch", "fit_keras", "evaluate_keras", "fit", "evaluate", "split_rows", "metadata", "git_commit",
           "hardware", "versions", "write_results", "read_results", "RESULTS_DIR",
           "add_training_arguments", "sizes"]

#: Positional schemes the lab compares by default (a subset of the Transformer's ``POSITIONS``).
SCHEMES = ("none", "sinusoidal", "learned", "t5", "alibi", "rope")

#: Where the committed results live (package data).
RESULTS_DIR = Path(__file__).resolve().parent / "results"


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


# --------------------------------------------------------------------------- the context


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
        commit: the code's git commit when the run started.
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
    commit: str = field(default_factory=lambda: git_commit())

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

    def write_results(self, rows: list, extra_meta: dict | None = None, *,
                      stem: str | None = None) -> Path | None:
        """Write ``rows`` (a list of flat dicts) with :func:`metadata` as JSON and CSV.

        Files: ``<out>/<name>/<stem>.json`` and ``.csv``; ``stem`` defaults to ``"results"``
        for PyTorch and ``"results-keras"`` for Keras, followed by ``-<tag>`` when the run has
        a tag. Only rank 0 writes; the others return ``None``.
        """
        if not self.is_main:
            return None
        from posenc.experiments import results_path

        stem = stem or results_path(self.name, framework=self.framework, tag=self.tag).stem
        meta = metadata(self)
        meta.update(extra_meta or {})
        return write_results(Path(self.out) / self.name, stem, rows, meta)


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
    """CPU model and core count, the GPU name when ``device`` is CUDA, the OS."""
    info = {"cpu": _cpu_name(), "cpu_cores": os.cpu_count(), "platform": platform.platform()}
    if device is not None and getattr(device, "type", None) == "cuda":
        import torch

        info["gpu"] = torch.cuda.get_device_name(device)
    if "torch" in sys.modules:
        info["torch_threads"] = sys.modules["torch"].get_num_threads()
    return info


def versions() -> dict:
    """Python, posenc, NumPy and the versions of the frameworks this process imported."""
    import posenc

    found = {"python": platform.python_version(), "posenc": posenc.__version__,
             "numpy": np.__version__}
    for name in ("torch", "keras", "tensorflow"):
        if name in sys.modules:
            found[name] = getattr(sys.modules[name], "__version__", "?")
    if "keras" in sys.modules:
        found["keras_backend"] = sys.modules["keras"].backend.backend()
    return found


def metadata(ctx: ExperimentContext) -> dict:
    """Everything needed to rerun and judge a result."""
    return {
        "experiment": ctx.name,
        "command": ctx.command,
        "arguments": ctx.arguments,
        "commit": ctx.commit,
        "hardware": hardware(ctx.device),
        "versions": versions(),
        "framework": ctx.framework,
        "seeds": list(ctx.seeds),
        "world_size": ctx.world_size,
        "quick": ctx.quick,
        "started_utc": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(ctx.started)),
        "wall_seconds": round(time.time() - ctx.started, 1),
    }


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


# --------------------------------------------------------------------------- the model


def make_model(scheme: str, vocab_size: int, *, framework: str = "torch", dim: int = 64,
               depth: int = 2, heads: int = 4, max_len: int = 512, seed: int = 0, **options):
    """The lab's causal Transformer with positional scheme ``scheme``, initialised from ``seed``.

    PyTorch: :class:`posenc.torch.attention.Transformer`; Keras:
    :class:`posenc.keras.attention.Transformer` (built on a dummy batch so that it has weights).
    """
    if framework == "torch":
        import torch

        from posenc.torch.attention import Transformer

        torch.manual_seed(seed)
        return Transformer(vocab_size, dim=dim, depth=depth, heads=heads, causal=True,
                           position=scheme, max_len=max_len, **options)
    import keras

    from posenc.keras.attention import Transformer

    keras.utils.set_random_seed(seed)
    model = Transformer(vocab_size, dim=dim, depth=depth, heads=heads, causal=True,
                        position=scheme, max_len=max_len, **options)
    model(np.zeros((1, 8), dtype="int32"))
    return model


def count_parameters(model) -> tuple[int, int]:
    """``(all parameters, those of the positional scheme)`` of a PyTorch or Keras Transformer."""
    if not hasattr(model, "trainable_variables"):      # a PyTorch module, not a Keras model
        total = sum(p.numel() for p in model.parameters())
        position = sum(p.numel() for p in model.position_weights())
        return int(total), int(position)
    total = sum(int(np.prod(w.shape)) for w in model.weights)
    position = sum(int(np.prod(w.shape)) for w in model.position_weights())
    return total, position


def _lr_at(step: int, steps: int, lr: float, warmup: int) -> float:
    """Linear warm-up to ``lr`` over ``warmup`` steps, then a cosine down to ``lr / 10``."""
    if step < warmup:
        return lr * (step + 1) / warmup
    progress = (step - warmup) / max(1, steps - warmup)
    return lr * (0.1 + 0.45 * (1 + math.cos(math.pi * progress)))


# --------------------------------------------------------------------------- PyTorch loops


def _weighted_ce(logits, targets, weights):
    import torch.nn.functional as F

    ce = F.cross_entropy(logits.reshape(-1, logits.shape[-1]).float(), targets.reshape(-1),
                         reduction="none")
    return (ce * weights.reshape(-1)).sum()


def train_torch(model, batch_fn, *, steps: int, ctx: ExperimentContext, lr: float = 3e-3,
                warmup: int | None = None, weight_decay: float = 0.01, clip: float = 1.0,
                desc: str = "train") -> dict:
    """Train ``model`` for ``steps`` AdamW steps on ``batch_fn(step) -> (inputs, targets,
    weights)`` (NumPy, the global batch); returns the loss history and the throughput.

    Under ``torchrun`` the model is wrapped in DistributedDataParallel and each process trains
    on its shard of every global batch (see the module's docstring).

    Returns:
        A dict: ``"losses"`` (the global mean loss of every step), ``"seconds"`` (the training
        time) and ``"tokens_per_second"`` (positions read per second, all processes together).
    """
    import torch

    device = ctx.device
    model.to(device).train()
    net = model
    if ctx.distributed:
        from torch.nn.parallel import DistributedDataParallel

        net = DistributedDataParallel(model, device_ids=[device] if device.type == "cuda"
                                      else None)
    opt = torch.optim.AdamW(model.parameters(), lr=lr, betas=(0.9, 0.98),
                            weight_decay=weight_decay)
    warmup = max(1, steps // 10) if warmup is None else warmup
    losses, tokens = [], 0
    start = time.perf_counter()
    bar = ctx.progress(range(steps), desc=desc)
    for step in bar:
        inputs, targets, weights = batch_fn(step)
        total_weight = float(weights.sum())
        tokens += inputs.size
        x, y, w = (torch.from_numpy(ctx.shard(a)).to(device) for a in (inputs, targets, weights))
        for group in opt.param_groups:
            group["lr"] = _lr_at(step, steps, lr, warmup)
        loss = _weighted_ce(net(x), y, w) / total_weight
        opt.zero_grad(set_to_none=True)
        (loss * ctx.world_size).backward()
        if clip:
            torch.nn.utils.clip_grad_norm_(model.parameters(), clip)
        opt.step()
        value = float(ctx.all_reduce([loss.item()])[0])
        losses.append(value)
        if step % 10 == 0 or step == steps - 1:
            bar.set_postfix(loss=f"{value:.3f}")
    seconds = time.perf_counter() - start
    return {"losses": losses, "seconds": seconds, "tokens_per_second": tokens / seconds}


def evaluate_torch(model, batches, *, ctx: ExperimentContext, desc: str = "eval") -> dict:
    """Loss and accuracy of ``model`` over ``batches`` (an iterable of global NumPy batches).

    Returns:
        A dict, summed over every process: ``"loss"`` (mean weighted cross-entropy in nats),
        ``"perplexity"`` (its exponential), ``"token_accuracy"`` (share of weighted positions
        whose argmax is the target), ``"exact_match"`` (share of rows whose weighted positions
        are all right), ``"rows"`` and ``"tokens"`` (weighted positions).
    """
    import torch

    model.to(ctx.device).eval()
    sums = np.zeros(5)  # loss, weight, right tokens, right rows, rows
    with torch.no_grad():
        for inputs, targets, weights in ctx.progress(batches, desc=desc):
            x, y, w = (torch.from_numpy(ctx.shard(a)).to(ctx.device)
                       for a in (inputs, targets, weights))
            if x.shape[0] == 0:
                continue
            logits = model(x)
            right = (logits.argmax(-1) == y).float() * w
            rows_right = (right.sum(-1) == w.sum(-1)).float()
            sums += [float(_weighted_ce(logits, y, w)), float(w.sum()), float(right.sum()),
                     float(rows_right.sum()), float(x.shape[0])]
    loss, weight, right, rows_right, rows = ctx.all_reduce(sums)
    mean = loss / weight
    return {"loss": mean, "perplexity": math.exp(mean), "token_accuracy": right / weight,
            "exact_match": rows_right / rows, "rows": int(rows), "tokens": int(weight)}


# --------------------------------------------------------------------------- Keras loops


def fit_keras(model, inputs, targets, weights, *, batch_size: int, epochs: int = 1,
              lr: float = 3e-3, ctx: ExperimentContext | None = None) -> dict:
    """Train a Keras Transformer with ``model.fit`` (AdamW, masked cross-entropy).

    The loss is the weighted mean over positions, the same as :func:`train_torch`'s up to how
    Keras averages ``sample_weight`` per batch. Returns the loss history and the throughput.
    """
    import keras

    steps = epochs * math.ceil(len(inputs) / batch_size)
    schedule = keras.optimizers.schedules.CosineDecay(
        lr / 10, decay_steps=steps, alpha=0.1, warmup_target=lr,
        warmup_steps=max(1, steps // 10))
    model.compile(optimizer=keras.optimizers.AdamW(schedule, beta_2=0.98, weight_decay=0.01,
                                                   clipnorm=1.0),
                  loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True))
    verbose = "auto" if (ctx is None or ctx.progress_bars) else 0
    start = time.perf_counter()
    history = model.fit(inputs, targets, sample_weight=weights, batch_size=batch_size,
                        epochs=epochs, shuffle=False, verbose=verbose)
    seconds = time.perf_counter() - start
    return {"losses": [float(v) for v in history.history["loss"]], "seconds": seconds,
            "tokens_per_second": epochs * inputs.size / seconds}


def evaluate_keras(model, batches) -> dict:
    """:func:`evaluate_torch` for a Keras Transformer (one process)."""
    import keras

    sums = np.zeros(5)
    for inputs, targets, weights in batches:
        logits = keras.ops.convert_to_numpy(model(inputs)).astype(np.float64)
        logits -= logits.max(-1, keepdims=True)
        logp = logits - np.log(np.exp(logits).sum(-1, keepdims=True))
        ce = -np.take_along_axis(logp, targets[..., None], -1)[..., 0]
        right = (logits.argmax(-1) == targets) * weights
        rows_right = right.sum(-1) == weights.sum(-1)
        sums += [(ce * weights).sum(), weights.sum(), right.sum(), rows_right.sum(), len(inputs)]
    loss, weight, right, rows_right, rows = sums
    mean = loss / weight
    return {"loss": mean, "perplexity": math.exp(mean), "token_accuracy": right / weight,
            "exact_match": rows_right / rows, "rows": int(rows), "tokens": int(weight)}


# --------------------------------------------------------------------------- either face


def fit(model, batch_fn, *, steps: int, ctx: ExperimentContext, lr: float = 3e-3,
        desc: str = "train") -> dict:
    """Train with :func:`train_torch` or, for Keras, :func:`fit_keras` on the same batches
    (``batch_fn(0) .. batch_fn(steps - 1)`` stacked into one array, one epoch)."""
    if ctx.framework == "torch":
        return train_torch(model, batch_fn, steps=steps, ctx=ctx, lr=lr, desc=desc)
    batches = [batch_fn(step) for step in range(steps)]
    inputs, targets, weights = (np.concatenate(parts) for parts in zip(*batches))
    return fit_keras(model, inputs, targets, weights, batch_size=len(batches[0][0]), lr=lr,
                     ctx=ctx)


def evaluate(model, batches, *, ctx: ExperimentContext, desc: str = "eval") -> dict:
    """:func:`evaluate_torch` or :func:`evaluate_keras`, by ``ctx.framework``."""
    if ctx.framework == "torch":
        return evaluate_torch(model, batches, ctx=ctx, desc=desc)
    return evaluate_keras(model, batches)


def split_rows(arrays, rows: int):
    """Cut ``(inputs, targets, weights)`` into batches of at most ``rows`` rows."""
    total = len(arrays[0])
    return [tuple(a[i:i + rows] for a in arrays) for i in range(0, total, rows)]
