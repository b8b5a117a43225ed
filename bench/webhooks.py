"""Webhooks (D28), over SQLite, one gunicorn worker pinned to one core:

- commit-to-receipt latency of one endpoint while orders change 100 times a second (a
  commit by a store of this process, as the CLI makes; receipt by a receiver on loopback);
  the issue's aim: p99 under 250 ms;
- deliveries a second to 10 local endpoints: 1,000 orders imported at once, 10,000
  messages; aim: at least 1,000 a second per worker;
- the service's list of 10 (v2, wrk) alone; while orders change 100 times a second with no
  endpoint; and while those changes go to 10 endpoints (1,000 messages a second). The
  deliveries' own cost is the last against the second (target: at least 0.8);
- the same list while the same changes go to 10 endpoints from a deliverer process of its
  own (`petstore webhooks deliver`, pinned to the worker's core, the worker serving with
  PETSTORE_WEBHOOKS_ENABLED=false), over a second database of its own, against the
  worker's own deliverer (issue 59): which of the two this machine serves better.

The receivers are asyncio servers of this process answering 204 on kept-alive connections.

    python -m bench.webhooks [--runs 3] [--seconds 3]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import signal
import statistics
import subprocess
import tempfile
import threading
import time
from collections import defaultdict
from collections.abc import Awaitable, Callable, Iterator
from contextlib import ExitStack, contextmanager
from pathlib import Path

import orjson

from app.core import webhook_urls, webhooks
from app.core.config import Settings
from app.core.storage import Store, open_store
from bench.harness import (
    LOAD_CPU,
    SERVER_CPU,
    Load,
    Process,
    free_port,
    median_load,
    pinned,
    say,
    server,
    table,
    wrk,
)
from bench.quotas import GUNICORN, PETSTORE
from bench.v2 import _prepare

LIST = "/v2/store/orders"
LATENCY_P99_AIM_MS = 250
DELIVERIES_AIM = 1000
# The list of 10 while 10 endpoints get 100 changes a second (1,000 messages), against the
# list while the same changes are made without endpoints: what the deliveries cost it. The
# changes alone cost the list too (each ends the cached answers of the revision before):
# that row is shown beside, against the list alone.
LIST_AT_LEAST = 0.8
LOOPBACK = "127.0.0.0/8"


class Receivers:
    """count receivers on loopback, in a thread of their own: each answers 204 and keeps,
    per order id, when each message arrived (time.perf_counter)."""

    def __init__(self, count: int) -> None:
        self.arrivals: list[dict[int, list[float]]] = [defaultdict(list) for _ in range(count)]
        self.counts = [0] * count
        self.ports: list[int] = []
        self.loop = asyncio.new_event_loop()
        ready = threading.Event()
        self.thread = threading.Thread(target=self._serve, args=(count, ready), daemon=True)
        self.thread.start()
        ready.wait(10)

    def _serve(self, count: int, ready: threading.Event) -> None:
        asyncio.set_event_loop(self.loop)
        servers = []
        for index in range(count):
            handler = self._handler(index)
            started = self.loop.run_until_complete(
                asyncio.start_server(handler, "127.0.0.1", 0))
            servers.append(started)
            self.ports.append(started.sockets[0].getsockname()[1])
        ready.set()
        self.loop.run_forever()

    def _handler(self, index: int) -> Callable[[asyncio.StreamReader, asyncio.StreamWriter],
                                               Awaitable[None]]:
        arrivals = self.arrivals[index]

        async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            try:
                while True:
                    head = await reader.readuntil(b"\r\n\r\n")
                    length = 0
                    for line in head.split(b"\r\n"):
                        if line[:15].lower() == b"content-length:":
                            length = int(line[15:])
                    body = await reader.readexactly(length)
                    arrivals[orjson.loads(body)["data"]["id"]].append(time.perf_counter())
                    self.counts[index] += 1
                    writer.write(b"HTTP/1.1 204 No Content\r\n\r\n")
            except (asyncio.IncompleteReadError, ConnectionError, asyncio.CancelledError):
                writer.close()  # the sender left, or the receivers close

        return handle

    def urls(self) -> list[str]:
        return [f"http://127.0.0.1:{port}/" for port in self.ports]

    def received(self) -> int:
        return sum(self.counts)

    def close(self) -> None:
        async def cancel() -> None:
            for task in asyncio.all_tasks():
                if task is not asyncio.current_task():
                    task.cancel()

        asyncio.run_coroutine_threadsafe(cancel(), self.loop).result(5)
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(5)


def _order(order_id: int) -> dict[str, int]:
    return {"id": order_id, "petId": order_id % 1000, "quantity": 1}


def _endpoints(store: Store, urls: list[str]) -> list[int]:
    allowed = webhook_urls.networks(LOOPBACK)
    return [webhooks.create(store, None, url, None, None, allowed)[0].id for url in urls]


def _remove(store: Store, ids: list[int]) -> None:
    for endpoint_id in ids:
        store.delete_webhook_endpoint(endpoint_id)


def _wait(condition: Callable[[], bool], seconds: float) -> bool:
    deadline = time.monotonic() + seconds
    while not condition():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.01)
    return True


class Writer:
    """Changes orders at a steady rate from a thread (one import of one new order each),
    keeping when each committed, until stopped."""

    def __init__(self, store: Store, first_id: int, per_second: int,
                 count: int | None = None) -> None:
        self.store, self.next_id, self.per_second, self.count = store, first_id, per_second, count
        self.committed: dict[int, float] = {}
        self.stopping = threading.Event()
        self.thread = threading.Thread(target=self._write, daemon=True)
        self.thread.start()

    def _write(self) -> None:
        started = time.perf_counter()
        done = 0
        while not self.stopping.is_set() and (self.count is None or done < self.count):
            due = started + done / self.per_second
            time.sleep(max(0.0, due - time.perf_counter()))
            self.store.import_orders([_order(self.next_id)])
            self.committed[self.next_id] = time.perf_counter()
            self.next_id += 1
            done += 1

    def stop(self) -> None:
        self.stopping.set()
        self.thread.join(10)


@contextmanager
def _service(database: str, folder: Path, own_deliverer: bool = False
             ) -> Iterator[tuple[int, dict[str, str], Process]]:
    """One worker over the database, pinned to SERVER_CPU; with own_deliverer, serving
    with its deliverer off and `petstore webhooks deliver` beside it, on the same core."""
    env, key = _prepare(database, 0, folder)
    auth = {"Authorization": f"Bearer {key}"}
    port = free_port()
    settings = {"PETSTORE_WEBHOOK_ALLOWED_NETWORKS": LOOPBACK,
                "PETSTORE_RATELIMIT_STORAGE": "memory://", "PETSTORE_LOG_LEVEL": "warning",
                **({"PETSTORE_WEBHOOKS_ENABLED": "false"} if own_deliverer else {})}
    with ExitStack() as stack:
        process = stack.enter_context(server(
            [*GUNICORN, "--bind", f"127.0.0.1:{port}", "wsgi:app"], {**env, **settings}, port,
            f"{LIST}?limit=10", auth))
        if own_deliverer:
            deliverer = subprocess.Popen(
                pinned(SERVER_CPU, [*PETSTORE, "webhooks", "deliver"]),
                env={**env, **settings}, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            stack.callback(deliverer.wait, 15)
            stack.callback(deliverer.send_signal, signal.SIGTERM)
        yield port, auth, process


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=3, help="rounds of the list of 10")
    parser.add_argument("--seconds", type=int, default=3, help="length of each wrk run")
    args = parser.parse_args()
    if (os.cpu_count() or 1) >= 2:
        # The receivers and the writer stand for the integrators' hosts and the CLI: on
        # wrk's core, not the service's (the server is pinned to SERVER_CPU).
        os.sched_setaffinity(0, {int(LOAD_CPU)})
    lines: list[str] = []
    rows: list[tuple[str, Load, str]] = []
    with tempfile.TemporaryDirectory(prefix="petstore-bench-webhooks-") as scratch, \
            ExitStack() as stack:
        folder = Path(scratch)
        database = str(folder / "petstore.db")
        port, auth, process = stack.enter_context(_service(database, folder))
        store = open_store(Settings(database=database))
        stack.callback(store.dispose)
        store.import_orders(_order(i) for i in range(1, 11))  # the list of 10
        next_id = 100

        say("SQLite: commit-to-receipt latency of one endpoint at 100 changes a second...")
        one = Receivers(1)
        ids = _endpoints(store, one.urls())
        time.sleep(1.5)  # claimed
        writer = Writer(store, next_id, 100, count=500)
        writer.thread.join(30)
        _wait(lambda: one.received() >= 500, 30)
        latencies = sorted((one.arrivals[0][order_id][0] - committed) * 1000
                           for order_id, committed in writer.committed.items()
                           if one.arrivals[0].get(order_id))
        next_id = writer.next_id
        _remove(store, ids)
        one.close()
        p50 = statistics.median(latencies)
        p99 = latencies[int(len(latencies) * 0.99) - 1]
        lines.append(f"SQLite: commit to receipt, one endpoint, 100 changes/s: p50 {p50:.0f} ms,"
                     f" p99 {p99:.0f} ms over {len(latencies)} of 500 changes (aim: p99 under "
                     f"{LATENCY_P99_AIM_MS} ms: "
                     f"{'ok' if p99 < LATENCY_P99_AIM_MS else 'ABOVE AIM'})")

        say("SQLite: deliveries a second to 10 endpoints (1,000 orders imported at once)...")
        ten = Receivers(10)
        ids = _endpoints(store, ten.urls())
        time.sleep(1.5)
        started = time.perf_counter()
        store.import_orders(_order(i) for i in range(next_id, next_id + 1000))
        next_id += 1000
        complete = _wait(lambda: ten.received() >= 10_000, 120)
        elapsed = time.perf_counter() - started
        rate = ten.received() / elapsed
        lines.append(f"SQLite: deliveries to 10 endpoints: {ten.received():,} in {elapsed:.1f} s"
                     f", {rate:,.0f} a second with one worker (aim: at least {DELIVERIES_AIM}: "
                     f"{'ok' if rate >= DELIVERIES_AIM else 'BELOW AIM'})"
                     + ("" if complete else " (not all arrived within 120 s)"))

        say("SQLite: the list of 10 alone, at 100 changes a second, and while those go to 10 "
            "endpoints...")
        _remove(store, ids)  # each round makes endpoints of its own, at the feed's end
        list_of_10 = f"http://127.0.0.1:{port}{LIST}?limit=10"
        wrk(list_of_10, auth, 1)
        alone: list[Load] = []
        changing: list[Load] = []
        beside: list[Load] = []
        own_database = str(folder / "own-deliverer.db")
        own_port, own_auth, own_process = stack.enter_context(
            _service(own_database, folder, own_deliverer=True))
        own_store = open_store(Settings(database=own_database))
        stack.callback(own_store.dispose)
        own_store.import_orders(_order(i) for i in range(1, 11))
        own_list = f"http://127.0.0.1:{own_port}{LIST}?limit=10"
        wrk(own_list, own_auth, 1)
        own_next = 100
        separate: list[Load] = []
        for _ in range(args.runs):
            alone.append(wrk(list_of_10, auth, args.seconds, process=process))
            writer = Writer(store, next_id, 100)
            time.sleep(0.5)
            changing.append(wrk(list_of_10, auth, args.seconds, process=process))
            ids = _endpoints(store, ten.urls())
            time.sleep(1.5)  # claimed, and delivering what the writer writes
            beside.append(wrk(list_of_10, auth, args.seconds, process=process))
            writer.stop()
            next_id = writer.next_id
            _remove(store, ids)
            # The same changes and endpoints, delivered by a process of their own.
            writer = Writer(own_store, own_next, 100)
            ids = _endpoints(own_store, ten.urls())
            time.sleep(1.5)
            separate.append(wrk(own_list, own_auth, args.seconds, process=own_process))
            writer.stop()
            own_next = writer.next_id
            _remove(own_store, ids)
        ten.close()
        by_changes = statistics.median(c.rps / a.rps for a, c in zip(alone, changing,
                                                                     strict=True))
        by_deliveries = statistics.median(b.rps / c.rps for c, b in zip(changing, beside,
                                                                        strict=True))
        by_both = statistics.median(b.rps / a.rps for a, b in zip(alone, beside, strict=True))
        rows.append(("SQLite: list of 10, alone", median_load(alone), ""))
        rows.append(("SQLite: list of 10, 100 changes/s, no endpoint", median_load(changing),
                     f"{by_changes:.2f}x alone"))
        rows.append(("SQLite: list of 10, the same to 10 endpoints", median_load(beside),
                     f"{by_deliveries:.2f}x without endpoints (target >= {LIST_AT_LEAST}: "
                     f"{'ok' if by_deliveries >= LIST_AT_LEAST else 'BELOW TARGET'}); "
                     f"{by_both:.2f}x alone"))
        by_process = statistics.median(o.rps / b.rps for b, o in zip(beside, separate,
                                                                     strict=True))
        rows.append(("SQLite: list of 10, the same from a deliverer process",
                     median_load(separate),
                     f"{by_process:.2f}x the worker's own deliverer (the process pinned to "
                     f"the worker's core)"))
    print("\nWebhooks: medians of rounds")
    print(table(rows))
    print("\n".join(lines))


if __name__ == "__main__":
    main()
