"""Positions that are not ``0, 1, 2, ...`` (Keras face).

Continuous time (irregular timestamps), tree paths, several modalities in
one sequence, real coordinates (DETR's sine embedding of points and boxes) and
graph nodes (Laplacian eigenvectors; the low-rank table is in ``learned.py``). Each is an absolute
encoding: a layer whose ``call`` returns ``x + P`` and whose ``encoding(...)``
returns ``P`` alone in float32. The layers are built with ``autocast=False``:
under a mixed policy, float timestamps and positions are not rounded to the
compute dtype and ``P`` is computed from float32 weights, then cast to the
compute dtype.

Index checks that depend on the data (child indices, modality ids, positions
below ``max_len``) follow the policy of the API reference ("Checks that read
the data"), as in the PyTorch face.
"""

from __future__ import annotations

import math

import keras
from keras import ops

from posenc._checks import (
    check_base,
    check_bool,
    check_choice,
    check_coordinate_scale,
    check_coordinate_width,
    check_coordinates,
    check_eigenvectors_shape,
    check_embeddings,
    check_even_dim,
    check_float_dtype,
    check_layout,
    check_level_width,
    check_not_scalar,
    check_numeric_dtype,
    check_paths_depth,
    check_paths_values,
    check_positive_int,
    check_seed,
    check_time_scale,
)
from posenc.keras._util import (
    AdditiveEncoding,
    as_indices,
    as_numpy,
    as_positions,
    can_inspect,
    check_indices,
    dtype_of,
    on_host,
    read_back,
    result_dtype,
    wide_dtype,
)
from posenc.keras.sinusoidal import sinusoidal
from posenc.structured import (
    MULTIMODAL_MODES,
    MULTIMODAL_TOO_SHORT,
    TABLE_INIT_STD,
    level_rows,
)
from posenc.structured import laplacian as numpy_laplacian
from posenc.structured import laplacian_positions as numpy_laplacian_positions

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

def _check_paths(paths, max_depth: int, *, what: str, max_children: int | None = None):
    """``paths`` as int32 ``(..., max_depth)``; their values checked when the policy allows."""
    paths = as_indices(paths, name="paths", what=what)
    check_paths_depth(paths.shape, max_depth, what=what)
    if can_inspect(paths):
        gap = ops.any(ops.logical_and(paths[..., 1:] >= 0, paths[..., :-1] < 0))
        values = read_back(ops.min(paths), ops.max(paths), gap)
        if values is not None:
            check_paths_values(*values[:2], bool(values[2]), max_children=max_children,
                               what=what)
    return paths


# --------------------------------------------------------------------------- time

class _TimeEncoding(AdditiveEncoding):
    """Base of the encodings of timestamps: ``call(x, timestamps)`` is ``x + P(timestamps)``."""

    def call(self, x, timestamps):
        check_embeddings(x.shape, self.dim, what=self._what())
        timestamps = ops.convert_to_tensor(timestamps)
        self._per_token("timestamps", timestamps, x, each="time")
        return self._add(x, self.encoding(timestamps))

    def _timestamps(self, timestamps):
        """Numeric timestamps as a tensor (an int n: ``0 .. n-1``)."""
        return as_positions(timestamps, name="timestamps", what=self._what())


