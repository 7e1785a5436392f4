"""One server: Algorithm 1's greedy executor over a device backend (simulated or live), its
knobs, the contract it offers the cluster, and its telemetry."""
