"""Positions that are not ``0, 1, 2, ...`` (PyTorch face).

Continuous time (irregular timestamps), tree paths, several modalities in
one sequence, real coordinates (DETR's sine embedding of points and boxes) and
graph nodes (Laplacian eigenvectors; the low-rank table is in ``learned.py``). Each is an absolute
encoding: a module whose ``forward`` returns ``x + P`` and whose
``encoding(...)`` returns ``P`` alone in float32.

Index checks that depend on the data (child indices, modality ids, positions
below ``max_len``) follow the policy of the API reference ("Checks that read
the data"), as in the Keras face.
"""

from __future__ import annotations

import math

import torch
from torch import nn

from posenc._checks import (
    check_base,
    check_bool,
    check_choice,
    check_embeddings,
    check_even_dim,
    check_float_dtype,
    check_layout,
    check_not_scalar,
    check_numeric_dtype,
    check_positive_int,
    check_seed,
)
from posenc.structured import (
    check_coordinate_scale,
    check_coordinate_width,
    check_coordinates,
    check_eigenvectors_shape,
    check_level_width,
    check_paths_depth,
    check_paths_values,
    check_time_scale,
    MULTIMODAL_MODES,
    MULTIMODAL_TOO_SHORT,
    TABLE_INIT_STD,
    level_rows,
)
from posenc.structured import laplacian as numpy_laplacian
from posenc.structured import laplacian_positions as numpy_laplacian_positions
from posenc.torch._util import (
    AdditiveEncoding,
    SeededDraws,
    as_indices,
    as_numpy,
    as_positions,
    can_inspect,
    check_indices,
    dtype_of,
    read_back,
    result_dtype,
    wide_dtype,
)
from posenc.torch.sinusoidal import sinusoidal

__all__ = [
    "ContinuousTimeEncoding",
    "Time2Vec",
    "hierarchical",
    "HierarchicalEncoding",
    "modality_positions",
    "MultimodalEncoding",
    "coordinate_encoding",
    "laplacian",
    "laplacian_positions",
    "LaplacianEncoding",
]


# --------------------------------------------------------------------------- helpers

def _check_paths(paths, max_depth: int, *, what: str,
                 max_children: int | None = None) -> torch.Tensor:
    """``paths`` as int64 ``(..., max_depth)``; their values checked when the policy allows."""
    paths = as_indices(paths, name="paths", what=what)
    check_paths_depth(paths.shape, max_depth, what=what)
    if can_inspect(paths):
        gap = ((paths[..., 1:] >= 0) & (paths[..., :-1] < 0)).any()
        values = read_back(*torch.aminmax(paths), gap)
        if values is not None:
            check_paths_values(*values[:2], bool(values[2]), max_children=max_children,
                               what=what)
    return paths


# --------------------------------------------------------------------------- time

class _TimeEncoding(AdditiveEncoding):
    """Base of the encodings of timestamps: ``forward(x, timestamps)`` is ``x + P(timestamps)``."""

    def forward(self, x: torch.Tensor, timestamps) -> torch.Tensor:
        check_embeddings(x.shape, self.dim, what=self._what())
        timestamps = torch.as_tensor(timestamps, device=x.device)
        self._per_token("timestamps", timestamps, x, each="time")
        return self._add(x, self.encoding(timestamps))

    def _timestamps(self, timestamps) -> torch.Tensor:
        """Numeric timestamps as a tensor (an int n: ``0 .. n-1``)."""
        return as_positions(timestamps, name="timestamps", what=self._what())