@keras.saving.register_keras_serializable(package="posenc")
class ContinuousTimeEncoding(_TimeEncoding):
    """Sinusoidal encoding of real-valued timestamps (irregular sampling).

    The sinusoid of Vaswani et al. (2017) is defined for any real position, so
    an event at time ``t`` can be encoded as ``sinusoidal(t / time_scale)``
    instead of by its index: gaps of different lengths give different codes,
    which an index cannot express for irregularly sampled series, event
    streams or clinical records. The relative property survives: shifting
    every timestamp by ``c`` multiplies each sine/cosine pair of every token by
    the same rotation of angle ``c * w_i / time_scale``, so attention can read
    elapsed time from ``P(t1) . P(t2)``. Angles are computed in float64
    (float32 on JAX without x64), so timestamps in the millions keep their
    fractional part. Weightless.

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
        Tensor of the shape of ``x`` in the layer's compute dtype.

    Example:
        >>> enc = ContinuousTimeEncoding(16, time_scale=0.5)
        >>> t = keras.ops.convert_to_tensor([[0.0, 0.3, 2.7], [0.0, 1.0, 1.1]])
        >>> tuple(enc(keras.ops.zeros((2, 3, 16)), t).shape)
        (2, 3, 16)

    References:
        Vaswani et al., "Attention Is All You Need", NeurIPS 2017, section 3.5.
        Kazemi et al., "Time2Vec: Learning a Vector Representation of Time",
        arXiv:1907.05321, 2019 (see :class:`Time2Vec` for a learned variant).
    """

    def __init__(self, dim: int, *, time_scale: float = 1.0, base: float = 10000.0,
                 layout: str = "interleaved", **kwargs):
        kwargs.setdefault("autocast", False)
        super().__init__(**kwargs)
        what = "ContinuousTimeEncoding"
        self.dim = check_even_dim(dim, what=what)
        self.time_scale = check_time_scale(time_scale, what=what)
        self.layout = check_layout(layout, what=what)
        self.base = check_base(base, what=what)
        self.built = True

    def encoding(self, timestamps):
        """``P`` (float32) of shape ``(*timestamps.shape, dim)``."""
        host = on_host(self._timestamps(timestamps))  # JAX without x64: float64 in NumPy
        t = (host[0] if host is not None
             else ops.cast(self._timestamps(timestamps), wide_dtype())) / self.time_scale
        return ops.cast(sinusoidal(t, self.dim, base=self.base, layout=self.layout), "float32")

    def get_config(self):
        config = super().get_config()
        config.update({"dim": self.dim, "time_scale": self.time_scale, "base": self.base,
                       "layout": self.layout})
        return config


@keras.saving.register_keras_serializable(package="posenc")
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
        Tensor of the shape of ``x`` in the layer's compute dtype.

    Weights:
        frequency: ``(dim,)``, the ``w_i``; initialised ``N(0, 1)``.
        phase: ``(dim,)``, the ``b_i``; initialised ``N(0, 1)``.

    Example:
        >>> t2v = Time2Vec(8)
        >>> t = keras.ops.convert_to_tensor([0.0, 0.5, 3.0])
        >>> tuple(t2v(keras.ops.zeros((2, 3, 8)), t).shape)
        (2, 3, 8)

    References:
        Kazemi et al., "Time2Vec: Learning a Vector Representation of Time",
        arXiv:1907.05321, 2019.
    """

    def __init__(self, dim: int, **kwargs):
        kwargs.setdefault("autocast", False)
        super().__init__(**kwargs)
        self.dim = check_positive_int("dim", dim, what="Time2Vec")
        init = keras.initializers.RandomNormal(stddev=1.0)
        self.frequency = self.add_weight(name="frequency", shape=(self.dim,), initializer=init)
        self.phase = self.add_weight(name="phase", shape=(self.dim,), initializer=init)
        self.built = True

    def encoding(self, timestamps):
        """``P`` (float32) of shape ``(*timestamps.shape, dim)``."""
        t = ops.cast(self._timestamps(timestamps), "float32")
        angles = (ops.expand_dims(t, -1) * ops.cast(self.frequency, "float32")
                  + ops.cast(self.phase, "float32"))
        return ops.concatenate((angles[..., :1], ops.sin(angles[..., 1:])), axis=-1)

    def get_config(self):
        config = super().get_config()
        config.update({"dim": self.dim})
        return config


# --------------------------------------------------------------------------- trees

def hierarchical(paths, dim: int, *, max_depth: int, base: float = 10000.0):
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
        >>> paths = keras.ops.convert_to_tensor([[0, -1], [0, 2], [1, -1]])
        >>> tuple(hierarchical(paths, 8, max_depth=2).shape)
        (3, 8)

    References:
        Shiv & Quirk, "Novel positional encodings to enable tree-based
        transformers", NeurIPS 2019.
    """
    width = check_level_width(dim, max_depth, what="hierarchical")
    paths = _check_paths(paths, max_depth, what="hierarchical")
    present = ops.expand_dims(ops.cast(paths >= 0, "float32"), -1)
    pe = sinusoidal(ops.maximum(paths, 0), width, base=base) * present
    return ops.reshape(pe, (*ops.shape(paths)[:-1], width * max_depth))


