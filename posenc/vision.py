"""Rotary embeddings for vision (NumPy): patch positions, axial angles, mixed frequencies.

A Vision Transformer cuts an image into a ``height x width`` grid of patches, read
row-major, often after a few *prefix tokens* (a CLS token, register tokens). Two rotary
schemes rotate the patches' queries and keys by their 2D position:

* **Axial 2D RoPE** (Heo et al., ECCV 2024; EVA-02; timm's ``RotaryEmbeddingCat``): the
  head's ``head_dim / 2`` feature pairs split in two; the first ``head_dim / 4`` pairs
  turn by ``row * inv_freq[j]``, the next ``head_dim / 4`` by ``column * inv_freq[j]``
  (``axis_order="hw"``, as EVA-02 and timm's ``RotaryEmbeddingCat`` with its default
  ``grid_indexing="ij"``; ``"wh"`` puts the column first, as Heo et al.'s code, torchtune,
  and timm's ``"xy"`` indexing do: ``RotaryEmbeddingMixed``'s default and timm's
  Perception Encoder configs), with
  ``inv_freq = rope_frequencies(head_dim // 2, base=base)``. A score then depends only
  on the 2D offset ``(dy, dx)`` between two patches.
* **RoPE-Mixed** (Heo et al.): each head (and each layer) learns, for every pair ``j``,
  a 2D frequency vector ``(fx[j], fy[j])``, and pair ``j`` turns by
  ``column * fx[j] + row * fy[j]``: the wave runs along any direction, so a head can
  attend along a diagonal. :func:`mixed_frequencies` is the paper's initialisation: for
  each head a random angle ``a``; the first ``head_dim / 4`` pairs point along ``a``,
  the others along ``a + pi/2``, with the magnitudes ``base^(-4j/head_dim)``.

Positions are given per call (any ``height x width``, no fixed table). With
``ref_grid=(H0, W0)`` (timm's ``ref_feat_shape``, EVA-02's fine-tuning rule) the
positions are scaled by ``H0 / height`` and ``W0 / width``, so that a grid of another
resolution spans the range the model was trained on. ``offset`` is added before the
scaling (torchtune counts patches from 1; so do most of timm's Perception Encoder
configs, ``rope_grid_offset=1``, all but the ``*_gigantic_*`` ones, which count from 0).

Prefix tokens are left unrotated. That is the same as rotating them at position
``(0, 0)`` (the rotation by angle 0 is the identity): with ``offset=0`` a CLS token then
shares the angles of the first patch, with ``offset=1`` (torchtune) it sits one step up
and to the left of the grid. Prefix tokens come first; torchtune's default
(``append_cls_token=True``) puts its CLS token *last*, a layout ``prefix_tokens`` does not
express (rotate the patches alone and append the token), so ``posenc`` matches torchtune's
``append_cls_token=False``. Either way the CLS token's positional preference is anchored
at position ``(0, 0)``.

Layouts, within the rotated head: ``"interleaved"`` (default: timm, EVA-02, torchtune,
Heo et al.'s complex form) pairs feature ``2j`` with ``2j + 1``; ``"half"`` pairs feature
``j`` with ``j + head_dim / 2`` over the whole head (timm's ``rotate_half=True``).
``posenc.torch.apply_rope_2d`` with ``layout="half"`` is another arrangement
(each axis' quarter-pairs within its own half of the head); with ``"interleaved"`` the
two agree.

Every table here is computed in float64 and returned as float32; the faces only
convert them (axial) or multiply them by their learned frequencies (mixed).
"""

from __future__ import annotations

import functools
import math

import numpy as np

from posenc._checks import (
    _error,
    check_base,
    check_bool,
    check_choice,
    check_float,
    check_hw,
    check_int,
    check_positive_int,
)
from posenc.rotary import ROPE_LAYOUTS, check_head_dim, check_rope_layout

