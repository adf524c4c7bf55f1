"""Framework-free parts of the regularised and structured encodings.

Argument validation that both faces share (so PyTorch and Keras raise the same
messages) and the small NumPy formulas that do not depend on the data. The data
checks take plain Python numbers (a minimum, a maximum, a flag) that each face
computes from its own tensors, so no tensor ever has to leave its framework.
"""

from __future__ import annotations

import math
import numbers

from posenc._checks import check_positions_shape, check_positive_int

#: The ways :class:`MultimodalEncoding` can share positions between modalities.
MULTIMODAL_MODES = ("shared", "per_modality", "shared_offset")

#: Standard deviation of a freshly initialised learned table (BERT, GPT-2).
TABLE_INIT_STD = 0.02


def _plain_number(name: str, value, what: str) -> float:
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise ValueError(f"{what}: {name} must be a number, got {name}={value!r}.")
    value = float(value)
    if not math.isfinite(value):
        raise ValueError(f"{what}: {name} must be finite, got {name}={value!r}.")
    return value


def check_rate(name: str, value, *, what: str) -> float:
    """A drop probability in ``[0, 1)``."""
    rate = _plain_number(name, value, what)
    if not 0.0 <= rate < 1.0:
        raise ValueError(
            f"{what}: {name} must be in [0, 1) (the probability of dropping an entry), "
            f"got {name}={value!r}; use a small value such as 0.1, or 0 to switch it off."
        )
    return rate


def check_std(name: str, value, *, what: str) -> float:
    """A noise standard deviation, ``>= 0``."""
    std = _plain_number(name, value, what)
    if std < 0.0:
        raise ValueError(
            f"{what}: {name} must be >= 0 (a standard deviation), got {name}={value!r}; "
            "use a small positive value such as 0.02, or 0 to switch the noise off."
        )
    return std


def check_seed(seed, *, what: str):
    """``None`` or a non-negative integer."""
    if seed is None:
        return None
    if isinstance(seed, bool) or not isinstance(seed, numbers.Integral) or seed < 0:
        raise ValueError(
            f"{what}: seed must be None or a non-negative integer, got seed={seed!r}."
        )
    return int(seed)


def check_time_scale(time_scale) -> float:
    """The unit of time, a finite number greater than 0."""
    value = _plain_number("time_scale", time_scale, "ContinuousTimeEncoding")
    if value <= 0.0:
        raise ValueError(
            f"ContinuousTimeEncoding: time_scale must be greater than 0 (timestamps are divided "
            f"by it), got time_scale={time_scale!r}; use the typical gap between events, "
            "or 1.0 to use the timestamps as they are."
        )
    return value


def hierarchical_level_width(dim, max_depth, *, what: str = "hierarchical") -> int:
    """Channels per tree level, ``dim // max_depth``; it must be even."""
    dim = check_positive_int("dim", dim)
    max_depth = check_positive_int("max_depth", max_depth)
    step = 2 * max_depth
    if dim % step:
        lower, upper = dim - dim % step, dim - dim % step + step
        hint = f"dim={upper}" + (f" or dim={lower}" if lower else "")
        reason = (f"{dim} is not divisible by max_depth={max_depth}" if dim % max_depth
                  else f"dim // max_depth = {dim // max_depth} is odd")
        raise ValueError(
            f"{what}: each of the max_depth={max_depth} levels gets dim // max_depth channels "
            f"of sine/cosine pairs, so dim must be a multiple of 2 * max_depth = {step}; "
            f"got dim={dim} ({reason}). Use {hint}."
        )
    return dim // max_depth


def check_paths_depth(shape, max_depth: int, *, what: str) -> None:
    """The last axis of ``paths`` holds one child index per level."""
    shape = tuple(shape)
    if len(shape) < 1 or (shape[-1] is not None and shape[-1] != max_depth):
        got = shape[-1] if shape else None
        if got is not None and got > max_depth:
            fix = f"build it with max_depth={got} for trees this deep"
        else:
            fix = f"pad every path with -1 up to max_depth={max_depth} levels"
        raise ValueError(
            f"{what}: paths must have shape (..., max_depth) with max_depth={max_depth}, "
            f"got paths.shape={shape}; {fix}."
        )


