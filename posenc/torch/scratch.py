"""Teaching versions of the formulas, in PyTorch: a few lines each, no checks, no caching.

The chapters show these functions side by side with :mod:`posenc.keras.scratch` before they use
the package; ``tests/test_scratch.py`` asserts that each one equals its ``posenc.torch``
counterpart. Use the package in real code: these skip the argument checks, the float64 angles
and the caches that the package's versions have.
"""

from __future__ import annotations

import torch
