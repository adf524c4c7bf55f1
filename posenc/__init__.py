"""posenc: positional encodings for Transformers, in PyTorch and Keras 3.

``import posenc`` imports neither framework. Use the faces:

* ``posenc.torch``: ``torch.nn.Module`` classes and functions on ``torch.Tensor``;
* ``posenc.keras``: Keras 3 layers and functions written with ``keras.ops``.

One family of encodings, one name, three places: ``posenc/<family>.py`` holds
the family's framework-free part (NumPy formulas, index maps, registries of
variants), ``posenc/torch/<family>.py`` and ``posenc/keras/<family>.py`` its
two faces. The families are :mod:`posenc.sinusoidal`, :mod:`posenc.learned`,
:mod:`posenc.regularization`, :mod:`posenc.time`, :mod:`posenc.trees`,
:mod:`posenc.modalities`, :mod:`posenc.graphs`, :mod:`posenc.bias`, :mod:`posenc.shaw`,
:mod:`posenc.rotary` and :mod:`posenc.attention`; the index maps several families share
are in :mod:`posenc.positions`, the shared argument checks in ``posenc/_checks.py``. Also here: :func:`posenc.pick_device`,
:mod:`posenc.theory`, :mod:`posenc.interop`, :mod:`posenc.plotting` and
:mod:`posenc.diagnostics`.
"""

from posenc.sinusoidal import sinusoidal_inv_freq, wavelengths
from posenc.device import pick_device

__version__ = "0.1.0"

__all__ = ["pick_device", "sinusoidal_inv_freq", "wavelengths", "__version__"]
