"""posenc's PyTorch face: ``torch.nn.Module`` classes and tensor functions.

Mirrors :mod:`posenc.keras` name for name.
Grouped by where a scheme enters the model: absolute (sinusoidal), learned
(learned, hybrid, resizing), regularization (dropout and noise on an encoding) and
structured (times, trees, modalities, low-rank tables) are all added to token embeddings.
"""

from posenc.torch import absolute, learned, regularization, structured
from posenc.torch.absolute import *  # noqa: F401,F403
from posenc.torch.learned import *  # noqa: F401,F403
from posenc.torch.regularization import *  # noqa: F401,F403
from posenc.torch.structured import *  # noqa: F401,F403

__all__ = [*absolute.__all__, *learned.__all__, *regularization.__all__, *structured.__all__]
