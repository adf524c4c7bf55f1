"""posenc's Keras 3 face: layers and functions written with ``keras.ops``.

Written for every Keras 3 backend; tested on TensorFlow and PyTorch. Mirrors :mod:`posenc.torch` name for name.
Grouped by where a scheme enters the model: absolute (sinusoidal), learned
(learned, hybrid, resizing), regularization (dropout and noise on an encoding) and
structured (times, trees, modalities, low-rank tables) are all added to token embeddings.
"""

from posenc.keras import absolute, learned, regularization, structured
from posenc.keras.absolute import *  # noqa: F401,F403
from posenc.keras.learned import *  # noqa: F401,F403
from posenc.keras.regularization import *  # noqa: F401,F403
from posenc.keras.structured import *  # noqa: F401,F403

__all__ = [*absolute.__all__, *learned.__all__, *regularization.__all__, *structured.__all__]
