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

from posenc import core
from posenc import structured_core as sc
from posenc._checks import (
    check_embeddings,
    check_even_dim,
    check_layout,
    check_positions_shape,
    check_positive_int,
)
from posenc.keras._util import AdditiveEncoding, as_positions, dtype_of, wide_dtype
from posenc.keras.absolute import sinusoidal

__all__ = [
    "ContinuousTimeEncoding",
    "Time2Vec",
    "hierarchical",
    "HierarchicalEncoding",
    "modality_positions",
    "MultimodalEncoding",
    "LowRankEncoding",
    "coordinate_encoding",
    "laplacian",
    "laplacian_positions",
    "LaplacianEncoding",
]


# --------------------------------------------------------------------------- helpers

def _can_inspect(t) -> bool:
    """Whether the values of ``t`` can be read now (not symbolic, traced or empty)."""
    if isinstance(t, keras.KerasTensor) or any(d == 0 for d in t.shape):
        return False
    backend = keras.backend.backend()
    if backend == "tensorflow":
        import tensorflow as tf

        return tf.executing_eagerly()
    if backend == "jax":
        import jax

        return not isinstance(t, jax.core.Tracer)
    if backend == "torch":
        import torch

        compiling = getattr(torch.compiler, "is_compiling", lambda: False)()
        return t.device.type != "meta" and not compiling
    return True


def _item(t) -> int:
    """A scalar (a min, a max, a flag) read back as a Python int."""
    return int(ops.convert_to_numpy(t))


def _integer(t, name: str, what: str):
    """``t`` as an int32 tensor (one index dtype on every backend), refusing other dtypes."""
    t = ops.convert_to_tensor(t)
    dtype = dtype_of(t)
    if "int" not in dtype:
        raise sc.integer_positions_error(name, dtype, what=what)
    return ops.cast(t, "int32")


def _check_index(t, name: str, limit: int, *, what: str, fix: str) -> None:
    if _can_inspect(t):
        sc.check_index_values(name, _item(ops.min(t)), _item(ops.max(t)), limit,
                              what=what, fix=fix)


def _check_paths(paths, max_depth: int, *, what: str, max_children: int | None = None):
    paths = _integer(paths, "paths", what)
    sc.check_paths_depth(paths.shape, max_depth, what=what)
    if _can_inspect(paths):
        gap = ops.any(ops.logical_and(paths[..., 1:] >= 0, paths[..., :-1] < 0))
        sc.check_paths_values(_item(ops.min(paths)), _item(ops.max(paths)), _item(gap),
                              what=what, max_children=max_children)
    return paths


def _table_positions(positions, max_len: int, what: str):
    """Integer positions (int32) for a table of ``max_len`` rows, checked."""
    if isinstance(positions, numbers.Integral) and not isinstance(positions, bool):
        n = check_positive_int("positions", positions, fix="Pass a sequence length of at least 1.")
        sc.check_length(n, max_len, what=what)
        return ops.arange(n, dtype="int32")
    pos = _integer(as_positions(positions), "positions", what)
    _check_index(pos, "positions", max_len, what=what,
                 fix="build it with a larger max_len, or restart positions per modality "
                     "with modality_positions(...)")
    return pos


def _default_positions(x, max_len: int | None, what: str):
    """``0 .. seq-1`` for ``x`` (checked against ``max_len`` when the length is known)."""
    seq = x.shape[-2]
    if seq is not None:
        if max_len is not None:
            sc.check_length(seq, max_len, what=what)
        return seq
    return ops.arange(ops.shape(x)[-2], dtype="int32")


def _timestamps(timestamps, what: str):
    """Numeric timestamps as a tensor; an int n stands for ``0 .. n-1``."""
    if isinstance(timestamps, bool) or not isinstance(timestamps, numbers.Integral):
        timestamps = ops.convert_to_tensor(timestamps)
        sc.check_numeric_timestamps(dtype_of(timestamps), what=what)
    return as_positions(timestamps, name="timestamps")