class ContinuousTimeEncoding(_TimeEncoding):
    """Sinusoidal encoding of real-valued timestamps (irregular sampling).

    The sinusoid of Vaswani et al. (2017) is defined for any real position, so
    an event at time ``t`` can be encoded as ``sinusoidal(t / time_scale)``
    instead of by its index: gaps of different lengths give different codes,
    which an index cannot express for irregularly sampled series, event
    streams or clinical records. The relative property survives: shifting
    every timestamp by ``c`` multiplies each sine/cosine pair of every token by
    the same rotation of angle ``c * w_i / time_scale``, so attention can read
    elapsed time from ``P(t1) . P(t2)``. Angles are computed in float64, so
    timestamps in the millions keep their fractional part.

    Args:
        dim: even feature dimension; must equal ``x.shape[-1]``.
        time_scale: positive float, the unit of time: timestamps are divided by
            it (choose about the shortest gap that should be distinguishable).
            Default ``1.0``.
        base: wavelength base. Default ``10000.0``.
        layout: ``"interleaved"`` or ``"concat"``. Default ``"interleaved"``.

    Call arguments:
        x: ``(batch, seq, dim)`` embeddings.
        timestamps: ``(batch, seq)`` or ``(seq,)`` times (float or int).

    Returns:
        Tensor of the shape and dtype of ``x``.

    Example:
        >>> enc = ContinuousTimeEncoding(16, time_scale=0.5)
        >>> t = torch.tensor([[0.0, 0.3, 2.7], [0.0, 1.0, 1.1]])
        >>> enc(torch.zeros(2, 3, 16), t).shape
        torch.Size([2, 3, 16])

    References:
        Vaswani et al., "Attention Is All You Need", NeurIPS 2017, section 3.5.
        Kazemi et al., "Time2Vec: Learning a Vector Representation of Time",
        arXiv:1907.05321, 2019 (see :class:`Time2Vec` for a learned variant).
    """

    def __init__(self, dim: int, *, time_scale: float = 1.0, base: float = 10000.0,
                 layout: str = "interleaved"):
        super().__init__()
        what = "ContinuousTimeEncoding"
        self.dim = check_even_dim(dim, what=what)
        self.time_scale = check_time_scale(time_scale, what=what)
        self.layout = check_layout(layout, what=what)
        self.base = check_base(base, what=what)

    def extra_repr(self) -> str:
        return (f"dim={self.dim}, time_scale={self.time_scale}, base={self.base}, "
                f"layout={self.layout!r}")

    def encoding(self, timestamps) -> torch.Tensor:
        """``P`` (float32) of shape ``(*timestamps.shape, dim)``."""
        t = self._timestamps(timestamps)
        t = t.to(wide_dtype(t.device)) / self.time_scale
        return sinusoidal(t, self.dim, base=self.base, layout=self.layout).float()


class Time2Vec(_TimeEncoding):
    """Time2Vec: one linear and ``dim - 1`` learned periodic features of time.

    Kazemi et al. (2019) represent a time ``t`` by ``t2v(t)[0] = w_0 t + b_0``
    (the non-periodic trend) and ``t2v(t)[i] = sin(w_i t + b_i)`` for
    ``i >= 1``, with learned frequencies ``w`` and phases ``b``: a learned
    analogue of the fixed sinusoid, able to discover the periods in the data
    (days, weeks). The paper concatenates ``t2v(t)`` to the features; here it
    is added to ``x`` like every absolute encoding (project or concatenate
    yourself if you prefer). The linear channel is unbounded, so feed
    timestamps on a scale of about one (e.g. in units of a typical gap),
    relative to the start of the sequence.

    Args:
        dim: feature dimension (``>= 1``); must equal ``x.shape[-1]``.

    Call arguments:
        x: ``(batch, seq, dim)`` embeddings.
        timestamps: ``(batch, seq)`` or ``(seq,)`` times (float or int), best
            on a scale of about one (the linear channel grows with them).

    Returns:
        Tensor of the shape and dtype of ``x``.

    Weights:
        frequency: ``(dim,)``, the ``w_i``; initialised ``N(0, 1)``.
        phase: ``(dim,)``, the ``b_i``; initialised ``N(0, 1)``.

    Example:
        >>> t2v = Time2Vec(8)
        >>> t2v(torch.zeros(2, 3, 8), torch.tensor([0.0, 0.5, 3.0])).shape
        torch.Size([2, 3, 8])

    References:
        Kazemi et al., "Time2Vec: Learning a Vector Representation of Time",
        arXiv:1907.05321, 2019.
    """

    def __init__(self, dim: int):
        super().__init__()
        self.dim = check_positive_int("dim", dim, what="Time2Vec")
        self.frequency = nn.Parameter(torch.empty(self.dim))
        self.phase = nn.Parameter(torch.empty(self.dim))
        self.reset_parameters()

    def reset_parameters(self) -> None:
        nn.init.normal_(self.frequency)
        nn.init.normal_(self.phase)

    def extra_repr(self) -> str:
        return f"dim={self.dim}"

    def encoding(self, timestamps) -> torch.Tensor:
        """``P`` (float32) of shape ``(*timestamps.shape, dim)``."""
        t = self._timestamps(timestamps).to(self.frequency.device)
        with torch.autocast(device_type=t.device.type, enabled=False):
            angles = t.float()[..., None] * self.frequency.float() + self.phase.float()
            return torch.cat((angles[..., :1], torch.sin(angles[..., 1:])), dim=-1)


