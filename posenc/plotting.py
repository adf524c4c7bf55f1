"""One plotting style for the whole book (needs matplotlib).

:func:`use_style` sets it; :func:`heatmap` draws any 2D array in it. For looking inside a
model: :func:`encoding_heatmap` and :func:`similarity_heatmap` (a table and its ``PE PE^T``),
:func:`frequency_plot` (channels against position), :func:`head_grid` (a bias or attention map
per head) and :func:`attention_grid` (every layer and head of a trained model on a sentence).
"""

from __future__ import annotations

from posenc._checks import check_choice, check_rank

#: How :func:`head_grid` and :func:`attention_grid` scale each map before drawing it.
NORMALIZATIONS = {
    "none": "the values as they are",
    "row": "each row divided by its largest absolute value (a query's strongest key is 1)",
}

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


# --------------------------------------------------------------------------- looking inside


def encoding_heatmap(ax, table, *, title: str | None = None, colorbar: bool = True):
    """Draw a ``(positions, dim)`` encoding table with positions across and channels down.

    Signed values, so the colour scale is centred on zero (:data:`DIVERGING`).
    """
    import numpy as np

    table = np.asarray(table, dtype=float)
    check_rank("table", table.shape, 2, what="encoding_heatmap",
               fix="pass one table (positions, dim)")
    return heatmap(ax, table.T, xlabel="position", ylabel="channel", title=title,
                   symmetric=True, colorbar=colorbar)


def similarity_heatmap(ax, matrix, *, title: str | None = None, label: str = "position",
                       colorbar: bool = True):
    """Draw a ``(positions, positions)`` similarity or score matrix, centred on zero.

    ``label`` names both axes: the query position down, the key position across.
    """
    return heatmap(ax, matrix, xlabel=f"key {label}", ylabel=f"query {label}", title=title,
                   symmetric=True, colorbar=colorbar)


def frequency_plot(ax, table, channels, *, labels=None, title: str | None = None):
    """Plot channels of a ``(positions, dim)`` table against the position, one line each.

    Args:
        ax: a matplotlib Axes.
        table: ``(positions, dim)`` array.
        channels: the channel indices to draw (one per frequency, e.g. the sines ``0, 2, ...``).
        labels: one legend label per channel (e.g. the wavelengths); default ``"channel c"``.
        title: optional title.
    """
    import numpy as np

    table = np.asarray(table, dtype=float)
    check_rank("table", table.shape, 2, what="frequency_plot",
               fix="pass one table (positions, dim)")
    channels = list(channels)
    labels = list(labels) if labels is not None else [f"channel {c}" for c in channels]
    for channel, label in zip(channels, labels):
        ax.plot(np.arange(len(table)), table[:, channel], label=label)
    ax.set_xlabel("position")
    ax.set_ylabel("value")
    if title:
        ax.set_title(title)
    ax.legend(loc="upper right", ncol=min(len(channels), 2))
    return ax


