"""Learned tables (Keras face): learned, hybrid and low-rank encodings, and table resizing.

The framework-free part (resampling matrices, the truncated SVD, what a table
suggests when a sequence does not fit) is ``posenc/learned.py``.
"""

from __future__ import annotations

import keras
import numpy as np
from keras import ops

from posenc._checks import (
    check_base,
    check_even_dim,
    check_float_dtype,
    check_layout,
    check_positive_int,
    check_rank,
    check_seed,
)
from posenc.keras._util import AdditiveEncoding, as_numpy, dtype_of, on_host, wide_dtype
from posenc.keras.sinusoidal import sinusoidal
from posenc.learned import (
    HYBRID_TOO_SHORT,
    LEARNED_TOO_SHORT,
    LOW_RANK_TOO_SHORT,
    TABLE_INIT_STD,
    check_extension,
    check_init_std,
    check_low_rank,
    check_scale,
    grid_resize_matrices,
    low_rank_factors,
    low_rank_init_std,
    table_resize_matrix,
)

__all__ = [
    "resize_table",
    "resize_table_2d",
    "LearnedEncoding",
    "HybridEncoding",
    "LowRankEncoding",
]


def _as_table(table, what: str):
    """``table`` as a floating-point tensor (interpolation would truncate integers)."""
    table = ops.convert_to_tensor(table)
    check_float_dtype("table", dtype_of(table), what=what,
                      fix="interpolation would truncate it. Cast it first, e.g. table.float()")
    return table


def _apply(matrix, table):
    """``matrix @ table`` along the first axis, in float64 (float32 on JAX without x64).

    ``ops.einsum``, not ``ops.matmul``: Keras' matmul rounds float64 to float32
    on the PyTorch and JAX backends.
    """
    host = on_host(table)
    if host is not None:  # JAX without x64: the float64 product in NumPy
        return ops.convert_to_tensor(np.tensordot(matrix, host[0], axes=1).astype(np.float32))
    wide = wide_dtype()
    return ops.einsum("nk,k...->n...", ops.convert_to_tensor(matrix.astype(wide)),
                      ops.cast(table, wide))


def resize_table(table, new_length: int, *, mode: str = "linear"):
    """Resample a learned ``(length, dim)`` position table to ``new_length`` rows.

    Row ``j`` of the result interpolates the old table at position
    ``(j + 0.5) * length / new_length - 0.5``, as
    ``torch.nn.functional.interpolate(..., align_corners=False)`` does; the
    weights are the matrix :func:`posenc.learned.interpolation_matrix`, applied
    in float64 (float32 on JAX unless ``jax_enable_x64`` is set), so the PyTorch
    face gives the same numbers. This is how a model
    trained on short sequences is given a longer table before fine-tuning on
    long ones; the stretched positions are only a starting point.

    Args:
        table: ``(length, dim)`` tensor or variable, e.g. ``LearnedEncoding.table``.
        new_length: number of rows of the result, a positive int.
        mode: ``"linear"`` (default), ``"cubic"`` (Keys, ``a = -0.75``) or
            ``"nearest"``.

    Returns:
        Tensor ``(new_length, dim)`` of ``table``'s dtype; equal to ``table``
        when ``new_length == length``.

    Example:
        >>> out = resize_table(keras.ops.convert_to_tensor([[0.0], [1.0]]), 4)
        >>> keras.ops.convert_to_numpy(out)[:, 0].tolist()
        [0.0, 0.25, 0.75, 1.0]

    References:
        Devlin et al., "BERT: Pre-training of Deep Bidirectional Transformers
        for Language Understanding", NAACL 2019 (the learned table).
    """
    table = _as_table(table, "resize_table")
    matrix = table_resize_matrix(tuple(table.shape), new_length, mode)
    return ops.cast(_apply(matrix, table), dtype_of(table))