# --------------------------------------------------------------------------- trees

def hierarchical(paths, dim: int, *, max_depth: int, base: float = 10000.0) -> torch.Tensor:
    """Fixed encoding of tree positions: one sinusoid block per level.

    A node is addressed by its path from the root, ``paths[..., l]`` being its
    child index at depth ``l`` (``-1`` below the node's depth). Level ``l``
    owns channels ``l * w .. (l + 1) * w - 1`` with ``w = dim // max_depth``,
    holding the interleaved sinusoid of that level's child index (zeros for
    the padded levels). Siblings therefore share every channel of their
    parent and differ only in their own level, and a node's encoding is its
    parent's plus one block. Shiv & Quirk (2019) encode the same path as a
    stack of one-hot child indices (newest step first, learned decay per
    level); this is a fixed, root-aligned cousin with no limit on the number
    of children.

    Args:
        paths: int tensor ``(..., max_depth)`` of child indices from the root,
            padded with ``-1``.
        dim: feature dimension, a multiple of ``2 * max_depth``.
        max_depth: number of levels (keyword-only).
        base: wavelength base. Default ``10000.0``.

    Returns:
        float32 tensor of shape ``(..., dim)``.

    Example:
        >>> paths = torch.tensor([[0, -1], [0, 2], [1, -1]])  # a child, its child, a sibling
        >>> hierarchical(paths, 8, max_depth=2).shape
        torch.Size([3, 8])

    References:
        Shiv & Quirk, "Novel positional encodings to enable tree-based
        transformers", NeurIPS 2019.
    """
    width = check_level_width(dim, max_depth, what="hierarchical")
    paths = _check_paths(paths, max_depth, what="hierarchical")
    present = (paths >= 0)[..., None]
    pe = sinusoidal(paths.clamp(min=0), width, base=base)  # (..., max_depth, width)
    return (pe * present).flatten(-2)


