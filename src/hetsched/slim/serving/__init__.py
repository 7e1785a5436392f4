"""Live Slim serving: Ray actors per server, a routing front, an HTTP API, a load generator.

One request's path: the HTTP API (:mod:`.app`) validates and decodes the images (:mod:`.images`),
admission control (:mod:`.admission`) accepts or rejects them early, the front (:mod:`.front`)
queues each image in the global FIFO and routes its next segment with any registered router, and
the server pool (:mod:`.pool`) runs each block on a Ray actor (:mod:`.actor`) that holds a greedy
executor on the live torch backend. Activations stay in Ray's object store between segments.
"""
