"""Rotary embeddings for vision (PyTorch face): axial 2D RoPE and RoPE-Mixed, any grid.

:func:`apply_vision_rope` and :class:`VisionRotaryEmbedding` rotate the patch tokens of a
Vision Transformer by their row and column (axial 2D RoPE), with the grid given per call,
prefix tokens (CLS, registers) left unrotated and an optional reference grid
(``ref_grid``, timm's ``ref_feat_shape``) that rescales a new resolution onto the trained
one. :func:`apply_mixed_rope` and :class:`MixedRotaryEmbedding` are RoPE-Mixed (Heo et
al., ECCV 2024): learned 2D frequencies per head and per layer.

The positions, the axial angles (float64, then float32 cos and sin) and the mixed
initialisation are in ``posenc/vision.py``; the rotation is the rotary family's
(``posenc.torch.rotary``). The mixed angles are computed in float32 with autocast off and
cast to ``q``'s dtype last. The Keras face mirrors this module name for name.
"""

from __future__ import annotations

import torch
from torch import nn

from posenc import vision as numpy_vision
from posenc._checks import check_base, check_positive_int, check_rank
from posenc.rotary import check_rope_layout
from posenc.torch.rotary import _rotate
from posenc.vision import (
    check_axis_order,
    check_freqs,
    check_grid,
    check_layer_index,
    check_mixed_heads,
    check_offset,
    check_prefix_tokens,
    check_vision_head_dim,
    check_vision_tokens,
    check_vision_width,
)

__all__ = [
    "apply_vision_rope",
    "apply_mixed_rope",
    "VisionRotaryEmbedding",
    "MixedRotaryEmbedding",
]


def _check_rank(name: str, x, *, what: str) -> None:
    check_rank(name, x.shape, tuple(range(2, 9)), what=what,
               fix=f"lay {name} out as (batch, heads, seq, head_dim)")


def _with_prefix(x, prefix_tokens: int, rotate):
    """``x``'s first ``prefix_tokens`` tokens as they are, the others through ``rotate``."""
    if prefix_tokens == 0:
        return rotate(x)
    return torch.cat([x[..., :prefix_tokens, :], rotate(x[..., prefix_tokens:, :])], -2)


def _axial_cos_sin(grid, head_dim, base, ref_grid, offset, axis_order, device, *, what: str):
    """The float32 cos and sin of the grid's axial angles (computed in float64), on ``device``."""
    cos, sin = numpy_vision.axial_cos_sin(grid, head_dim, base=base, ref_grid=ref_grid,
                                          offset=offset, axis_order=axis_order, what=what)
    return torch.tensor(cos, device=device), torch.tensor(sin, device=device)


def apply_vision_rope(x: torch.Tensor, grid, *, prefix_tokens: int = 0, ref_grid=None,
                      base: float = 10000.0, offset: float = 0.0, axis_order: str = "hw",
                      layout: str = "interleaved") -> torch.Tensor:
    """Axial 2D RoPE on the patch tokens of a Vision Transformer, for any grid.

    Heo et al. (ECCV 2024): half of the feature pairs turn with the patch's row, the
    other half with its column, each by ``position * base^(-4j/head_dim)``. With the
    default ``axis_order="hw"`` (EVA-02, timm's ``RotaryEmbeddingCat`` with
    ``grid_indexing="ij"``) the row turns the first ``head_dim / 4`` pairs; Heo et al.'s
    code and torchtune put the column first (``axis_order="wh"``). A score depends only
    on the 2D offset ``(dy, dx)`` between two patches. The first ``prefix_tokens`` tokens (CLS,
    registers) are left unrotated, which is the same as rotating them at position
    ``(0, 0)``. With ``ref_grid`` the positions are scaled by ``ref_grid / grid`` on each
    axis (timm's ``ref_feat_shape``), so a grid of another resolution spans the trained
    range. The angles are computed in float64; the result has ``x``'s dtype.

    Args:
        x: ``(batch, heads, prefix_tokens + height * width, head_dim)`` (any
            ``(..., seq, head_dim)``), ``head_dim`` a multiple of 4.
        grid: ``(height, width)`` of the patches, row-major after the prefix.
        prefix_tokens: leading tokens left unrotated; default 0.
        ref_grid: ``None`` (default) or the trained ``(height, width)``.
        base: the wavelength base; default 10000.0 (timm, EVA-02; Heo et al.'s code uses 100.0).
        offset: added to each patch index before scaling; default 0.0 (1.0 is torchtune's).
        axis_order: ``"hw"`` (default: EVA-02, timm's ``RotaryEmbeddingCat``) rows on the
            first pairs, ``"wh"`` columns first (Heo et al.'s code, torchtune, timm's ``"xy"``).
        layout: ``"interleaved"`` (default: timm, EVA-02, torchtune) pairs ``2j`` with
            ``2j + 1``; ``"half"`` pairs ``j`` with ``j + head_dim / 2`` (timm's
            ``rotate_half``).

    Returns:
        Tensor of the shape and dtype of ``x``.

    Example:
        >>> q = torch.randn(2, 6, 1 + 14 * 14, 64)          # a CLS token, then 14 x 14 patches
        >>> apply_vision_rope(q, (14, 14), prefix_tokens=1).shape
        torch.Size([2, 6, 197, 64])
        >>> q = torch.randn(2, 6, 1 + 24 * 24, 64)          # 384 px: rescaled onto the 14 x 14 range
        >>> apply_vision_rope(q, (24, 24), prefix_tokens=1, ref_grid=(14, 14)).shape
        torch.Size([2, 6, 577, 64])

    References:
        Heo et al., "Rotary Position Embedding for Vision Transformer", ECCV 2024;
        Fang et al., "EVA-02: A Visual Representation for Neon Genesis", 2023.
    """
    what = "apply_vision_rope"
    _check_rank("x", x, what=what)
    head_dim = check_vision_head_dim(x.shape[-1], name="x.shape[-1]", what=what)
    grid = check_grid("grid", grid, what=what)
    prefix_tokens = check_prefix_tokens(prefix_tokens, what=what)
    layout = check_rope_layout(layout, what=what)
    check_vision_tokens(x.shape, grid, prefix_tokens, name="x", what=what)
    cos, sin = _axial_cos_sin(grid, head_dim, base, ref_grid, offset, axis_order, x.device,
                              what=what)
    return _with_prefix(x, prefix_tokens, lambda t: _rotate(t, cos, sin, layout))


