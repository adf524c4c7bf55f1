"""Structured positions (framework-free): times, trees, modalities, graphs.

What both faces share beyond the sinusoid itself: the registry of the ways
``MultimodalEncoding`` shares positions between modalities, and the index maps
its modes and ``HierarchicalEncoding`` gather with. The index maps use only
``+`` and ``*``, so one function serves NumPy arrays and the tensors of both
faces alike. Graph positions (:func:`laplacian`, :func:`laplacian_positions`)
are computed here, in float64 NumPy, once per graph; both faces return them as
tensors. The family's argument rules (``check_*``) are here too; the shared
primitives are in :mod:`posenc._checks`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import numpy as np

from posenc._checks import _error, check_bool, check_float, check_positive_int
from posenc.learned import TABLE_INIT_STD

__all__ = ["TABLE_INIT_STD", "MultimodalMode", "MULTIMODAL_MODES", "level_rows", "laplacian",
           "laplacian_positions"]


# --------------------------------------------------------------------------- argument rules

def check_time_scale(time_scale, *, what: str = "") -> float:
    """The unit of time, a finite number greater than 0."""
    return check_float("time_scale", time_scale, above=0.0,
                       meaning="timestamps are divided by it", what=what,
                       fix="use the typical gap between events, or 1.0 to use the timestamps "
                           "as they are")


def _block_width(dim: int, blocks: int, name: str, unit: str, *, what: str) -> int:
    """Channels per block, ``dim // blocks``, when ``blocks`` sinusoids are concatenated:
    ``dim`` must be a multiple of ``2 * blocks``."""
    step = 2 * blocks
    if dim % step:
        lower, upper = dim - dim % step, dim - dim % step + step
        hint = f"dim={upper}" + (f" or dim={lower}" if lower else "")
        reason = (f"{dim} is not divisible by {name}={blocks}" if dim % blocks
                  else f"dim // {name} = {dim // blocks} is odd")
        raise _error(what, f"each of the {name}={blocks} {unit} gets dim // {name} "
                           f"channels of sine/cosine pairs, so dim must be a multiple of "
                           f"2 * {name} = {step}; got dim={dim} ({reason})", f"use {hint}")
    return dim // blocks


def check_level_width(dim, max_depth, *, what: str = "") -> int:
    """Channels per tree level, ``dim // max_depth``; it must be even."""
    dim = check_positive_int("dim", dim, what=what)
    max_depth = check_positive_int("max_depth", max_depth, what=what)
    return _block_width(dim, max_depth, "max_depth", "levels", what=what)


def check_paths_depth(shape, max_depth: int, *, what: str = "") -> None:
    """The last axis of ``paths`` holds one child index per level."""
    shape = tuple(shape)
    if len(shape) < 1 or (shape[-1] is not None and shape[-1] != max_depth):
        got = shape[-1] if shape else None
        if got is not None and got > max_depth:
            fix = f"build it with max_depth={got} for trees this deep"
        else:
            fix = f"pad every path with -1 up to max_depth={max_depth} levels"
        raise _error(what, f"paths must have shape (..., max_depth) with max_depth={max_depth}, "
                           f"got paths.shape={shape}", fix)


def check_paths_values(lowest: int, highest: int, gap: bool, *, max_children: int | None = None,
                       what: str = "") -> None:
    """Child indices are ``>= 0``; ``-1`` pads the levels below a node's depth."""
    if lowest < -1:
        raise _error(what, f"paths hold child indices >= 0, padded with -1 below the node's "
                           f"depth, got the value {lowest}",
                     "use -1 for every level deeper than the node")
    if gap:
        raise _error(what, "a path has a child index after a -1 (e.g. [2, -1, 0]); -1 marks "
                           "the levels below the node, so it may only follow the node's last "
                           "level, as in [2, 0, -1]")
    if max_children is not None and highest >= max_children:
        raise _error(what, f"child index {highest} is out of range for "
                           f"max_children={max_children} (indices 0 .. {max_children - 1})",
                     f"build it with max_children={highest + 1} or more")


def check_coordinates(shape, *, what: str = "") -> int:
    """``coords`` are ``(..., k)`` with ``k >= 1`` coordinates on the last axis; returns ``k``."""
    shape = tuple(shape)
    if len(shape) < 1:
        raise _error(what, "coords must be (..., k), got a scalar",
                     "use coords[..., None] for a single coordinate")
    if shape[-1] is None or shape[-1] < 1:
        raise _error(what, f"coords must be (..., k) with at least one coordinate on the last "
                           f"axis, got coords.shape={shape}",
                     "pass e.g. (y, x) pairs or (x, y, w, h) boxes")
    return int(shape[-1])


