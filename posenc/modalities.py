"""Several modalities in one sequence (framework-free): the registry of modes.

:data:`MULTIMODAL_MODES` names the ways ``MultimodalEncoding`` shares positions
between modalities (text, image patches, audio), with the index map each mode
gathers with. The maps use only ``+`` and ``*``, so one function serves NumPy
arrays and the tensors of both faces. Adding a mode is adding one entry.
"""

from __future__ import annotations

from posenc._checks import _error

from dataclasses import dataclass
from typing import Callable


__all__ = ["MultimodalMode", "MULTIMODAL_MODES", "MULTIMODAL_TOO_SHORT"]


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

    Example:
        >>> import numpy as np
        >>> per_modality = MULTIMODAL_MODES["per_modality"]   # table m, row pos
        >>> per_modality.row(np.array([0, 1, 1]), np.array([0, 0, 1]), 4)
        array([0, 4, 5])
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


# --------------------------------------------------------------------------- argument rules


def check_not_scalar(name: str, shape, *, what: str = "") -> None:
    """A tensor of one value per token: ``(..., seq)``, not a scalar."""
    if len(tuple(shape)) < 1:
        raise _error(what, f"{name} must be (..., seq), got a scalar",
                     f"pass one {name[:-1] if name.endswith('s') else name} per token")
