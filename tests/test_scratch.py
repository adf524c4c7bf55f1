"""The teaching versions in posenc.torch.scratch and posenc.keras.scratch equal the package."""

from __future__ import annotations
