"""The simulated world: a modelled device backend, the network link, seeded workloads, and the
paper's scenario built into a runnable cluster."""