__all__ = [
    "AXIS_ORDERS",
    "VISION_LAYOUTS",
    "patch_positions",
    "axial_frequencies",
    "axial_angles",
    "axial_cos_sin",
    "mixed_frequencies",
    "axial_as_mixed",
]

#: ``"hw"``: rows on the first quarter-pairs, then columns (timm ``grid_indexing="ij"``,
#: EVA-02); ``"wh"``: columns first (Heo et al.'s code, torchtune, timm ``"xy"``).
AXIS_ORDERS = ("hw", "wh")
#: The pairings of a head's features (see the module docstring).
VISION_LAYOUTS = ROPE_LAYOUTS


# --------------------------------------------------------------------------- the rules

def check_vision_head_dim(head_dim, *, name: str = "head_dim", what: str = "") -> int:
    """Two axes, each with pairs of features: a multiple of 4."""
    return check_head_dim(head_dim, name=name, multiple=4, what=what)


def check_grid(name: str, grid, *, what: str = "", required: bool = True):
    """``(height, width)`` of the patch grid, or ``None`` where it may come later."""
    if grid is None:
        if required:
            raise _error(what, f"{name} is None: the patch grid is needed to place the tokens",
                         f"pass {name}=(height, width), e.g. (image_size // patch_size, "
                         "image_size // patch_size), to the call or the constructor")
        return None
    return check_hw(name, grid, what=what)


def check_prefix_tokens(prefix_tokens, *, what: str = "") -> int:
    return check_int("prefix_tokens", prefix_tokens, minimum=0, what=what,
                     fix="pass the number of CLS and register tokens before the patches "
                         "(0 when there are none)")


def check_axis_order(axis_order, *, what: str = "") -> str:
    return check_choice("axis_order", axis_order, AXIS_ORDERS, what=what,
                        fix='"hw" turns the first pairs with the row (timm, EVA-02), '
                            '"wh" with the column (Heo et al.\'s code, torchtune)')


def check_offset(offset, *, what: str = "") -> float:
    return check_float("offset", offset, what=what,
                       fix="pass a number added to every patch index (0.0, or 1.0 as torchtune)")


def check_vision_tokens(shape, grid, prefix_tokens: int, *, name: str = "x",
                        what: str = "") -> None:
    """``x`` ``(..., seq, head_dim)`` holds ``prefix_tokens + height * width`` tokens (a
    ``None`` size passes)."""
    shape = tuple(shape)
    seq = shape[-2] if len(shape) >= 2 else None
    height, width = grid
    want = prefix_tokens + height * width
    if seq is not None and seq != want:
        fix = f"pass {want} tokens, or the grid of this image"
        if seq > prefix_tokens and prefix_tokens == 0 and math.isqrt(seq - 1) ** 2 == seq - 1:
            fix += (f" (with a CLS token before {seq - 1} patches, "
                    f"prefix_tokens=1 and grid=({math.isqrt(seq - 1)}, {math.isqrt(seq - 1)}))")
        elif seq > prefix_tokens and math.isqrt(seq - prefix_tokens) ** 2 == seq - prefix_tokens:
            side = math.isqrt(seq - prefix_tokens)
            fix += f" (grid=({side}, {side}) for {seq - prefix_tokens} square patches)"
        raise _error(what, f"{name} must hold prefix_tokens + height * width = {prefix_tokens} + "
                           f"{height} * {width} = {want} tokens, got {seq} "
                           f"({name}.shape={shape}) for grid=({height}, {width})", fix)


def check_vision_width(name: str, shape, head_dim: int, *, what: str = "") -> None:
    shape = tuple(shape)
    if len(shape) >= 2 and shape[-1] is not None and shape[-1] != head_dim:
        raise _error(what, f"{name} must be (..., seq, head_dim) with head_dim={head_dim}, got "
                           f"{name}.shape={shape}",
                     f"build the layer with head_dim={shape[-1]}, or split the heads first "
                     "(batch, heads, seq, head_dim)")


