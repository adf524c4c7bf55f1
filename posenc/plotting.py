"""One plotting style for the whole book (needs matplotlib)."""

from __future__ import annotations

from posenc._checks import check_rank

#: Sequential colour map that reads in greyscale.
SEQUENTIAL = "cividis"
#: Diverging colour map for signed values (encodings, similarities).
DIVERGING = "RdBu_r"

_STYLE = {
    "figure.figsize": (6.4, 3.6),
    "figure.dpi": 110,
    "savefig.dpi": 150,
    "axes.grid": False,
    "axes.spines.top": False,
    "axes.spines.right": False,
    "axes.titlesize": 11,
    "axes.labelsize": 10,
    "xtick.labelsize": 9,
    "ytick.labelsize": 9,
    "legend.fontsize": 9,
    "legend.frameon": False,
    "image.cmap": SEQUENTIAL,
    "lines.linewidth": 1.6,
    "font.size": 10,
}


def use_style() -> None:
    """Apply the book's matplotlib style (sizes that fit the page, greyscale-safe maps)."""
    import matplotlib as mpl

    mpl.rcParams.update(_STYLE)


def heatmap(ax, data, *, xlabel: str, ylabel: str, title: str | None = None,
            cmap: str | None = None, symmetric: bool = False, colorbar: bool = True,
            **imshow_kwargs):
    """Draw ``data`` (2D, array-like) as an image with labelled axes.

    Args:
        ax: a matplotlib Axes.
        data: 2D array (rows on the y axis).
        xlabel, ylabel: axis labels (with units where there are any).
        title: optional title.
        cmap: colour map; defaults to :data:`DIVERGING` when ``symmetric`` else
            :data:`SEQUENTIAL`.
        symmetric: centre the colour scale on zero.
        colorbar: add a colour bar.
    """
    import numpy as np

    data = np.asarray(data, dtype=float)
    check_rank("data", data.shape, 2, what="heatmap")
    if symmetric:
        lim = float(np.abs(data).max()) or 1.0
        imshow_kwargs.setdefault("vmin", -lim)
        imshow_kwargs.setdefault("vmax", lim)
    image = ax.imshow(data, aspect="auto", interpolation="nearest",
                      cmap=cmap or (DIVERGING if symmetric else SEQUENTIAL), **imshow_kwargs)
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    if title:
        ax.set_title(title)
    if colorbar:
        ax.figure.colorbar(image, ax=ax, fraction=0.046, pad=0.04)
    return image
