"""Positions that are not ``0, 1, 2, ...`` (Keras face).

Continuous time (irregular timestamps), tree paths, several modalities in one
sequence, and a low-rank learned table. Each is an absolute encoding: a layer
whose ``call`` returns ``x + P`` and whose ``encoding(...)`` returns ``P``
alone in float32. The layers are built with ``autocast=False``: under a mixed
policy, float timestamps and positions are not rounded to the compute dtype
and ``P`` is computed from float32 weights, then cast to the compute dtype.

Index checks that depend on the data (child indices, modality ids, positions
below ``max_len``) run when the values are at hand (eager execution); inside a
traced graph (``fit``, ``jit``) the backend's own gather bounds apply.
"""

from __future__ import annotations

import numbers

import keras
from keras import ops

from posenc._checks import (
    check_embeddings,
    check_even_dim,
    check_layout,
    check_positions_shape,
    check_positive_int,
)
from posenc.sinusoidal import sinusoidal_inv_freq
from posenc.structured import (
    TABLE_INIT_STD,
    check_mode,
    check_numeric_timestamps,
    check_paths_depth,
    check_paths_values,
    check_per_token_shape,
    check_time_scale,
    hierarchical_level_width,
)
from posenc.keras._util import (
    AdditiveEncoding,
    as_indices,
    as_positions,
    can_inspect,
    check_indices,
    dtype_of,
    item,
    table_positions,
    wide_dtype,
)
from posenc.keras.sinusoidal import sinusoidal

__all__ = [
    "ContinuousTimeEncoding",
    "Time2Vec",
    "hierarchical",
    "HierarchicalEncoding",
    "modality_positions",
    "MultimodalEncoding",
]


# --------------------------------------------------------------------------- helpers

def _check_paths(paths, max_depth: int, *, what: str, max_children: int | None = None):
    paths = as_indices(paths, "paths", what)
    check_paths_depth(paths.shape, max_depth, what=what)
    if can_inspect(paths):
        gap = ops.any(ops.logical_and(paths[..., 1:] >= 0, paths[..., :-1] < 0))
        check_paths_values(item(ops.min(paths)), item(ops.max(paths)), item(gap),
                              what=what, max_children=max_children)
    return paths


def _timestamps(timestamps, what: str):
    """Numeric timestamps as a tensor; an int n stands for ``0 .. n-1``."""
    if isinstance(timestamps, bool) or not isinstance(timestamps, numbers.Integral):
        timestamps = ops.convert_to_tensor(timestamps)
        check_numeric_timestamps(dtype_of(timestamps), what=what)
    return as_positions(timestamps, name="timestamps")


def _per_token(name: str, t, x, *, what: str, each: str, trailing: str = "") -> None:
    check_per_token_shape(name, t.shape, x.shape, what=what, each=each, trailing=trailing)


# --------------------------------------------------------------------------- time

@keras.saving.register_keras_serializable(package="posenc")
class ContinuousTimeEncoding(AdditiveEncoding):
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
        self.dim = check_even_dim(dim)
        self.time_scale = check_time_scale(time_scale)
        check_layout(layout)
        sinusoidal_inv_freq(dim, base)  # validates base
        self.base = float(base)
        self.layout = layout
        self.built = True

    def encoding(self, timestamps):
        """``P`` (float32) of shape ``(*timestamps.shape, dim)``."""
        wide = wide_dtype()
        t = ops.cast(_timestamps(timestamps, "ContinuousTimeEncoding"), wide) / self.time_scale
        return ops.cast(sinusoidal(t, self.dim, base=self.base, layout=self.layout), "float32")

    def call(self, x, timestamps):
        check_embeddings("ContinuousTimeEncoding", x.shape, self.dim)
        timestamps = ops.convert_to_tensor(timestamps)
        _per_token("timestamps", timestamps, x, what="ContinuousTimeEncoding", each="time")
        return self.add_encoding(x, self.encoding(timestamps))

    def get_config(self):
        config = super().get_config()
        config.update({"dim": self.dim, "time_scale": self.time_scale, "base": self.base,
                       "layout": self.layout})
        return config


