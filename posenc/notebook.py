"""Helpers for the book's notebooks that also work outside Jupyter Book (Colab)."""

from __future__ import annotations


def glue(name: str, value, display: bool = False) -> None:
    """Store ``value`` so the page's prose can show it with ``{glue:text}`name```.

    Uses ``myst_nb.glue`` when MyST-NB is installed (the book build, nbval);
    elsewhere (Colab) it prints ``name = value`` so the reader still sees it.
    Returns nothing, so a cell that ends with ``glue(...)`` shows no stray output.
    """
    try:
        from myst_nb import glue as _glue
    except ImportError:
        print(f"{name} = {value}")
        return
    _glue(name, value, display=display)


def glue_run_time(start: float, device=None) -> None:
    """Glue how long a chapter's code ran and on what, for its "Running this chapter" section.

    Glues ``chapter_seconds`` (seconds since ``start``, a ``time.perf_counter()`` reading
    taken in the set-up cell) and ``machine`` (the number of CPU cores, and the GPU when
    ``device`` is a CUDA ``torch.device``; and, when ``POSENC_BUILD_JOBS`` is above 1, that
    the chapter shared them with chapters executed alongside, as
    ``scripts/execute_notebooks.py`` runs them).

    Example:
        >>> import time
        >>> glue_run_time(time.perf_counter())  # doctest: +SKIP
        (in a notebook built by MyST-NB: glued; elsewhere printed, as)
        chapter_seconds = 0.0001...
        machine = 2 CPU cores, no GPU used
    """
    import os
    import time

    machine = f"{os.cpu_count()} CPU cores"
    if device is not None and getattr(device, "type", None) == "cuda":
        import torch

        machine += f" and a {torch.cuda.get_device_name(device)} GPU"
    else:
        machine += ", no GPU used"
    jobs = int(os.environ.get("POSENC_BUILD_JOBS", "1") or 1)
    if jobs > 1:   # scripts/execute_notebooks.py ran this chapter beside others
        machine += f", shared with {jobs - 1} other chapter{'s' * (jobs > 2)} running alongside"
    glue("chapter_seconds", time.perf_counter() - start)
    glue("machine", machine)
