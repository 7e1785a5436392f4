"""The machines: nodes and GPU types, free resources, cluster files, built-in clusters and slices.

:mod:`.model` holds the immutable :class:`~hetsched.jobs.cluster.model.Cluster`, :mod:`.state`
the free resources a scheduler allocates from (and eq. 3's fragmentation factor), :mod:`.specs`
the YAML cluster files, :mod:`.catalog` the built-in clusters and ``--cluster`` resolution,
:mod:`.slicing` stratified slices and :mod:`.virtual_clusters` the mapping of a trace's
partitions onto a cluster's. The lowest room: it imports nothing else of ``hetsched.jobs``.
"""
