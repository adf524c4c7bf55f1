"""posenc's Keras 3 face: layers and functions written with ``keras.ops``.

Runs on the TensorFlow, PyTorch and JAX backends. Mirrors :mod:`posenc.torch`
name for name.
"""

from posenc.keras.absolute import *  # noqa: F401,F403
from posenc.keras.absolute import __all__ as _absolute

__all__ = [*_absolute]
