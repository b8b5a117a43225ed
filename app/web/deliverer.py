"""The deliverer of webhooks (D28): one per worker, on its event loop.

It claims endpoints by lease (Store.claim_webhook_endpoints: PostgreSQL's FOR UPDATE SKIP
LOCKED, SQLite's write lock), so that each endpoint has one deliverer across every worker
and host, and renews its leases every claim_seconds; a clean stop gives them all back.
Each endpoint it holds gets a task of its own, so a slow or dead receiver delays only
itself. A task reads the feeds of orders and pets after the endpoint's place
(Store.changes_after, D39), sends the first change the endpoint wants (one message in
flight, in feed order), and moves the place past it only after a 2xx, while it still
holds the lease. A failure is retried on the schedule of app.core.webhooks (the
endpoint's attempt count and next time are stored, so another worker goes on from them);
a 410 disables the endpoint at once, and so does the last failed retry, its place kept.
With nothing to send, a task waits for the commit signal the feed's long polling uses
(RevisionWatch), and for its time otherwise.

An attempt and what follows from it are one write, and the attempts that the endpoints of
a deliverer make meanwhile share it (Recorder): one transaction and one commit for all, in
place of one each, so that at a thousand messages a second the database's work stays small
beside the requests'. Each endpoint still waits for its attempt's commit before its next
message, and goes on with the endpoint as that write left it (a PATCH, a replay, a
rotation or a disable committed before it is seen in it) rather than reading it again.

A worker killed mid-attempt sends nothing more; its leases run out, another worker claims
the endpoints and sends the same change again, with the same webhook-id (at least once).
The store is called from a small pool of threads of the deliverer's own: a PostgreSQL
round trip never blocks the loop.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import secrets
import signal
import socket
import time
from collections.abc import Callable
from typing import Any, TypeVar

from app.core import metrics, webhook_urls, webhooks
from app.core.config import Settings
from app.core.logs import configure_logging
from app.core.orders import format_unix_time
from app.core.setting_values import redacted
from app.core.storage import Store, open_store
from app.core.storage.records import Attempted, Change, Place, WebhookEndpoint
from app.outbound import Sender
from app.web.longpoll import RevisionWatch
from app.web.threads import HandlerThreads

log = logging.getLogger("petstore.webhooks")

T = TypeVar("T")
CLAIM_MAX = 200  # endpoints one claim may take
READ_AHEAD = 100  # changes read at once after an endpoint's place
IDLE_SECONDS = 2.0  # a task with nothing to send looks at its endpoint again this often
# A task waiting to retry looks at the clock this often, so a retry goes at most this late
# (the schedule of D28 counts from 5 seconds up).
RETRY_POLL_SECONDS = 0.25
# An endpoint is sent one pet at most this often (D39): a pet that changes again sooner is
# read again when the time is up and sent as it is then, so a flash sale of one pet costs
# a receiver, and the worker that serves the sale, ten messages a second, not one a place.
# Other pets and orders are not held back by it but for those behind it in the feed.
PET_PACE_SECONDS = 0.1
PRUNE_SECONDS = 3600.0  # how often the attempts log is pruned


class Deliverer:
    """Claims webhook endpoints and delivers every change to each, in order."""

    def __init__(self, store: Store, settings: Settings, watch: RevisionWatch,
                 clock: Callable[[], float] = time.time, owner: str | None = None) -> None:
        self.store, self.settings, self.watch, self.clock = store, settings, watch, clock
        self.owner = owner or f"{socket.gethostname()}:{os.getpid()}:{secrets.token_hex(4)}"
        self.lease = settings.webhook_lease_seconds
        self.allowed = webhook_urls.networks(settings.webhook_allowed_networks)
        self.tasks: dict[int, asyncio.Task[None]] = {}
        self.sender: Sender | None = None
        self.pool: HandlerThreads | None = None
        self.main: asyncio.Task[None] | None = None
        self.failing = False
        self.sending: set[int] = set()  # endpoints with a message in flight
        # Set as stop() begins: the claim loop, waiting on it, ends at its next turn.
        self.stop_begun = asyncio.Event()
        self.recorder = Recorder(self)
        # reads of the feed under way, by place: endpoints at one place share one
        self.reading: dict[tuple[Place, tuple[str, ...], int | None],
                           asyncio.Future[tuple[int | None, list[Change]]]] = {}

    @property
    def stopping(self) -> bool:
        """Whether stop() has begun."""
        return self.stop_begun.is_set()

    @property
    def claim_seconds(self) -> float:
        """How often leases are claimed and renewed: three times a lease, at most 1 s."""
        return min(1.0, self.lease / 3)

    def start(self) -> None:
        """Begin on the running event loop."""
        self.sender = Sender(self.settings.webhook_timeout, self.allowed)
        self.pool = HandlerThreads(8, "webhooks")
        self.main = asyncio.get_running_loop().create_task(self._run(), name="webhooks")

    async def stop(self) -> None:
        """Stop: a message in flight may finish (its answer recorded, so a clean stop sends
        nothing twice), and so may a claim, a read of the feed or a write under way, within
        the attempt timeout and a second in all; every other task stops at once. Then every
        lease this deliverer holds is given up, within a second more (another worker takes
        them at once), and the connections closed. What a store that hangs past that bound
        leaves undone is as a killed worker's (D28): its leases run out."""
        # The claim loop ends at its next turn, not cancelled: a claim cancelled in its
        # thread would still commit, perhaps after the leases below were given up.
        self.stop_begun.set()
        idle = [task for endpoint_id, task in self.tasks.items()
                if endpoint_id not in self.sending]
        for task in idle:
            task.cancel()
        busy = [self.tasks[endpoint_id] for endpoint_id in self.sending
                if endpoint_id in self.tasks]
        # A store that hangs does not hang the worker's end.
        loop = asyncio.get_running_loop()
        deadline = loop.time() + self.settings.webhook_timeout + 1
        waited = [task for task in (self.main, *busy) if task is not None]
        if waited:
            await asyncio.wait(waited, timeout=deadline - loop.time())
        tasks = [task for task in (self.main, *self.tasks.values()) if task is not None]
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        # The recorder's write and the reads of the feed under way end as they began,
        # before the loop does (a read's task may be gone: nobody waits on it but this).
        pending = [f for f in (*self.reading.values(), self.recorder.writer) if f is not None]
        if pending:
            _, late = await asyncio.wait(pending, timeout=max(0.0, deadline - loop.time()))
            for future in late:  # given up on: its thread may still answer, to nobody
                future.cancel()
            await asyncio.gather(*late, return_exceptions=True)
        self.tasks.clear()
        # Every lease of this owner, in one statement: those of endpoints whose task ended
        # (disabled meanwhile) too, which a list of its tasks or its last claim would miss.
        with contextlib.suppress(Exception):
            await asyncio.wait_for(self._call(self.store.release_webhook_leases, self.owner),
                                   max(1.0, deadline - loop.time()))
        if self.sender is not None:
            await self.sender.close()
        if self.pool is not None:
            self.pool.close()

    async def _call(self, work: Callable[..., T], *args: Any) -> T:
        assert self.pool is not None
        return await self.pool.run(work, *args)

    async def _run(self) -> None:
        # The attempts log is pruned at the first claim, then hourly (the setting
        # PETSTORE_WEBHOOK_ATTEMPTS_KEPT_DAYS, docs/api/webhooks.md). None, not 0.0: the
        # monotonic clock counts from the host's boot, so 0.0 put off the first prune of a
        # host up less than an hour.
        pruned: float | None = None
        while not self.stopping:
            try:
                now = self.clock()
                claimed = await self._call(self.store.claim_webhook_endpoints, self.owner,
                                           now, now + self.lease, CLAIM_MAX)
                if self.stopping:  # it began during the claim: no new task, no prune
                    break
                # Said before any delivery it lets go on, so the log reads in order.
                if self.failing:
                    log.warning("the webhook deliverer reaches the database again")
                    self.failing = False
                for endpoint in claimed:
                    task = self.tasks.get(endpoint.id)
                    if task is None or task.done():
                        self.tasks[endpoint.id] = asyncio.get_running_loop().create_task(
                            self._serve(endpoint.id), name=f"webhook-{endpoint.id}")
                if pruned is None or time.monotonic() - pruned > PRUNE_SECONDS:
                    pruned = time.monotonic()
                    await self._call(webhooks.prune, self.store,
                                     self.settings.webhook_attempts_kept_days)
            except Exception as exc:  # the store is down: said once, tried again
                if not self.failing:
                    log.warning("the webhook deliverer cannot claim endpoints (%s); it "
                                "tries again", exc)
                self.failing = True
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self.stop_begun.wait(), self.claim_seconds)

    async def _serve(self, endpoint_id: int) -> None:
        """Deliver to one endpoint while this deliverer holds it."""
        ahead = Ahead()
        try:
            while not self.stopping and await self._step(endpoint_id, ahead):
                pass
        except asyncio.CancelledError:
            raise
        except Exception as exc:  # the store failed: the next claim starts a task again
            log.warning("webhook endpoint %s: delivery stopped (%s); it goes on shortly",
                        endpoint_id, exc)
            await asyncio.sleep(self.claim_seconds)
        finally:
            if self.tasks.get(endpoint_id) is asyncio.current_task():
                del self.tasks[endpoint_id]

    async def _step(self, endpoint_id: int, ahead: Ahead) -> bool:
        """One message sent, or one wait; False when this deliverer no longer holds it.

        The endpoint is as the last attempt's write left it, or read (a PATCH, a replay, a
        rotation or a disable takes effect at the next message); the changes after its
        place are read READ_AHEAD at a time and kept while its place is where the last one
        left it."""
        endpoint = ahead.endpoint or await self._call(self.store.get_webhook_endpoint,
                                                      endpoint_id)
        ahead.endpoint = None
        now = self.clock()
        if (endpoint is None or not endpoint.enabled or endpoint.lease_owner != self.owner
                or (endpoint.lease_until or 0) < now):
            return False
        if endpoint.next_attempt_at is not None and endpoint.next_attempt_at > now:
            await asyncio.sleep(RETRY_POLL_SECONDS)
            return True
        place = endpoint.place
        if ahead.after != place:  # moved by a replay, or nothing read yet
            ahead.changes, ahead.after = [], place
        if not ahead.changes:
            ahead.revision, ahead.changes = await self._changes_after(
                place, webhooks.feeds(endpoint), endpoint.id)
        change = next((c for c in ahead.changes if webhooks.wanted(endpoint, c)), None)
        if change is None:
            if ahead.changes:  # none of them wanted: the place moves past them, and the
                # feed is read again at once (what came since, or the revision to wait on)
                last = ahead.changes[-1]
                await self._call(self.store.webhook_delivered, endpoint.id, self.owner,
                                 last.place, place, _seen(ahead.changes))
                ahead.changes, ahead.after = [], last.place
                return True
            ahead.behind = None
            metrics.WEBHOOK_LAG.labels(str(endpoint_id)).set(0)
            assert ahead.revision is not None  # an empty read reads the revision
            await self.watch.passed(ahead.revision, IDLE_SECONDS)
            return True
        if change.of == "pet":
            early = ahead.pet_sent(change.item_id)
            if early > 0:  # read again when the pace allows: the pet as it is then
                ahead.changes = []
                await asyncio.sleep(early)
                return True
        if ahead.behind is None:
            ahead.behind = time.time()
        metrics.WEBHOOK_LAG.labels(str(endpoint_id)).set(time.time() - ahead.behind)
        self.sending.add(endpoint_id)
        try:
            delivered, ahead.endpoint = await self._deliver(endpoint, change)
            if delivered:
                index = ahead.changes.index(change)
                ahead.changes = ahead.changes[index + 1:]
                ahead.after = change.place
            else:  # a retry reads the feed again: the order as it is then
                ahead.changes = []
        finally:
            self.sending.discard(endpoint_id)
        return True

    async def _changes_after(self, place: Place, feeds: tuple[str, ...],
                             endpoint_id: int) -> tuple[int | None, list[Change]]:
        """The READ_AHEAD changes of the feeds after the place, in one trip to a thread;
        where there are none, the revision read before them (a task with nothing to send
        waits for a later one: read after, a change committed in between would be waited
        past), else None, saving a busy endpoint that read for each message. Endpoints at
        the same place wanting the same feeds (each change wakes them all at once) share
        one read under way (a read of the pets is each endpoint's own: it carries what
        that endpoint last read of them)."""
        reader = endpoint_id if "pet" in feeds else None
        key = (place, feeds, reader)
        shared = self.reading.get(key)
        if shared is None:
            def read() -> tuple[int | None, list[Change]]:
                changes = self.store.changes_after(place, READ_AHEAD, feeds, reader)
                if changes:
                    return None, changes
                revision = self.store.revision()
                return revision, self.store.changes_after(place, READ_AHEAD, feeds, reader)

            shared = asyncio.ensure_future(self._call(read))
            self.reading[key] = shared
            shared.add_done_callback(lambda _: self.reading.pop(key, None))
        revision, changes = await asyncio.shield(shared)
        return revision, list(changes)

    async def _deliver(self, endpoint: WebhookEndpoint,
                       change: Change) -> tuple[bool, WebhookEndpoint | None]:
        """One attempt, recorded with what follows from it: whether it was delivered, and
        the endpoint as the record left it (None when this deliverer lost its lease, or a
        replay moved the endpoint's place meanwhile: its next step reads it)."""
        assert self.sender is not None
        place = endpoint.place
        msg_id = webhooks.webhook_id(change)
        kind = webhooks.message_type(change)
        sent_at = time.time()  # the signature's time is the real one, whatever the clock
        body = webhooks.message(kind, change.data, sent_at)
        headers = webhooks.signed_headers(endpoint, msg_id, body, sent_at)
        outcome = await self.sender.send(endpoint.url, headers, body)
        attempt = endpoint.attempt + 1
        metrics.WEBHOOK_ATTEMPTS.labels(_outcome(outcome)).inc()
        record = dict(endpoint_id=endpoint.id, webhook_id=msg_id, type=kind, attempt=attempt,
                      status=outcome.status, duration_ms=outcome.duration_ms,
                      response=outcome.response,
                      error=None if outcome.delivered else outcome.failure(),
                      now=format_unix_time(sent_at))
        if outcome.delivered:
            after = await self.recorder.record(Attempted(
                record, delivered=change.place, since=place, seen=_seen([change])))
            return True, after
        if outcome.gone:
            reason, delay = "the receiver answered 410 Gone", None
        else:
            waited = webhooks.retry_after(outcome.retry_after, time.time())
            delay = webhooks.next_attempt(attempt, waited)
            reason = f"{attempt} attempts failed; the last: {outcome.failure()}"
        if delay is None:
            log.warning("webhook endpoint %s disabled: %s", endpoint.id, reason)
        after = await self.recorder.record(Attempted(
            record, next_attempt_at=None if delay is None else self.clock() + delay,
            disabled_reason=reason if delay is None else None, since=place))
        return False, after


