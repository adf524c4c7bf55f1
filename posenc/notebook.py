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
