"""posenc's Keras 3 face: layers and functions written with ``keras.ops``.

Written for every Keras 3 backend; tested on TensorFlow and PyTorch. Mirrors :mod:`posenc.torch` name for name.
Grouped by where a scheme enters the model: absolute (sinusoidal), learned
(learned, hybrid, resizing), regularization (dropout and noise on an encoding) and
structured (times, trees, modalities, low-rank tables) are all added to token embeddings.
"""

from posenc.keras import learned as _learned
from posenc.keras import regularization as _regularization
from posenc.keras import sinusoidal as _sinusoidal
from posenc.keras import structured as _structured
from posenc.keras.sinusoidal import *  # noqa: F401,F403
from posenc.keras.learned import *  # noqa: F401,F403
from posenc.keras.regularization import *  # noqa: F401,F403
from posenc.keras.structured import *  # noqa: F401,F403

__all__ = [*_sinusoidal.__all__, *_learned.__all__, *_regularization.__all__,
           *_structured.__all__]
