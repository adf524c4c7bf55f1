"""Sinusoidal encodings (PyTorch face): functions and the module that adds them."""

from __future__ import annotations

import functools
import math

import torch

from posenc._checks import (
    check_base,
    check_even_dim,
    check_layout,
    check_numeric_dtype,
    check_positive_int,
)
from posenc.sinusoidal import (
    check_coordinate_scale,
    check_coordinate_width,
    check_coordinates,
    grid_coordinates,
    sinusoidal_inv_freq,
)
from posenc.torch._util import (
    AdditiveEncoding,
    as_positions,
    dtype_of,
    is_compiling,
    result_dtype,
    wide_dtype,
)

__all__ = ["sinusoidal", "sinusoidal_2d", "SinusoidalEncoding", "coordinate_encoding"]


def sinusoidal(positions, dim: int, *, base: float = 10000.0,
               layout: str = "interleaved") -> torch.Tensor:
    """Sinusoidal positional encoding of Vaswani et al. (2017) for any positions.

    ``PE[p, 2i] = sin(p * w_i)`` and ``PE[p, 2i+1] = cos(p * w_i)`` with
    ``w_i = base ** (-2i / dim)``. Positions may be integers or floats of any
    shape; there is no maximum length. The angles are computed in float64
    with autocast off (on the CPU for Apple MPS, which has no float64), so the result stays accurate at
    positions near a million, then cast to the positions' dtype (float32 for
    integer positions).

    Args:
        positions: an int ``n`` (meaning ``0 .. n-1``) or a tensor of positions
            of any shape. Pass integer or float32 positions: float16 and
            bfloat16 cannot hold every integer above 2048 and 256.
        dim: even feature dimension.
        base: wavelength base. Default ``10000.0``.
        layout: ``"interleaved"`` (sin, cos, sin, cos, ...: the paper, d2l,
            keras-hub) or ``"concat"`` (all sines, then all cosines:
            TensorFlow's tutorial, x-transformers). Default ``"interleaved"``.

    Returns:
        Tensor of shape ``(*positions.shape, dim)``.

    Example:
        >>> sinusoidal(4, 8).shape
        torch.Size([4, 8])

    References:
        Vaswani et al., "Attention Is All You Need", NeurIPS 2017, section 3.5.
    """
    dim = check_even_dim(dim)
    layout = check_layout(layout, what="sinusoidal")
    base = check_base(base, what="sinusoidal")
    pos = as_positions(positions, what="sinusoidal")
    if pos.device.type == "mps":
        # MPS has no float64: compute on the CPU, where the angles are exact enough, then move.
        return sinusoidal(pos.cpu(), dim, base=base, layout=layout).to(pos.device)
    wide = wide_dtype(pos.device)
    if is_compiling():     # traced once into the graph: no cache needed
        inv_freq = torch.as_tensor(sinusoidal_inv_freq(dim, base), dtype=wide,
                                   device=pos.device)
    else:
        inv_freq = _inv_freq(dim, base, pos.device, wide)
    with torch.autocast(device_type=pos.device.type, enabled=False):
        angles = pos.to(wide)[..., None] * inv_freq
        sin, cos = angles.sin(), angles.cos()
    if layout == "interleaved":
        out = torch.stack((sin, cos), dim=-1).flatten(-2)
    else:
        out = torch.cat((sin, cos), dim=-1)
    return out.to(result_dtype(pos))


@functools.lru_cache(maxsize=32)
def _inv_freq(dim: int, base: float, device: torch.device, dtype: torch.dtype) -> torch.Tensor:
    """``sinusoidal_inv_freq`` as a tensor, made once per device (no copy per call)."""
    with torch.inference_mode(False):
        return torch.as_tensor(sinusoidal_inv_freq(dim, base), dtype=dtype, device=device)


