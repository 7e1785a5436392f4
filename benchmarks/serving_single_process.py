"""A single-process batched FastAPI server: the baseline issue 20 asks the serving path to match
on one host (``bench_serving_stacks.py --stacks single-process``).

One uvicorn process holds the model at full width; ``POST /v1/classify`` takes PNG files like
the project's API, decodes them (the project's decoder and limits), and queues the images in one
bounded queue (256 images; a request that does not fit gets 429 with ``Retry-After``); one batcher
task takes up to 16 queued images at a time and runs them through the model in a worker thread
(so the event loop keeps accepting), then answers each request with its labels. No routing, no
widths, no Ray: what a user who runs one machine would write first.

Run it until Ctrl-C: ``python benchmarks/serving_single_process.py --checkpoint CKPT --port 8799
[--threads N]`` (N torch threads for the model, default 1).
"""

from __future__ import annotations

import argparse
import asyncio
from contextlib import asynccontextmanager
from pathlib import Path

import numpy as np
import torch
import uvicorn
from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse, PlainTextResponse

from hetsched.slim.model.checkpoint import load_checkpoint, model_from_checkpoint
from hetsched.slim.serving.images import RequestError, decode_image_file
from hetsched.slim.serving.runtime import input_spec

MAX_BATCH = 16
"""Images per forward pass (the project's B_max)."""
QUEUE_IMAGES = 256
"""Images waiting at most (the project's default admission bound)."""
MAX_PIXELS = 1 << 20
"""Largest decoded image accepted (as the project's default)."""


def build_app(checkpoint_path: Path, threads: int) -> FastAPI:
    """The baseline app: decode, one bounded queue, one batcher, full-width forward passes."""
    checkpoint = load_checkpoint(checkpoint_path)
    torch.set_num_threads(threads)
    model = model_from_checkpoint(checkpoint).eval()
    spec = input_spec(checkpoint)
    widths = (1.0,) * 4
    queue: asyncio.Queue[tuple[np.ndarray, asyncio.Future[int]]] = asyncio.Queue(QUEUE_IMAGES)

    def forward(images: list[np.ndarray]) -> list[int]:
        with torch.inference_mode():
            logits = model(torch.from_numpy(np.stack(images)), widths)
        return [int(label) for label in logits.argmax(dim=1)]

    async def batch_forever() -> None:
        while True:
            items = [await queue.get()]
            while len(items) < MAX_BATCH and not queue.empty():
                items.append(queue.get_nowait())
            labels = await asyncio.to_thread(forward, [image for image, _ in items])
            for (_, future), label in zip(items, labels, strict=True):
                if not future.done():
                    future.set_result(label)

    @asynccontextmanager
    async def lifespan(_: FastAPI):
        task = asyncio.create_task(batch_forever())
        yield
        task.cancel()

    app = FastAPI(lifespan=lifespan)

    @app.post("/v1/classify")
    async def classify(request: Request) -> JSONResponse:
        form = await request.form()
        files = [await upload.read() for upload in form.getlist("image")]  # type: ignore[union-attr]
        if not files:
            return JSONResponse({"error": "no image"}, status_code=400)
        if queue.qsize() + len(files) > QUEUE_IMAGES:
            return JSONResponse(
                {"error": "queue_full"}, status_code=429, headers={"Retry-After": "1"}
            )
        try:
            images = [
                decode_image_file(data, "image/png", spec, index=i, max_pixels=MAX_PIXELS)
                for i, data in enumerate(files)
            ]
        except RequestError as error:
            return JSONResponse({"error": str(error)}, status_code=error.status)
        loop = asyncio.get_running_loop()
        futures = [loop.create_future() for _ in images]
        for image, future in zip(images, futures, strict=True):
            queue.put_nowait((image, future))
        labels = await asyncio.gather(*futures)
        return JSONResponse({"results": [{"label": label} for label in labels]})

    @app.get("/readyz")
    async def readyz() -> dict[str, str]:
        return {"status": "ready"}

    @app.get("/metrics")
    async def metrics() -> PlainTextResponse:
        return PlainTextResponse("")

    return app


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--checkpoint", type=Path, required=True)
    parser.add_argument("--port", type=int, default=8799)
    parser.add_argument("--threads", type=int, default=1, help="torch threads of the model")
    args = parser.parse_args()
    app = build_app(args.checkpoint, args.threads)
    uvicorn.run(app, host="127.0.0.1", port=args.port, log_level="warning", http="httptools")


if __name__ == "__main__":
    main()