@keras.saving.register_keras_serializable(package="posenc")
class HierarchicalEncoding(AdditiveEncoding):
    """Learned tree positions: the sum of one embedding per level of the path.

    ``P(path) = sum_l level_tables[l, path[l]]`` over the levels the node
    reaches (padded ``-1`` levels add nothing). Shiv & Quirk (2019) represent
    a path as stacked one-hot child indices; a linear map of such a stack is
    exactly a sum of per-level embedding rows, which this layer learns
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
        Tensor of the shape of ``x`` in the layer's compute dtype.

    Weights:
        level_tables: ``(max_depth, max_children, dim)``, initialised
        ``N(0, 0.02^2)``.

    Example:
        >>> enc = HierarchicalEncoding(3, 4, 16)
        >>> paths = keras.ops.convert_to_tensor([[0, -1, -1], [0, 3, -1], [0, 3, 1]])
        >>> tuple(enc(keras.ops.zeros((2, 3, 16)), paths).shape)
        (2, 3, 16)

    References:
        Shiv & Quirk, "Novel positional encodings to enable tree-based
        transformers", NeurIPS 2019.
    """

    def __init__(self, max_depth: int, max_children: int, dim: int, **kwargs):
        kwargs.setdefault("autocast", False)
        super().__init__(**kwargs)
        what = "HierarchicalEncoding"
        self.max_depth = check_positive_int("max_depth", max_depth, what=what)
        self.max_children = check_positive_int("max_children", max_children, what=what)
        self.dim = check_positive_int("dim", dim, what=what)
        self.level_tables = self.add_weight(
            name="level_tables", shape=(self.max_depth, self.max_children, self.dim),
            initializer=keras.initializers.RandomNormal(stddev=TABLE_INIT_STD))
        self.built = True

    def encoding(self, paths):
        """``P`` (float32) of shape ``(*paths.shape[:-1], dim)``."""
        paths = _check_paths(paths, self.max_depth, what=self._what(),
                             max_children=self.max_children)
        rows = level_rows(ops.maximum(paths, 0), self._arange(self.max_depth), self.max_children)
        table = ops.reshape(ops.cast(self.level_tables, "float32"), (-1, self.dim))
        present = ops.expand_dims(ops.cast(paths >= 0, "float32"), -1)
        return ops.sum(ops.take(table, rows, axis=0) * present, axis=-2)

    def call(self, x, paths):
        check_embeddings(x.shape, self.dim, what=self._what())
        paths = ops.convert_to_tensor(paths)
        check_paths_depth(paths.shape, self.max_depth, what=self._what())
        self._per_token("paths", paths, x, each="path", trailing="max_depth")
        return self._add(x, self.encoding(paths))

    def get_config(self):
        config = super().get_config()
        config.update({"max_depth": self.max_depth, "max_children": self.max_children,
                       "dim": self.dim})
        return config


# --------------------------------------------------------------------------- modalities

