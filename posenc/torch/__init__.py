"""posenc's PyTorch face: ``torch.nn.Module`` classes and tensor functions.

Mirrors :mod:`posenc.keras` name for name.
Grouped by where a scheme enters the model: absolute (sinusoidal), learned
(learned, hybrid, resizing), regularization (dropout and noise on an encoding) and
structured (times, trees, modalities, low-rank tables) are all added to token embeddings.
"""

from posenc.torch import learned as _learned
from posenc.torch import regularization as _regularization
from posenc.torch import sinusoidal as _sinusoidal
from posenc.torch import structured as _structured
from posenc.torch.sinusoidal import *  # noqa: F401,F403
from posenc.torch.learned import *  # noqa: F401,F403
from posenc.torch.regularization import *  # noqa: F401,F403
from posenc.torch.structured import *  # noqa: F401,F403

__all__ = [*_sinusoidal.__all__, *_learned.__all__, *_regularization.__all__,
           *_structured.__all__]