def resize_table_2d(table, old_hw, new_hw, *, prefix_tokens: int = 0, mode: str = "bicubic",
                    antialias: bool = True):
    """Resample a ViT position table from one patch grid to another.

    The table holds ``prefix_tokens`` rows that are not on the grid (the CLS
    token and the like) followed by a row-major ``old_h x old_w`` grid. The
    prefix rows are kept as they are; the grid is interpolated separably, one
    :func:`posenc.learned.interpolation_matrix` per axis, in float64 (float32
    on JAX unless ``jax_enable_x64`` is set). ViT
    interpolates its table this way to fine-tune at a higher resolution than it
    was pre-trained at (Dosovitskiy et al., section 3.2; its released code
    interpolates linearly, ``mode="bilinear"`` here up to the grid-edge
    convention). The defaults give the numbers of timm's
    ``resample_abs_pos_embed`` with its defaults (bicubic,
    ``align_corners=False``, antialiased: ``a = -0.5``, the kernel widened by
    ``old / new`` when shrinking so that every trained row contributes, edge
    weights renormalised); ``antialias=False`` is plain
    ``interpolate(..., mode="bicubic")`` (``a = -0.75``, edge rows repeated),
    as DeiT's code and Swin's bias tables resize.

    Args:
        table: ``(prefix_tokens + old_h * old_w, dim)`` tensor or variable.
        old_hw: ``(old_h, old_w)``, the grid the table was trained on.
        new_hw: ``(new_h, new_w)``, the grid wanted.
        prefix_tokens: number of leading non-grid rows. Default ``0``.
        mode: ``"bicubic"`` (default), ``"bilinear"`` or ``"nearest"``.
        antialias: ``True`` (default, as timm) or ``False``; ``"nearest"``
            ignores it.

    Returns:
        Tensor ``(prefix_tokens + new_h * new_w, dim)`` of ``table``'s dtype.

    Example:
        >>> table = keras.random.normal((1 + 14 * 14, 768))
        >>> tuple(resize_table_2d(table, (14, 14), (24, 24), prefix_tokens=1).shape)
        (577, 768)

    References:
        Dosovitskiy et al., "An Image is Worth 16x16 Words: Transformers for
        Image Recognition at Scale", ICLR 2021, section 3.2.
    """
    table = _as_table(table, "resize_table_2d")
    rows, cols = grid_resize_matrices(tuple(table.shape), old_hw, new_hw, prefix_tokens, mode,
                                      antialias=antialias)
    (old_h, old_w), dim = old_hw, table.shape[-1]
    prefix, grid = table[:prefix_tokens], table[prefix_tokens:]
    grid = _apply(rows, ops.reshape(grid, (old_h, old_w, dim)))    # (new_h, old_w, dim)
    grid = _apply(cols, ops.transpose(grid, (1, 0, 2)))           # (new_w, new_h, dim)
    grid = ops.cast(ops.reshape(ops.transpose(grid, (1, 0, 2)), (-1, dim)), dtype_of(table))
    return ops.concatenate((prefix, grid), axis=0)


