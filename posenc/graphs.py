"""Graph positions (framework-free): the Laplacian, its eigenvectors, the argument rules.

Dwivedi et al.'s Laplacian eigenvector positions are computed here, in float64
NumPy, once per graph (:func:`laplacian`, :func:`laplacian_positions`); both
faces return them as tensors, and their ``LaplacianEncoding`` maps them to the
model width with random sign flips.
"""

from __future__ import annotations

import numpy as np

from posenc._checks import _error, check_bool, check_positive_int

__all__ = ["laplacian", "laplacian_positions", "TRIVIAL_EIGENVALUE_TOL"]


# --------------------------------------------------------------------------- argument rules

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

# --------------------------------------------------------------------------- the Laplacian

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
