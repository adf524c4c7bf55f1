"""The book's plots: attention maps show every query's row."""

from __future__ import annotations

import numpy as np
import pytest

matplotlib = pytest.importorskip("matplotlib")
matplotlib.use("Agg")

import matplotlib.pyplot as plt  # noqa: E402

from posenc import plotting  # noqa: E402


def causal_uniform(length: int) -> np.ndarray:
    """Causal attention spread evenly: query i puts 1/(i+1) on each of its keys."""
    weights = np.tril(np.ones((length, length)))
    return weights / weights.sum(-1, keepdims=True)


def test_attention_grid_shows_every_row_on_the_whole_scale():
    attention = np.broadcast_to(causal_uniform(12), (2, 3, 12, 12))
    fig, grid = plotting.attention_grid(attention)
    for ax in grid.ravel():
        image = ax.images[0]
        lo, hi = image.get_clim()
        rows = np.nanmax(np.asarray(image.get_array(), dtype=float), axis=-1)
        np.testing.assert_allclose(rows, hi)      # the last query as bright as the first
        assert lo == 0.0
    assert "largest in its row" in fig.axes[-1].get_ylabel()
    plt.close(fig)


def test_attention_grid_can_draw_the_weights_themselves():
    attention = np.broadcast_to(causal_uniform(12), (1, 2, 12, 12))
    fig, grid = plotting.attention_grid(attention, normalize="none")
    image = grid[0, 0].images[0]
    assert image.get_clim() == (0.0, 1.0)
    np.testing.assert_allclose(np.asarray(image.get_array())[-1, 0], 1 / 12)
    plt.close(fig)


def test_row_normalisation_keeps_signs_zero_rows_and_blanks():
    maps = np.array([[[-2.0, 1.0, -np.inf], [0.0, 0.0, 0.0]]])
    fig, (ax,) = plotting.head_grid(maps, xlabel="key", ylabel="query", symmetric=True,
                                    normalize="row")
    drawn = np.ma.filled(np.ma.asarray(ax.images[0].get_array(), dtype=float), np.nan)
    np.testing.assert_allclose(drawn, [[-1.0, 0.5, np.nan], [0.0, 0.0, 0.0]])
    plt.close(fig)


def test_unknown_normalisation_names_the_choices():
    with pytest.raises(ValueError, match=r"head_grid: normalize must be one of 'none', 'row', "
                                         r"got normalize='log'"):
        plotting.head_grid(np.zeros((1, 2, 2)), xlabel="", ylabel="", normalize="log")