@keras.saving.register_keras_serializable(package="posenc")
class LearnedEncoding(AdditiveEncoding):
    """Adds a learned position table to token embeddings (BERT, GPT-2, ViT).

    Each position ``p < max_len`` owns a trainable row ``table[p]``, and
    ``call(x)`` returns ``x + table[positions]`` in the layer's compute dtype.
    Devlin et al. (BERT) and Radford et al. (GPT-2) learn such a table instead
    of the fixed sinusoids of Vaswani et al., who found the two about equally
    good; Dosovitskiy et al. (ViT) learn one row per image patch plus one for
    the CLS token, so a ViT uses ``max_len = 1 + H * W``. The table is
    initialised like BERT's: a normal distribution of standard deviation
    ``init_std`` truncated at two standard deviations.

    The price is a hard maximum length: a sequence longer than ``max_len``
    raises ``ValueError``, and so does a position outside ``0 .. max_len-1``
    where the data may be read (see "Checks that read the data" in the API
    reference). To fine-tune at a new length, :meth:`resized`
    (:meth:`resized_2d` for a ViT grid) gives a copy whose table is
    resampled, and :meth:`extended` one that keeps the trained rows.

    Args:
        max_len: number of positions (rows of the table).
        dim: feature dimension; must equal ``x.shape[-1]``.
        init_std: standard deviation of the initial table. Default ``0.02``
            (BERT, ViT).
        **kwargs: other ``keras.layers.Layer`` arguments (``name``, ``dtype``).

    Call arguments:
        x: ``(batch, seq, dim)`` (any leading shape) embeddings, ``seq <= max_len``.
        positions: optional ``(seq,)`` or ``(batch, seq)`` integer positions;
            default ``0 .. seq-1``.

    Returns:
        ``x + table[positions]``, of ``x``'s shape, in the compute dtype.

    Example:
        >>> enc = LearnedEncoding(512, 64)
        >>> tuple(enc(keras.ops.zeros((2, 10, 64))).shape)
        (2, 10, 64)
        >>> tuple(enc.resized(1024).table.shape)
        (1024, 64)

    References:
        Devlin et al., "BERT: Pre-training of Deep Bidirectional Transformers
        for Language Understanding", NAACL 2019.
        Radford et al., "Language Models are Unsupervised Multitask Learners",
        OpenAI, 2019 (GPT-2).
        Dosovitskiy et al., "An Image is Worth 16x16 Words: Transformers for
        Image Recognition at Scale", ICLR 2021.
    """

    def __init__(self, max_len: int, dim: int, *, init_std: float = TABLE_INIT_STD, **kwargs):
        super().__init__(**kwargs)
        what = "LearnedEncoding"
        self.max_len = check_positive_int("max_len", max_len, what=what)
        self.dim = check_positive_int("dim", dim, what=what)
        self.init_std = check_init_std(init_std, what=what)
        # Read in float32 even under mixed precision: P is cast at the end.
        self.table = self.add_weight(
            shape=(self.max_len, self.dim), name="table", autocast=False,
            initializer=keras.initializers.TruncatedNormal(stddev=self.init_std))
        self.built = True

    def get_config(self):
        config = super().get_config()
        config.update({"max_len": self.max_len, "dim": self.dim, "init_std": self.init_std})
        return config

    @classmethod
    def from_table(cls, table, *, init_std: float = TABLE_INIT_STD) -> "LearnedEncoding":
        """A new layer whose table is a copy of ``table``.

        ``max_len`` and ``dim`` are read from the table's shape, so a table
        trained elsewhere (another model, a checkpoint) or edited by hand
        becomes a layer in one call.

        Args:
            table: ``(max_len, dim)`` floating-point tensor, array or variable.
            init_std: the standard deviation of later draws (the new rows of
                :meth:`extended`). Default ``0.02``.

        Returns:
            A ``LearnedEncoding(max_len, dim, init_std=init_std)`` holding a
            copy of ``table`` (in the layer's variable dtype).

        Example:
            >>> enc = LearnedEncoding.from_table(keras.ops.zeros((16, 8)))
            >>> (enc.max_len, enc.dim)
            (16, 8)
        """
        what = "LearnedEncoding.from_table"
        table = _as_table(table, what)
        check_rank("table", table.shape, 2, what=what)
        new = cls(*table.shape, init_std=init_std)
        new.table.assign(ops.cast(table, new.table.dtype))
        return new

    def encoding(self, positions):
        """The rows alone (float32) for ``positions`` (an int n or an int tensor)."""
        pos = self._table_positions(positions, self.max_len, fix=LEARNED_TOO_SHORT)
        return ops.take(ops.cast(self.table, "float32"), pos, axis=0)

    def resized(self, new_max_len: int, *, mode: str = "linear") -> "LearnedEncoding":
        """A new layer whose table is this one's resampled to ``new_max_len`` rows.

        Args:
            new_max_len: the new ``max_len``.
            mode: see :func:`resize_table`. Default ``"linear"``.

        Returns:
            A ``LearnedEncoding(new_max_len, dim, init_std=...)`` with this
            layer's dtype policy and the resampled table (and a new name).
        """
        return self._with_table(resize_table(self.table, new_max_len, mode=mode))

    def resized_2d(self, old_hw, new_hw, *, prefix_tokens: int = 0,
                   mode: str = "bicubic", antialias: bool = True) -> "LearnedEncoding":
        """A new layer for a ViT on a ``new_hw`` patch grid (see :func:`resize_table_2d`).

        Args:
            old_hw: ``(old_h, old_w)``, with ``prefix_tokens + old_h * old_w == max_len``.
            new_hw: ``(new_h, new_w)``.
            prefix_tokens: leading rows kept as they are (1 for the CLS token).
            mode: ``"bicubic"`` (default), ``"bilinear"`` or ``"nearest"``.
            antialias: ``True`` (default, as timm) or ``False``.

        Returns:
            A ``LearnedEncoding(prefix_tokens + new_h * new_w, dim)`` with the
            resampled table.
        """
        return self._with_table(resize_table_2d(self.table, old_hw, new_hw,
                                                prefix_tokens=prefix_tokens, mode=mode,
                                                antialias=antialias))

    def extended(self, new_max_len: int, *, seed: int | None = None) -> "LearnedEncoding":
        """A copy with ``new_max_len`` rows: the trained rows kept, the new ones drawn.

        Rows ``0 .. max_len-1`` equal this layer's table exactly; rows
        ``max_len .. new_max_len-1`` are drawn like a fresh table (normal of
        standard deviation ``init_std``, truncated at two standard deviations)
        and must be learned. :meth:`resized` instead stretches the trained
        rows over the new length, so no row stays where it was trained.

        Args:
            new_max_len: the new ``max_len``, at least ``max_len``.
            seed: optional int for reproducible new rows. Default ``None``.

        Returns:
            A ``LearnedEncoding(new_max_len, dim, init_std=...)`` with this
            layer's dtype policy (and a new name).

        Example:
            >>> enc = LearnedEncoding(8, 4)
            >>> longer = enc.extended(12, seed=0)
            >>> bool(keras.ops.all(longer.table[:8] == enc.table))
            True
        """
        what = "LearnedEncoding.extended"
        new_max_len = check_extension(self.max_len, new_max_len, what=what)
        seed = check_seed(seed, what=what)
        init = keras.initializers.TruncatedNormal(stddev=self.init_std, seed=seed)
        rows = init((new_max_len - self.max_len, self.dim), dtype=self.table.dtype)
        return self._with_table(ops.concatenate((ops.convert_to_tensor(self.table), rows), axis=0))

    def _with_table(self, table) -> "LearnedEncoding":
        config = self.get_config()
        config.pop("name", None)
        config["max_len"] = int(table.shape[0])
        new = type(self).from_config(config)
        new.table.assign(ops.cast(table, new.table.dtype))
        new.trainable = self.trainable
        return new


