"""The live world: real SlimResNet segments on cpu/cuda behind the same executor, the live cluster
setup, and device profiling that calibrates the simulator."""