def head_grid(maps, *, xlabel: str, ylabel: str, titles=None, suptitle: str | None = None,
              ncols: int | None = None, symmetric: bool = False, tick_labels=None,
              panel_size: float = 2.1, shared_scale: bool = True, normalize: str = "none"):
    """One small heatmap per head (or per layer): a figure of panels from ``(n, rows, cols)``.

    Used for the bias of each head and the attention weights of each head and layer. Entries
    that are not finite (a causal bias's ``-inf``) are drawn blank.

    Args:
        maps: array ``(n, rows, cols)``.
        xlabel, ylabel: axis labels (put on the outer panels only).
        titles: one title per panel; default ``"head h"``.
        suptitle: optional figure title.
        ncols: panels per row; default ``min(n, 4)``.
        symmetric: centre the colour scale on zero (signed maps such as biases).
        tick_labels: optional labels (tokens) for both axes of every panel.
        panel_size: inches per panel side.
        shared_scale: one colour scale for all panels (comparable heads). Default ``True``.
        normalize: ``"none"`` (default) draws the values as they are; ``"row"`` divides each
            row of each map by its largest absolute finite value first (rows of zeros stay
            zero), so that every row uses the whole colour scale. Attention weights need it:
            query 0 of a causal map puts weight 1 on its one key, query ``i`` about ``1/i`` on
            each of its keys, and on one 0-1 scale every row but the first few is dark. The
            colour bar of a row-normalised grid says so.

    Returns:
        ``(figure, axes)``, axes a flat list of the ``n`` panels.
    """
    import matplotlib.pyplot as plt
    import numpy as np

    maps = np.asarray(maps, dtype=float)
    check_rank("maps", maps.shape, 3, what="head_grid", fix="pass maps as (n, rows, cols)")
    check_choice("normalize", normalize, NORMALIZATIONS, what="head_grid")
    if normalize == "row":
        size = np.where(np.isfinite(maps), np.abs(maps), 0.0).max(axis=-1, keepdims=True)
        maps = maps / np.where(size > 0, size, 1.0)
    n = maps.shape[0]
    ncols = ncols or min(n, 4)
    nrows = -(-n // ncols)
    fig, axes = plt.subplots(nrows, ncols, figsize=(panel_size * ncols + 0.8,
                                                    panel_size * nrows + 0.4),
                             squeeze=False, constrained_layout=True)
    finite = maps[np.isfinite(maps)]
    scale = {}
    if shared_scale and finite.size:
        if symmetric:
            lim = float(np.abs(finite).max()) or 1.0
            scale = {"vmin": -lim, "vmax": lim}
        else:
            scale = {"vmin": float(finite.min()), "vmax": float(finite.max())}
    titles = list(titles) if titles is not None else [f"head {h}" for h in range(n)]
    flat = list(axes.ravel())
    image = None
    for index, ax in enumerate(flat):
        if index >= n:
            ax.axis("off")
            continue
        data = np.where(np.isfinite(maps[index]), maps[index], np.nan)
        image = heatmap(ax, data, xlabel=xlabel if index // ncols == nrows - 1 else "",
                        ylabel=ylabel if index % ncols == 0 else "", title=titles[index],
                        symmetric=symmetric and not shared_scale, colorbar=not shared_scale,
                        **({"cmap": DIVERGING} if symmetric else {}), **scale)
        if tick_labels is not None:
            ticks = range(len(tick_labels))
            ax.set_xticks(ticks, list(tick_labels), fontsize=7, rotation=90)
            ax.set_yticks(ticks, list(tick_labels), fontsize=7)
    if shared_scale and image is not None:
        bar = fig.colorbar(image, ax=flat[:n], fraction=0.046, pad=0.02)
        if normalize == "row":
            bar.set_label("value / largest in its row")
    if suptitle:
        fig.suptitle(suptitle)
    return fig, flat[:n]


def attention_grid(attention, *, tokens=None, suptitle: str | None = None,
                   panel_size: float = 1.9, normalize: str = "row"):
    """Attention weights of every layer (rows) and head (columns) for one sequence.

    Each query's row is drawn relative to its largest weight by default (``normalize="row"``,
    see :func:`head_grid`): the map shows where each query looks, not how many keys it
    shares its weight with. ``normalize="none"`` draws the weights themselves on one scale.

    Args:
        attention: a list per layer of ``(heads, q_len, k_len)`` arrays (one example of what
            ``attention_maps`` returns), or an array ``(layers, heads, q_len, k_len)``.
        tokens: optional labels of the positions (the characters of the sentence).
        suptitle: optional figure title.
        panel_size: inches per panel side.
        normalize: ``"row"`` (default) or ``"none"`` (see :func:`head_grid`).

    Returns:
        ``(figure, axes)``, axes an array ``(layers, heads)``.
    """
    import numpy as np

    attention = np.asarray(attention, dtype=float)
    check_rank("attention", attention.shape, 4, what="attention_grid",
               fix="pass one example: a list per layer of (heads, q_len, k_len)")
    layers, heads = attention.shape[:2]
    titles = [f"layer {layer}, head {head}" for layer in range(layers) for head in range(heads)]
    fig, axes = head_grid(attention.reshape(layers * heads, *attention.shape[2:]),
                          xlabel="key", ylabel="query", titles=titles, suptitle=suptitle,
                          ncols=heads, tick_labels=tokens, panel_size=panel_size,
                          shared_scale=True, normalize=normalize)
    for ax in axes:
        ax.title.set_fontsize(8)
    return fig, np.array(axes, dtype=object).reshape(layers, heads)
