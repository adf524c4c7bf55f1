"""Several modalities in one sequence (PyTorch face).

:func:`modality_positions` restarts the positions in each modality;
:class:`MultimodalEncoding` shares them between modalities in one of the modes
of the registry ``posenc.modalities.MULTIMODAL_MODES``.

The encodings are absolute: a module whose ``forward`` returns ``x + P``,
its ``encoding(...)`` ``P`` alone in float32. The Keras face
mirrors this module name for name.
"""

from __future__ import annotations

import torch
from torch import nn

from posenc._checks import check_choice, check_even_dim, check_positive_int
from posenc.modalities import check_not_scalar
from posenc.learned import TABLE_INIT_STD
from posenc.modalities import MULTIMODAL_MODES, MULTIMODAL_TOO_SHORT
from posenc.torch._util import AdditiveEncoding, as_indices, check_indices
from posenc.torch.sinusoidal import sinusoidal

__all__ = [
    "modality_positions",
    "MultimodalEncoding",
]


def modality_positions(modality_ids, *, num_modalities: int | None = None) -> torch.Tensor:
    """Positions that restart at 0 in each modality: ``0, 1, 2, ...`` per modality.

    Token ``i`` gets the number of earlier tokens of its own modality (a
    cumulative count), so ``[0, 0, 1, 1, 1, 0]`` gives ``[0, 1, 0, 1, 2, 2]``.
    Without ``num_modalities`` the count compares every pair of tokens
    (``O(seq^2)`` memory, any integer ids); with it, a one-hot cumulative sum
    (``O(seq * num_modalities)``, ids in ``0 .. num_modalities - 1``).

    Args:
        modality_ids: int tensor ``(..., seq)``.
        num_modalities: optional number of modalities, for the one-hot path.

    Returns:
        int64 tensor of the shape of ``modality_ids``.

    Example:
        >>> modality_positions(torch.tensor([0, 0, 1, 1, 1, 0]))
        tensor([0, 1, 0, 1, 2, 2])
    """
    what = "modality_positions"
    ids = as_indices(modality_ids, name="modality_ids", what=what)
    check_not_scalar("modality_ids", ids.shape, what=what)
    if num_modalities is None:
        seq = ids.shape[-1]
        same = ids[..., :, None] == ids[..., None, :]
        earlier = torch.ones(seq, seq, dtype=torch.bool, device=ids.device).tril(-1)
        return (same & earlier).sum(dim=-1)
    num_modalities = check_positive_int("num_modalities", num_modalities, what=what)
    check_indices(ids, num_modalities, name="modality_ids", limit_name="num_modalities",
                  what=what, fix="pass a larger num_modalities, or none to count any ids")
    one_hot = nn.functional.one_hot(ids, num_modalities)
    return (one_hot.cumsum(dim=-2) * one_hot).sum(dim=-1) - 1