class Recorder:
    """Writes the attempts of a deliverer's endpoints together: what they record while a
    write runs goes into the next one, one transaction for all (Store.webhook_attempted).
    Each caller is answered after the commit that holds its attempt."""

    def __init__(self, deliverer: Deliverer) -> None:
        self.deliverer = deliverer
        self.waiting: list[tuple[Attempted, asyncio.Future[WebhookEndpoint | None]]] = []
        self.writer: asyncio.Task[None] | None = None

    async def record(self, attempted: Attempted) -> WebhookEndpoint | None:
        """Record the attempt; the endpoint as the write left it, or None when the
        deliverer no longer held its lease."""
        future: asyncio.Future[WebhookEndpoint | None] = \
            asyncio.get_running_loop().create_future()
        self.waiting.append((attempted, future))
        if self.writer is None or self.writer.done():
            self.writer = asyncio.get_running_loop().create_task(self._write())
        return await future

    async def _write(self) -> None:
        deliverer = self.deliverer
        while self.waiting:
            batch, self.waiting = self.waiting, []
            try:
                after = await deliverer._call(deliverer.store.webhook_attempted,
                                              deliverer.owner, [a for a, _ in batch])
            except Exception as exc:  # each caller's task stops, and starts again shortly
                for _, future in batch:
                    if not future.done():
                        future.set_exception(exc)
            else:
                for (_, future), endpoint in zip(batch, after, strict=True):
                    if not future.done():
                        future.set_result(endpoint)


