"""Tree positions (PyTorch face).

A node's position is its path from the root: :func:`hierarchical` gives each
level a block of the sinusoid, :class:`HierarchicalEncoding` sums one learned row
per level. The index map and the argument rules are in ``posenc/trees.py``.

The encodings are absolute: a module whose ``forward`` returns ``x + P``,
its ``encoding(...)`` ``P`` alone in float32. The Keras face
mirrors this module name for name.
"""

from __future__ import annotations

import torch
from torch import nn

from posenc._checks import check_embeddings, check_positive_int
from posenc.learned import TABLE_INIT_STD
from posenc.torch._util import AdditiveEncoding, as_indices, can_inspect, read_back
from posenc.torch.sinusoidal import sinusoidal
from posenc.trees import check_level_width, check_paths_depth, check_paths_values, level_rows

__all__ = [
    "hierarchical",
    "HierarchicalEncoding",
]


def _check_paths(paths, max_depth: int, *, what: str,
                 max_children: int | None = None) -> torch.Tensor:
    """``paths`` as int64 ``(..., max_depth)``; their values checked when the policy allows."""
    paths = as_indices(paths, name="paths", what=what)
    check_paths_depth(paths.shape, max_depth, what=what)
    if can_inspect(paths):
        gap = ((paths[..., 1:] >= 0) & (paths[..., :-1] < 0)).any()
        values = read_back(*torch.aminmax(paths), gap)
        if values is not None:
            check_paths_values(*values[:2], bool(values[2]), max_children=max_children,
                               what=what)
    return paths


def hierarchical(paths, dim: int, *, max_depth: int, base: float = 10000.0) -> torch.Tensor:
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
        >>> paths = torch.tensor([[0, -1], [0, 2], [1, -1]])  # a child, its child, a sibling
        >>> hierarchical(paths, 8, max_depth=2).shape
        torch.Size([3, 8])

    References:
        Shiv & Quirk, "Novel positional encodings to enable tree-based
        transformers", NeurIPS 2019.
    """
    width = check_level_width(dim, max_depth, what="hierarchical")
    paths = _check_paths(paths, max_depth, what="hierarchical")
    present = (paths >= 0)[..., None]
    pe = sinusoidal(paths.clamp(min=0), width, base=base)  # (..., max_depth, width)
    return (pe * present).flatten(-2)


class HierarchicalEncoding(AdditiveEncoding):
    """Learned tree positions: the sum of one embedding per level of the path.

    ``P(path) = sum_l level_tables[l, path[l]]`` over the levels the node
    reaches (padded ``-1`` levels add nothing). Shiv & Quirk (2019) stack
    one-hot child indices newest step first, so a linear map of their stack
    sums rows indexed by steps back from the node; this module indexes its rows
    by level from the root instead (root-aligned, without the paper's
    geometric decay), so a level keeps its rows at any depth. A child's
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
        Tensor of the shape and dtype of ``x``.

    Weights:
        level_tables: ``(max_depth, max_children, dim)``, initialised
        ``N(0, 0.02^2)``.

    Example:
        >>> enc = HierarchicalEncoding(3, 4, 16)
        >>> paths = torch.tensor([[0, -1, -1], [0, 3, -1], [0, 3, 1]])
        >>> enc(torch.zeros(2, 3, 16), paths).shape
        torch.Size([2, 3, 16])

    References:
        Shiv & Quirk, "Novel positional encodings to enable tree-based
        transformers", NeurIPS 2019.
    """

    def __init__(self, max_depth: int, max_children: int, dim: int):
        super().__init__()
        what = "HierarchicalEncoding"
        self.max_depth = check_positive_int("max_depth", max_depth, what=what)
        self.max_children = check_positive_int("max_children", max_children, what=what)
        self.dim = check_positive_int("dim", dim, what=what)
        self.level_tables = nn.Parameter(torch.empty(self.max_depth, self.max_children, self.dim))
        self.reset_parameters()

    def reset_parameters(self) -> None:
        nn.init.normal_(self.level_tables, std=TABLE_INIT_STD)

    def extra_repr(self) -> str:
        return f"max_depth={self.max_depth}, max_children={self.max_children}, dim={self.dim}"

    def encoding(self, paths) -> torch.Tensor:
        """``P`` (float32) of shape ``(*paths.shape[:-1], dim)``."""
        paths = _check_paths(paths, self.max_depth, what=self._what(),
                             max_children=self.max_children)
        paths = paths.to(self.level_tables.device)
        rows = level_rows(paths.clamp(min=0), self._arange(self.max_depth), self.max_children)
        table = self.level_tables.float().reshape(-1, self.dim)
        return (table[rows] * (paths >= 0)[..., None]).sum(dim=-2)

    def forward(self, x: torch.Tensor, paths) -> torch.Tensor:
        check_embeddings(x.shape, self.dim, what=self._what())
        paths = paths if torch.is_tensor(paths) else torch.as_tensor(paths)
        check_paths_depth(paths.shape, self.max_depth, what=self._what())
        self._per_token("paths", paths, x, each="path", trailing="max_depth")
        return self._add(x, self.encoding(paths))
