"""Learned tables (PyTorch face): learned, hybrid and low-rank encodings, and table resizing.

The framework-free part (resampling matrices, the truncated SVD, what a table
suggests when a sequence does not fit) is ``posenc/learned.py``.
"""

from __future__ import annotations

import torch
from torch import nn

from posenc._checks import (
    check_base,
    check_even_dim,
    check_float_dtype,
    check_layout,
    check_positive_int,
    check_rank,
    check_seed,
)
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
from posenc.torch._util import AdditiveEncoding, as_numpy, dtype_of, wide_dtype
from posenc.torch.sinusoidal import sinusoidal

__all__ = [
    "resize_table",
    "resize_table_2d",
    "LearnedEncoding",
    "HybridEncoding",
    "LowRankEncoding",
]


def _as_table(table, what: str) -> torch.Tensor:
    """``table`` as a floating-point tensor (interpolation would truncate integers)."""
    table = table if torch.is_tensor(table) else torch.as_tensor(table)
    check_float_dtype("table", dtype_of(table), what=what,
                      fix="interpolation would truncate it. Cast it first, e.g. table.float()")
    return table


def _apply(matrix, table: torch.Tensor) -> torch.Tensor:
    """``matrix @ table`` along the first axis, in float64 (float32 on MPS), autocast off."""
    wide = wide_dtype(table.device)
    m = torch.as_tensor(matrix, dtype=wide, device=table.device)
    with torch.autocast(device_type=table.device.type, enabled=False):
        return torch.einsum("nk,k...->n...", m, table.to(wide))


def resize_table(table, new_length: int, *, mode: str = "linear") -> torch.Tensor:
    """Resample a learned ``(length, dim)`` position table to ``new_length`` rows.

    Row ``j`` of the result interpolates the old table at position
    ``(j + 0.5) * length / new_length - 0.5``, as
    ``torch.nn.functional.interpolate(..., align_corners=False)`` does; the
    weights are the matrix :func:`posenc.learned.interpolation_matrix`, applied
    in float64, so the Keras face gives the same numbers. This is how a model
    trained on short sequences is given a longer table before fine-tuning on
    long ones; the stretched positions are only a starting point.

    Args:
        table: ``(length, dim)`` tensor, e.g. ``LearnedEncoding.table``.
        new_length: number of rows of the result, a positive int.
        mode: ``"linear"`` (default), ``"cubic"`` (Keys, ``a = -0.75``) or
            ``"nearest"``.

    Returns:
        Tensor ``(new_length, dim)`` of ``table``'s dtype and device; equal to
        ``table`` when ``new_length == length``. Gradients flow to ``table``.

    Example:
        >>> resize_table(torch.tensor([[0.0], [1.0]]), 4).squeeze(-1)
        tensor([0.0000, 0.2500, 0.7500, 1.0000])

    References:
        Devlin et al., "BERT: Pre-training of Deep Bidirectional Transformers
        for Language Understanding", NAACL 2019 (the learned table).
    """
    table = _as_table(table, "resize_table")
    matrix = table_resize_matrix(table.shape, new_length, mode)
    return _apply(matrix, table).to(table.dtype)


def resize_table_2d(table, old_hw, new_hw, *, prefix_tokens: int = 0,
                    mode: str = "bicubic", antialias: bool = True) -> torch.Tensor:
    """Resample a ViT position table from one patch grid to another.

    The table holds ``prefix_tokens`` rows that are not on the grid (the CLS
    token and the like) followed by a row-major ``old_h x old_w`` grid. The
    prefix rows are kept as they are; the grid is interpolated separably, one
    :func:`posenc.learned.interpolation_matrix` per axis, in float64. ViT
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
        table: ``(prefix_tokens + old_h * old_w, dim)`` tensor.
        old_hw: ``(old_h, old_w)``, the grid the table was trained on.
        new_hw: ``(new_h, new_w)``, the grid wanted.
        prefix_tokens: number of leading non-grid rows. Default ``0``.
        mode: ``"bicubic"`` (default), ``"bilinear"`` or ``"nearest"``.
        antialias: ``True`` (default, as timm) or ``False``; ``"nearest"``
            ignores it.

    Returns:
        Tensor ``(prefix_tokens + new_h * new_w, dim)`` of ``table``'s dtype.

    Example:
        >>> table = torch.randn(1 + 14 * 14, 768)
        >>> resize_table_2d(table, (14, 14), (24, 24), prefix_tokens=1).shape
        torch.Size([577, 768])

    References:
        Dosovitskiy et al., "An Image is Worth 16x16 Words: Transformers for
        Image Recognition at Scale", ICLR 2021, section 3.2.
    """
    table = _as_table(table, "resize_table_2d")
    rows, cols = grid_resize_matrices(table.shape, old_hw, new_hw, prefix_tokens, mode,
                                      antialias=antialias)
    (old_h, old_w), dim = old_hw, table.shape[-1]
    prefix, grid = table[:prefix_tokens], table[prefix_tokens:]
    grid = _apply(rows, grid.reshape(old_h, old_w, dim))    # (new_h, old_w, dim)
    grid = _apply(cols, grid.transpose(0, 1))              # (new_w, new_h, dim)
    grid = grid.transpose(0, 1).reshape(-1, dim).to(table.dtype)
    return torch.cat((prefix, grid), dim=0)