class MultimodalEncoding(AdditiveEncoding):
    """Positions for sequences that mix modalities (text, image patches, audio).

    Three ways to share position information between modalities, chosen by
    ``mode``:

    * ``"shared"``: one sinusoidal code for everyone, ``P = PE(pos)``; no
      weights. Cheap, but the model cannot tell modalities apart by position.
    * ``"per_modality"``: a learned table per modality,
      ``P = modality_tables[m, pos]``; nothing is shared, ``pos < max_len``.
    * ``"shared_offset"`` (default): ``P = PE(pos) + modality_embedding[m]``:
      the shared sinusoid plus a learned vector per modality, like BERT's
      segment embeddings.

    ``positions`` default to ``0 .. seq-1`` over the whole sequence; pass
    ``modality_positions(modality_ids)`` to restart them in each modality.

    Text + image: image patches usually carry a 2D position. Add the grid code
    ``sinusoidal_2d(rows, cols, dim)`` to the patch embeddings, concatenate
    them after the text, and give every patch 1D position 0, so the shared
    sinusoid adds only a constant to them while the text keeps its order::

        text = torch.randn(2, 5, 64)                      # 5 text tokens
        patches = torch.randn(2, 12, 64) + sinusoidal_2d(3, 4, 64)  # 3 x 4 grid
        x = torch.cat((text, patches), dim=1)
        ids = torch.tensor([0] * 5 + [1] * 12)
        positions = torch.where(ids == 0, modality_positions(ids), 0)
        enc = MultimodalEncoding(64, num_modalities=2, max_len=512)
        y = enc(x, ids, positions)                         # (2, 17, 64)

    Args:
        dim: feature dimension (even for the modes with a sinusoid).
        num_modalities: number of modalities; ids run ``0 .. num_modalities - 1``.
        max_len: rows of each ``per_modality`` table (positions must be below
            it); unused by the other modes.
        mode: ``"shared"``, ``"per_modality"`` or ``"shared_offset"``.
            Default ``"shared_offset"``.

    Call arguments:
        x: ``(batch, seq, dim)`` embeddings.
        modality_ids: int ``(batch, seq)`` or ``(seq,)``.
        positions: optional ``(batch, seq)`` or ``(seq,)`` positions (integers
            for ``per_modality``); default ``0 .. seq-1``.

    Returns:
        Tensor of the shape and dtype of ``x``.

    Weights:
        modality_tables: ``(num_modalities, max_len, dim)`` (``per_modality``).
        modality_embedding: ``(num_modalities, dim)`` (``shared_offset``).
        Both initialised ``N(0, 0.02^2)``.

    Example:
        >>> enc = MultimodalEncoding(16, num_modalities=2, max_len=32)
        >>> ids = torch.tensor([0, 0, 0, 1, 1])
        >>> enc(torch.zeros(2, 5, 16), ids, modality_positions(ids)).shape
        torch.Size([2, 5, 16])

    References:
        Vaswani et al., "Attention Is All You Need", NeurIPS 2017.
        Devlin et al., "BERT: Pre-training of Deep Bidirectional Transformers
        for Language Understanding", NAACL 2019 (segment embeddings).
    """

    def __init__(self, dim: int, *, num_modalities: int, max_len: int,
                 mode: str = "shared_offset"):
        super().__init__()
        what = "MultimodalEncoding"
        self.mode = check_choice("mode", mode, MULTIMODAL_MODES, what=what)
        spec = MULTIMODAL_MODES[mode]
        self.dim = (check_even_dim(dim, what=f"{what}(mode={mode!r})") if spec.sinusoid
                    else check_positive_int("dim", dim, what=what))
        self.num_modalities = check_positive_int("num_modalities", num_modalities, what=what)
        self.max_len = check_positive_int("max_len", max_len, what=what)
        if spec.table is not None:
            shape = spec.table_shape(self.num_modalities, self.max_len, self.dim)
            self.register_parameter(spec.table, nn.Parameter(torch.empty(shape)))
        self.reset_parameters()

    def reset_parameters(self) -> None:
        for p in self.parameters():
            nn.init.normal_(p, std=TABLE_INIT_STD)

    def extra_repr(self) -> str:
        return (f"dim={self.dim}, num_modalities={self.num_modalities}, "
                f"max_len={self.max_len}, mode={self.mode!r}")

    def encoding(self, modality_ids, positions=None) -> torch.Tensor:
        """``P`` (float32) of shape ``(*broadcast(modality_ids, positions).shape, dim)``.

        In ``"shared"`` mode the ids are not used and ``P`` has shape
        ``(*positions.shape, dim)``.
        """
        what, spec = self._what(), MULTIMODAL_MODES[self.mode]
        ids = as_indices(modality_ids, name="modality_ids", what=what)
        check_not_scalar("modality_ids", ids.shape, what=what)
        check_indices(ids, self.num_modalities, name="modality_ids", limit_name="num_modalities",
                      what=what, fix=f"build it with num_modalities={self.num_modalities + 1} "
                                     "or more")
        ids = ids.to(self._anchor.device)
        if positions is None:
            positions = ids.shape[-1]
        if spec.positions_index:
            positions = self._table_positions(positions, self.max_len, fix=MULTIMODAL_TOO_SHORT)
        else:
            positions = self._positions(positions)
        pe = sinusoidal(positions, self.dim).float() if spec.sinusoid else 0.0
        if spec.table is not None:
            table = getattr(self, spec.table).float().reshape(-1, self.dim)
            pe = pe + table[spec.row(ids, positions, self.max_len)]
        return pe

    def forward(self, x: torch.Tensor, modality_ids, positions=None) -> torch.Tensor:
        positions = self._positions_for(x, positions)
        modality_ids = as_indices(modality_ids, name="modality_ids", what=self._what())
        self._per_token("modality_ids", modality_ids, x, each="modality id")
        if positions is None:
            return x
        return self._add(x, self.encoding(modality_ids, positions))
