"""The ``hetsched jobs`` commands: this package's ``app``, with every command registered below.

The commands live in :mod:`.sim_commands` (``trace-info``, ``synth``, ``simulate``),
:mod:`.rl_commands` (``train``, ``evaluate``) and :mod:`.slurm_commands` (``slurm``,
``slurm-submit``, ``slurm-experiment``); :mod:`.option_groups` declares a group of flags once for
several commands. They only parse options, call the library rooms of :mod:`hetsched.jobs` and
print; no library module imports them.
"""

from __future__ import annotations

import typer

from hetsched.jobs.cli.rl_commands import evaluate, train
from hetsched.jobs.cli.sim_commands import simulate, synth, trace_info
from hetsched.jobs.cli.slurm_commands import slurm, slurm_experiment, slurm_submit

app = typer.Typer(no_args_is_help=True)
app.command("trace-info")(trace_info)
app.command("synth")(synth)
app.command("simulate")(simulate)
app.command("train")(train)
app.command("evaluate")(evaluate)
app.command("slurm")(slurm)
app.command("slurm-submit")(slurm_submit)
app.command("slurm-experiment")(slurm_experiment)
