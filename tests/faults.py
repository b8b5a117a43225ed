"""What the fault tests share (D41): clients that place orders under Idempotency-Keys while
a fault lasts and keep a ledger of every answer, probes of /healthz and /readyz, and the
check afterwards that nothing acknowledged was lost: every order answered 201 is in the
store, and its Idempotency-Key, sent again, replays that same order.

A fault test starts a Load and a Watch, makes its fault, ends it, stops both, and asserts
on what they saw; Ledger.check_store() is the last step of each.
"""

from __future__ import annotations

import http.client
import itertools
import json
import threading
import time
import uuid
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any, Self

PLACE = "/v2/store/orders"


@dataclass(frozen=True)
class Answer:
    """One request's answer, when it was sent (time.monotonic()) and how long it took."""

    path: str
    status: int  # 0: no answer at all (the connection failed or timed out)
    headers: dict[str, str]
    body: bytes
    sent: float
    seconds: float

    def json(self) -> Any:
        return json.loads(self.body)


def call(port: int, method: str, path: str, headers: dict[str, str] | None = None,
         body: Any = None, timeout: float = 30.0) -> Answer:
    """One request on a connection of its own, timed; a failure to get any answer is
    status 0 (never an exception: a fault test records it)."""
    sent = time.monotonic()
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout)
    try:
        data = None if body is None else json.dumps(body).encode()
        conn.request(method, path, body=data, headers={
            **(headers or {}), **({"Content-Type": "application/json"} if data else {})})
        response = conn.getresponse()
        answer = Answer(path, response.status,
                        {k.lower(): v for k, v in response.getheaders()}, response.read(),
                        sent, time.monotonic() - sent)
    except OSError as exc:
        answer = Answer(path, 0, {}, str(exc).encode(), sent, time.monotonic() - sent)
    finally:
        conn.close()
    return answer


def assert_unavailable(answer: Answer | tuple[int, dict[str, str], bytes],
                       counted: bool = True) -> None:
    """A 503 service_unavailable Error with Retry-After and (counted: from a server whose
    quotas are on) the rate-limit headers, leaking nothing: what every fault test holds a
    refusal to (an Answer, or a served request's (status, lower-case headers, body))."""
    status, headers, body = ((answer.status, answer.headers, answer.body)
                             if isinstance(answer, Answer) else answer)
    assert status == 503, (status, body)
    error = json.loads(body)
    assert (error["code"], error["status"]) == ("service_unavailable", 503), error
    assert int(headers["retry-after"]) >= 1
    assert not counted or headers["x-ratelimit-limit"]
    for leak in (b"Traceback", b"psycopg", b"sqlite", b"redis"):
        assert leak not in body.lower(), body


# How long after the drop the acknowledged orders must all replay (D41's bounds, with room
# for a loaded machine).
REPLAY_WITHIN = 30.0