@keras.saving.register_keras_serializable(package="posenc")
class Time2Vec(AdditiveEncoding):
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
        timestamps: ``(batch, seq)`` or ``(seq,)`` times (float or int).

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
        self.dim = check_positive_int("dim", dim)
        init = keras.initializers.RandomNormal(stddev=1.0)
        self.frequency = self.add_weight(name="frequency", shape=(self.dim,), initializer=init)
        self.phase = self.add_weight(name="phase", shape=(self.dim,), initializer=init)
        self.built = True

    def encoding(self, timestamps):
        """``P`` (float32) of shape ``(*timestamps.shape, dim)``."""
        t = ops.cast(_timestamps(timestamps, "Time2Vec"), "float32")
        angles = (ops.expand_dims(t, -1) * ops.cast(self.frequency, "float32")
                  + ops.cast(self.phase, "float32"))
        return ops.concatenate((angles[..., :1], ops.sin(angles[..., 1:])), axis=-1)

    def call(self, x, timestamps):
        check_embeddings("Time2Vec", x.shape, self.dim)
        timestamps = ops.convert_to_tensor(timestamps)
        _per_token("timestamps", timestamps, x, what="Time2Vec", each="time")
        return self.add_encoding(x, self.encoding(timestamps))

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
    width = hierarchical_level_width(dim, max_depth)
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
        self.max_depth = check_positive_int("max_depth", max_depth)
        self.max_children = check_positive_int("max_children", max_children)
        self.dim = check_positive_int("dim", dim)
        self.level_tables = self.add_weight(
            name="level_tables", shape=(self.max_depth, self.max_children, self.dim),
            initializer=keras.initializers.RandomNormal(stddev=TABLE_INIT_STD))
        self.built = True

    def encoding(self, paths):
        """``P`` (float32) of shape ``(*paths.shape[:-1], dim)``."""
        paths = _check_paths(paths, self.max_depth, what="HierarchicalEncoding",
                             max_children=self.max_children)
        offsets = ops.arange(self.max_depth, dtype="int32") * self.max_children
        table = ops.reshape(ops.cast(self.level_tables, "float32"), (-1, self.dim))
        rows = ops.take(table, ops.maximum(paths, 0) + offsets, axis=0)
        present = ops.expand_dims(ops.cast(paths >= 0, "float32"), -1)
        return ops.sum(rows * present, axis=-2)

    def call(self, x, paths):
        what = "HierarchicalEncoding"
        check_embeddings(what, x.shape, self.dim)
        paths = ops.convert_to_tensor(paths)
        check_paths_depth(paths.shape, self.max_depth, what=what)
        _per_token("paths", paths, x, what=what, each="path", trailing="max_depth")
        return self.add_encoding(x, self.encoding(paths))

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
    ids = as_indices(modality_ids, "modality_ids", "modality_positions")
    if len(ids.shape) < 1:
        raise ValueError("modality_positions: modality_ids must be (..., seq), got a scalar.")
    if num_modalities is None:
        index = ops.arange(ops.shape(ids)[-1], dtype="int32")
        earlier = ops.expand_dims(index, -1) > index  # [i, j]: j comes before i
        same = ops.equal(ops.expand_dims(ids, -1), ops.expand_dims(ids, -2))
        return ops.sum(ops.cast(ops.logical_and(same, earlier), "int32"), axis=-1)
    num_modalities = check_positive_int("num_modalities", num_modalities)
    check_indices(ids, "modality_ids", num_modalities, what="modality_positions",
                 fix="pass a larger num_modalities, or none to count any ids")
    one_hot = ops.one_hot(ids, num_modalities, dtype="int32")
    counts = ops.sum(ops.cumsum(one_hot, axis=-2) * one_hot, axis=-1)
    return ops.cast(counts, "int32") - 1


def _shared(enc: "MultimodalEncoding", ids, positions):
    return sinusoidal(positions, enc.dim)


def _per_modality(enc: "MultimodalEncoding", ids, positions):
    table = ops.reshape(ops.cast(enc.modality_tables, "float32"), (-1, enc.dim))
    flat = ids * enc.max_len + positions
    return ops.take(table, flat, axis=0)


def _shared_offset(enc: "MultimodalEncoding", ids, positions):
    offset = ops.take(ops.cast(enc.modality_embedding, "float32"), ids, axis=0)
    return ops.cast(sinusoidal(positions, enc.dim), "float32") + offset


#: mode -> function(encoding, modality_ids, positions) returning P.
_MODES = {"shared": _shared, "per_modality": _per_modality, "shared_offset": _shared_offset}


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
        self.mode = check_mode(mode)
        self.dim = (check_positive_int("dim", dim) if mode == "per_modality"
                    else check_even_dim(dim, what=f"MultimodalEncoding(mode={mode!r})"))
        self.num_modalities = check_positive_int("num_modalities", num_modalities)
        self.max_len = check_positive_int("max_len", max_len)
        init = keras.initializers.RandomNormal(stddev=TABLE_INIT_STD)
        if mode == "per_modality":
            self.modality_tables = self.add_weight(
                name="modality_tables", shape=(self.num_modalities, self.max_len, self.dim),
                initializer=init)
        elif mode == "shared_offset":
            self.modality_embedding = self.add_weight(
                name="modality_embedding", shape=(self.num_modalities, self.dim),
                initializer=init)
        self.built = True

    def encoding(self, modality_ids, positions=None):
        """``P`` (float32) of shape ``(*broadcast(modality_ids, positions).shape, dim)``.

        In ``"shared"`` mode the ids are not used and ``P`` has shape
        ``(*positions.shape, dim)``.
        """
        what = "MultimodalEncoding"
        ids = as_indices(modality_ids, "modality_ids", what)
        if len(ids.shape) < 1:
            raise ValueError(f"{what}: modality_ids must be (seq,) or (batch, seq), got a scalar.")
        check_indices(ids, "modality_ids", self.num_modalities, what=what,
                     fix=f"build it with num_modalities={self.num_modalities + 1} or more")
        if positions is None:
            seq = ids.shape[-1]
            positions = seq if seq is not None else ops.arange(ops.shape(ids)[-1], dtype="int32")
        if self.mode == "per_modality":
            positions = table_positions(positions, self.max_len, what)
        else:
            positions = as_positions(positions)
        return _MODES[self.mode](self, ids, positions)

    def call(self, x, modality_ids, positions=None):
        what = "MultimodalEncoding"
        check_embeddings(what, x.shape, self.dim)
        modality_ids = as_indices(modality_ids, "modality_ids", what)
        _per_token("modality_ids", modality_ids, x, what=what, each="modality id")
        if positions is None:
            if x.shape[-2] == 0:
                return ops.cast(x, self.compute_dtype)
        else:
            positions = as_positions(positions)
            check_positions_shape(what, positions.shape, x.shape)
        return self.add_encoding(x, self.encoding(modality_ids, positions))

    def get_config(self):
        config = super().get_config()
        config.update({"dim": self.dim, "num_modalities": self.num_modalities,
                       "max_len": self.max_len, "mode": self.mode})
        return config