class HierarchicalEncoding(AdditiveEncoding):
    """Learned tree positions: the sum of one embedding per level of the path.

    ``P(path) = sum_l level_tables[l, path[l]]`` over the levels the node
    reaches (padded ``-1`` levels add nothing). Shiv & Quirk (2019) represent
    a path as stacked one-hot child indices; a linear map of such a stack is
    exactly a sum of per-level embedding rows, which this module learns
    directly (root-aligned, without the paper's geometric decay). A child's
    encoding is its parent's plus one row, so siblings share their parent's
    part.

    Args:
        max_depth: number of levels a path may have.
        max_children: largest branching factor; child indices run
            ``0 .. max_children - 1``.
        dim: feature dimension; must equal ``x.shape[-1]``.

    Call arguments:
        x: ``(batch, seq, dim)`` embeddings.
        paths: int ``(batch, seq, max_depth)`` or ``(seq, max_depth)`` child
            indices from the root, padded with ``-1``.

    Returns:
        Tensor of the shape and dtype of ``x``.

    Weights:
        level_tables: ``(max_depth, max_children, dim)``, initialised
        ``N(0, 0.02^2)``.

    Example:
        >>> enc = HierarchicalEncoding(3, 4, 16)
        >>> paths = torch.tensor([[0, -1, -1], [0, 3, -1], [0, 3, 1]])
        >>> enc(torch.zeros(2, 3, 16), paths).shape
        torch.Size([2, 3, 16])

    References:
        Shiv & Quirk, "Novel positional encodings to enable tree-based
        transformers", NeurIPS 2019.
    """

    def __init__(self, max_depth: int, max_children: int, dim: int):
        super().__init__()
        what = "HierarchicalEncoding"
        self.max_depth = check_positive_int("max_depth", max_depth, what=what)
        self.max_children = check_positive_int("max_children", max_children, what=what)
        self.dim = check_positive_int("dim", dim, what=what)
        self.level_tables = nn.Parameter(torch.empty(self.max_depth, self.max_children, self.dim))
        self.reset_parameters()

    def reset_parameters(self) -> None:
        nn.init.normal_(self.level_tables, std=TABLE_INIT_STD)

    def extra_repr(self) -> str:
        return f"max_depth={self.max_depth}, max_children={self.max_children}, dim={self.dim}"

    def encoding(self, paths) -> torch.Tensor:
        """``P`` (float32) of shape ``(*paths.shape[:-1], dim)``."""
        paths = _check_paths(paths, self.max_depth, what=self._what(),
                             max_children=self.max_children)
        paths = paths.to(self.level_tables.device)
        rows = level_rows(paths.clamp(min=0), self._arange(self.max_depth), self.max_children)
        table = self.level_tables.float().reshape(-1, self.dim)
        return (table[rows] * (paths >= 0)[..., None]).sum(dim=-2)

    def forward(self, x: torch.Tensor, paths) -> torch.Tensor:
        check_embeddings(x.shape, self.dim, what=self._what())
        paths = paths if torch.is_tensor(paths) else torch.as_tensor(paths)
        check_paths_depth(paths.shape, self.max_depth, what=self._what())
        self._per_token("paths", paths, x, each="path", trailing="max_depth")
        return self._add(x, self.encoding(paths))


# --------------------------------------------------------------------------- modalities

def modality_positions(modality_ids, *, num_modalities: int | None = None) -> torch.Tensor:
    """Positions that restart at 0 in each modality: ``0, 1, 2, ...`` per modality.

    Token ``i`` gets the number of earlier tokens of its own modality (a
    cumulative count), so ``[0, 0, 1, 1, 1, 0]`` gives ``[0, 1, 0, 1, 2, 2]``.
    Without ``num_modalities`` the count compares every pair of tokens
    (``O(seq^2)`` memory, any integer ids); with it, a one-hot cumulative sum
    (``O(seq * num_modalities)``, ids in ``0 .. num_modalities - 1``).

    Args:
        modality_ids: int tensor ``(..., seq)``.
        num_modalities: optional number of modalities, for the one-hot path.

    Returns:
        int64 tensor of the shape of ``modality_ids``.

    Example:
        >>> modality_positions(torch.tensor([0, 0, 1, 1, 1, 0]))
        tensor([0, 1, 0, 1, 2, 2])
    """
    what = "modality_positions"
    ids = as_indices(modality_ids, name="modality_ids", what=what)
    check_not_scalar("modality_ids", ids.shape, what=what)
    if num_modalities is None:
        seq = ids.shape[-1]
        same = ids[..., :, None] == ids[..., None, :]
        earlier = torch.ones(seq, seq, dtype=torch.bool, device=ids.device).tril(-1)
        return (same & earlier).sum(dim=-1)
    num_modalities = check_positive_int("num_modalities", num_modalities, what=what)
    check_indices(ids, num_modalities, name="modality_ids", limit_name="num_modalities",
                  what=what, fix="pass a larger num_modalities, or none to count any ids")
    one_hot = nn.functional.one_hot(ids, num_modalities)
    return (one_hot.cumsum(dim=-2) * one_hot).sum(dim=-1) - 1


