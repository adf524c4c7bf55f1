"""Teaching versions of the formulas, in Keras 3 (``keras.ops``): a few lines each, no checks.

The chapters show these functions side by side with :mod:`posenc.torch.scratch` before they use
the package; ``tests/test_scratch.py`` asserts that each one equals its ``posenc.keras``
counterpart. Use the package in real code: these skip the argument checks and the float64
angles that the package's versions have.
"""

from __future__ import annotations

from keras import ops