@keras.saving.register_keras_serializable(package="posenc")
class HybridEncoding(AdditiveEncoding):
    """Adds a scaled sinusoid plus a learned correction to token embeddings.

    ``P(p) = scale * sinusoidal(p) + offset[p]``: the fixed encoding of
    Vaswani et al. (computed, never a weight) gives every position a sensible
    starting point and the relative structure of the sinusoids, while the
    trainable ``offset`` table ``(max_len, dim)`` and the trainable scalar
    ``scale`` let training adapt it. ``offset`` starts at zero, so at
    initialisation the layer equals ``scale * SinusoidalEncoding``. Like a
    learned table, ``offset`` fixes a maximum length: longer sequences raise
    ``ValueError``.

    Args:
        max_len: number of positions (rows of ``offset``).
        dim: even feature dimension; must equal ``x.shape[-1]``.
        base: wavelength base of the sinusoid. Default ``10000.0``.
        layout: ``"interleaved"`` or ``"concat"``; see :func:`sinusoidal`.
            Default ``"interleaved"``.
        scale: initial value of the trainable ``scale`` weight. Default ``1.0``.
        **kwargs: other ``keras.layers.Layer`` arguments (``name``, ``dtype``).

    Call arguments:
        x: ``(batch, seq, dim)`` (any leading shape) embeddings, ``seq <= max_len``.
        positions: optional ``(seq,)`` or ``(batch, seq)`` integer positions;
            default ``0 .. seq-1``.

    Returns:
        ``x + P(positions)``, of ``x``'s shape, in the compute dtype.

    Example:
        >>> enc = HybridEncoding(128, 16)
        >>> tuple(enc(keras.ops.zeros((2, 10, 16))).shape)
        (2, 10, 16)

    References:
        Vaswani et al., "Attention Is All You Need", NeurIPS 2017, section 3.5.
    """

    def __init__(self, max_len: int, dim: int, *, base: float = 10000.0,
                 layout: str = "interleaved", scale: float = 1.0, **kwargs):
        super().__init__(**kwargs)
        what = "HybridEncoding"
        self.max_len = check_positive_int("max_len", max_len, what=what)
        self.dim = check_even_dim(dim, what=what)
        self.layout = check_layout(layout, what=what)
        self.base = check_base(base, what=what)
        self.initial_scale = check_scale(scale, what=what)
        self.scale = self.add_weight(
            shape=(), name="scale", autocast=False,
            initializer=keras.initializers.Constant(self.initial_scale))
        self.offset = self.add_weight(
            shape=(self.max_len, self.dim), name="offset", autocast=False,
            initializer="zeros")
        self.built = True

    def get_config(self):
        config = super().get_config()
        config.update({"max_len": self.max_len, "dim": self.dim, "base": self.base,
                       "layout": self.layout, "scale": self.initial_scale})
        return config

    def encoding(self, positions):
        """``P(positions)`` alone (float32) for an int n or an int tensor."""
        pos = self._table_positions(positions, self.max_len, fix=HYBRID_TOO_SHORT)
        sinusoid = sinusoidal(pos, self.dim, base=self.base, layout=self.layout)
        offset = ops.take(ops.cast(self.offset, "float32"), pos, axis=0)
        return ops.cast(self.scale, "float32") * sinusoid + offset