def modality_positions(modality_ids, *, num_modalities: int | None = None):
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
        int32 tensor of the shape of ``modality_ids``.

    Example:
        >>> ids = keras.ops.convert_to_tensor([0, 0, 1, 1, 1, 0])
        >>> keras.ops.convert_to_numpy(modality_positions(ids)).tolist()
        [0, 1, 0, 1, 2, 2]
    """
    what = "modality_positions"
    ids = as_indices(modality_ids, name="modality_ids", what=what)
    check_not_scalar("modality_ids", ids.shape, what=what)
    if num_modalities is None:
        index = ops.arange(ops.shape(ids)[-1], dtype="int32")
        earlier = ops.expand_dims(index, -1) > index  # [i, j]: j comes before i
        same = ops.equal(ops.expand_dims(ids, -1), ops.expand_dims(ids, -2))
        return ops.sum(ops.cast(ops.logical_and(same, earlier), "int32"), axis=-1)
    num_modalities = check_positive_int("num_modalities", num_modalities, what=what)
    check_indices(ids, num_modalities, name="modality_ids", limit_name="num_modalities",
                  what=what, fix="pass a larger num_modalities, or none to count any ids")
    one_hot = ops.one_hot(ids, num_modalities, dtype="int32")
    counts = ops.sum(ops.cumsum(one_hot, axis=-2) * one_hot, axis=-1)
    return ops.cast(counts, "int32") - 1


@keras.saving.register_keras_serializable(package="posenc")
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

        text = keras.random.normal((2, 5, 64))            # 5 text tokens
        patches = keras.random.normal((2, 12, 64)) + sinusoidal_2d(3, 4, 64)
        x = keras.ops.concatenate((text, patches), axis=1)
        ids = keras.ops.convert_to_tensor([0] * 5 + [1] * 12)
        positions = keras.ops.where(ids == 0, modality_positions(ids), 0)
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
        Tensor of the shape of ``x`` in the layer's compute dtype.

    Weights:
        modality_tables: ``(num_modalities, max_len, dim)`` (``per_modality``).
        modality_embedding: ``(num_modalities, dim)`` (``shared_offset``).
        Both initialised ``N(0, 0.02^2)``.

    Example:
        >>> enc = MultimodalEncoding(16, num_modalities=2, max_len=32)
        >>> ids = keras.ops.convert_to_tensor([0, 0, 0, 1, 1])
        >>> tuple(enc(keras.ops.zeros((2, 5, 16)), ids, modality_positions(ids)).shape)
        (2, 5, 16)

    References:
        Vaswani et al., "Attention Is All You Need", NeurIPS 2017.
        Devlin et al., "BERT: Pre-training of Deep Bidirectional Transformers
        for Language Understanding", NAACL 2019 (segment embeddings).
    """

    def __init__(self, dim: int, *, num_modalities: int, max_len: int,
                 mode: str = "shared_offset", **kwargs):
        kwargs.setdefault("autocast", False)
        super().__init__(**kwargs)
        what = "MultimodalEncoding"
        self.mode = check_choice("mode", mode, MULTIMODAL_MODES, what=what)
        spec = MULTIMODAL_MODES[mode]
        self.dim = (check_even_dim(dim, what=f"{what}(mode={mode!r})") if spec.sinusoid
                    else check_positive_int("dim", dim, what=what))
        self.num_modalities = check_positive_int("num_modalities", num_modalities, what=what)
        self.max_len = check_positive_int("max_len", max_len, what=what)
        if spec.table is not None:
            shape = spec.table_shape(self.num_modalities, self.max_len, self.dim)
            setattr(self, spec.table, self.add_weight(
                name=spec.table, shape=shape,
                initializer=keras.initializers.RandomNormal(stddev=TABLE_INIT_STD)))
        self.built = True

    def encoding(self, modality_ids, positions=None):
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
        if positions is None:
            positions = ids.shape[-1]
            if positions is None:  # a length known only at run time
                positions = self._arange(ops.shape(ids)[-1])
        if spec.positions_index:
            positions = self._table_positions(positions, self.max_len, fix=MULTIMODAL_TOO_SHORT)
        else:
            positions = self._positions(positions)
        pe = ops.cast(sinusoidal(positions, self.dim), "float32") if spec.sinusoid else 0.0
        if spec.table is not None:
            table = ops.reshape(ops.cast(getattr(self, spec.table), "float32"), (-1, self.dim))
            pe = pe + ops.take(table, spec.row(ids, positions, self.max_len), axis=0)
        return pe

    def call(self, x, modality_ids, positions=None):
        positions = self._positions_for(x, positions)
        modality_ids = as_indices(modality_ids, name="modality_ids", what=self._what())
        self._per_token("modality_ids", modality_ids, x, each="modality id")
        if positions is None:
            return ops.cast(x, self.compute_dtype)
        return self._add(x, self.encoding(modality_ids, positions))

    def get_config(self):
        config = super().get_config()
        config.update({"dim": self.dim, "num_modalities": self.num_modalities,
                       "max_len": self.max_len, "mode": self.mode})
        return config