class MultimodalEncoding(AdditiveEncoding):
    """Positions for sequences that mix modalities (text, image patches, audio).

    Three ways to share position information between modalities, chosen by
    ``mode``:

    * ``"shared"``: one sinusoidal code for everyone, ``P = PE(pos)``; no
      weights. Cheap, but the model cannot tell modalities apart by position.
    * ``"per_modality"``: a learned table per modality,
      ``P = modality_tables[m, pos]``; nothing is shared, ``pos < max_len``.
    * ``"shared_offset"`` (default): ``P = PE(pos) + modality_embedding[m]``:
      the shared sinusoid plus a learned vector per modality, like BERT's
      segment embeddings.

    ``positions`` default to ``0 .. seq-1`` over the whole sequence; pass
    ``modality_positions(modality_ids)`` to restart them in each modality.

    Text + image: image patches usually carry a 2D position. Add the grid code
    ``sinusoidal_2d(rows, cols, dim)`` to the patch embeddings, concatenate
    them after the text, and give every patch 1D position 0, so the shared
    sinusoid adds only a constant to them while the text keeps its order::

        text = torch.randn(2, 5, 64)                      # 5 text tokens
        patches = torch.randn(2, 12, 64) + sinusoidal_2d(3, 4, 64)  # 3 x 4 grid
        x = torch.cat((text, patches), dim=1)
        ids = torch.tensor([0] * 5 + [1] * 12)
        positions = torch.where(ids == 0, modality_positions(ids), 0)
        enc = MultimodalEncoding(64, num_modalities=2, max_len=512)
        y = enc(x, ids, positions)                         # (2, 17, 64)

    Args:
        dim: feature dimension (even for the modes with a sinusoid).
        num_modalities: number of modalities; ids run ``0 .. num_modalities - 1``.
        max_len: rows of each ``per_modality`` table (positions must be below
            it); unused by the other modes.
        mode: ``"shared"``, ``"per_modality"`` or ``"shared_offset"``.
            Default ``"shared_offset"``.

    Call arguments:
        x: ``(batch, seq, dim)`` embeddings.
        modality_ids: int ``(batch, seq)`` or ``(seq,)``.
        positions: optional ``(batch, seq)`` or ``(seq,)`` positions (integers
            for ``per_modality``); default ``0 .. seq-1``.

    Returns:
        Tensor of the shape and dtype of ``x``.

    Weights:
        modality_tables: ``(num_modalities, max_len, dim)`` (``per_modality``).
        modality_embedding: ``(num_modalities, dim)`` (``shared_offset``).
        Both initialised ``N(0, 0.02^2)``.

    Example:
        >>> enc = MultimodalEncoding(16, num_modalities=2, max_len=32)
        >>> ids = torch.tensor([0, 0, 0, 1, 1])
        >>> enc(torch.zeros(2, 5, 16), ids, modality_positions(ids)).shape
        torch.Size([2, 5, 16])

    References:
        Vaswani et al., "Attention Is All You Need", NeurIPS 2017.
        Devlin et al., "BERT: Pre-training of Deep Bidirectional Transformers
        for Language Understanding", NAACL 2019 (segment embeddings).
    """

    def __init__(self, dim: int, *, num_modalities: int, max_len: int,
                 mode: str = "shared_offset"):
        super().__init__()
        what = "MultimodalEncoding"
        self.mode = check_choice("mode", mode, MULTIMODAL_MODES, what=what)
        spec = MULTIMODAL_MODES[mode]
        self.dim = (check_even_dim(dim, what=f"{what}(mode={mode!r})") if spec.sinusoid
                    else check_positive_int("dim", dim, what=what))
        self.num_modalities = check_positive_int("num_modalities", num_modalities, what=what)
        self.max_len = check_positive_int("max_len", max_len, what=what)
        if spec.table is not None:
            shape = spec.table_shape(self.num_modalities, self.max_len, self.dim)
            self.register_parameter(spec.table, nn.Parameter(torch.empty(shape)))
        self.reset_parameters()

    def reset_parameters(self) -> None:
        for p in self.parameters():
            nn.init.normal_(p, std=TABLE_INIT_STD)

    def extra_repr(self) -> str:
        return (f"dim={self.dim}, num_modalities={self.num_modalities}, "
                f"max_len={self.max_len}, mode={self.mode!r}")

    def encoding(self, modality_ids, positions=None) -> torch.Tensor:
        """``P`` (float32) of shape ``(*broadcast(modality_ids, positions).shape, dim)``.

        In ``"shared"`` mode the ids are not used and ``P`` has shape
        ``(*positions.shape, dim)``.
        """
        what, spec = self._what(), MULTIMODAL_MODES[self.mode]
        ids = as_indices(modality_ids, name="modality_ids", what=what)
        check_not_scalar("modality_ids", ids.shape, what=what)
        check_indices(ids, self.num_modalities, name="modality_ids", limit_name="num_modalities",
                      what=what, fix=f"build it with num_modalities={self.num_modalities + 1} "
                                     "or more")
        ids = ids.to(self._anchor.device)
        if positions is None:
            positions = ids.shape[-1]
        if spec.positions_index:
            positions = self._table_positions(positions, self.max_len, fix=MULTIMODAL_TOO_SHORT)
        else:
            positions = self._positions(positions)
        pe = sinusoidal(positions, self.dim).float() if spec.sinusoid else 0.0
        if spec.table is not None:
            table = getattr(self, spec.table).float().reshape(-1, self.dim)
            pe = pe + table[spec.row(ids, positions, self.max_len)]
        return pe

    def forward(self, x: torch.Tensor, modality_ids, positions=None) -> torch.Tensor:
        positions = self._positions_for(x, positions)
        modality_ids = as_indices(modality_ids, name="modality_ids", what=self._what())
        self._per_token("modality_ids", modality_ids, x, each="modality id")
        if positions is None:
            return x
        return self._add(x, self.encoding(modality_ids, positions))