def _mixed_cos_sin(freqs: torch.Tensor, grid, ref_grid, offset: float, device):
    """float32 cos and sin of ``column * fx + row * fy``: ``(heads, height * width, n)``."""
    rows, cols = numpy_vision.patch_positions(grid, ref_grid=ref_grid, offset=offset)
    with torch.autocast(device_type=device.type, enabled=False):
        f = freqs.to(device=device, dtype=torch.float32)
        r, c = (torch.tensor(a, device=device) for a in (rows, cols))
        angles = c[:, None] * f[0].unsqueeze(-2) + r[:, None] * f[1].unsqueeze(-2)
        return torch.cos(angles), torch.sin(angles)


def apply_mixed_rope(x: torch.Tensor, grid, freqs, *, prefix_tokens: int = 0, ref_grid=None,
                     offset: float = 0.0, layout: str = "interleaved") -> torch.Tensor:
    """RoPE-Mixed: pair ``j`` of head ``h`` turns by ``column * fx[h, j] + row * fy[h, j]``.

    Heo et al. (ECCV 2024): each head has a 2D frequency vector per pair, so its
    waves can run along any direction of the image (axial RoPE is the case where each
    vector lies on an axis, ``posenc.vision.axial_as_mixed``). Scores still depend only
    on the 2D offset between patches. Prefix tokens, ``ref_grid`` and ``offset`` are as
    in :func:`apply_vision_rope`. The angles are float32 with autocast off; gradients
    reach ``freqs``.

    Args:
        x: ``(batch, heads, prefix_tokens + height * width, head_dim)``.
        grid: ``(height, width)`` of the patches.
        freqs: one layer's frequencies ``(2, heads, head_dim // 2)``, x's then y's
            (``MixedRotaryEmbedding.freqs[:, layer]``, timm's ``freqs[:, layer]``).
        prefix_tokens: leading tokens left unrotated; default 0.
        ref_grid: ``None`` (default) or the trained ``(height, width)``.
        offset: added to each patch index before scaling; default 0.0.
        layout: ``"interleaved"`` (default, as Heo et al. and timm) or ``"half"``.

    Returns:
        Tensor of the shape and dtype of ``x``.

    Example:
        >>> from posenc.vision import mixed_frequencies
        >>> freqs = torch.as_tensor(mixed_frequencies(32, 4, seed=0))[:, 0]
        >>> apply_mixed_rope(torch.randn(2, 4, 7 * 9, 32), (7, 9), freqs).shape
        torch.Size([2, 4, 63, 32])

    References:
        Heo et al., "Rotary Position Embedding for Vision Transformer", ECCV 2024.
    """
    what = "apply_mixed_rope"
    _check_rank("x", x, what=what)
    head_dim = check_vision_head_dim(x.shape[-1], name="x.shape[-1]", what=what)
    freqs = freqs if torch.is_tensor(freqs) else torch.as_tensor(freqs)
    check_freqs(freqs.shape, head_dim, what=what)
    check_mixed_heads("x", x.shape, freqs.shape[1], what=what)
    grid = check_grid("grid", grid, what=what)
    ref_grid = check_grid("ref_grid", ref_grid, what=what, required=False)
    offset = check_offset(offset, what=what)
    prefix_tokens = check_prefix_tokens(prefix_tokens, what=what)
    layout = check_rope_layout(layout, what=what)
    check_vision_tokens(x.shape, grid, prefix_tokens, name="x", what=what)
    cos, sin = _mixed_cos_sin(freqs, grid, ref_grid, offset, x.device)
    return _with_prefix(x, prefix_tokens, lambda t: _rotate(t, cos, sin, layout))