# --------------------------------------------------------------------------- coordinates


def coordinate_encoding(coords, dim: int, *, scale=2 * math.pi, base: float = 10000.0,
                        layout: str = "interleaved"):
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
        >>> centres = keras.ops.convert_to_tensor([[0.5, 0.25], [0.1, 0.9]])   # (y, x)
        >>> tuple(coordinate_encoding(centres, 256).shape)
        (2, 256)

    References:
        Carion et al., "End-to-End Object Detection with Transformers", ECCV 2020.
        Liu et al., "DAB-DETR: Dynamic Anchor Boxes are Better Queries for DETR",
        ICLR 2022.
    """
    what = "coordinate_encoding"
    coords = ops.convert_to_tensor(coords)
    check_numeric_dtype("coords", dtype_of(coords), what=what)
    num = check_coordinates(coords.shape, what=what)
    width = check_coordinate_width(dim, num, what=what)
    scales = check_coordinate_scale(scale, num, what=what)
    base, layout = check_base(base, what=what), check_layout(layout, what=what)
    host = on_host(coords)  # JAX without x64: the float64 scaling in NumPy
    wide = host[0] if host is not None else ops.cast(coords, wide_dtype())
    blocks = [sinusoidal(wide[..., c] * scales[c], width, base=base, layout=layout)
              for c in range(num)]
    return ops.cast(ops.concatenate(blocks, axis=-1), result_dtype(coords))


# --------------------------------------------------------------------------- graphs

def laplacian(adjacency, *, normalized: bool = True):
    """The graph Laplacian (float32), ``I - D^(-1/2) A D^(-1/2)`` or ``D - A``.

    Computed in float64 NumPy by :func:`posenc.structured.laplacian` (the
    checks and the formula live there) and returned as a tensor.

    Args:
        adjacency: ``(nodes, nodes)`` symmetric, non-negative array or tensor.
        normalized: the normalised (default) or the combinatorial Laplacian.

    Returns:
        float32 tensor ``(nodes, nodes)``.

    Example:
        >>> keras.ops.convert_to_numpy(laplacian([[0, 1], [1, 0]]))
        array([[ 1., -1.],
               [-1.,  1.]], dtype=float32)
    """
    lap = numpy_laplacian(as_numpy(adjacency), normalized=normalized)
    return ops.convert_to_tensor(lap.astype("float32"))


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
        >>> import numpy as np
        >>> cycle = np.roll(np.eye(6), 1, 0) + np.roll(np.eye(6), -1, 0)
        >>> tuple(laplacian_positions(cycle, 2).shape)
        (6, 2)

    References:
        Dwivedi et al., "Benchmarking Graph Neural Networks", arXiv:2003.00982, 2020.
    """
    out = numpy_laplacian_positions(as_numpy(adjacency), k, normalized=normalized,
                                    return_eigenvalues=return_eigenvalues)
    if return_eigenvalues:
        return tuple(ops.convert_to_tensor(o.astype("float32")) for o in out)
    return ops.convert_to_tensor(out.astype("float32"))


