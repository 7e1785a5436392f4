"""RLTune's live mode (paper section 3.1.2 and 5.6): drive a real Slurm cluster's job priorities.

Modules, one job each: :mod:`.records` parses what Slurm prints, :mod:`.client` runs the Slurm
commands, :mod:`.snapshot` turns a scan into the simulator's queue state, :mod:`.priorities` maps
policy scores to Slurm priorities and placement advice, :mod:`.adapter` is the scan-score-apply
loop, :mod:`.workload` submits scaled traces, :mod:`.local` runs a private single-node Slurm, and
:mod:`.experiment` is the scaled section 5.6 comparison, live and simulated.
"""