class VisionRotaryEmbedding(nn.Module):
    """Axial 2D RoPE for a Vision Transformer at any resolution: rotates ``q`` and ``k``.

    :func:`apply_vision_rope` as a module: the grid is given per call (or once, to the
    constructor), nothing is tabulated for a fixed size, the prefix tokens are left
    unrotated and ``ref_grid`` rescales a new grid onto the trained one (EVA-02). No
    weights.

    Args:
        head_dim: features per head, a multiple of 4.
        grid: default ``(height, width)`` of the patches, or ``None`` (default): then
            every call passes ``grid``.
        ref_grid: ``None`` (default) or the trained ``(height, width)`` (timm's
            ``ref_feat_shape``).
        prefix_tokens: leading tokens (CLS, registers) left unrotated; default 0.
        base: the wavelength base; default 10000.0.
        offset: added to each patch index; default 0.0.
        axis_order: ``"hw"`` (default, rows first) or ``"wh"`` (columns first).
        layout: ``"interleaved"`` (default) or ``"half"``.

    Call arguments:
        q: ``(batch, heads, prefix_tokens + height * width, head_dim)``.
        k: the keys, of the same layout.
        grid: this call's ``(height, width)``; default the constructor's.

    Returns:
        ``(q_rot, k_rot)`` of the shapes and dtypes of ``q`` and ``k``.

    Example:
        >>> rope = VisionRotaryEmbedding(64, prefix_tokens=1, ref_grid=(14, 14))
        >>> q = k = torch.randn(2, 6, 1 + 16 * 20, 64)   # a 256 x 320 image, 16 px patches
        >>> rope(q, k, grid=(16, 20))[0].shape
        torch.Size([2, 6, 321, 64])

    References:
        Heo et al., "Rotary Position Embedding for Vision Transformer", ECCV 2024;
        Fang et al., "EVA-02: A Visual Representation for Neon Genesis", 2023.
    """

    def __init__(self, head_dim: int, *, grid=None, ref_grid=None, prefix_tokens: int = 0,
                 base: float = 10000.0, offset: float = 0.0, axis_order: str = "hw",
                 layout: str = "interleaved"):
        super().__init__()
        what = "VisionRotaryEmbedding"
        self.head_dim = check_vision_head_dim(head_dim, what=what)
        self.grid = check_grid("grid", grid, what=what, required=False)
        self.ref_grid = check_grid("ref_grid", ref_grid, what=what, required=False)
        self.prefix_tokens = check_prefix_tokens(prefix_tokens, what=what)
        self.base = check_base(base, what=what)
        self.offset = check_offset(offset, what=what)
        self.axis_order = check_axis_order(axis_order, what=what)
        self.layout = check_rope_layout(layout, what=what)

    def extra_repr(self) -> str:
        return (f"head_dim={self.head_dim}, grid={self.grid}, ref_grid={self.ref_grid}, "
                f"prefix_tokens={self.prefix_tokens}, base={self.base}, offset={self.offset}, "
                f"axis_order={self.axis_order!r}, layout={self.layout!r}")

    def forward(self, q: torch.Tensor, k: torch.Tensor, grid=None):
        what = type(self).__name__
        grid = check_grid("grid", self.grid if grid is None else grid, what=what)
        for name, t in (("q", q), ("k", k)):
            _check_rank(name, t, what=what)
            check_vision_width(name, t.shape, self.head_dim, what=what)
            check_vision_tokens(t.shape, grid, self.prefix_tokens, name=name, what=what)
        cos, sin = _axial_cos_sin(grid, self.head_dim, self.base, self.ref_grid, self.offset,
                                  self.axis_order, q.device, what=what)
        return tuple(_with_prefix(t, self.prefix_tokens,
                                  lambda u: _rotate(u, cos, sin, self.layout)) for t in (q, k))


