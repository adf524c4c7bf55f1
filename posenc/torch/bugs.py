"""Bugs that real positional-encoding code has shipped, in PyTorch: WRONG ON PURPOSE.

For teaching only (the debugging chapter): each function reproduces one mistake that
:data:`posenc.bugs.BUGS` describes, next to the posenc code it gets wrong. The Keras face
``posenc.keras.bugs`` has the same names. ``tests/test_bugs.py`` checks that posenc's tests
fail on every one of them (each named test runs on the wrong code as a strict xfail).
Never use them in a model.
"""

from __future__ import annotations

import torch

from posenc.sinusoidal import sinusoidal_inv_freq
from posenc.torch.bias import alibi_slopes
from posenc.torch.rotary import convert_rope_layout

__all__ = ["convert_rope_layout_one_head", "convert_qk_with_query_heads",
           "apply_rope_in_input_dtype", "clamped_encoding", "sinusoidal_swapped",
           "starve_position_table", "alibi_bias_key_only"]


def convert_rope_layout_one_head(weight, num_heads, *, to):
    """WRONG: permutes the whole projection as if it were one head (``num_heads`` ignored)."""
    return convert_rope_layout(weight, 1, to=to)


def convert_qk_with_query_heads(wq, wk, num_heads, num_kv_heads, *, to):
    """WRONG under grouped-query attention: converts the key projection with the number of
    query heads (``num_kv_heads`` ignored), so each key head is cut at the wrong rows.

    Returns the converted ``(wq, wk)``; right when ``num_kv_heads == num_heads``."""
    return (convert_rope_layout(wq, num_heads, to=to),
            convert_rope_layout(wk, num_heads, to=to))


def apply_rope_in_input_dtype(x, positions, inv_freq):
    """WRONG: half-layout RoPE whose positions and angles are in ``x``'s dtype."""
    inv_freq = torch.as_tensor(inv_freq, device=x.device)
    angles = torch.outer(positions.to(x.dtype), inv_freq.to(x.dtype))
    cos, sin = angles.cos(), angles.sin()
    n = inv_freq.shape[0]
    x1, x2 = x[..., :n], x[..., n:2 * n]
    return torch.cat((x1 * cos - x2 * sin, x2 * cos + x1 * sin, x[..., 2 * n:]), -1)


def clamped_encoding(encoding, positions):
    """WRONG: a learned table's rows read without a length check; positions past the end
    get the last row (what a clamping gather does)."""
    table = encoding.table
    return table[positions.clamp(max=table.shape[0] - 1)].float()


def sinusoidal_swapped(positions, dim, *, base=10000.0):
    """WRONG: the concatenated sinusoidal encoding with the cosines first."""
    inv_freq = torch.as_tensor(sinusoidal_inv_freq(dim, base), dtype=torch.float32)
    angles = torch.outer(positions.float(), inv_freq)
    return torch.cat((angles.cos(), angles.sin()), -1)


def starve_position_table(model):
    """WRONG: the model's learned table enters the model detached (no gradient reaches it)."""
    encoding = model.position_encoding
    original = encoding.encoding
    encoding.encoding = lambda positions: original(positions).detach()
    return model


def alibi_bias_key_only(num_heads, q_len, k_len):
    """WRONG in low precision: ALiBi's key-only form ``slope * j`` with the causal mask.

    The softmax of a row ignores the row's constant ``-slope * i``, so in exact arithmetic
    this gives ALiBi's attention; but the bias grows with the key's absolute position, and
    once it is added in bfloat16 (a bfloat16 model) its rounding swamps the scores."""
    slopes = alibi_slopes(num_heads)[:, None, None]
    keys = torch.arange(k_len, dtype=torch.float32)
    queries = torch.arange(k_len - q_len, k_len, dtype=torch.float32)[:, None]
    return torch.where(keys > queries, float("-inf"), slopes * keys)
