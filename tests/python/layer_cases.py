"""The torch layers the export and deployment tests build, each as (name,
a function of the layers module making it, an input shape): the same
cases for einc.layers.torch, einc.einops.layers.torch and einops'."""

LAYERS = [
    ("Rearrange", lambda m: m.Rearrange("b c (h p) w -> b (h w) (p c)", p=2),
     (3, 4, 6, 6)),
    ("Reduce_max", lambda m: m.Reduce("b c (h 2) (w 2) -> b c h w", "max"),
     (3, 4, 6, 6)),
    ("Reduce_mean", lambda m: m.Reduce("b c h w -> b c", "mean"),
     (3, 4, 6, 6)),
    ("EinMix", lambda m: m.EinMix("b t d -> b t e", weight_shape="d e",
                                  bias_shape="e", d=6, e=5), (3, 4, 6)),
    ("EinMix_grouped",
     lambda m: m.EinMix("b t (g cin) -> b t (g cout)",
                        weight_shape="g cin cout", bias_shape="g cout",
                        g=2, cin=3, cout=4), (3, 4, 6)),
    ("EinMix_no_bias",
     lambda m: m.EinMix("b t d -> b d", weight_shape="t d", t=4, d=6),
     (3, 4, 6)),
]