def check_mixed_heads(name: str, shape, num_heads: int, *, what: str = "") -> None:
    """Per-head frequencies need ``x`` ``(..., heads, seq, head_dim)`` with ``num_heads``
    heads (any rank when ``num_heads == 1``)."""
    shape = tuple(shape)
    if num_heads == 1:
        return
    heads = shape[-3] if len(shape) >= 3 else None
    if len(shape) < 3 or (heads is not None and heads != num_heads):
        raise _error(what, f"{name} must be (batch, heads, seq, head_dim) with "
                           f"heads=num_heads={num_heads}, got {name}.shape={shape}",
                     "split the heads first (batch, heads, seq, head_dim), or build the "
                     f"layer with num_heads={heads if heads else 1}")


def check_layer_index(layer_index, depth: int, *, what: str = "") -> int:
    """Which layer's frequencies: ``0 .. depth - 1``."""
    layer_index = check_int("layer_index", layer_index, minimum=0, what=what,
                            fix=f"pass a layer 0 .. {depth - 1}")
    if layer_index >= depth:
        raise _error(what, f"layer_index must be below depth={depth}, got "
                           f"layer_index={layer_index}",
                     f"pass a layer 0 .. {depth - 1}, or build it with depth={layer_index + 1}")
    return layer_index


def check_freqs(shape, head_dim: int | None = None, *, what: str = "") -> None:
    """One layer's frequencies ``(2, heads, head_dim // 2)``: x's and y's."""
    shape = tuple(shape)
    if len(shape) != 3 or shape[0] != 2 or (head_dim is not None and shape[-1] != head_dim // 2):
        want = "head_dim // 2" if head_dim is None else f"{head_dim // 2}"
        raise _error(what, f"freqs must be (2, heads, {want}): the x and the y frequency of "
                           f"each pair of each head, got freqs.shape={shape}",
                     "pass one layer's frequencies, e.g. mixed_frequencies(head_dim, "
                     "num_heads)[:, 0] or layer.freqs[:, layer_index]")


# --------------------------------------------------------------------------- positions

@functools.lru_cache(maxsize=64)
def _positions64(grid: tuple[int, int], ref_grid, offset: float):
    height, width = grid
    rows = np.arange(height, dtype=np.float64) + offset
    cols = np.arange(width, dtype=np.float64) + offset
    if ref_grid is not None:
        rows, cols = rows * (ref_grid[0] / height), cols * (ref_grid[1] / width)
    rows, cols = np.repeat(rows, width), np.tile(cols, height)
    return rows, cols


def patch_positions(grid, *, ref_grid=None, offset: float = 0.0):
    """The row and the column of each patch of a row-major grid, as RoPE reads them.

    ``(index + offset)``, times ``ref_grid / grid`` on each axis when ``ref_grid`` is
    given (EVA-02's rescaling: the new grid spans the reference grid's range).

    Args:
        grid: ``(height, width)`` of the patches.
        ref_grid: ``None`` (default) or the ``(height, width)`` the model was trained on.
        offset: added to every index before scaling; default 0.0.

    Returns:
        ``(rows, cols)``: two float32 arrays ``(height * width,)``.

    Example:
        >>> rows, cols = patch_positions((2, 3), ref_grid=(4, 3))
        >>> rows, cols
        (array([0., 0., 0., 2., 2., 2.], dtype=float32), array([0., 1., 2., 0., 1., 2.], dtype=float32))
    """
    what = "patch_positions"
    grid = check_grid("grid", grid, what=what)
    ref_grid = check_grid("ref_grid", ref_grid, what=what, required=False)
    offset = check_offset(offset, what=what)
    rows, cols = _positions64(grid, ref_grid, offset)
    return rows.astype(np.float32), cols.astype(np.float32)


def axial_frequencies(head_dim: int, *, base: float = 10000.0) -> np.ndarray:
    """Each axis' ``head_dim // 4`` frequencies, ``base^(-4j/head_dim)``: RoPE's frequencies
    for ``head_dim // 2`` features (timm's ``freq_bands(head_dim // 4, temperature=base,
    step=1)``).

    Example:
        >>> axial_frequencies(8, base=100.0)
        array([1. , 0.1], dtype=float32)
    """
    what = "axial_frequencies"
    head_dim = check_vision_head_dim(head_dim, what=what)
    base = check_base(base, what=what)
    return _axial64(head_dim, base).astype(np.float32)


def _axial64(head_dim: int, base: float) -> np.ndarray:
    return 1.0 / base ** (np.arange(0, head_dim // 4, dtype=np.float64) / (head_dim // 4))


@functools.lru_cache(maxsize=64)
def _angles64(grid, head_dim: int, base: float, ref_grid, offset: float, axis_order: str):
    rows, cols = _positions64(grid, ref_grid, offset)
    inv_freq = _axial64(head_dim, base)
    first, second = (rows, cols) if axis_order == "hw" else (cols, rows)
    out = np.concatenate([first[:, None] * inv_freq, second[:, None] * inv_freq], axis=-1)
    return out


def _checked_axial(grid, head_dim, base, ref_grid, offset, axis_order, *, what: str):
    return (check_grid("grid", grid, what=what), check_vision_head_dim(head_dim, what=what),
            check_base(base, what=what),
            check_grid("ref_grid", ref_grid, what=what, required=False),
            check_offset(offset, what=what), check_axis_order(axis_order, what=what))


def axial_angles(grid, head_dim: int, *, base: float = 10000.0, ref_grid=None,
                 offset: float = 0.0, axis_order: str = "hw") -> np.ndarray:
    """The angle of each pair of each patch, axial 2D RoPE: ``(height * width, head_dim // 2)``.

    Pair ``j < head_dim / 4`` turns by ``row * inv_freq[j]``, pair ``head_dim / 4 + j`` by
    ``column * inv_freq[j]`` (``axis_order="hw"``; ``"wh"`` swaps them), with the
    positions of :func:`patch_positions` and the frequencies of :func:`axial_frequencies`.

    Returns:
        float32 array ``(height * width, head_dim // 2)``, computed in float64.

    Example:
        >>> axial_angles((2, 2), 8, base=100.0)
        array([[0. , 0. , 0. , 0. ],
               [0. , 0. , 1. , 0.1],
               [1. , 0.1, 0. , 0. ],
               [1. , 0.1, 1. , 0.1]], dtype=float32)
    """
    args = _checked_axial(grid, head_dim, base, ref_grid, offset, axis_order,
                          what="axial_angles")
    return _angles64(*args).astype(np.float32)


@functools.lru_cache(maxsize=64)
def _cos_sin(grid, head_dim, base, ref_grid, offset, axis_order):
    angles = _angles64(grid, head_dim, base, ref_grid, offset, axis_order)
    cos, sin = np.cos(angles).astype(np.float32), np.sin(angles).astype(np.float32)
    return cos, sin


def axial_cos_sin(grid, head_dim: int, *, base: float = 10000.0, ref_grid=None,
                  offset: float = 0.0, axis_order: str = "hw", what: str = "axial_cos_sin"):
    """``cos`` and ``sin`` of :func:`axial_angles`, each float32 ``(height * width,
    head_dim // 2)``, computed in float64 (cached per grid; the caller gets copies)."""
    cos, sin = _cos_sin(*_checked_axial(grid, head_dim, base, ref_grid, offset, axis_order,
                                        what=what))
    return cos.copy(), sin.copy()


# --------------------------------------------------------------------------- RoPE-Mixed

def mixed_frequencies(head_dim: int, num_heads: int, *, depth: int = 1, base: float = 10.0,
                      rotate: bool = True, seed: int | None = None) -> np.ndarray:
    """RoPE-Mixed's initial frequencies (Heo et al. 2024, as in their code and timm): ``(2, depth,
    num_heads, head_dim // 2)``, the x and the y frequency of each pair.

    For each layer and head an angle ``a`` is drawn uniformly in ``[0, 2 pi)`` (``0`` with
    ``rotate=False``); pair ``j < head_dim / 4`` gets ``m_j (cos a, sin a)`` and pair
    ``head_dim / 4 + j`` gets ``m_j (cos(a + pi/2), sin(a + pi/2))``, with
    ``m_j = base^(-4j/head_dim)``. The two halves point along perpendicular directions;
    with ``rotate=False`` they are the x and the y axes (axial RoPE, columns first).

    Args:
        head_dim: features per head, a multiple of 4.
        num_heads: heads per layer.
        depth: layers, each with its own frequencies; default 1.
        base: the magnitudes' base; default 10.0 (the paper's, and timm's).
        rotate: draw the angles (default) or start on the axes.
        seed: the NumPy seed of the angles; ``None`` draws fresh ones.

    Returns:
        float32 array ``(2, depth, num_heads, head_dim // 2)``.

    Example:
        >>> mixed_frequencies(8, 1, rotate=False).round(3)[:, 0, 0]
        array([[1.   , 0.316, 0.   , 0.   ],
               [0.   , 0.   , 1.   , 0.316]], dtype=float32)
    """
    what = "mixed_frequencies"
    head_dim = check_vision_head_dim(head_dim, what=what)
    num_heads = check_positive_int("num_heads", num_heads, what=what)
    depth = check_positive_int("depth", depth, what=what)
    base = check_base(base, what=what)
    rotate = check_bool("rotate", rotate, what=what)
    if seed is not None:
        seed = check_int("seed", seed, minimum=0, what=what)
    magnitude = _axial64(head_dim, base)
    if rotate:
        angle = np.random.default_rng(seed).uniform(0.0, 2 * np.pi, size=(depth, num_heads, 1))
    else:
        angle = np.zeros((depth, num_heads, 1))
    fx = np.concatenate([magnitude * np.cos(angle), magnitude * np.cos(angle + np.pi / 2)], -1)
    fy = np.concatenate([magnitude * np.sin(angle), magnitude * np.sin(angle + np.pi / 2)], -1)
    if not rotate:   # cos(pi/2) is 6e-17 in float64: the axes exactly
        fx[..., head_dim // 4:] = 0.0
        fy[..., :head_dim // 4] = 0.0
    return np.stack([fx, fy]).astype(np.float32)


def axial_as_mixed(head_dim: int, num_heads: int = 1, *, depth: int = 1,
                   base: float = 10000.0, axis_order: str = "hw") -> np.ndarray:
    """Axial 2D RoPE written as RoPE-Mixed frequencies ``(2, depth, num_heads, head_dim // 2)``:
    the pairs of the row get ``(0, inv_freq)``, those of the column ``(inv_freq, 0)``, so a
    mixed layer holding them rotates as the axial one (both are special cases of one formula).

    Example:
        >>> axial_as_mixed(8, base=100.0)[:, 0, 0]
        array([[0. , 0. , 1. , 0.1],
               [1. , 0.1, 0. , 0. ]], dtype=float32)
    """
    what = "axial_as_mixed"
    head_dim = check_vision_head_dim(head_dim, what=what)
    num_heads = check_positive_int("num_heads", num_heads, what=what)
    depth = check_positive_int("depth", depth, what=what)
    base = check_base(base, what=what)
    axis_order = check_axis_order(axis_order, what=what)
    inv_freq, zero = _axial64(head_dim, base), np.zeros(head_dim // 4)
    row, col = np.concatenate([inv_freq, zero]), np.concatenate([zero, inv_freq])
    if axis_order == "wh":
        row, col = col, row
    freqs = np.stack([col, row])[:, None, None, :]
    return np.broadcast_to(freqs, (2, depth, num_heads, head_dim // 2)).astype(np.float32)
