"""Tree positions (framework-free): the argument rules and the index map of the levels.

A node is its path from the root, one child index per level, padded with
``-1`` below its depth. ``hierarchical`` gives each level a block of the
sinusoid; ``HierarchicalEncoding`` sums one learned row per level, read at
:func:`level_rows`, which uses only ``+`` and ``*`` so that one function serves
NumPy arrays and the tensors of both faces.
"""

from __future__ import annotations

from posenc._checks import _error, check_positive_int
from posenc.sinusoidal import _block_width

__all__ = ["level_rows"]


# --------------------------------------------------------------------------- argument rules

def check_level_width(dim, max_depth, *, what: str = "") -> int:
    """Channels per tree level, ``dim // max_depth``; it must be even."""
    dim = check_positive_int("dim", dim, what=what)
    max_depth = check_positive_int("max_depth", max_depth, what=what)
    return _block_width(dim, max_depth, "max_depth", "levels", what=what)


def check_paths_depth(shape, max_depth: int, *, what: str = "") -> None:
    """The last axis of ``paths`` holds one child index per level."""
    shape = tuple(shape)
    if len(shape) < 1 or (shape[-1] is not None and shape[-1] != max_depth):
        got = shape[-1] if shape else None
        if got is not None and got > max_depth:
            fix = f"build it with max_depth={got} for trees this deep"
        else:
            fix = f"pad every path with -1 up to max_depth={max_depth} levels"
        raise _error(what, f"paths must have shape (..., max_depth) with max_depth={max_depth}, "
                           f"got paths.shape={shape}", fix)


def check_paths_values(lowest: int, highest: int, gap: bool, *, max_children: int | None = None,
                       what: str = "") -> None:
    """Child indices are ``>= 0``; ``-1`` pads the levels below a node's depth."""
    if lowest < -1:
        raise _error(what, f"paths hold child indices >= 0, padded with -1 below the node's "
                           f"depth, got the value {lowest}",
                     "use -1 for every level deeper than the node")
    if gap:
        raise _error(what, "a path has a child index after a -1 (e.g. [2, -1, 0]); -1 marks "
                           "the levels below the node, so it may only follow the node's last "
                           "level, as in [2, 0, -1]")
    if max_children is not None and highest >= max_children:
        raise _error(what, f"child index {highest} is out of range for "
                           f"max_children={max_children} (indices 0 .. {max_children - 1})",
                     f"build it with max_children={highest + 1} or more")

# --------------------------------------------------------------------------- index maps

def level_rows(paths, level_offsets, max_children: int):
    """Row of each tree level's table in ``level_tables`` flattened to ``(-1, dim)``.

    Level ``l`` of a path reads row ``l * max_children + paths[..., l]``
    (padded ``-1`` levels are clipped to 0 and masked by the caller).

    Example:
        >>> import numpy as np
        >>> level_rows(np.array([[2, 0, 1]]), np.arange(3), 4)
        array([[2, 4, 9]])
    """
    return level_offsets * max_children + paths
