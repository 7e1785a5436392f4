"""RLTune's live mode (paper section 3.1.2 and 5.6): drive a real Slurm cluster's job priorities.

Modules, one job each:

- reading Slurm, which is untrusted input: :mod:`.binaries` finds the programs (one lookup for
  daemons and client), :mod:`.client` runs the commands, :mod:`.json_fields` reads single JSON
  values defensively, :mod:`.records` parses jobs and nodes (filtering by partition/user first,
  skipping malformed records), :mod:`.requested_comment` reads the optional, bounded
  ``hetsched:requested_s=`` claim, :mod:`.untrusted_tally` counts and warns once about what was
  left out, :mod:`.controller` waits (bounded) for slurmctld;
- deciding: :mod:`.snapshot` turns a scan into the simulator's queue state, :mod:`.priorities`
  maps policy scores to ranks and gives placement advice, :mod:`.priority_band` places the ranks
  relative to what Slurm's own priority plugin hands out, :mod:`.managed_priorities` keeps that
  band and the originals, :mod:`.oversubscribe` changes OverSubscribe only where it can be
  written back exactly;
- the loop: :mod:`.adapter` scans, scores and applies; :mod:`.scan_report` is its record;
- experiments: :mod:`.workload` submits scaled traces, :mod:`.private_dir`,
  :mod:`.local_config` and :mod:`.local` run a private Slurm of one or several nodes,
  :mod:`.experiment` is the scaled section 5.6 comparison (three arms, repeated, live and
  simulated) and :mod:`.experiment_stats` says which differences exceed the spread.
"""
