"""Replay: the event-driven simulator (:mod:`.simulator`, configured by :mod:`.config`, producing a
:mod:`.result`; EASY's reservation in :mod:`.easy_backfill`), seeded-window evaluation
(:mod:`.windows`) and the policy comparison that ``hetsched jobs simulate`` runs
(:mod:`.comparison`, figures in :mod:`.plots`)."""
