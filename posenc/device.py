"""Pick where the chapters run: CUDA, then Apple MPS, then the CPU."""

from __future__ import annotations

import importlib.util
import os
import sys
from dataclasses import dataclass, field

from posenc._checks import check_positive_int


@dataclass
class DeviceReport:
    """What :func:`pick_device` found and chose."""

    torch_device: str | None
    tensorflow_gpus: list = field(default_factory=list)
    keras_backend: str | None = None
    torch_threads: int | None = None

    def __str__(self) -> str:
        parts = []
        if self.torch_device is not None:
            threads = (f" ({self.torch_threads} thread{'s' if self.torch_threads > 1 else ''})"
                       if self.torch_threads is not None else "")
            parts.append(f"PyTorch on {self.torch_device}{threads}")
        if self.keras_backend is not None:
            parts.append(f"Keras backend {self.keras_backend}")
        if self.tensorflow_gpus:
            parts.append(
                f"TensorFlow on {len(self.tensorflow_gpus)} GPU(s), memory growth on"
            )
        elif self.keras_backend == "tensorflow":
            parts.append("TensorFlow on the CPU")
        return "posenc: " + "; ".join(parts) if parts else "posenc: no framework found"


def _installed(name: str) -> bool:
    return name in sys.modules or importlib.util.find_spec(name) is not None


def _keras_backend() -> str | None:
    if not _installed("keras"):
        return None
    if "keras" in sys.modules:
        return sys.modules["keras"].backend.backend()
    return os.environ.get("KERAS_BACKEND", "tensorflow")


def pick_device(*, verbose: bool = True, report: bool = False, cpu_threads="auto"):
    """Choose a device for PyTorch and make TensorFlow share the machine politely.

    PyTorch gets CUDA if available, then Apple's MPS, then the CPU.
    TensorFlow (when it is installed and is Keras's backend) is told to grow its
    GPU memory on demand instead of reserving all of it, so PyTorch and
    TensorFlow can share one GPU in one Python process. Call it before
    TensorFlow touches the GPU (first thing in a notebook).

    On the CPU, PyTorch's intra-op threads and the thread pools TensorFlow
    starts when it is imported compete for the same cores; for the small
    models of the chapters, one PyTorch thread is then faster than many. So
    with ``cpu_threads="auto"`` (the default), when PyTorch runs on the CPU in
    a process that has TensorFlow (imported, or Keras's backend),
    ``torch.set_num_threads(1)`` is called. Pass an int to set another number,
    or ``None`` to leave PyTorch's threads alone.

    Args:
        verbose: print one line saying what was chosen. Default ``True``.
        report: also return a :class:`DeviceReport`. Default ``False``.
        cpu_threads: ``"auto"``, a positive int or ``None``: PyTorch's thread
            count when it runs on the CPU. Default ``"auto"``.

    Returns:
        ``torch.device`` (or ``None`` without PyTorch); with ``report=True``,
        the pair ``(device, DeviceReport)``.

    Example:
        >>> device = pick_device(verbose=False)
    """
    if cpu_threads not in ("auto", None):
        cpu_threads = check_positive_int("cpu_threads", cpu_threads, what="pick_device",
                                         fix='pass "auto", None or a number of threads')
    device = None
    torch_name = None
    threads = None
    if _installed("torch"):
        import torch

        if torch.cuda.is_available():
            torch_name = "cuda"
        elif getattr(torch.backends, "mps", None) is not None and torch.backends.mps.is_available():
            torch_name = "mps"
        else:
            torch_name = "cpu"
        device = torch.device(torch_name)

    backend = _keras_backend()
    with_tensorflow = ((backend == "tensorflow" or "tensorflow" in sys.modules)
                       and _installed("tensorflow"))
    if torch_name == "cpu" and cpu_threads is not None:
        if cpu_threads != "auto":
            threads = cpu_threads
        elif with_tensorflow:
            threads = 1
        if threads is not None:
            torch.set_num_threads(threads)
    gpus = []
    if with_tensorflow:
        import tensorflow as tf

        gpus = tf.config.list_physical_devices("GPU")
        for gpu in gpus:
            try:
                tf.config.experimental.set_memory_growth(gpu, True)
            except RuntimeError:
                # The GPU is already initialised; growth can no longer be changed.
                pass
    info = DeviceReport(torch_name, [g.name for g in gpus], backend, threads)
    if verbose:
        print(info)
    return (device, info) if report else device