@keras.saving.register_keras_serializable(package="posenc")
class LowRankEncoding(AdditiveEncoding):
    """A learned position table factorised as ``P = left @ right``.

    A learned table has ``max_len * dim`` free numbers. A low-rank table is
    one whose rows span only ``rank`` directions of the ``dim``-dimensional
    space: ``left (max_len, rank) @ right (rank, dim)``, with
    ``rank * (max_len + dim)`` parameters. Each position gets a
    ``rank``-dimensional code, mapped to the model width by a shared
    projection. The rank limits how many directions the rows use, not how
    they change from one position to the next: neighbouring positions may
    have unrelated codes, and no smoothness is implied. ``rank = min(max_len,
    dim)`` can represent any table; :meth:`from_table` gives the best
    approximation of a given table at a lower rank.

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
        self.max_len, self.dim, self.rank = check_low_rank(max_len, dim, rank,
                                                           what="LowRankEncoding")
        init = keras.initializers.RandomNormal(stddev=low_rank_init_std(self.rank))
        self.left = self.add_weight(name="left", shape=(self.max_len, self.rank), initializer=init)
        self.right = self.add_weight(name="right", shape=(self.rank, self.dim), initializer=init)
        self.built = True

    def get_config(self):
        config = super().get_config()
        config.update({"max_len": self.max_len, "dim": self.dim, "rank": self.rank})
        return config

    @classmethod
    def from_table(cls, table, rank: int) -> "LowRankEncoding":
        """The best rank-``rank`` approximation of a ``(max_len, dim)`` table.

        The factors come from a truncated SVD of ``table`` in float64
        (:func:`posenc.learned.low_rank_factors`): with ``table = U S V^T``,
        ``left = U_r sqrt(S_r)`` and ``right = sqrt(S_r) V_r^T``, so
        ``left @ right = U_r S_r V_r^T``, the closest rank-``rank`` table in
        the Frobenius norm (Eckart & Young, 1936). Splitting ``S`` evenly keeps
        both factors on the same scale.

        Args:
            table: ``(max_len, dim)`` floating-point tensor, array or variable.
            rank: ``1 <= rank <= min(max_len, dim)``.

        Returns:
            A ``LowRankEncoding(max_len, dim, rank=rank)`` holding the factors.

        Example:
            >>> table = keras.ops.outer(keras.ops.arange(4.0), keras.ops.ones(3))  # rank 1
            >>> enc = LowRankEncoding.from_table(table, 1)
            >>> bool(keras.ops.all(keras.ops.isclose(enc.encoding(4), table, atol=1e-6)))
            True

        References:
            Eckart & Young, "The approximation of one matrix by another of
            lower rank", Psychometrika 1(3), 1936.
        """
        what = "LowRankEncoding.from_table"
        table = _as_table(table, what)
        check_rank("table", table.shape, 2, what=what)
        left, right = low_rank_factors(as_numpy(table), rank)
        new = cls(*table.shape, rank=rank)
        new.left.assign(ops.cast(left, new.left.dtype))
        new.right.assign(ops.cast(right, new.right.dtype))
        return new

    def encoding(self, positions):
        """``P`` (float32) for ``positions`` (an int length or an int tensor)."""
        pos = self._table_positions(positions, self.max_len, fix=LOW_RANK_TOO_SHORT)
        left = ops.take(ops.cast(self.left, "float32"), pos, axis=0)
        return ops.matmul(left, ops.cast(self.right, "float32"))
