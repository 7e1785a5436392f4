"""RLTune's learning part: Table 3 features (:mod:`.features`), the actor-critic and its checkpoints
(:mod:`.agent`), the trained policy and policies by name or checkpoint (:mod:`.policy`), the
Gymnasium environment (:mod:`.environment`), PPO training (:mod:`.training`), the held-out
evaluation (:mod:`.evaluation`) and the scenario both run on (:mod:`.scenario`)."""
