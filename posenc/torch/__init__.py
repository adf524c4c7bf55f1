"""posenc's PyTorch face: ``torch.nn.Module`` classes and functions on ``torch.Tensor``.

Mirrors :mod:`posenc.keras` name for name: the same modules, the same public
names in the same order, the same arguments and numbers. One family, one name,
three places: the family's framework-free part is ``posenc/<family>.py``, its
faces ``posenc/torch/<family>.py`` and ``posenc/keras/<family>.py``.

* ``sinusoidal.py``: :func:`sinusoidal`, :func:`sinusoidal_2d`,
  :class:`SinusoidalEncoding`, :func:`coordinate_encoding` (DETR's sine embedding of
  points and boxes) (formulas in ``posenc/sinusoidal.py``).
* ``learned.py``: :func:`resize_table`, :func:`resize_table_2d`,
  :class:`LearnedEncoding` (``from_table``, ``resized``, ``resized_2d``,
  ``extended``), :class:`HybridEncoding`, :class:`LowRankEncoding`
  (``from_table``) (resampling matrices and the truncated SVD in
  ``posenc/learned.py``).
* ``regularization.py``: :class:`EncodingDropout`, :class:`ChannelDropout`,
  :class:`GaussianNoise`, :class:`RegularizedEncoding` (``posenc/regularization.py``).
* ``time.py``: :class:`ContinuousTimeEncoding`, :class:`Time2Vec`
  (``posenc/time.py``).
* ``trees.py``: :func:`hierarchical`, :class:`HierarchicalEncoding`
  (the index map of the levels in ``posenc/trees.py``).
* ``modalities.py``: :func:`modality_positions`, :class:`MultimodalEncoding` (its modes
  are the registry ``posenc.modalities.MULTIMODAL_MODES``).
* ``graphs.py``: :func:`laplacian`, :func:`laplacian_positions`, :class:`LaplacianEncoding`
  (the graph Laplacian and its eigenvectors in ``posenc/graphs.py``).
* ``bias.py``: :func:`alibi_slopes`, :func:`alibi_bias`, :class:`ALiBiBias`,
  :func:`t5_buckets`, :class:`T5RelativeBias`, :func:`swin_relative_index`,
  :func:`resize_swin_bias_table`, :class:`SwinRelativeBias` (``SwinRelativeBias.resized``):
  additive attention biases ``(1, heads, q_len, k_len)``, each class called as
  ``bias(q_len, k_len=None)`` (slopes, buckets and index maps in ``posenc/bias.py``).
* ``shaw.py``: :func:`shaw_relative_index`, :func:`shaw_attention` (``method="naive"`` or
  ``"skew"``, the registry ``posenc.shaw.SHAW_METHODS``), :func:`windowed_attention`,
  :class:`ShawRelativeAttention` (index maps and query blocks in ``posenc/shaw.py``).
* ``rotary.py``: :func:`rope_frequencies` (the scalings are the registry
  ``posenc.rotary.ROPE_SCALINGS``), :func:`apply_rope`, :func:`convert_rope_layout`,
  :class:`RotaryEmbedding` (called as ``rope(q, k, offset=0, positions=None)``),
  :func:`apply_rope_2d`, :class:`RotaryEmbedding2D` (frequencies and layouts in
  ``posenc/rotary.py``).
* ``mrope.py``: :func:`apply_mrope`, multimodal RoPE (which pair reads which axis, and the
  positions of text, images and video, ``mrope_positions``, in ``posenc/mrope.py``).
* ``vision.py``: :func:`apply_vision_rope`, :class:`VisionRotaryEmbedding` (axial 2D RoPE
  for any patch grid, prefix tokens, ``ref_grid`` rescaling), :func:`apply_mixed_rope`,
  :class:`MixedRotaryEmbedding` (RoPE-Mixed's learned 2D frequencies; positions, angles and
  the initialisation in ``posenc/vision.py``).
* ``distance_bias.py``: :class:`XPosEmbedding` (RoPE with xPos's decay), :class:`KerpleBias`,
  :class:`SandwichBias`, :class:`FireBias`, :class:`DynamicPositionBias`,
  :class:`ContinuousPositionBias` (Swin V2): the length-extrapolation family (rules and
  constants in ``posenc/distance_bias.py``).
* ``attention.py``: :class:`MultiHeadAttention` and :class:`Transformer` with every
  positional scheme by name (``position=``; the registry ``posenc.attention.POSITIONS``,
  the option rules and the decoding cache in ``posenc/attention.py``).
* ``stacks.py``: :class:`LatentAttention` (DeepSeek's multi-head latent attention with
  decoupled RoPE); a ``Transformer(stack=...)``'s per-layer schemes, windows, chunks and
  temperature, the presets and the rules are in ``posenc/stacks.py``.
* ``tasks.py`` (import it as ``posenc.torch.tasks``; not re-exported here):
  ``LagModel``, ``lag_loss``, ``train_lag``, ``accuracy_by_position``: the small task the
  chapters train on (data and analysis helpers in ``posenc/tasks.py``).
* ``diagnostics.py`` (import it as ``posenc.torch.diagnostics``; not re-exported here):
  ``hidden_states``, ``attention_maps``, ``GradientMonitor`` (gradient norms collected through hooks);
  the analysis (similarity, the position probe, the healthy range) is ``posenc/diagnostics.py``.
* ``scratch.py`` (``posenc.torch.scratch``): the few-line teaching versions the chapters
  show beside ``posenc.keras.scratch``, tested equal to the package.
* ``_util.py``: :class:`AdditiveEncoding`, the base of every class above that
  adds an encoding to token embeddings, and the tensor helpers.

Every argument check is framework-free (a family's rules in ``posenc/<family>.py``, the
shared ones in ``posenc/_checks.py``), so both faces raise the same errors. Checks that read values out of a tensor (an index past a table's end)
run only on eager CPU tensors, in both faces: see "Checks that read the data"
in the API reference.

Each family module and the function it exports can share a name: after
``import posenc.torch as pt``, ``pt.sinusoidal`` is the function; reach the
module with ``importlib.import_module("posenc.torch.sinusoidal")``.
"""