@dataclass
class Ledger:
    """Every place sent and its answer; acknowledged: Idempotency-Key -> order id (201)."""

    pet_id: int = 7
    answers: list[Answer] = field(default_factory=list)
    acknowledged: dict[str, int] = field(default_factory=dict)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def place(self, port: int, auth: dict[str, str], key: str) -> Answer:
        answer = call(port, "POST", PLACE, {**auth, "Idempotency-Key": key},
                      {"petId": self.pet_id, "quantity": 1})
        with self.lock:
            self.answers.append(answer)
            if answer.status == 201:
                self.acknowledged[key] = int(answer.json()["id"])
        return answer

    def statuses(self) -> Counter[int]:
        return Counter(answer.status for answer in self.answers)

    def longest(self) -> float:
        return max((answer.seconds for answer in self.answers), default=0.0)

    def check_store(self, port: int, auth: dict[str, str]) -> int:
        """Nothing acknowledged lost: every order answered 201 is in the list, and every
        acknowledged Idempotency-Key, sent again with its request, replays that order.
        Returns how many were checked."""
        # The list and each replay may meet a worker that has not reached the database
        # or the quotas' Redis again yet (each worker's link heals by itself, the last up
        # to its connect timeout after the first, D41): its 503 says to retry, and a
        # client does, after Retry-After.
        deadline = time.monotonic() + REPLAY_WITHIN

        def answered(method: str, path: str, headers: dict[str, str],
                     body: Any = None) -> Answer:
            while True:
                answer = call(port, method, path, headers, body)
                if answer.status != 503 or time.monotonic() > deadline:
                    return answer
                time.sleep(min(1.0, float(answer.headers.get("retry-after", "1"))))

        listed = answered("GET", "/v1/store/orders", auth)
        assert listed.status == 200, listed.body
        ids = {order["id"] for order in listed.json()}
        lost = {key: order for key, order in self.acknowledged.items() if order not in ids}
        assert not lost, f"acknowledged orders lost: {sorted(lost.values())[:20]}"

        def replay(key: str) -> tuple[str, int, Any]:
            again = answered("POST", PLACE, {**auth, "Idempotency-Key": key},
                             {"petId": self.pet_id, "quantity": 1})
            # No answer at all (status 0: the call's 30 s ran out) is reported as such.
            return key, again.status, (again.json().get("id") if 200 <= again.status < 300
                                       else again.body[:200])

        with ThreadPoolExecutor(4) as pool:
            replays = list(pool.map(replay, self.acknowledged))
        wrong = [(key, status, found) for key, status, found in replays
                 if status not in (200, 201) or found != self.acknowledged[key]]
        assert not wrong, f"keys that did not replay their order: {wrong[:10]}"
        return len(replays)


class _Threads:
    """Threads of a test's own, started by `with` and stopped (told, then joined) by
    stop() or at the block's end."""

    threads: list[threading.Thread]
    stopping: threading.Event

    def __enter__(self) -> Self:
        for thread in self.threads:
            thread.start()
        return self

    def __exit__(self, *_: Any) -> None:
        self.stop()

    def stop(self) -> None:
        self.stopping.set()
        for thread in self.threads:
            thread.join(60)


class Load(_Threads):
    """clients threads placing orders one after another, each under a new key, until
    stop(); every answer goes to the ledger."""

    def __init__(self, port: int, auth: dict[str, str], ledger: Ledger,
                 clients: int = 8) -> None:
        self.port, self.auth, self.ledger = port, auth, ledger
        self.stopping = threading.Event()
        self.numbers = itertools.count()
        run = uuid.uuid4().hex[:8]
        self.threads = [threading.Thread(target=self._place, args=(f"{run}-{client}",),
                                         daemon=True) for client in range(clients)]

    def _place(self, client: str) -> None:
        while not self.stopping.is_set():
            answer = self.ledger.place(self.port, self.auth, f"{client}-{next(self.numbers)}")
            if answer.status != 201:
                time.sleep(0.05)  # as a client would before trying again


class Watch(_Threads):
    """Asks each path every `every` seconds from a thread of its own, until stop()."""

    def __init__(self, port: int, paths: tuple[str, ...] = ("/healthz", "/readyz"),
                 every: float = 0.2) -> None:
        self.port, self.paths, self.every = port, paths, every
        self.answers: dict[str, list[Answer]] = {path: [] for path in paths}
        self.stopping = threading.Event()
        self.threads = [threading.Thread(target=self._ask, args=(path,), daemon=True)
                        for path in paths]

    def _ask(self, path: str) -> None:
        while not self.stopping.is_set():
            self.answers[path].append(call(self.port, "GET", path))
            self.stopping.wait(self.every)

    def first(self, path: str, status: int, after: float) -> Answer | None:
        """The first answer of path with this status among those sent after a moment."""
        return next((answer for answer in self.answers[path]
                     if answer.sent >= after and answer.status == status), None)


def first_success_after(ledger: Ledger, moment: float) -> float | None:
    """Seconds from a moment to the first 201 of a place sent after it."""
    times = [answer.sent + answer.seconds - moment for answer in ledger.answers
             if answer.sent >= moment and answer.status == 201]
    return min(times, default=None)
