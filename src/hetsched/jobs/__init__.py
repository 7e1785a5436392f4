"""RLTune: RL job prioritisation and MILP placement for DL jobs on heterogeneous GPU clusters."""