def check_paths_values(lowest: int, highest: int, gap: bool, *, what: str,
                       max_children: int | None = None) -> None:
    """Child indices are ``>= 0``, ``-1`` pads the levels below a node's depth."""
    if lowest < -1:
        raise ValueError(
            f"{what}: paths hold child indices >= 0, padded with -1 below the node's depth, "
            f"got the value {lowest}; use -1 for every level deeper than the node."
        )
    if gap:
        raise ValueError(
            f"{what}: a path has a child index after a -1 (e.g. [2, -1, 0]); -1 marks the "
            "levels below the node, so it may only follow the node's last level, as in "
            "[2, 0, -1]."
        )
    if max_children is not None and highest >= max_children:
        raise ValueError(
            f"{what}: child index {highest} is out of range for max_children={max_children} "
            f"(indices 0 .. {max_children - 1}); build it with max_children={highest + 1} "
            "or more."
        )


def check_per_token_shape(name: str, shape, x_shape, *, what: str, each: str,
                          trailing: str = "") -> None:
    """``name`` gives one ``each`` per token of ``x`` ``(..., seq, dim)``.

    Its shape (without its last axis when ``trailing`` names one, as for the
    levels of ``paths``) must be ``(seq,)`` or ``(batch, seq)``, or anything
    else :func:`posenc._checks.check_positions_shape` accepts.
    """
    shape = tuple(shape)
    lead = shape[:-1] if trailing else shape
    try:
        check_positions_shape(what, lead, x_shape)
    except ValueError:
        one, batched = ((f"(seq, {trailing})", f"(batch, seq, {trailing})") if trailing
                        else ("(seq,)", "(batch, seq)"))
        raise ValueError(
            f"{what}: {name} must have shape {one} or {batched} matching x's (..., seq, dim), "
            f"got {name}.shape={shape} for x.shape={tuple(x_shape)}; pass one {each} per token."
        ) from None


def check_numeric_timestamps(dtype: str, *, what: str) -> None:
    """Timestamps are numbers (int or float); a boolean tensor is a mask."""
    if dtype == "bool" or "complex" in dtype:
        raise ValueError(
            f"{what}: timestamps must be integers or floats, got dtype {dtype}; a boolean "
            "tensor is a mask, not times: pass the time of each token."
        )


def check_float_encoding(what: str, dtype: str) -> None:
    """A regulariser scales and perturbs ``P``: an integer ``P`` would be truncated."""
    if "float" not in dtype:
        raise ValueError(
            f"{what}: the encoding must be a floating-point tensor, got dtype {dtype}; "
            "pass the encoding P itself (float32, bfloat16, ...), or cast it first."
        )


def check_index_values(name: str, lowest: int, highest: int, limit: int, *, what: str,
                       fix: str) -> None:
    """Integer indices into a table of ``limit`` rows."""
    if lowest < 0 or highest >= limit:
        bad = lowest if lowest < 0 else highest
        raise ValueError(
            f"{what}: {name} must lie in 0 .. {limit - 1}, got {bad}; {fix}."
        )


def check_length(length: int, max_len: int, *, what: str) -> None:
    """A sequence fits a table of ``max_len`` rows."""
    if length > max_len:
        raise ValueError(
            f"{what}: sequence length {length} exceeds the table's max_len={max_len}; "
            "build it with a larger max_len."
        )


def integer_positions_error(name: str, dtype: str, *, what: str) -> ValueError:
    return ValueError(
        f"{what}: {name} index a table, so they must be integers, got dtype {dtype}; "
        "round them to integers, or use a sinusoidal encoding for fractional positions."
    )


def check_mode(mode) -> str:
    if mode not in MULTIMODAL_MODES:
        raise ValueError(
            "MultimodalEncoding: mode must be one of "
            f"{', '.join(repr(m) for m in MULTIMODAL_MODES)}, got mode={mode!r}."
        )
    return mode