class Ahead:
    """An endpoint task's changes read ahead: those after the place `after`, and, when a
    read found none, the revision read before it (a task with nothing to send waits for a
    later one); the endpoint as its last attempt's write left it, for the next step;
    when it last sent each pet lately (PET_PACE_SECONDS); and since when a change has
    waited for it, its lag (a task that takes the endpoint again counts afresh)."""

    def __init__(self) -> None:
        self.endpoint: WebhookEndpoint | None = None
        self.after: Place | None = None
        self.changes: list[Change] = []
        self.revision: int | None = None
        self.pets_sent: dict[int, float] = {}  # pet id -> when last sent (monotonic)
        self.behind: float | None = None  # when a change was first found waiting (Unix)

    def pet_sent(self, pet_id: int) -> float:
        """How long the pet must wait for its pace (0: none, and it is noted sent now)."""
        now = time.monotonic()
        if len(self.pets_sent) > 100:  # those past their pace are forgotten
            self.pets_sent = {pet: at for pet, at in self.pets_sent.items()
                              if now - at < PET_PACE_SECONDS}
        sent = self.pets_sent.get(pet_id)
        early = 0.0 if sent is None else sent + PET_PACE_SECONDS - now
        if early <= 0:
            self.pets_sent[pet_id] = now
        return max(early, 0.0)


