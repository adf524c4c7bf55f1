"""Multimodal RoPE (PyTorch face): RoPE whose pairs read a token's temporal, height or width position.

:func:`apply_mrope` rotates ``x`` as :func:`posenc.torch.rotary.apply_rope`
does, with the angles and the rotation of that module: the angles of the
three positions are computed once each (float32, autocast off), then pair
``i`` keeps the angle of its axis (:func:`posenc.mrope.mrope_axes`). The
positions of a mixed sequence come from :func:`posenc.mrope.mrope_positions`;
the Keras face mirrors this module name for name.
"""

from __future__ import annotations

import torch

from posenc import mrope as numpy_mrope
from posenc.rotary import check_rope_layout
from posenc.torch._util import as_positions
from posenc.torch.rotary import _angles, _batched, _check_x, _inv_freq, _rotate

__all__ = ["apply_mrope"]


def _per_pair(cos3: torch.Tensor, sin3: torch.Tensor, axes) -> tuple[torch.Tensor, torch.Tensor]:
    """``(3, ..., n)`` angles of the three axes -> ``(..., n)``, pair ``i`` from ``axes[i]``."""
    axes = torch.as_tensor(axes, device=cos3.device)
    height, width = axes == 1, axes == 2

    def pick(a):
        return torch.where(width, a[2], torch.where(height, a[1], a[0]))

    return pick(cos3), pick(sin3)


def apply_mrope(x: torch.Tensor, positions, inv_freq, *, sections, arrangement: str = "chunked",
                layout: str = "half") -> torch.Tensor:
    """Multimodal RoPE: pair ``i`` of ``x`` turns by ``positions[axis(i)] * inv_freq[i]``.

    Each token has three positions, temporal, height and width (Qwen2-VL's
    M-RoPE); ``sections = (s_t, s_h, s_w)`` pairs read each of them, in the
    ``arrangement`` of :func:`posenc.mrope.mrope_axes`: ``"chunked"``
    (Qwen2-VL, Qwen2.5-VL: contiguous blocks) or ``"interleaved"`` (Qwen3-VL:
    ``t, h, w`` at stride 3). Text tokens, with ``t = h = w``, get exactly
    :func:`apply_rope`. The angles are float32 with autocast off; the result
    has ``x``'s dtype; features past ``2 * len(inv_freq)`` pass unchanged.

    Args:
        x: tensor ``(batch, ..., seq, head_dim)``, e.g. ``(batch, heads, seq, head_dim)``.
        positions: int or float ``(3, batch, seq)`` (``batch`` may be 1), the
            temporal, height and width positions
            (:func:`posenc.mrope.mrope_positions`).
        inv_freq: ``(n,)`` frequencies with ``2n <= head_dim`` (:func:`rope_frequencies`).
        sections: three non-negative ints summing to ``n``: the pairs of the
            temporal, height and width axes (Hugging Face's ``mrope_section``,
            e.g. ``(16, 24, 24)`` for Qwen2-VL's 128-wide heads).
        arrangement: ``"chunked"`` (default) or ``"interleaved"`` (stride 3:
            at most ``(n + 1) // 3`` height and ``n // 3`` width pairs).
        layout: ``"half"`` (default; Qwen's, Hugging Face's ``rotate_half``) or
            ``"interleaved"``: how features pair up, as in :func:`apply_rope`.

    Returns:
        Tensor of the shape and dtype of ``x``.

    Example:
        >>> from posenc.torch import rope_frequencies, apply_rope
        >>> inv_freq, _ = rope_frequencies(16)
        >>> q = torch.randn(2, 4, 5, 16)
        >>> t = torch.arange(5).expand(3, 2, 5)                 # text: t = h = w
        >>> torch.equal(apply_mrope(q, t, inv_freq, sections=(2, 3, 3)),
        ...             apply_rope(q, t[0], inv_freq))
        True

    References:
        Wang et al., "Qwen2-VL: Enhancing Vision-Language Model's Perception of
        the World at Any Resolution", arXiv 2409.12191, 2024, section 2.1.
    """
    what = "apply_mrope"
    layout = check_rope_layout(layout, what=what)
    inv_freq = _inv_freq(inv_freq, what)
    axes = numpy_mrope.mrope_setup(sections, inv_freq.shape[0], arrangement, what=what)
    _check_x(x, inv_freq.shape[0], name="x", what=what)
    positions = as_positions(positions, what=what)
    numpy_mrope.check_mrope_positions(positions.shape, x.shape, what=what)
    cos, sin = _per_pair(*_angles(positions, inv_freq.to(x.device), 1.0), axes)
    cos, sin = _batched(cos, sin, positions[0], x)
    return _rotate(x, cos, sin, layout)
