"""Framework-free formulas shared by both faces.

Everything here is NumPy in float64: the tables that do not depend on the data
(frequencies, slopes, index maps). Each face converts them to its own tensors,
so a formula lives in exactly one place.
"""

from __future__ import annotations

import numpy as np

from posenc._checks import check_base, check_even_dim


def sinusoidal_inv_freq(dim: int, base: float = 10000.0) -> np.ndarray:
    """Angular frequencies of the sinusoidal encoding, shape ``(dim // 2,)``.

    ``inv_freq[i] = base ** (-2 i / dim)``: the wavelengths ``2 pi / inv_freq``
    form a geometric progression from ``2 pi`` to almost ``base * 2 pi``
    (Vaswani et al., 2017, section 3.5).

    Args:
        dim: even feature dimension.
        base: the wavelength base, 10000 in the paper.

    Example:
        >>> sinusoidal_inv_freq(4)
        array([1.  , 0.01])
    """
    dim = check_even_dim(dim)
    base = check_base(base)
    return base ** (-np.arange(0, dim, 2, dtype=np.float64) / dim)


def wavelengths(dim: int, base: float = 10000.0) -> np.ndarray:
    """Wavelengths ``2 pi / inv_freq`` of the sinusoidal channel pairs, in positions."""
    return 2.0 * np.pi / sinusoidal_inv_freq(dim, base)