def _seen(changes: list[Change]) -> tuple[tuple[int, bool, bool], ...]:
    """What an endpoint read of the pets among changes, to remember (D39)."""
    return tuple((c.item_id, *c.state) for c in changes if c.state is not None)


def _outcome(outcome: webhooks.Outcome) -> str:
    """The label of an attempt's outcome in /metrics."""
    if outcome.delivered:
        return "delivered"
    if outcome.status is None:
        return "no_answer"
    if outcome.gone:
        return "gone"
    return "refused"


def run_alone(settings: Settings) -> None:
    """A deliverer on an event loop of its own until SIGINT or SIGTERM: `petstore webhooks
    deliver`, for an operator who serves with PETSTORE_WEBHOOKS_ENABLED=false and keeps the
    deliveries off the request workers (docs/api/webhooks.md)."""
    store = open_store(settings)

    async def deliver() -> None:
        loop = asyncio.get_running_loop()
        stopping = asyncio.Event()
        for signum in (signal.SIGINT, signal.SIGTERM):
            loop.add_signal_handler(signum, stopping.set)
        deliverer = Deliverer(store, settings, RevisionWatch(store))
        deliverer.start()
        log.info("delivering webhooks from %s", redacted(settings.database))
        await stopping.wait()
        await deliverer.stop()
        log.info("stopped delivering webhooks")

    try:
        asyncio.run(deliver())
    finally:
        store.dispose()


if __name__ == "__main__":
    settings = Settings.from_env()
    configure_logging(settings)
    run_alone(settings)
