"""The gunicorn worker `petstore serve` runs: uvicorn's, on the standard library's asyncio
event loop rather than uvloop.

Why not uvloop (issue 17, measured): since libuv 1.45 (libuv/libuv#3696) uvloop accepts one
connection per turn of its loop. A worker busy with 64 connections turns its loop about
every 10 ms, so a burst of new connections, as a client pool opening, waits in a staircase:
the 64th connection's first answer came 300 ms late (seen on the wire with tcpdump), and
wrk's p99 at 64 connections swung between 1.5 and 17 times its p50 from run to run.
asyncio's loop accepts every waiting connection at once: p99 stayed within 1.1 to 1.6 times
p50 in every run, and throughput was the same (the service's time is spent in Python, not
in the loop). httptools still parses HTTP.
"""

from __future__ import annotations

from typing import Any, ClassVar

from uvicorn_worker import UvicornWorker


class Worker(UvicornWorker):
    """uvicorn's gunicorn worker with the asyncio loop and the httptools parser."""

    CONFIG_KWARGS: ClassVar[dict[str, Any]] = {"loop": "asyncio", "http": "httptools"}
