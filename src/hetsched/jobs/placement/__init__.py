"""Node choice: pack and spread placement and candidate placements (:mod:`.placers`), RLTune's
MILP placement with look-ahead (:mod:`.milp`, Algorithm 1), and the placers by name
(:mod:`.registry`)."""