class MixedRotaryEmbedding(nn.Module):
    """RoPE-Mixed (Heo et al., ECCV 2024): learned 2D frequencies per head and per layer.

    Holds ``freqs`` ``(2, depth, num_heads, head_dim // 2)`` (timm's
    ``RotaryEmbeddingMixed.freqs`` layout), initialised as in the paper
    (:func:`posenc.vision.mixed_frequencies`: a random direction per head, the two
    halves of the pairs perpendicular); layer ``layer_index`` rotates pair ``j`` of head
    ``h`` by ``column * fx + row * fy`` (:func:`apply_mixed_rope`). Trainable: the
    frequencies learn which directions each head attends along. The grid is given per
    call; prefix tokens are left unrotated.

    Args:
        head_dim: features per head, a multiple of 4.
        num_heads: heads per layer.
        depth: layers, each with its own frequencies; default 1 (one per attention layer).
        grid: default ``(height, width)``, or ``None`` (default): every call passes it.
        ref_grid: ``None`` (default) or the trained ``(height, width)``.
        prefix_tokens: leading tokens left unrotated; default 0.
        base: the initial magnitudes' base; default 10.0 (the paper's).
        offset: added to each patch index; default 0.0.
        rotate: random initial directions (default), or the axes (axial RoPE).
        seed: the NumPy seed of the initial directions; ``None`` draws fresh ones. The
            same seed gives the same weights in both faces.
        layout: ``"interleaved"`` (default) or ``"half"``.

    Call arguments:
        q: ``(batch, num_heads, prefix_tokens + height * width, head_dim)`` (the heads
            axis may be absent when ``num_heads == 1``).
        k: the keys, of the same layout.
        grid: this call's ``(height, width)``; default the constructor's.
        layer_index: which layer's frequencies, ``0 .. depth - 1``; default 0.

    Returns:
        ``(q_rot, k_rot)`` of the shapes and dtypes of ``q`` and ``k``.

    Example:
        >>> rope = MixedRotaryEmbedding(32, 4, depth=12, prefix_tokens=1, seed=0)
        >>> tuple(rope.freqs.shape)
        (2, 12, 4, 16)
        >>> q = k = torch.randn(2, 4, 1 + 7 * 9, 32)
        >>> rope(q, k, grid=(7, 9), layer_index=3)[0].shape
        torch.Size([2, 4, 64, 32])

    References:
        Heo et al., "Rotary Position Embedding for Vision Transformer", ECCV 2024.
    """

    def __init__(self, head_dim: int, num_heads: int, *, depth: int = 1, grid=None,
                 ref_grid=None, prefix_tokens: int = 0, base: float = 10.0,
                 offset: float = 0.0, rotate: bool = True, seed: int | None = None,
                 layout: str = "interleaved"):
        super().__init__()
        what = "MixedRotaryEmbedding"
        self.head_dim = check_vision_head_dim(head_dim, what=what)
        self.num_heads = check_positive_int("num_heads", num_heads, what=what)
        self.depth = check_positive_int("depth", depth, what=what)
        self.grid = check_grid("grid", grid, what=what, required=False)
        self.ref_grid = check_grid("ref_grid", ref_grid, what=what, required=False)
        self.prefix_tokens = check_prefix_tokens(prefix_tokens, what=what)
        self.base = check_base(base, what=what)
        self.offset = check_offset(offset, what=what)
        self.rotate = bool(rotate)
        self.seed = seed
        self.layout = check_rope_layout(layout, what=what)
        self.freqs = nn.Parameter(torch.from_numpy(numpy_vision.mixed_frequencies(
            self.head_dim, self.num_heads, depth=self.depth, base=self.base, rotate=rotate,
            seed=seed)))

    def extra_repr(self) -> str:
        return (f"head_dim={self.head_dim}, num_heads={self.num_heads}, depth={self.depth}, "
                f"grid={self.grid}, prefix_tokens={self.prefix_tokens}, layout={self.layout!r}")

    def forward(self, q: torch.Tensor, k: torch.Tensor, grid=None, layer_index: int = 0):
        what = type(self).__name__
        grid = check_grid("grid", self.grid if grid is None else grid, what=what)
        layer_index = check_layer_index(layer_index, self.depth, what=what)
        for name, t in (("q", q), ("k", k)):
            _check_rank(name, t, what=what)
            check_vision_width(name, t.shape, self.head_dim, what=what)
            check_mixed_heads(name, t.shape, self.num_heads, what=what)
            check_vision_tokens(t.shape, grid, self.prefix_tokens, name=name, what=what)
        cos, sin = _mixed_cos_sin(self.freqs[:, layer_index], grid, self.ref_grid, self.offset,
                                  q.device)
        return tuple(_with_prefix(t, self.prefix_tokens,
                                  lambda u: _rotate(u, cos, sin, self.layout)) for t in (q, k))
