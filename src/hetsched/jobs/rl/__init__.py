"""The learned schedulers: RLTune's prioritiser and the two learned baselines of its Table 9.

RLTune's Table 3 features (:mod:`.features`) and RLScheduler's observation
(:mod:`.rlscheduler_features`), by name in :mod:`.feature_sets`; the queue-scoring actor-critic
and every agent's checkpoints (:mod:`.agent`); SchedInspector's inspection features
(:mod:`.inspector_features`), policy (:mod:`.inspector`) and actor-critic (:mod:`.inspector_agent`);
trained agents as priority policies and policies by
name or checkpoint (:mod:`.policy`); the training episodes and rewards (:mod:`.episodes`), the
Gymnasium environment (:mod:`.environment`), PPO training (:mod:`.training`), the held-out
evaluation (:mod:`.evaluation`) and the scenario both run on (:mod:`.scenario`)."""