class LearnedEncoding(AdditiveEncoding):
    """Adds a learned position table to token embeddings (BERT, GPT-2, ViT).

    Each position ``p < max_len`` owns a trainable row ``table[p]``, and
    ``forward(x)`` returns ``x + table[positions]``. Devlin et al. (BERT) and
    Radford et al. (GPT-2) learn such a table instead of the fixed sinusoids of
    Vaswani et al., who found the two about equally good; Dosovitskiy et al.
    (ViT) learn one row per image patch plus one for the CLS token, so a ViT
    uses ``max_len = 1 + H * W``. The table is initialised like BERT's: a normal
    distribution of standard deviation ``init_std`` truncated at two standard
    deviations.

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

    Call arguments:
        x: ``(batch, seq, dim)`` (any leading shape) embeddings, ``seq <= max_len``.
        positions: optional ``(seq,)`` or ``(batch, seq)`` integer positions;
            default ``0 .. seq-1``.

    Returns:
        ``x + table[positions]``, of ``x``'s shape and dtype.

    Example:
        >>> enc = LearnedEncoding(512, 64)
        >>> enc(torch.zeros(2, 10, 64)).shape
        torch.Size([2, 10, 64])
        >>> enc.resized(1024).table.shape
        torch.Size([1024, 64])

    References:
        Devlin et al., "BERT: Pre-training of Deep Bidirectional Transformers
        for Language Understanding", NAACL 2019.
        Radford et al., "Language Models are Unsupervised Multitask Learners",
        OpenAI, 2019 (GPT-2).
        Dosovitskiy et al., "An Image is Worth 16x16 Words: Transformers for
        Image Recognition at Scale", ICLR 2021.
    """

    def __init__(self, max_len: int, dim: int, *, init_std: float = TABLE_INIT_STD):
        super().__init__()
        what = "LearnedEncoding"
        self.max_len = check_positive_int("max_len", max_len, what=what)
        self.dim = check_positive_int("dim", dim, what=what)
        self.init_std = check_init_std(init_std, what=what)
        self.table = nn.Parameter(torch.empty(self.max_len, self.dim))
        self.reset_parameters()

    def reset_parameters(self) -> None:
        """Draw the table again: truncated normal, ``init_std``, cut at 2 std."""
        s = self.init_std
        nn.init.trunc_normal_(self.table, std=s, a=-2.0 * s, b=2.0 * s)

    def extra_repr(self) -> str:
        return f"max_len={self.max_len}, dim={self.dim}, init_std={self.init_std}"

    @classmethod
    def from_table(cls, table, *, init_std: float = TABLE_INIT_STD) -> "LearnedEncoding":
        """A new module whose table is a copy of ``table``.

        ``max_len`` and ``dim`` are read from the table's shape, so a table
        trained elsewhere (another model, a checkpoint) or edited by hand
        becomes a module in one call.

        Args:
            table: ``(max_len, dim)`` floating-point tensor or array.
            init_std: the standard deviation of later draws
                (:meth:`reset_parameters`, the new rows of :meth:`extended`).
                Default ``0.02``.

        Returns:
            A ``LearnedEncoding(max_len, dim, init_std=init_std)`` on
            ``table``'s device, in its dtype, holding a copy of ``table``.

        Example:
            >>> enc = LearnedEncoding.from_table(torch.zeros(16, 8))
            >>> (enc.max_len, enc.dim)
            (16, 8)
        """
        what = "LearnedEncoding.from_table"
        table = _as_table(table, what)
        check_rank("table", table.shape, 2, what=what)
        new = cls(*table.shape, init_std=init_std).to(device=table.device, dtype=table.dtype)
        with torch.no_grad():
            new.table.copy_(table)
        return new

    def encoding(self, positions) -> torch.Tensor:
        """The rows alone (float32) for ``positions`` (an int n or an int tensor)."""
        pos = self._table_positions(positions, self.max_len, fix=LEARNED_TOO_SHORT)
        return self.table[pos].float()

    def resized(self, new_max_len: int, *, mode: str = "linear") -> "LearnedEncoding":
        """A new module whose table is this one's resampled to ``new_max_len`` rows.

        Args:
            new_max_len: the new ``max_len``.
            mode: see :func:`resize_table`. Default ``"linear"``.

        Returns:
            A ``LearnedEncoding(new_max_len, dim, init_std=...)`` on this
            module's device and dtype, with the resampled table.
        """
        with torch.no_grad():
            table = resize_table(self.table, new_max_len, mode=mode)
        return self._with_table(table)

    def resized_2d(self, old_hw, new_hw, *, prefix_tokens: int = 0,
                   mode: str = "bicubic", antialias: bool = True) -> "LearnedEncoding":
        """A new module for a ViT on a ``new_hw`` patch grid (see :func:`resize_table_2d`).

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
        with torch.no_grad():
            table = resize_table_2d(self.table, old_hw, new_hw, prefix_tokens=prefix_tokens,
                                    mode=mode, antialias=antialias)
        return self._with_table(table)

    def extended(self, new_max_len: int, *, seed: int | None = None) -> "LearnedEncoding":
        """A copy with ``new_max_len`` rows: the trained rows kept, the new ones drawn.

        Rows ``0 .. max_len-1`` equal this module's table exactly; rows
        ``max_len .. new_max_len-1`` are drawn like a fresh table (normal of
        standard deviation ``init_std``, truncated at two standard deviations)
        and must be learned. :meth:`resized` instead stretches the trained
        rows over the new length, so no row stays where it was trained.

        Args:
            new_max_len: the new ``max_len``, at least ``max_len``.
            seed: optional int for reproducible new rows. Default ``None``
                (PyTorch's global generator).

        Returns:
            A ``LearnedEncoding(new_max_len, dim, init_std=...)`` on this
            module's device and dtype.

        Example:
            >>> enc = LearnedEncoding(8, 4)
            >>> longer = enc.extended(12, seed=0)
            >>> bool((longer.table[:8] == enc.table).all())
            True
        """
        what = "LearnedEncoding.extended"
        new_max_len = check_extension(self.max_len, new_max_len, what=what)
        seed = check_seed(seed, what=what)
        rows = torch.empty(new_max_len - self.max_len, self.dim)
        generator = None if seed is None else torch.Generator().manual_seed(seed)
        s = self.init_std
        nn.init.trunc_normal_(rows, std=s, a=-2.0 * s, b=2.0 * s, generator=generator)
        with torch.no_grad():
            table = torch.cat((self.table, rows.to(self.table)), dim=0)
        return self._with_table(table)

    def _with_table(self, table: torch.Tensor) -> "LearnedEncoding":
        new = LearnedEncoding(table.shape[0], self.dim, init_std=self.init_std)
        new = new.to(device=self.table.device, dtype=self.table.dtype)
        with torch.no_grad():
            new.table.copy_(table)
        new.table.requires_grad_(self.table.requires_grad)
        return new.train(self.training)


class HybridEncoding(AdditiveEncoding):
    """Adds a scaled sinusoid plus a learned correction to token embeddings.

    ``P(p) = scale * sinusoidal(p) + offset[p]``: the fixed encoding of
    Vaswani et al. (computed, never a weight) gives every position a sensible
    starting point and the relative structure of the sinusoids, while the
    trainable ``offset`` table ``(max_len, dim)`` and the trainable scalar
    ``scale`` let training adapt it. ``offset`` starts at zero, so at
    initialisation the module equals ``scale * SinusoidalEncoding``. Like a
    learned table, ``offset`` fixes a maximum length: longer sequences raise
    ``ValueError``.

    Args:
        max_len: number of positions (rows of ``offset``).
        dim: even feature dimension; must equal ``x.shape[-1]``.
        base: wavelength base of the sinusoid. Default ``10000.0``.
        layout: ``"interleaved"`` or ``"concat"``; see :func:`sinusoidal`.
            Default ``"interleaved"``.
        scale: initial value of the trainable ``scale`` weight. Default ``1.0``.

    Call arguments:
        x: ``(batch, seq, dim)`` (any leading shape) embeddings, ``seq <= max_len``.
        positions: optional ``(seq,)`` or ``(batch, seq)`` integer positions;
            default ``0 .. seq-1``.

    Returns:
        ``x + P(positions)``, of ``x``'s shape and dtype.

    Example:
        >>> enc = HybridEncoding(128, 16)
        >>> enc(torch.zeros(2, 10, 16)).shape
        torch.Size([2, 10, 16])

    References:
        Vaswani et al., "Attention Is All You Need", NeurIPS 2017, section 3.5.
    """

    def __init__(self, max_len: int, dim: int, *, base: float = 10000.0,
                 layout: str = "interleaved", scale: float = 1.0):
        super().__init__()
        what = "HybridEncoding"
        self.max_len = check_positive_int("max_len", max_len, what=what)
        self.dim = check_even_dim(dim, what=what)
        self.layout = check_layout(layout, what=what)
        self.base = check_base(base, what=what)
        self.initial_scale = check_scale(scale, what=what)
        self.scale = nn.Parameter(torch.tensor(self.initial_scale))
        self.offset = nn.Parameter(torch.zeros(self.max_len, self.dim))

    def extra_repr(self) -> str:
        return (f"max_len={self.max_len}, dim={self.dim}, base={self.base}, "
                f"layout={self.layout!r}, scale={self.initial_scale}")

    def encoding(self, positions) -> torch.Tensor:
        """``P(positions)`` alone (float32) for an int n or an int tensor."""
        pos = self._table_positions(positions, self.max_len, fix=HYBRID_TOO_SHORT)
        sinusoid = sinusoidal(pos, self.dim, base=self.base, layout=self.layout)
        return self.scale.float() * sinusoid + self.offset[pos].float()


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
        Tensor of the shape and dtype of ``x``.

    Weights:
        left: ``(max_len, rank)``; right: ``(rank, dim)``. Both initialised
        ``N(0, s^2)`` with ``s = sqrt(0.02 / sqrt(rank))``, so the entries of
        ``P`` start with standard deviation 0.02, like a fresh learned table.

    Example:
        >>> enc = LowRankEncoding(128, 64, rank=8)
        >>> sum(p.numel() for p in enc.parameters())  # 8 * (128 + 64)
        1536
        >>> enc(torch.zeros(2, 10, 64)).shape
        torch.Size([2, 10, 64])
    """

    def __init__(self, max_len: int, dim: int, *, rank: int):
        super().__init__()
        self.max_len, self.dim, self.rank = check_low_rank(max_len, dim, rank,
                                                           what="LowRankEncoding")
        self.left = nn.Parameter(torch.empty(self.max_len, self.rank))
        self.right = nn.Parameter(torch.empty(self.rank, self.dim))
        self.reset_parameters()

    def reset_parameters(self) -> None:
        std = low_rank_init_std(self.rank)
        nn.init.normal_(self.left, std=std)
        nn.init.normal_(self.right, std=std)

    def extra_repr(self) -> str:
        return f"max_len={self.max_len}, dim={self.dim}, rank={self.rank}"

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
            table: ``(max_len, dim)`` floating-point tensor or array.
            rank: ``1 <= rank <= min(max_len, dim)``.

        Returns:
            A ``LowRankEncoding(max_len, dim, rank=rank)`` (float32) on
            ``table``'s device.

        Example:
            >>> table = torch.outer(torch.arange(4.0), torch.ones(3))  # rank 1
            >>> enc = LowRankEncoding.from_table(table, 1)
            >>> torch.allclose(enc.encoding(4), table)
            True

        References:
            Eckart & Young, "The approximation of one matrix by another of
            lower rank", Psychometrika 1(3), 1936.
        """
        what = "LowRankEncoding.from_table"
        table = _as_table(table, what)
        check_rank("table", table.shape, 2, what=what)
        left, right = low_rank_factors(as_numpy(table), rank)
        new = cls(*table.shape, rank=rank).to(table.device)
        with torch.no_grad():
            new.left.copy_(torch.as_tensor(left))
            new.right.copy_(torch.as_tensor(right))
        return new

    def encoding(self, positions) -> torch.Tensor:
        """``P`` (float32) for ``positions`` (an int length or an int tensor)."""
        pos = self._table_positions(positions, self.max_len, fix=LOW_RANK_TOO_SHORT)
        with torch.autocast(device_type=self.left.device.type, enabled=False):
            return self.left.float()[pos] @ self.right.float()
