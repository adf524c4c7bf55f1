"""Several modalities in one sequence (Keras face).

:func:`modality_positions` restarts the positions in each modality;
:class:`MultimodalEncoding` shares them between modalities in one of the modes
of the registry ``posenc.modalities.MULTIMODAL_MODES``.

The encodings are absolute: a layer whose ``call`` returns ``x + P``,
its ``encoding(...)`` ``P`` alone in float32. The layers are built with
``autocast=False``: under a mixed policy, float inputs are not rounded to the
compute dtype and ``P`` is computed in float32, then cast to the compute dtype.
The PyTorch face mirrors this module name for name.
"""

from __future__ import annotations

import keras
from keras import ops

from posenc._checks import check_choice, check_even_dim, check_positive_int
from posenc.modalities import check_not_scalar
from posenc.keras._util import AdditiveEncoding, as_indices, check_indices
from posenc.keras.sinusoidal import sinusoidal
from posenc.learned import TABLE_INIT_STD
from posenc.modalities import MULTIMODAL_MODES, MULTIMODAL_TOO_SHORT

__all__ = [
    "modality_positions",
    "MultimodalEncoding",
]


def modality_positions(modality_ids, *, num_modalities: int | None = None):
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
        int32 tensor of the shape of ``modality_ids``.

    Example:
        >>> ids = keras.ops.convert_to_tensor([0, 0, 1, 1, 1, 0])
        >>> keras.ops.convert_to_numpy(modality_positions(ids)).tolist()
        [0, 1, 0, 1, 2, 2]
    """
    what = "modality_positions"
    ids = as_indices(modality_ids, name="modality_ids", what=what)
    check_not_scalar("modality_ids", ids.shape, what=what)
    if num_modalities is None:
        index = ops.arange(ops.shape(ids)[-1], dtype="int32")
        earlier = ops.expand_dims(index, -1) > index  # [i, j]: j comes before i
        same = ops.equal(ops.expand_dims(ids, -1), ops.expand_dims(ids, -2))
        return ops.sum(ops.cast(ops.logical_and(same, earlier), "int32"), axis=-1)
    num_modalities = check_positive_int("num_modalities", num_modalities, what=what)
    check_indices(ids, num_modalities, name="modality_ids", limit_name="num_modalities",
                  what=what, fix="pass a larger num_modalities, or none to count any ids")
    one_hot = ops.one_hot(ids, num_modalities, dtype="int32")
    counts = ops.sum(ops.cumsum(one_hot, axis=-2) * one_hot, axis=-1)
    return ops.cast(counts, "int32") - 1


@keras.saving.register_keras_serializable(package="posenc")
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

        text = keras.random.normal((2, 5, 64))            # 5 text tokens
        patches = keras.random.normal((2, 12, 64)) + sinusoidal_2d(3, 4, 64)
        x = keras.ops.concatenate((text, patches), axis=1)
        ids = keras.ops.convert_to_tensor([0] * 5 + [1] * 12)
        positions = keras.ops.where(ids == 0, modality_positions(ids), 0)
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
        Tensor of the shape of ``x`` in the layer's compute dtype.

    Weights:
        modality_tables: ``(num_modalities, max_len, dim)`` (``per_modality``).
        modality_embedding: ``(num_modalities, dim)`` (``shared_offset``).
        Both initialised ``N(0, 0.02^2)``.

    Example:
        >>> enc = MultimodalEncoding(16, num_modalities=2, max_len=32)
        >>> ids = keras.ops.convert_to_tensor([0, 0, 0, 1, 1])
        >>> tuple(enc(keras.ops.zeros((2, 5, 16)), ids, modality_positions(ids)).shape)
        (2, 5, 16)

    References:
        Vaswani et al., "Attention Is All You Need", NeurIPS 2017.
        Devlin et al., "BERT: Pre-training of Deep Bidirectional Transformers
        for Language Understanding", NAACL 2019 (segment embeddings).
    """

    def __init__(self, dim: int, *, num_modalities: int, max_len: int,
                 mode: str = "shared_offset", **kwargs):
        kwargs.setdefault("autocast", False)
        super().__init__(**kwargs)
        what = "MultimodalEncoding"
        self.mode = check_choice("mode", mode, MULTIMODAL_MODES, what=what)
        spec = MULTIMODAL_MODES[mode]
        self.dim = (check_even_dim(dim, what=f"{what}(mode={mode!r})") if spec.sinusoid
                    else check_positive_int("dim", dim, what=what))
        self.num_modalities = check_positive_int("num_modalities", num_modalities, what=what)
        self.max_len = check_positive_int("max_len", max_len, what=what)
        if spec.table is not None:
            shape = spec.table_shape(self.num_modalities, self.max_len, self.dim)
            setattr(self, spec.table, self.add_weight(
                name=spec.table, shape=shape,
                initializer=keras.initializers.RandomNormal(stddev=TABLE_INIT_STD)))
        self.built = True

    def encoding(self, modality_ids, positions=None):
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
        if positions is None:
            positions = ids.shape[-1]
            if positions is None:  # a length known only at run time
                positions = self._arange(ops.shape(ids)[-1])
        if spec.positions_index:
            positions = self._table_positions(positions, self.max_len, fix=MULTIMODAL_TOO_SHORT)
        else:
            positions = self._positions(positions)
        pe = ops.cast(sinusoidal(positions, self.dim), "float32") if spec.sinusoid else 0.0
        if spec.table is not None:
            table = ops.reshape(ops.cast(getattr(self, spec.table), "float32"), (-1, self.dim))
            pe = pe + ops.take(table, spec.row(ids, positions, self.max_len), axis=0)
        return pe

    def call(self, x, modality_ids, positions=None):
        positions = self._positions_for(x, positions)
        modality_ids = as_indices(modality_ids, name="modality_ids", what=self._what())
        self._per_token("modality_ids", modality_ids, x, each="modality id")
        if positions is None:
            return ops.cast(x, self.compute_dtype)
        return self._add(x, self.encoding(modality_ids, positions))

    def get_config(self):
        config = super().get_config()
        config.update({"dim": self.dim, "num_modalities": self.num_modalities,
                       "max_len": self.max_len, "mode": self.mode})
        return config