def _per_token(name: str, t, x, *, what: str, each: str, trailing: str = "") -> None:
    sc.check_per_token_shape(name, t.shape, x.shape, what=what, each=each, trailing=trailing)


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
        self.time_scale = sc.check_time_scale(time_scale)
        check_layout(layout)
        core.sinusoidal_inv_freq(dim, base)  # validates base
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
    width = sc.hierarchical_level_width(dim, max_depth)
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
            initializer=keras.initializers.RandomNormal(stddev=sc.TABLE_INIT_STD))
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
        sc.check_paths_depth(paths.shape, self.max_depth, what=what)
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
    ids = _integer(modality_ids, "modality_ids", "modality_positions")
    if len(ids.shape) < 1:
        raise ValueError("modality_positions: modality_ids must be (..., seq), got a scalar.")
    if num_modalities is None:
        index = ops.arange(ops.shape(ids)[-1], dtype="int32")
        earlier = ops.expand_dims(index, -1) > index  # [i, j]: j comes before i
        same = ops.equal(ops.expand_dims(ids, -1), ops.expand_dims(ids, -2))
        return ops.sum(ops.cast(ops.logical_and(same, earlier), "int32"), axis=-1)
    num_modalities = check_positive_int("num_modalities", num_modalities)
    _check_index(ids, "modality_ids", num_modalities, what="modality_positions",
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
        self.mode = sc.check_mode(mode)
        self.dim = (check_positive_int("dim", dim) if mode == "per_modality"
                    else check_even_dim(dim, what=f"MultimodalEncoding(mode={mode!r})"))
        self.num_modalities = check_positive_int("num_modalities", num_modalities)
        self.max_len = check_positive_int("max_len", max_len)
        init = keras.initializers.RandomNormal(stddev=sc.TABLE_INIT_STD)
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
        ids = _integer(modality_ids, "modality_ids", what)
        if len(ids.shape) < 1:
            raise ValueError(f"{what}: modality_ids must be (seq,) or (batch, seq), got a scalar.")
        _check_index(ids, "modality_ids", self.num_modalities, what=what,
                     fix=f"build it with num_modalities={self.num_modalities + 1} or more")
        if positions is None:
            seq = ids.shape[-1]
            positions = seq if seq is not None else ops.arange(ops.shape(ids)[-1], dtype="int32")
        if self.mode == "per_modality":
            positions = _table_positions(positions, self.max_len, what)
        else:
            positions = as_positions(positions)
        return _MODES[self.mode](self, ids, positions)

    def call(self, x, modality_ids, positions=None):
        what = "MultimodalEncoding"
        check_embeddings(what, x.shape, self.dim)
        modality_ids = _integer(modality_ids, "modality_ids", what)
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


# --------------------------------------------------------------------------- low rank

@keras.saving.register_keras_serializable(package="posenc")
class LowRankEncoding(AdditiveEncoding):
    """A learned position table factorised as ``P = left @ right``.

    A learned table has ``max_len * dim`` free numbers, but trained tables
    are close to low rank (their rows vary smoothly with the position), so
    the factorisation ``left (max_len, rank) @ right (rank, dim)`` keeps
    ``rank * (max_len + dim)`` parameters instead: each position gets a
    ``rank``-dimensional code, mapped to the model width by a shared
    projection. ``rank = min(max_len, dim)`` can represent any table.

    Args:
        max_len: largest sequence length (rows of ``left``).
        dim: feature dimension; must equal ``x.shape[-1]``.
        rank: inner dimension, ``1 <= rank <= min(max_len, dim)``
            (keyword-only).

    Call arguments:
        x: ``(batch, seq, dim)`` embeddings, ``seq <= max_len``.
        positions: optional int ``(seq,)`` or ``(batch, seq)`` positions below
            ``max_len``; default ``0 .. seq-1``.

    Returns:
        Tensor of the shape of ``x`` in the layer's compute dtype.

    Weights:
        left: ``(max_len, rank)``; right: ``(rank, dim)``. Both initialised
        ``N(0, s^2)`` with ``s = sqrt(0.02 / sqrt(rank))``, so the entries of
        ``P`` start with standard deviation 0.02, like a fresh learned table.

    Example:
        >>> enc = LowRankEncoding(128, 64, rank=8)
        >>> enc.count_params()  # 8 * (128 + 64)
        1536
        >>> tuple(enc(keras.ops.zeros((2, 10, 64))).shape)
        (2, 10, 64)
    """

    def __init__(self, max_len: int, dim: int, *, rank: int, **kwargs):
        kwargs.setdefault("autocast", False)
        super().__init__(**kwargs)
        self.max_len, self.dim, self.rank = sc.check_low_rank(max_len, dim, rank)
        init = keras.initializers.RandomNormal(stddev=sc.low_rank_init_std(self.rank))
        self.left = self.add_weight(name="left", shape=(self.max_len, self.rank), initializer=init)
        self.right = self.add_weight(name="right", shape=(self.rank, self.dim), initializer=init)
        self.built = True

    def encoding(self, positions):
        """``P`` (float32) for ``positions`` (an int length or an int tensor)."""
        return self._rows(_table_positions(positions, self.max_len, "LowRankEncoding"))

    def _rows(self, pos):
        left = ops.take(ops.cast(self.left, "float32"), pos, axis=0)
        return ops.matmul(left, ops.cast(self.right, "float32"))

    def call(self, x, positions=None):
        what = "LowRankEncoding"
        check_embeddings(what, x.shape, self.dim)
        if positions is None:
            if x.shape[-2] == 0:
                return ops.cast(x, self.compute_dtype)
            positions = _default_positions(x, self.max_len, what)
        pos = _table_positions(positions, self.max_len, what)
        check_positions_shape(what, pos.shape, x.shape)
        return self.add_encoding(x, self._rows(pos))

    def get_config(self):
        config = super().get_config()
        config.update({"max_len": self.max_len, "dim": self.dim, "rank": self.rank})
        return config


# --------------------------------------------------------------------------- coordinates and graphs

import math  # noqa: E402

from posenc.keras._util import result_dtype  # noqa: E402


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
    coords = as_positions(ops.convert_to_tensor(coords))
    if len(coords.shape) < 1:
        raise ValueError(f"{what}: coords must be (..., k), got a scalar; use coords[..., None].")
    num = coords.shape[-1]
    width = sc.coordinate_width(dim, num, what=what)
    scales = sc.check_coordinate_scale(scale, num, what=what)
    wide = ops.cast(coords, wide_dtype())
    blocks = [sinusoidal(wide[..., c] * scales[c], width, base=base, layout=layout)
              for c in range(num)]
    return ops.cast(ops.concatenate(blocks, axis=-1), result_dtype(coords))


def laplacian(adjacency, *, normalized: bool = True):
    """The graph Laplacian (float32), ``I - D^(-1/2) A D^(-1/2)`` or ``D - A``.

    Computed in float64 NumPy by :func:`posenc.structured_core.laplacian` (the
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
    lap = sc.laplacian(_host(adjacency), normalized=normalized)
    return ops.convert_to_tensor(lap.astype("float32"))


def laplacian_positions(adjacency, k: int, *, normalized: bool = True,
                        return_eigenvalues: bool = False):
    """Laplacian eigenvector positions (Dwivedi et al., 2020) as a float32 tensor.

    The ``k`` eigenvectors of the graph Laplacian with the smallest non-trivial
    eigenvalues, one row per node, with the deterministic sign convention of
    :func:`posenc.structured_core.laplacian_positions` (which computes them in
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
    out = sc.laplacian_positions(_host(adjacency), k, normalized=normalized,
                                 return_eigenvalues=return_eigenvalues)
    if return_eigenvalues:
        return tuple(ops.convert_to_tensor(o.astype("float32")) for o in out)
    return ops.convert_to_tensor(out.astype("float32"))


def _host(array):
    """A backend tensor or variable as NumPy (anything else as it is), for the graph code."""
    if isinstance(array, keras.Variable) or ops.is_tensor(array):
        return ops.convert_to_numpy(array)
    return array


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
        self.k = check_positive_int("k", k)
        self.dim = check_positive_int("dim", dim)
        self.sign_flip = sc.check_sign_flip(sign_flip)
        self.seed = sc.check_seed(seed, what="LaplacianEncoding")
        self.seed_generator = keras.random.SeedGenerator(self.seed)
        self.kernel = self.add_weight(name="kernel", shape=(self.k, self.dim),
                                      initializer="glorot_uniform")
        self.bias = self.add_weight(name="bias", shape=(self.dim,), initializer="zeros")
        self.built = True

    def encoding(self, eigenvectors, training=None):
        """``P`` (float32) ``(..., nodes, dim)``; signs flipped at random when training."""
        u = ops.cast(ops.convert_to_tensor(eigenvectors), "float32")
        sc.check_eigenvectors_shape(u.shape, self.k)
        if training and self.sign_flip:
            shape = (*ops.shape(u)[:-2], 1, self.k)
            coin = keras.random.uniform(shape, seed=self.seed_generator) < 0.5
            u = u * ops.where(coin, -1.0, 1.0)
        return ops.matmul(u, ops.cast(self.kernel, "float32")) + ops.cast(self.bias, "float32")

    def call(self, x, eigenvectors, training=None):
        what = "LaplacianEncoding"
        check_embeddings(what, x.shape, self.dim)
        eigenvectors = ops.convert_to_tensor(eigenvectors)
        sc.check_eigenvectors_shape(eigenvectors.shape, self.k)
        _per_token("eigenvectors", eigenvectors, x, what=what, each="row of k eigenvector "
                   "entries (one per node)", trailing="k")
        return self.add_encoding(x, self.encoding(eigenvectors, training=training))

    def get_config(self):
        config = super().get_config()
        config.update({"k": self.k, "dim": self.dim, "sign_flip": self.sign_flip,
                       "seed": self.seed})
        return config
