"""posenc: positional encodings for Transformers, in PyTorch and Keras 3.

``import posenc`` imports neither framework. Use the faces:

* ``posenc.torch``: ``torch.nn.Module`` classes and functions on ``torch.Tensor``;
* ``posenc.keras``: Keras 3 layers and functions written with ``keras.ops``.

Framework-free helpers live here: :mod:`posenc.sinusoidal`, :mod:`posenc.learned`, ... (the NumPy
formulas and argument rules both faces share), :func:`posenc.pick_device` and :mod:`posenc.plotting`.
"""

from posenc.sinusoidal import sinusoidal_inv_freq, wavelengths
from posenc.device import pick_device

__version__ = "0.1.0"

__all__ = ["pick_device", "sinusoidal_inv_freq", "wavelengths", "__version__"]
