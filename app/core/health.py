"""What makes an instance ready to serve (D16): its database answers, and when quotas
fail closed, its quota storage too.

The checks run off the requests' path (D41): each in a thread of its own that runs it
every INTERVAL_SECONDS, each within a short bound of its own (the store's check, the quota
storage's timeouts), and keeps the last result. /readyz reads those, so it answers at once
whatever the links do, and a load balancer stops sending traffic to a host that cannot
serve within about two seconds of a fault. A worker's first /readyz waits for the first
results up to FIRST_WAIT_SECONDS; a result older than STALE_SECONDS (a check that does not
come back) counts as a failure.
"""

from __future__ import annotations

import threading
import time
import weakref
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from app.core.errors import NotReady, StoreUnavailable
from app.core.storage import Store

INTERVAL_SECONDS = 1.0
FIRST_WAIT_SECONDS = 1.5
STALE_SECONDS = 5.0


@dataclass(frozen=True)
class Result:
    """One run of a check: what /readyz shows, whether it makes the instance unready."""

    shown: str  # "ok", or what failed
    ready: bool
    at: float  # time.monotonic() when it ended


class Check:
    """One check, run every interval seconds by a thread of its own from the first start()
    until stop() (or until nothing refers to it any more)."""

    def __init__(self, name: str, run: Callable[[], Result],
                 interval: float = INTERVAL_SECONDS) -> None:
        self.name, self.run, self.interval = name, run, interval
        self.last: Result | None = None
        self.done = threading.Condition()
        self.stopping = threading.Event()
        self.thread: threading.Thread | None = None

    def start(self) -> None:
        with self.done:
            if self.thread is None or not self.thread.is_alive():
                self.stopping.clear()
                self.thread = threading.Thread(
                    target=_keep_checking, args=(weakref.ref(self), self.stopping),
                    name=f"petstore-ready-{self.name}", daemon=True)
                self.thread.start()

    def stop(self) -> None:
        self.stopping.set()

    def result(self, wait: float) -> Result | None:
        """The last result, waiting up to wait seconds for a first one."""
        with self.done:
            if self.last is None:
                self.done.wait_for(lambda: self.last is not None, wait)
            return self.last

    def once(self) -> None:
        try:
            result = self.run()
        except Exception as exc:  # a check that fails in its own way is "not ready"
            result = Result(f"the check failed ({type(exc).__name__})", False,
                            time.monotonic())
        with self.done:
            self.last = result
            self.done.notify_all()


def _keep_checking(ref: weakref.ref[Check], stopping: threading.Event) -> None:
    while not stopping.is_set():
        check = ref()
        if check is None:
            return
        check.once()
        interval = check.interval
        del check  # the thread holds no reference while it sleeps
        stopping.wait(interval)


class Readiness:
    """/readyz's checks, kept by their threads (see the module): the database, and the
    quota storage when it is a shared one. A quota storage that does not answer makes
    the instance unready only when quotas fail closed (D16); otherwise /readyz shows that
    requests are counted in process memory."""

    def __init__(self, store: Store, quota_probe: Callable[[], bool] | None = None,
                 quotas_fail_closed: bool = False,
                 interval: float = INTERVAL_SECONDS) -> None:
        self.store = store
        self.checks = {"database": Check("database", self._database, interval)}
        if quota_probe is not None:
            self.checks["quotas"] = Check("quotas", lambda: _quotas(
                quota_probe, quotas_fail_closed), interval)

    def start(self) -> None:
        for check in self.checks.values():
            check.start()

    def stop(self) -> None:
        for check in self.checks.values():
            check.stop()

    def report(self) -> dict[str, Any]:
        """The checks and their last results; raises NotReady naming each that failed."""
        self.start()
        now = time.monotonic()
        shown = {"database": "ok", "quotas": "not checked"}
        failed = []
        for name, check in self.checks.items():
            result = check.result(FIRST_WAIT_SECONDS)
            if result is None:
                failed.append(f"{name}: not checked yet (no answer within "
                              f"{FIRST_WAIT_SECONDS:g} s)")
            elif now - result.at > STALE_SECONDS:
                failed.append(f"{name}: no answer for {now - result.at:.0f} s")
            elif not result.ready:
                failed.append(f"{name}: {result.shown} (checked {max(0.0, now - result.at):.1f}"
                              " s ago)")
            else:
                shown[name] = result.shown
        if failed:
            raise NotReady("; ".join(failed))
        return {"status": "ready", "checks": shown}

    def _database(self) -> Result:
        try:
            self.store.check()
        except StoreUnavailable as exc:
            return Result(exc.message, False, time.monotonic())
        return Result("ok", True, time.monotonic())


def _quotas(probe: Callable[[], bool], fail_closed: bool) -> Result:
    if probe():
        return Result("ok", True, time.monotonic())
    if fail_closed:
        return Result("the quota storage does not answer", False, time.monotonic())
    return Result("does not answer; counting in process memory", True, time.monotonic())
