"""posenc's PyTorch face: ``torch.nn.Module`` classes and tensor functions.

Mirrors :mod:`posenc.keras` name for name.
"""

from posenc.torch.absolute import *  # noqa: F401,F403
from posenc.torch.absolute import __all__ as _absolute

__all__ = [*_absolute]
