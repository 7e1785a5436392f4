"""Keeping the garbage collector's full passes short in long-running servers.

A full (generation 2) collection walks every tracked object in the process. A serving process
holds millions of them that live as long as it does (torch, Ray, FastAPI, the model), so each
full pass took up to 250 ms in the serving front under overload (9 passes in 45 s at 3x capacity
on the 2-core sandbox; RESULTS, "Serving: the front's full collections"), and every request in
flight, a refusal too, waited for it. :func:`freeze_startup_objects`, called once start-up is
done, moves what exists then to the permanent generation, which collections skip; objects made
later are still collected (the same technique as ``gc.freeze``'s documented use before forking).
"""

from __future__ import annotations

import gc


def freeze_startup_objects() -> int:
    """Collects once, then exempts every object alive now from later collections.

    Returns:
        How many objects were frozen (``gc.get_freeze_count()``).
    """
    gc.collect()
    gc.freeze()
    return gc.get_freeze_count()


def thaw_startup_objects() -> None:
    """Undoes :func:`freeze_startup_objects` (a server that stops but whose process goes on,
    as in tests, gives its start-up objects back to the collector)."""
    gc.unfreeze()
