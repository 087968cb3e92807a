"""einops.layers for einc.einops: ``einc.einops.layers.torch``."""
