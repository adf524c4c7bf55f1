"""Structured positions (framework-free): times, trees, modalities, graphs.

What both faces share beyond the sinusoid itself: the registry of the ways
``MultimodalEncoding`` shares positions between modalities, and the index maps
its modes and ``HierarchicalEncoding`` gather with. The index maps use only
``+`` and ``*``, so one function serves NumPy arrays and the tensors of both
faces alike. Graph positions (:func:`laplacian`, :func:`laplacian_positions`)
are computed here, in float64 NumPy, once per graph; both faces return them as
tensors. The argument checks of the family live in :mod:`posenc._checks`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import numpy as np

from posenc._checks import (
    check_adjacency,
    check_bool,
    check_eigenvector_count,
    check_positive_int,
)
from posenc.learned import TABLE_INIT_STD

__all__ = ["TABLE_INIT_STD", "MultimodalMode", "MULTIMODAL_MODES", "level_rows", "laplacian",
           "laplacian_positions"]


def level_rows(paths, level_offsets, max_children: int):
    """Row of each tree level's table in ``level_tables`` flattened to ``(-1, dim)``.

    Level ``l`` of a path reads row ``l * max_children + paths[..., l]``
    (padded ``-1`` levels are clipped to 0 and masked by the caller).

    Example:
        >>> import numpy as np
        >>> level_rows(np.array([[2, 0, 1]]), np.arange(3), 4)
        array([[2, 4, 9]])
    """
    return level_offsets * max_children + paths


def _modality_table_rows(modality_ids, positions, max_len: int):
    # per_modality: table m, row pos, in a (num_modalities * max_len, dim) table
    return modality_ids * max_len + positions


def _modality_rows(modality_ids, positions, max_len: int):
    # shared_offset: one row per modality
    return modality_ids


@dataclass(frozen=True)
class MultimodalMode:
    """How one mode of ``MultimodalEncoding`` builds ``P``.

    ``P = PE(pos)`` (when ``sinusoid``) ``+ table[row(ids, pos, max_len)]``
    (when the mode has a ``table``), with the table flattened to
    ``(-1, dim)``. Adding a mode is adding one entry to
    :data:`MULTIMODAL_MODES`; both faces read it.

    Attributes:
        sinusoid: whether ``P`` contains the shared sinusoid (``dim`` must be even).
        table: name of the learned weight, or ``None`` for none.
        table_shape: ``(num_modalities, max_len, dim) -> shape`` of that weight.
        row: ``(modality_ids, positions, max_len) -> row`` each token reads.
        positions_index: whether ``row`` reads the positions (then they must be
            integers below ``max_len``).
    """

    sinusoid: bool
    table: str | None = None
    table_shape: Callable[[int, int, int], tuple] | None = None
    row: Callable | None = None
    positions_index: bool = False


#: mode name -> :class:`MultimodalMode`.
MULTIMODAL_MODES = {
    "shared": MultimodalMode(sinusoid=True),
    "per_modality": MultimodalMode(
        sinusoid=False, table="modality_tables",
        table_shape=lambda num_modalities, max_len, dim: (num_modalities, max_len, dim),
        row=_modality_table_rows, positions_index=True),
    "shared_offset": MultimodalMode(
        sinusoid=True, table="modality_embedding",
        table_shape=lambda num_modalities, max_len, dim: (num_modalities, dim),
        row=_modality_rows),
}

#: What ``MultimodalEncoding`` suggests when positions do not fit its tables.
MULTIMODAL_TOO_SHORT = ("build it with a larger max_len, or restart positions per modality "
                        "with modality_positions(...)")


# --------------------------------------------------------------------------- graphs
# Chapter 4: Laplacian eigenvector positions. (DETR's sine embedding of coordinates needs
# nothing beyond the sinusoid: it is written in the faces from their sinusoidal().)

def laplacian(adjacency, *, normalized: bool = True) -> np.ndarray:
    """The graph Laplacian of a symmetric adjacency matrix, in float64.

    ``normalized=True`` gives the symmetric normalised Laplacian
    ``L = I - D^(-1/2) A D^(-1/2)`` (Chung's convention: the diagonal is 1 for a
    node with edges, 0 for an isolated node); ``normalized=False`` the
    combinatorial ``L = D - A``. ``D`` is the diagonal matrix of degrees (row sums
    of ``A``). Both are symmetric positive semi-definite, with one zero eigenvalue
    per connected component.

    Args:
        adjacency: ``(nodes, nodes)`` array, symmetric with non-negative weights
            (0/1 for an unweighted graph); self-loops are allowed.
        normalized: the normalised (default) or the combinatorial Laplacian.

    Returns:
        float64 array of shape ``(nodes, nodes)``.

    Example:
        >>> laplacian([[0, 1], [1, 0]])
        array([[ 1., -1.],
               [-1.,  1.]])

    References:
        Chung, "Spectral Graph Theory", AMS, 1997, chapter 1.
    """
    what = "laplacian"
    normalized = check_bool("normalized", normalized, what=what)
    return _laplacian(check_adjacency(adjacency, what=what), normalized)


def _laplacian(a: np.ndarray, normalized: bool) -> np.ndarray:
    degree = a.sum(axis=1)
    if not normalized:
        return np.diag(degree) - a
    inv_sqrt = np.zeros_like(degree)
    inv_sqrt[degree > 0] = degree[degree > 0] ** -0.5
    return np.diag((degree > 0).astype(np.float64)) - inv_sqrt[:, None] * a * inv_sqrt[None, :]


#: Eigenvalues below this (relative to the largest, at least 1) count as zero.
TRIVIAL_EIGENVALUE_TOL = 1e-8


def laplacian_positions(adjacency, k, *, normalized: bool = True,
                        return_eigenvalues: bool = False):
    """Laplacian eigenvector positions of the nodes of a graph (NumPy, float64).

    Dwivedi et al. (2020) give each node of a graph the entries of the ``k``
    eigenvectors of the normalised Laplacian with the smallest non-trivial
    eigenvalues: the graph's analogue of the sinusoids, which are exactly the
    Laplacian eigenvectors of a cycle. The trivial eigenvectors (eigenvalue 0,
    one per connected component, constant on it up to the degree scaling) are
    skipped. Eigenvectors are sorted by eigenvalue and have unit norm.

    An eigenvector is defined only up to its sign (``L v = lam v`` implies
    ``L (-v) = lam (-v)``), so a deterministic convention is applied: the first
    entry whose magnitude exceeds ``1e-6`` times the vector's largest is made
    positive. The convention is arbitrary, which is why models flip the signs at
    random during training (:class:`LaplacianEncoding`). Where eigenvalues
    repeat (a cycle, a square grid), any orthonormal basis of their eigenspace
    is as valid as the one returned; only the space is determined.

    Args:
        adjacency: ``(nodes, nodes)`` symmetric array of non-negative edge
            weights (0/1 for an unweighted graph).
        k: number of eigenvectors, ``1 <= k <= nodes - components``.
        normalized: use ``I - D^(-1/2) A D^(-1/2)`` (default, as Dwivedi et al.)
            or, with ``False``, ``D - A``.
        return_eigenvalues: also return the ``k`` eigenvalues. Default ``False``.

    Returns:
        float64 array ``(nodes, k)``, column ``j`` the eigenvector with the
        ``j``-th smallest non-trivial eigenvalue; with ``return_eigenvalues``,
        the pair ``(vectors, eigenvalues)``.

    Example:
        >>> path = np.eye(4, k=1) + np.eye(4, k=-1)          # 0 - 1 - 2 - 3
        >>> vectors, values = laplacian_positions(path, 2, return_eigenvalues=True)
        >>> vectors.shape, np.round(values, 4)
        ((4, 2), array([0.5, 1.5]))

    References:
        Dwivedi, Joshi, Laurent, Bengio & Bresson, "Benchmarking Graph Neural
        Networks", arXiv:2003.00982, 2020 (JMLR 2023).
        Dwivedi & Bresson, "A Generalization of Transformer Networks to Graphs",
        AAAI Workshop on Deep Learning on Graphs, 2021.
    """
    what = "laplacian_positions"
    normalized = check_bool("normalized", normalized, what=what)
    return_eigenvalues = check_bool("return_eigenvalues", return_eigenvalues, what=what)
    lap = _laplacian(check_adjacency(adjacency, what=what), normalized)
    nodes = lap.shape[0]
    k = check_positive_int("k", k, what=what)
    check_eigenvector_count(k, nodes, what=what)
    values, vectors = np.linalg.eigh(lap)
    order = np.argsort(values, kind="stable")
    values, vectors = values[order], vectors[:, order]
    trivial = int(np.sum(values < TRIVIAL_EIGENVALUE_TOL * max(1.0, float(values[-1]))))
    check_eigenvector_count(k, nodes, components=trivial, what=what)
    values, vectors = values[trivial:trivial + k], vectors[:, trivial:trivial + k].copy()
    for j in range(k):
        column = vectors[:, j]
        first = int(np.argmax(np.abs(column) > 1e-6 * np.abs(column).max()))
        if column[first] < 0:
            vectors[:, j] = -column
    return (vectors, values) if return_eigenvalues else vectors
