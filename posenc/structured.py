"""Structured positions (framework-free): times, trees, modalities.

What both faces share beyond the sinusoid itself: the registry of the ways
``MultimodalEncoding`` shares positions between modalities, and the index maps
its modes and ``HierarchicalEncoding`` gather with. The index maps use only
``+`` and ``*``, so one function serves NumPy arrays and the tensors of both
faces alike. The argument checks of the family live in :mod:`posenc._checks`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

from posenc.learned import TABLE_INIT_STD

__all__ = ["TABLE_INIT_STD", "MultimodalMode", "MULTIMODAL_MODES", "level_rows"]


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


def _modality_table_rows(modality_ids, positions, max_len: int):
    # per_modality: table m, row pos, in a (num_modalities * max_len, dim) table
    return modality_ids * max_len + positions


def _modality_rows(modality_ids, positions, max_len: int):
    # shared_offset: one row per modality
    return modality_ids


@dataclass(frozen=True)
class MultimodalMode:
    """How one mode of ``MultimodalEncoding`` builds ``P``.

    ``P = PE(pos)`` (when ``sinusoid``) ``+ table[row(ids, pos, max_len)]``
    (when the mode has a ``table``), with the table flattened to
    ``(-1, dim)``. Adding a mode is adding one entry to
    :data:`MULTIMODAL_MODES`; both faces read it.

    Attributes:
        sinusoid: whether ``P`` contains the shared sinusoid (``dim`` must be even).
        table: name of the learned weight, or ``None`` for none.
        table_shape: ``(num_modalities, max_len, dim) -> shape`` of that weight.
        row: ``(modality_ids, positions, max_len) -> row`` each token reads.
        positions_index: whether ``row`` reads the positions (then they must be
            integers below ``max_len``).
    """

    sinusoid: bool
    table: str | None = None
    table_shape: Callable[[int, int, int], tuple] | None = None
    row: Callable | None = None
    positions_index: bool = False


#: mode name -> :class:`MultimodalMode`.
MULTIMODAL_MODES = {
    "shared": MultimodalMode(sinusoid=True),
    "per_modality": MultimodalMode(
        sinusoid=False, table="modality_tables",
        table_shape=lambda num_modalities, max_len, dim: (num_modalities, max_len, dim),
        row=_modality_table_rows, positions_index=True),
    "shared_offset": MultimodalMode(
        sinusoid=True, table="modality_embedding",
        table_shape=lambda num_modalities, max_len, dim: (num_modalities, dim),
        row=_modality_rows),
}

#: What ``MultimodalEncoding`` suggests when positions do not fit its tables.
MULTIMODAL_TOO_SHORT = ("build it with a larger max_len, or restart positions per modality "
                        "with modality_positions(...)")
