"""Replay: the event-driven simulator (:mod:`.simulator`, configured by :mod:`.config`, producing a
:mod:`.result`), with its parts: the waiting queue in arrival and priority order
(:mod:`.waiting_queue`), the running jobs in estimated-end order (:mod:`.running_jobs`), job
shapes (:mod:`.job_shapes`), the head's reservation (:mod:`.easy_backfill`) and the EASY and
RLScheduler backfilling rules (:mod:`.backfill`); seeded-window evaluation (:mod:`.windows`) and
the policy comparison that ``hetsched jobs simulate`` runs (:mod:`.comparison`, figures in
:mod:`.plots`)."""