# --------------------------------------------------------------------------- coordinates


def coordinate_encoding(coords, dim: int, *, scale=2 * math.pi, base: float = 10000.0,
                        layout: str = "interleaved") -> torch.Tensor:
    """Sinusoidal encoding of real coordinates: one sinusoid per coordinate, concatenated.

    DETR (Carion et al., 2020) encodes the position of a feature-map cell by its
    coordinates normalised to ``[0, 1]`` and multiplied by ``2 pi``, with the
    sinusoid of Vaswani et al. applied to each axis and the two halves
    concatenated, ``y`` first. Conditional DETR and DAB-DETR encode reference
    points ``(x, y)`` and anchor boxes ``(x, y, w, h)`` of their object queries
    the same way. For ``coords`` of shape ``(..., k)`` the result is
    ``concat_c sinusoidal(scale_c * coords[..., c], dim // k)``: pass the
    coordinates in the order you want their blocks (``(y, x)`` for DETR).

    Args:
        coords: float (or int) tensor ``(..., k)``, e.g. ``(y, x)`` in ``[0, 1]``.
        dim: feature dimension, a multiple of ``2 * k``.
        scale: positive number multiplying every coordinate, or one per
            coordinate (e.g. ``1 / hop`` for seconds). Default ``2 * pi``.
        base: wavelength base (DETR's ``temperature``). Default ``10000.0``.
        layout: ``"interleaved"`` (DETR) or ``"concat"`` within each block.

    Returns:
        Tensor ``(..., dim)``: float32 for integer coordinates, else the
        coordinates' dtype.

    Example:
        >>> centres = torch.tensor([[0.5, 0.25], [0.1, 0.9]])   # (y, x) of two points
        >>> coordinate_encoding(centres, 256).shape
        torch.Size([2, 256])

    References:
        Carion et al., "End-to-End Object Detection with Transformers", ECCV 2020.
        Liu et al., "DAB-DETR: Dynamic Anchor Boxes are Better Queries for DETR",
        ICLR 2022.
    """
    what = "coordinate_encoding"
    coords = coords if torch.is_tensor(coords) else torch.as_tensor(coords)
    check_numeric_dtype("coords", dtype_of(coords), what=what)
    num = check_coordinates(coords.shape, what=what)
    width = check_coordinate_width(dim, num, what=what)
    scales = check_coordinate_scale(scale, num, what=what)
    base, layout = check_base(base, what=what), check_layout(layout, what=what)
    wide = coords.to(wide_dtype(coords.device))
    blocks = [sinusoidal(wide[..., c] * scales[c], width, base=base, layout=layout)
              for c in range(num)]
    return torch.cat(blocks, dim=-1).to(result_dtype(coords))


