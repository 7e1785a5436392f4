"""RLTune: RL job prioritisation and MILP placement for DL jobs on heterogeneous GPU clusters.

The package is split into rooms, each a sub-package with one job, in layers; a room imports only
rooms of lower layers (``tests/jobs/test_import_graph.py`` checks it):

1. :mod:`~hetsched.jobs.cluster`: the machines (nodes, free resources, built-in clusters).
2. :mod:`~hetsched.jobs.traces`: the jobs (the job table, trace loaders, synthetic traces,
   requested-time models, the shipped sample traces).
3. :mod:`~hetsched.jobs.policies` (queue order) and :mod:`~hetsched.jobs.placement` (node
   choice, including the MILP): the two decisions of a scheduler, independent of each other.
4. :mod:`~hetsched.jobs.sim`: the event-driven simulator that replays jobs under a policy and a
   placer, and the evaluation on windows.
5. :mod:`~hetsched.jobs.rl` (RLTune's agent, environment, training, evaluation) and
   :mod:`~hetsched.jobs.slurm` (the live mode against a real Slurm).
6. :mod:`~hetsched.jobs.cli`: the ``hetsched jobs`` commands, which only parse options, call the
   rooms below and print.
"""
