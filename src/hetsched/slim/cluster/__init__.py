"""The multi-server mechanism both worlds share: global FIFO, router, per-server executors, block
outcomes; and the accuracy signals the reward reads."""