# --------------------------------------------------------------------------- graphs

def laplacian(adjacency, *, normalized: bool = True) -> torch.Tensor:
    """The graph Laplacian (float32), ``I - D^(-1/2) A D^(-1/2)`` or ``D - A``.

    Computed in float64 NumPy by :func:`posenc.structured.laplacian` (the
    checks and the formula live there) and returned as a tensor.

    Args:
        adjacency: ``(nodes, nodes)`` symmetric, non-negative array or tensor.
        normalized: the normalised (default) or the combinatorial Laplacian.

    Returns:
        float32 tensor ``(nodes, nodes)``.

    Example:
        >>> laplacian(torch.tensor([[0, 1], [1, 0]]))
        tensor([[ 1., -1.],
                [-1.,  1.]])
    """
    lap = numpy_laplacian(as_numpy(adjacency), normalized=normalized)
    return torch.as_tensor(lap, dtype=torch.float32)


def laplacian_positions(adjacency, k: int, *, normalized: bool = True,
                        return_eigenvalues: bool = False):
    """Laplacian eigenvector positions (Dwivedi et al., 2020) as a float32 tensor.

    The ``k`` eigenvectors of the graph Laplacian with the smallest non-trivial
    eigenvalues, one row per node, with the deterministic sign convention of
    :func:`posenc.structured.laplacian_positions` (which computes them in
    float64 NumPy: a preprocessing step, done once per graph).

    Args:
        adjacency: ``(nodes, nodes)`` symmetric, non-negative array or tensor.
        k: number of eigenvectors, ``1 <= k <= nodes - components``.
        normalized: normalised (default) or combinatorial Laplacian.
        return_eigenvalues: also return the ``k`` eigenvalues. Default ``False``.

    Returns:
        float32 tensor ``(nodes, k)`` (and the eigenvalues ``(k,)`` if asked).

    Example:
        >>> cycle = torch.roll(torch.eye(6), 1, 0) + torch.roll(torch.eye(6), -1, 0)
        >>> laplacian_positions(cycle, 2).shape
        torch.Size([6, 2])

    References:
        Dwivedi et al., "Benchmarking Graph Neural Networks", arXiv:2003.00982, 2020.
    """
    out = numpy_laplacian_positions(as_numpy(adjacency), k, normalized=normalized,
                                    return_eigenvalues=return_eigenvalues)
    if return_eigenvalues:
        return tuple(torch.as_tensor(o, dtype=torch.float32) for o in out)
    return torch.as_tensor(out, dtype=torch.float32)