def sinusoidal_2d(height: int, width: int, dim: int, *, base: float = 10000.0,
                  layout: str = "interleaved", trained_hw=None) -> torch.Tensor:
    """2D sinusoidal encoding of a row-major ``height x width`` grid of patches.

    The first ``dim/2`` channels encode the row with :func:`sinusoidal`, the
    last ``dim/2`` the column. Fixed 2D tables like this are used by MoCo v3
    and MAE; check a checkpoint's convention before loading it (MAE's released
    code puts the column first and uses the concatenated layout).

    With ``trained_hw = (h0, w0)`` the cells sit at fractional coordinates
    of an ``h0 x w0`` grid stretched to ``height x width``: cell ``(i, j)`` at
    ``((i + 0.5) * h0 / height - 0.5, (j + 0.5) * w0 / width - 0.5)``, the
    points where ``resize_table_2d`` (``align_corners=False``) samples a
    trained table. ``sinusoidal_2d(24, 24, dim, trained_hw=(14, 14))`` is what
    a model trained on a 14 x 14 grid sees when its sinusoidal table is
    stretched to 24 x 24 (see :func:`posenc.sinusoidal.grid_coordinates`).

    Args:
        height: number of rows (patches down).
        width: number of columns (patches across).
        dim: feature dimension, a multiple of 4.
        base: wavelength base. Default ``10000.0``.
        layout: ``"interleaved"`` or ``"concat"``, within each half.
        trained_hw: optional ``(h0, w0)``: place the cells on this grid,
            stretched. Default ``None``: the integer grid; ``(height, width)``
            gives the same table.

    Returns:
        float32 tensor of shape ``(height * width, dim)``.

    Example:
        >>> sinusoidal_2d(2, 3, 8).shape
        torch.Size([6, 8])
    """
    rows, cols = grid_coordinates(height, width, trained_hw)
    dim = check_even_dim(dim, multiple=4, what="sinusoidal_2d")
    return torch.cat(
        (sinusoidal(torch.as_tensor(rows), dim // 2, base=base, layout=layout),
         sinusoidal(torch.as_tensor(cols), dim // 2, base=base, layout=layout)),
        dim=-1,
    ).float()


class SinusoidalEncoding(AdditiveEncoding):
    """Adds the fixed sinusoidal encoding to token embeddings.

    ``forward(x)`` returns ``x + sinusoidal(positions, dim)``. The table for
    ``0 .. n-1`` is cached (not saved in the state dict) and grown when a
    longer sequence arrives, so there is no maximum length.

    Args:
        dim: even feature dimension; must equal ``x.shape[-1]``.
        base: wavelength base. Default ``10000.0``.
        layout: ``"interleaved"`` or ``"concat"``. Default ``"interleaved"``.

    Call arguments:
        x: ``(batch, seq, dim)`` (any leading shape) embeddings.
        positions: optional ``(seq,)`` or ``(batch, seq)`` positions (int or
            float); default ``0 .. seq-1``.

    Example:
        >>> enc = SinusoidalEncoding(16)
        >>> enc(torch.zeros(2, 5, 16)).shape
        torch.Size([2, 5, 16])
    """

    def __init__(self, dim: int, *, base: float = 10000.0, layout: str = "interleaved"):
        super().__init__()
        self.dim = check_even_dim(dim, what="SinusoidalEncoding")
        self.layout = check_layout(layout, what="SinusoidalEncoding")
        self.base = check_base(base, what="SinusoidalEncoding")
        self.register_buffer("_cache", torch.empty(0, self.dim), persistent=False)

    def extra_repr(self) -> str:
        return f"dim={self.dim}, base={self.base}, layout={self.layout!r}"

    def _table(self, n: int) -> torch.Tensor:
        """``sinusoidal(arange(n))`` from the cache (a view: do not modify it)."""
        n = check_positive_int("positions", n, what="SinusoidalEncoding",
                               fix="pass a sequence length of at least 1")
        stale = (self._cache.shape[0] < n
                 or self._cache.dtype != torch.float32           # after module.to(bfloat16)
                 or (self._cache.is_inference() and not torch.is_inference_mode_enabled()))
        if stale:
            with torch.inference_mode(False):
                self._cache = sinusoidal(torch.arange(n, device=self._cache.device), self.dim,
                                         base=self.base, layout=self.layout)
        return self._cache[:n]

    def encoding(self, positions) -> torch.Tensor:
        """The encoding alone for ``positions`` (an int n or a tensor).

        float32 for an int or integer positions; float positions keep their dtype.
        """
        if isinstance(positions, int) and not isinstance(positions, bool):
            return self._table(positions).clone()
        return self._encode(positions)

    def _encode(self, positions) -> torch.Tensor:
        """The cached table itself for an int (read-only), else :func:`sinusoidal`."""
        if isinstance(positions, int) and not isinstance(positions, bool):
            return self._table(positions)
        return sinusoidal(as_positions(positions, what="SinusoidalEncoding"), self.dim,
                          base=self.base, layout=self.layout)


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
