"""Start-up objects leave the collector's reach and come back."""

from __future__ import annotations

import gc

from hetsched.core.gc_pauses import freeze_startup_objects, thaw_startup_objects


class Node:
    def __init__(self) -> None:
        self.partner: Node | None = None


def test_frozen_objects_are_skipped_by_collections_and_thawed_ones_are_not():
    startup = [Node() for _ in range(100)]
    try:
        assert freeze_startup_objects() >= len(startup)
        tracked = {id(obj) for obj in gc.get_objects()}
        assert not any(id(node) in tracked for node in startup)
        later = Node()
        assert id(later) in {id(obj) for obj in gc.get_objects()}
        # cyclic garbage made after the freeze is still collected
        a, b = Node(), Node()
        a.partner, b.partner = b, a
        del a, b
        assert gc.collect() >= 2
    finally:
        thaw_startup_objects()
    assert gc.get_freeze_count() == 0
    assert id(startup[0]) in {id(obj) for obj in gc.get_objects()}