class LaplacianEncoding(SeededDraws, AdditiveEncoding):
    """Graph node positions: a linear map of Laplacian eigenvectors, signs flipped in training.

    Dwivedi & Bresson (2021) give each node ``i`` of a graph the row ``u_i`` of
    its ``k`` Laplacian eigenvectors (:func:`laplacian_positions`) and add
    ``u_i C + c`` to the node's features, ``C`` a learned ``(k, dim)`` matrix.
    The sign of each eigenvector is arbitrary, so during training every
    eigenvector's sign is flipped at random (Dwivedi et al., 2020), here
    independently for each graph of the batch: the model learns not to rely
    on a sign that another graph, or another eigensolver, would choose
    differently. In
    evaluation mode the eigenvectors are used as given.

    Args:
        k: number of eigenvectors per node.
        dim: feature dimension; must equal ``x.shape[-1]``.
        sign_flip: flip signs at random in training. Default ``True``.
        seed: optional int for reproducible flips.

    Call arguments:
        x: ``(batch, nodes, dim)`` node features.
        eigenvectors: ``(nodes, k)`` or ``(batch, nodes, k)`` eigenvector entries.
            In training each graph (each leading index) draws its own signs; a
            ``(nodes, k)`` input draws one sign pattern for the whole batch.

    Returns:
        Tensor of the shape and dtype of ``x``.

    Weights:
        kernel: ``(k, dim)``, Glorot-uniform; bias: ``(dim,)``, zeros.

    Example:
        >>> path = torch.diag(torch.ones(4), 1) + torch.diag(torch.ones(4), -1)
        >>> enc = LaplacianEncoding(2, 8, seed=0)
        >>> enc(torch.zeros(1, 5, 8), laplacian_positions(path, 2)).shape
        torch.Size([1, 5, 8])

    References:
        Dwivedi & Bresson, "A Generalization of Transformer Networks to Graphs",
        AAAI Workshop on Deep Learning on Graphs, 2021.
        Dwivedi et al., "Benchmarking Graph Neural Networks", arXiv:2003.00982, 2020.
    """

    def __init__(self, k: int, dim: int, *, sign_flip: bool = True, seed: int | None = None):
        super().__init__()
        what = "LaplacianEncoding"
        self.k = check_positive_int("k", k, what=what)
        self.dim = check_positive_int("dim", dim, what=what)
        self.sign_flip = check_bool("sign_flip", sign_flip, what=what)
        self.seed = check_seed(seed, what=what)
        self._generators: dict[str, torch.Generator] = {}
        self.kernel = nn.Parameter(torch.empty(self.k, self.dim))
        self.bias = nn.Parameter(torch.empty(self.dim))
        self.reset_parameters()

    def reset_parameters(self) -> None:
        nn.init.xavier_uniform_(self.kernel)
        nn.init.zeros_(self.bias)

    def extra_repr(self) -> str:
        return f"k={self.k}, dim={self.dim}, sign_flip={self.sign_flip}, seed={self.seed}"

    def encoding(self, eigenvectors) -> torch.Tensor:
        """``P`` (float32) ``(..., nodes, dim)``; signs flipped at random in training mode."""
        u = self._eigenvectors(eigenvectors).to(self._anchor.device).float()
        if self.training and self.sign_flip:
            u = u * self._signs((*u.shape[:-2], 1, self.k))
        with torch.autocast(device_type=u.device.type, enabled=False):
            return u @ self.kernel.float() + self.bias.float()

    def forward(self, x: torch.Tensor, eigenvectors) -> torch.Tensor:
        check_embeddings(x.shape, self.dim, what=self._what())
        eigenvectors = self._eigenvectors(eigenvectors)
        self._per_token("eigenvectors", eigenvectors, x,
                        each="row of k eigenvector entries (one per node)", trailing="k")
        return self._add(x, self.encoding(eigenvectors))

    def _eigenvectors(self, eigenvectors) -> torch.Tensor:
        """``eigenvectors`` as a floating-point tensor ``(..., nodes, k)``."""
        u = eigenvectors if torch.is_tensor(eigenvectors) else torch.as_tensor(eigenvectors)
        check_float_dtype("eigenvectors", dtype_of(u), what=self._what(),
                          fix=f"pass laplacian_positions(adjacency, {self.k})")
        check_eigenvectors_shape(u.shape, self.k, what=self._what())
        return u

    def _signs(self, shape) -> torch.Tensor:
        """-1 or +1 with probability 1/2 each, of ``shape``, on the module's device."""
        return torch.where(self._uniform(shape, self._anchor.device) < 0.5, -1.0, 1.0)