from posenc.torch import attention as _attention
from posenc.torch import bias as _bias
from posenc.torch import graphs as _graphs
from posenc.torch import learned as _learned
from posenc.torch import modalities as _modalities
from posenc.torch import mrope as _mrope
from posenc.torch import regularization as _regularization
from posenc.torch import rotary as _rotary
from posenc.torch import vision as _vision
from posenc.torch import shaw as _shaw
from posenc.torch import sinusoidal as _sinusoidal
from posenc.torch import time as _time
from posenc.torch import trees as _trees
from posenc.torch.sinusoidal import *  # noqa: F401,F403
from posenc.torch.learned import *  # noqa: F401,F403
from posenc.torch.regularization import *  # noqa: F401,F403
from posenc.torch.time import *  # noqa: F401,F403
from posenc.torch.trees import *  # noqa: F401,F403
from posenc.torch.modalities import *  # noqa: F401,F403
from posenc.torch.graphs import *  # noqa: F401,F403
from posenc.torch.bias import *  # noqa: F401,F403
from posenc.torch.shaw import *  # noqa: F401,F403
from posenc.torch.rotary import *  # noqa: F401,F403
from posenc.torch.mrope import *  # noqa: F401,F403
from posenc.torch.vision import *  # noqa: F401,F403
from posenc.torch.attention import *  # noqa: F401,F403

__all__ = [*_sinusoidal.__all__, *_learned.__all__, *_regularization.__all__,
           *_time.__all__, *_trees.__all__, *_modalities.__all__, *_graphs.__all__,
           *_bias.__all__, *_shaw.__all__, *_rotary.__all__,
           *_attention.__all__]
__all__ += _mrope.__all__
from posenc.torch import stacks as _stacks  # noqa: E402
from posenc.torch.stacks import *  # noqa: F401,F403,E402

__all__ += _stacks.__all__
__all__ += _vision.__all__

from posenc.torch import distance_bias as _distance_bias  # noqa: E402
from posenc.torch.distance_bias import *  # noqa: F401,F403,E402

__all__ += _distance_bias.__all__

from posenc.torch import content as _content  # noqa: E402
from posenc.torch.content import *  # noqa: F401,F403,E402

__all__ += _content.__all__
