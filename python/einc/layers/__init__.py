"""Framework layers built on einc: ``einc.layers.torch`` has Rearrange,
Reduce and EinMix as einops.layers.torch has them."""
