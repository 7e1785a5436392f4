"""The SlimResNet: slimmable layers, the four-segment model, its data, training, checkpoints,
analytic segment costs and measured accuracy tables (the paper's Tables I and II)."""
