"""Live Slim serving: Ray actors per server, a routing front, an HTTP API, a load generator.

One request's path: the guard (:mod:`.guard`) checks the token, the declared size and admission's
verdict from the headers alone; the HTTP API (:mod:`.app`, and the Open Inference Protocol in
:mod:`.oip`) reads the body within its bounds and decodes the images on a thread pool
(:mod:`.request_body`, :mod:`.images`, :mod:`.options`); admission control (:mod:`.admission`)
accepts or rejects them; the front (:mod:`.front`) queues each image (:mod:`.jobs`) in the global
FIFO and routes its next segment with any registered router; the server pool (:mod:`.pool`, the
contract in :mod:`.blocks`) runs each block on a
Ray actor (:mod:`.actor`) that holds a greedy executor on the live torch backend
(:mod:`.worker`). Activations stay in Ray's object store between segments. uvicorn runs the app
with head and body timeouts and a connection limit (:mod:`.http_server`); the load generator
(:mod:`.loadgen`) sends real PNG requests from a light raw-socket client (:mod:`.http_client`).
"""