@keras.saving.register_keras_serializable(package="posenc")
class LaplacianEncoding(AdditiveEncoding):
    """Graph node positions: a linear map of Laplacian eigenvectors, signs flipped in training.

    Dwivedi & Bresson (2021) give each node ``i`` of a graph the row ``u_i`` of
    its ``k`` Laplacian eigenvectors (:func:`laplacian_positions`) and add
    ``u_i C + c`` to the node's features, ``C`` a learned ``(k, dim)`` matrix.
    The sign of each eigenvector is arbitrary, so during training every
    eigenvector's sign is flipped at random (Dwivedi et al., 2020), here
    independently for each graph of the batch: the model learns not to rely
    on a sign that another graph, or another eigensolver, would choose
    differently.
    Without ``training=True`` the eigenvectors are used as given.

    Args:
        k: number of eigenvectors per node.
        dim: feature dimension; must equal ``x.shape[-1]``.
        sign_flip: flip signs at random in training. Default ``True``.
        seed: optional int for a reproducible ``keras.random.SeedGenerator``.

    Call arguments:
        x: ``(batch, nodes, dim)`` node features.
        eigenvectors: ``(nodes, k)`` or ``(batch, nodes, k)`` eigenvector entries.
            In training each graph (each leading index) draws its own signs; a
            ``(nodes, k)`` input draws one sign pattern for the whole batch.
        training: bool; only ``True`` flips signs. Keras sets it inside ``fit``.

    Returns:
        Tensor of the shape of ``x`` in the layer's compute dtype.

    Weights:
        kernel: ``(k, dim)``, Glorot-uniform; bias: ``(dim,)``, zeros.

    Example:
        >>> import numpy as np
        >>> path = np.eye(5, k=1) + np.eye(5, k=-1)
        >>> enc = LaplacianEncoding(2, 8, seed=0)
        >>> tuple(enc(keras.ops.zeros((1, 5, 8)), laplacian_positions(path, 2)).shape)
        (1, 5, 8)

    References:
        Dwivedi & Bresson, "A Generalization of Transformer Networks to Graphs",
        AAAI Workshop on Deep Learning on Graphs, 2021.
        Dwivedi et al., "Benchmarking Graph Neural Networks", arXiv:2003.00982, 2020.
    """

    def __init__(self, k: int, dim: int, *, sign_flip: bool = True, seed: int | None = None,
                 **kwargs):
        kwargs.setdefault("autocast", False)
        super().__init__(**kwargs)
        what = "LaplacianEncoding"
        self.k = check_positive_int("k", k, what=what)
        self.dim = check_positive_int("dim", dim, what=what)
        self.sign_flip = check_bool("sign_flip", sign_flip, what=what)
        self.seed = check_seed(seed, what=what)
        self.seed_generator = keras.random.SeedGenerator(self.seed)
        self.kernel = self.add_weight(name="kernel", shape=(self.k, self.dim),
                                      initializer="glorot_uniform")
        self.bias = self.add_weight(name="bias", shape=(self.dim,), initializer="zeros")
        self.built = True

    def encoding(self, eigenvectors, training=None):
        """``P`` (float32) ``(..., nodes, dim)``; signs flipped at random when training."""
        u = ops.cast(self._eigenvectors(eigenvectors), "float32")
        if training and self.sign_flip:
            u = u * self._signs((*ops.shape(u)[:-2], 1, self.k))
        return ops.matmul(u, ops.cast(self.kernel, "float32")) + ops.cast(self.bias, "float32")

    def call(self, x, eigenvectors, training=None):
        check_embeddings(x.shape, self.dim, what=self._what())
        eigenvectors = self._eigenvectors(eigenvectors)
        self._per_token("eigenvectors", eigenvectors, x,
                        each="row of k eigenvector entries (one per node)", trailing="k")
        return self._add(x, self.encoding(eigenvectors, training=training))

    def _eigenvectors(self, eigenvectors):
        """``eigenvectors`` as a floating-point tensor ``(..., nodes, k)``."""
        u = ops.convert_to_tensor(eigenvectors)
        check_float_dtype("eigenvectors", dtype_of(u), what=self._what(),
                          fix=f"pass laplacian_positions(adjacency, {self.k})")
        check_eigenvectors_shape(u.shape, self.k, what=self._what())
        return u

    def _signs(self, shape):
        """-1 or +1 with probability 1/2 each, of ``shape``, from the layer's seed generator."""
        return ops.where(keras.random.uniform(shape, seed=self.seed_generator) < 0.5, -1.0, 1.0)

    def get_config(self):
        config = super().get_config()
        config.update({"k": self.k, "dim": self.dim, "sign_flip": self.sign_flip,
                       "seed": self.seed})
        return config
