"""einops.layers.torch for code that imports einc.einops in place of
einops (issue 38): ``from einc.einops.layers.torch import Rearrange``.
The classes are einc.layers.torch's, which take einops.layers.torch's
constructor arguments (pattern, reduction, weight_shape, bias_shape,
axes lengths)."""

from ...layers.torch import EinMix, Rearrange, Reduce

__all__ = ["EinMix", "Rearrange", "Reduce"]