def check_low_rank(max_len, dim, rank) -> tuple[int, int, int]:
    """``1 <= rank <= min(max_len, dim)``."""
    max_len = check_positive_int("max_len", max_len)
    dim = check_positive_int("dim", dim)
    full = min(max_len, dim)
    if isinstance(rank, bool) or not isinstance(rank, numbers.Integral):
        raise ValueError(f"LowRankEncoding: rank must be an integer, got rank={rank!r}.")
    rank = int(rank)
    if rank < 1:
        raise ValueError(
            f"LowRankEncoding: rank must be at least 1, got rank={rank}; "
            f"use a rank from 1 to min(max_len, dim)={full}."
        )
    if rank > full:
        raise ValueError(
            f"LowRankEncoding: rank={rank} exceeds min(max_len, dim)={full}; a rank of {full} "
            "already represents every (max_len, dim) table, so more only adds parameters. "
            f"Use rank <= {full}."
        )
    return max_len, dim, rank


def low_rank_init_std(rank: int, target: float = TABLE_INIT_STD) -> float:
    """Standard deviation of each factor so that ``left @ right`` has std ``target``.

    With independent ``N(0, s^2)`` entries, each entry of the product is a sum
    of ``rank`` terms of variance ``s^4``, so ``s = sqrt(target / sqrt(rank))``.
    """
    return math.sqrt(target / math.sqrt(rank))


# --------------------------------------------------------------------------- coordinates and graphs
# Chapter 4: DETR's sine embedding of coordinates, and Laplacian eigenvector positions.

import numpy as np  # noqa: E402  (this section's formulas are NumPy)

def coordinate_width(dim, num_coords: int, *, what: str = "coordinate_encoding") -> int:
    """Channels per coordinate, ``dim // num_coords``; it must be even."""
    dim = check_positive_int("dim", dim)
    if num_coords < 1:
        raise ValueError(
            f"{what}: coords must be (..., k) with at least one coordinate on the last axis, "
            f"got k={num_coords}; pass e.g. (y, x) pairs or (x, y, w, h) boxes."
        )
    step = 2 * num_coords
    if dim % step:
        lower, upper = dim - dim % step, dim - dim % step + step
        hint = f"dim={upper}" + (f" or dim={lower}" if lower else "")
        raise ValueError(
            f"{what}: each of the k={num_coords} coordinates gets dim // k channels of "
            f"sine/cosine pairs, so dim must be a multiple of 2 * k = {step}; got dim={dim}. "
            f"Use {hint}."
        )
    return dim // num_coords


def check_coordinate_scale(scale, num_coords: int, *,
                           what: str = "coordinate_encoding") -> tuple[float, ...]:
    """One positive finite factor per coordinate (a single number is used for all)."""
    values = (list(scale) if isinstance(scale, (list, tuple)) else [scale])
    if len(values) == 1:
        values = values * num_coords
    if len(values) != num_coords:
        raise ValueError(
            f"{what}: scale must be one number or one per coordinate, got {len(values)} "
            f"values for k={num_coords} coordinates (scale={scale!r}); pass a single number "
            f"or a sequence of {num_coords}."
        )
    out = tuple(_plain_number("scale", v, what) for v in values)
    if any(v <= 0.0 for v in out):
        raise ValueError(
            f"{what}: scale must be greater than 0 (coordinates are multiplied by it), got "
            f"scale={scale!r}; use 2 * pi for coordinates normalised to [0, 1] (DETR), or "
            "1 / unit for coordinates in a unit such as seconds or pixels."
        )
    return out


def check_sign_flip(sign_flip, *, what: str = "LaplacianEncoding") -> bool:
    if not isinstance(sign_flip, bool):
        raise ValueError(f"{what}: sign_flip must be True or False, got sign_flip={sign_flip!r}.")
    return sign_flip