def check_coordinate_width(dim, num_coords: int, *, what: str = "") -> int:
    """Channels per coordinate, ``dim // k``; it must be even."""
    dim = check_positive_int("dim", dim, what=what)
    return _block_width(dim, num_coords, "k", "coordinates", what=what)


def check_coordinate_scale(scale, num_coords: int, *, what: str = "") -> tuple[float, ...]:
    """One finite factor ``> 0`` per coordinate (a single number is used for all)."""
    values = list(scale) if isinstance(scale, (list, tuple)) else [scale]
    if len(values) == 1:
        values = values * num_coords
    if len(values) != num_coords:
        raise _error(what, f"scale must be one number or one per coordinate, got "
                           f"{len(values)} values for k={num_coords} coordinates "
                           f"(scale={scale!r})",
                     f"pass a single number or a sequence of {num_coords}")
    return tuple(check_float("scale", v, above=0.0, meaning="coordinates are multiplied by it",
                             what=what,
                             fix="use 2 * pi for coordinates normalised to [0, 1] (DETR), or "
                                 "1 / unit for coordinates in a unit such as seconds or pixels")
                 for v in values)


def check_adjacency(adjacency, *, what: str = ""):
    """A graph's ``(nodes, nodes)`` adjacency (a NumPy array or nested lists): numbers, finite,
    non-negative, symmetric. Returns it as a float64 array, symmetrised exactly."""
    a = np.asarray(adjacency)
    if a.dtype == bool:
        a = a.astype(np.float64)
    if not (np.issubdtype(a.dtype, np.integer) or np.issubdtype(a.dtype, np.floating)):
        raise _error(what, f"adjacency must hold numbers (0/1 or edge weights), got dtype "
                           f"{a.dtype}")
    a = a.astype(np.float64)
    if a.ndim != 2 or a.shape[0] != a.shape[1] or a.shape[0] == 0:
        raise _error(what, f"adjacency must be a square (nodes, nodes) matrix, got "
                           f"adjacency.shape={a.shape}",
                     "pass the n x n adjacency (or weight) matrix of the graph")
    if not np.all(np.isfinite(a)):
        raise _error(what, "adjacency must be finite, got a NaN or infinite weight")
    if np.any(a < 0):
        i, j = (int(v) for v in np.argwhere(a < 0)[0])
        raise _error(what, f"adjacency must hold non-negative edge weights, got "
                           f"adjacency[{i}, {j}]={float(a[i, j])!r}",
                     "use 0 for no edge and a positive weight for an edge")
    close = np.isclose(a, a.T, rtol=1e-6, atol=1e-9)
    if not np.all(close):
        i, j = (int(v) for v in np.argwhere(~close)[0])
        raise _error(what, f"adjacency must be symmetric (an undirected graph), got "
                           f"adjacency[{i}, {j}]={float(a[i, j])!r} but "
                           f"adjacency[{j}, {i}]={float(a[j, i])!r}",
                     "use np.maximum(A, A.T) or (A + A.T) / 2 for the undirected graph")
    return (a + a.T) / 2.0


def check_eigenvector_count(k: int, nodes: int, *, components: int | None = None,
                            what: str = "") -> None:
    """``k`` non-trivial eigenvectors exist: ``k <= nodes - components`` (one trivial
    eigenvector per connected component; ``None``: not known yet, at least one)."""
    if nodes < 2:
        raise _error(what, "adjacency has a single node, whose only eigenvector is the trivial "
                           "one", "Laplacian positions need a graph of at least 2 nodes")
    if k > nodes - 1:
        raise _error(what, f"k={k} is too large for a graph of {nodes} nodes: it has {nodes} "
                           "eigenvectors, one of them trivial", f"use k <= {nodes - 1}")
    if components is not None and k > nodes - components:
        raise _error(what, f"k={k} exceeds the {nodes - components} non-trivial eigenvectors "
                           f"of this graph ({nodes} nodes, {components} connected components, "
                           "each with a trivial eigenvector)",
                     f"use k <= {nodes - components}, or connect the graph")


def check_eigenvectors_shape(shape, k: int, *, what: str = "") -> None:
    """``eigenvectors`` are ``(..., nodes, k)``: one row of ``k`` entries per node."""
    shape = tuple(shape)
    if len(shape) < 2 or (shape[-1] is not None and shape[-1] != k):
        raise _error(what, f"eigenvectors must have shape (nodes, k) or (batch, nodes, k) with "
                           f"k={k}, got eigenvectors.shape={shape}",
                     f"pass laplacian_positions(adjacency, {k}) or build the encoding with "
                     "the k you computed")


# --------------------------------------------------------------------------- index maps


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
