"""posenc: positional encodings for Transformers, in PyTorch and Keras 3.

``import posenc`` imports neither framework. Use the faces:

* ``posenc.torch``: ``torch.nn.Module`` classes and functions on ``torch.Tensor``;
* ``posenc.keras``: Keras 3 layers and functions written with ``keras.ops``.

One family of encodings, one name, three places: ``posenc/<family>.py`` holds
the family's framework-free part (NumPy formulas, index maps, registries of
variants), ``posenc/torch/<family>.py`` and ``posenc/keras/<family>.py`` its
two faces. The families of encodings are :mod:`posenc.sinusoidal` (with DETR's
coordinates), :mod:`posenc.learned`, :mod:`posenc.regularization`,
:mod:`posenc.time`, :mod:`posenc.trees`, :mod:`posenc.modalities`,
:mod:`posenc.graphs`, :mod:`posenc.bias` (ALiBi, T5, Swin), :mod:`posenc.distance_bias`
(xPos, Kerple, Sandwich, FIRE, the dynamic and continuous biases), :mod:`posenc.shaw`,
:mod:`posenc.rotary` and :mod:`posenc.mrope` (multimodal RoPE); :mod:`posenc.attention` is the attention and the
Transformer they plug into, :mod:`posenc.stacks` the stacks whose layers differ
(per-layer schemes, windows, Llama 4's temperature, DeepSeek's latent attention) and
:mod:`posenc.batches` the positions of padded and packed batches and of caches. Laid out the same way (a core and two faces) are the
tools around them: :mod:`posenc.diagnostics` (looking inside a model),
:mod:`posenc.tasks` (a task that needs positions) and :mod:`posenc.bugs` (known
mistakes, kept for teaching). Framework-free only: :mod:`posenc.positions` (the
index maps several families share), :mod:`posenc.theory`, :mod:`posenc.interop`
(weights from one face to the other), :mod:`posenc.plotting`,
:mod:`posenc.experiments` (the lab) and :func:`posenc.pick_device`. Each family's
argument rules live beside its registry in its own module; ``posenc/_checks.py``
holds the message builder and the checks several families share.
:mod:`posenc.vision` is the family of rotary embeddings for image patches (axial 2D RoPE
at any grid, RoPE-Mixed). :mod:`posenc.content` is the family whose positions depend on the
content (the Forgetting Transformer's forget gate bias, CoPE). :mod:`posenc.torch.flex`, in
the PyTorch face only, runs ALiBi, Kerple, FIRE and FoX as FlexAttention score modifications.
"""

from posenc.sinusoidal import sinusoidal_inv_freq, wavelengths
from posenc.device import pick_device

__version__ = "0.1.0"

__all__ = ["pick_device", "sinusoidal_inv_freq", "wavelengths", "__version__"]