def check_eigenvectors_shape(shape, k: int, *, what: str = "LaplacianEncoding") -> None:
    """``eigenvectors`` are ``(..., nodes, k)``: one row of ``k`` entries per node."""
    shape = tuple(shape)
    if len(shape) < 2 or (shape[-1] is not None and shape[-1] != k):
        raise ValueError(
            f"{what}: eigenvectors must have shape (nodes, k) or (batch, nodes, k) with k={k}, "
            f"got eigenvectors.shape={shape}; pass laplacian_positions(adjacency, {k}) or "
            "build the encoding with the k you computed."
        )


def _adjacency(adjacency, what: str) -> np.ndarray:
    """``adjacency`` as a float64 matrix: square, finite, symmetric, non-negative."""
    a = np.asarray(adjacency)
    if a.dtype == bool:
        a = a.astype(np.float64)
    if not (np.issubdtype(a.dtype, np.integer) or np.issubdtype(a.dtype, np.floating)):
        raise ValueError(
            f"{what}: adjacency must hold numbers (0/1 or edge weights), got dtype {a.dtype}."
        )
    a = a.astype(np.float64)
    if a.ndim != 2 or a.shape[0] != a.shape[1] or a.shape[0] == 0:
        raise ValueError(
            f"{what}: adjacency must be a square (nodes, nodes) matrix, got "
            f"adjacency.shape={a.shape}; pass the n x n adjacency (or weight) matrix of the graph."
        )
    if not np.all(np.isfinite(a)):
        raise ValueError(f"{what}: adjacency must be finite, got a NaN or infinite weight.")
    if np.any(a < 0):
        i, j = (int(v) for v in np.argwhere(a < 0)[0])
        raise ValueError(
            f"{what}: adjacency must hold non-negative edge weights, got adjacency[{i}, {j}]="
            f"{float(a[i, j])!r}; use 0 for no edge and a positive weight for an edge."
        )
    if not np.allclose(a, a.T, rtol=1e-6, atol=1e-9):
        i, j = (int(v) for v in np.argwhere(~np.isclose(a, a.T, rtol=1e-6, atol=1e-9))[0])
        raise ValueError(
            f"{what}: adjacency must be symmetric (an undirected graph), got adjacency[{i}, {j}]="
            f"{float(a[i, j])!r} but adjacency[{j}, {i}]={float(a[j, i])!r}; use "
            "np.maximum(A, A.T) or (A + A.T) / 2 for the undirected graph."
        )
    return (a + a.T) / 2.0


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
    return _laplacian(_adjacency(adjacency, "laplacian"), normalized)


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
    lap = _laplacian(_adjacency(adjacency, what), normalized)
    nodes = lap.shape[0]
    if isinstance(k, bool) or not isinstance(k, numbers.Integral) or k < 1:
        raise ValueError(
            f"{what}: k must be a positive integer (the number of eigenvectors), got k={k!r}."
        )
    k = int(k)
    if nodes < 2:
        raise ValueError(
            f"{what}: adjacency has a single node, whose only eigenvector is the trivial one; "
            "Laplacian positions need a graph of at least 2 nodes."
        )
    if k > nodes - 1:
        raise ValueError(
            f"{what}: k={k} is too large for a graph of {nodes} nodes: it has {nodes} "
            f"eigenvectors, one of them trivial, so use k <= {nodes - 1}."
        )
    values, vectors = np.linalg.eigh(lap)
    order = np.argsort(values, kind="stable")
    values, vectors = values[order], vectors[:, order]
    trivial = int(np.sum(values < TRIVIAL_EIGENVALUE_TOL * max(1.0, float(values[-1]))))
    if k > nodes - trivial:
        raise ValueError(
            f"{what}: k={k} exceeds the {nodes - trivial} non-trivial eigenvectors of this "
            f"graph ({nodes} nodes, {trivial} connected components, each with a trivial "
            f"eigenvector); use k <= {nodes - trivial}, or connect the graph."
        )
    values, vectors = values[trivial:trivial + k], vectors[:, trivial:trivial + k].copy()
    for j in range(k):
        column = vectors[:, j]
        first = int(np.argmax(np.abs(column) > 1e-6 * np.abs(column).max()))
        if column[first] < 0:
            vectors[:, j] = -column
    return (vectors, values) if return_eigenvalues else vectors
