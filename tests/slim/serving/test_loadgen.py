"""The load generator's tally: which replies count as refused, admitted, on time."""

from __future__ import annotations

import asyncio
import json

import numpy as np

from hetsched.slim.serving.http_client import HttpReply
from hetsched.slim.serving.loadgen import LoadgenConfig, _Run


class ScriptedClient:
    """Answers each request with the next scripted (status, seconds) and no network."""

    authority = "127.0.0.1:1"

    def __init__(self, script: list[tuple[int, float]]) -> None:
        self.script = list(script)

    async def send(self, request: bytes, timeout_s: float) -> HttpReply:
        status, seconds = self.script.pop(0)
        await asyncio.sleep(seconds)
        body = json.dumps({"results": [{"label": 0}]} if status == 200 else {"error": "x"})
        return HttpReply(status, {}, body.encode())


def test_a_504_is_an_admitted_answer_and_a_429_a_refusal():
    script = [(200, 0.0), (504, 0.05), (429, 0.0), (200, 0.02)]
    config = LoadgenConfig(url="http://127.0.0.1:1", duration_s=1.0, deadline_s=0.01)
    run = _Run(ScriptedClient(script), config, [b"png"], np.zeros(1, dtype=np.int64))

    async def send_all() -> None:
        for _ in script:
            await run.one_request()

    asyncio.run(send_all())
    assert len(run.latencies_s) == 2 and len(run.refusal_latencies_s) == 1
    assert len(run.deadline_latencies_s) == 1 and run.deadline_latencies_s[0] >= 0.05
    assert run.images_ok == 2 and run.images_on_time == 1  # the second 200 came after 0.01 s
    assert dict(run.errors) == {"504": 1, "429": 1}
