"""A link that drops packets, between a real `petstore serve` and PostgreSQL, and between
it and Redis (D41): through a relay of the test's own (tests/relay.py) that stops
forwarding without refusing or closing anything, as a switch, a security group or a
partition fails. While it drops, every request that needs the link is answered 503
service_unavailable with Retry-After within the bound the manual states, /healthz answers
at once, /readyz says no within about two seconds naming what is unreachable; after it
heals, the service answers 2xx again within a bound with no restart, and nothing it
acknowledged is lost (tests/faults.py); the feed's long polls and the webhooks' deliverer go
on from where they were. The shared servers are never touched."""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import urlsplit

import pytest

from tests.faults import Ledger, Load, Watch, assert_unavailable, call, first_success_after
from tests.receivers import Received, receiving
from tests.relay import Relay, relay_to
from tests.support import Server, serving

pytestmark = pytest.mark.slow

# The manual's bounds (docs/running/several-hosts.md), with room for a loaded CI machine.
ANSWER_WITHIN = 5.0 + 2.0  # a request that needs a silent link: 503 within 5 s
READY_ANSWERS_WITHIN = 2.0  # /readyz, whatever the links do
READY_SAYS_NO_WITHIN = 3.0 + 2.0  # its checks notice a silent link within about 3 s
READY_SAYS_YES_WITHIN = 2.0 + 2.0  # and a healed one at their next run, within about 2 s
HEALTH_ANSWERS_WITHIN = 1.0
HEALED_WITHIN = 3.0 + 2.0  # a 201 again after the link heals
DROP_SECONDS = 7.0
DELIVERED_WITHIN = 10.0  # after the heal, every acknowledged change at the receiver
FEED = "/v2/store/order-changes"


def _via(url: str, relay: Relay) -> str:
    """url with its host and port replaced by the relay's."""
    parts = urlsplit(url)
    user = parts.netloc.rsplit("@", 1)[0] + "@" if "@" in parts.netloc else ""
    return parts._replace(netloc=f"{user}127.0.0.1:{relay.port}").geturl()


@pytest.fixture
def postgres_relay(postgres_database: str) -> Iterator[tuple[str, Relay]]:
    parts = urlsplit(postgres_database)
    with relay_to(parts.hostname or "127.0.0.1", parts.port or 5432) as relay:
        yield _via(postgres_database, relay), relay


@pytest.fixture
def redis_relay(redis_url: str) -> Iterator[tuple[str, Relay]]:
    parts = urlsplit(redis_url)
    with relay_to(parts.hostname or "127.0.0.1", parts.port or 6379) as relay:
        yield _via(redis_url, relay), relay


def _auth(server: Server) -> dict[str, str]:
    key = server.petstore("keys", "create", "--plan", "enterprise", "--per-minute", "100000",
                          "--per-day", "10000000", "--name", "faults").stdout.strip()
    return {"Authorization": f"Bearer {key}"}


def _drop(server: Server, relay: Relay, auth: dict[str, str],
          ledger: Ledger | None = None) -> dict[str, object]:
    """Places from eight clients (into ledger), /healthz and /readyz asked five times a
    second, while the relay drops for DROP_SECONDS and then heals; returns what was seen,
    for the assertions and the report."""
    ledger = ledger or Ledger()
    with Watch(server.port) as watch, Load(server.port, auth, ledger):
        time.sleep(1.0)  # the load under way, on a link that works
        assert ledger.statuses()[201] > 0, ledger.statuses()
        dropped = time.monotonic()
        relay.drop()
        time.sleep(DROP_SECONDS)
        healed = time.monotonic()
        relay.heal()
        # Until a place succeeds again and /readyz says yes again, or both bounds are past.
        deadline = healed + max(HEALED_WITHIN, READY_SAYS_YES_WITHIN)
        while (first_success_after(ledger, healed) is None
               or watch.first("/readyz", 200, healed) is None) and time.monotonic() < deadline:
            time.sleep(0.1)
    # Answered while the link dropped (a place sent just before it healed may succeed).
    during = [answer for answer in ledger.answers
              if dropped + 0.5 <= answer.sent and answer.sent + answer.seconds < healed]
    ready = watch.answers["/readyz"]
    said_no = watch.first("/readyz", 503, dropped)
    said_yes = watch.first("/readyz", 200, healed)
    seen = {
        "sent": len(ledger.answers), "statuses": dict(ledger.statuses()),
        "longest": round(ledger.longest(), 2),
        "during the drop": dict(Counter(a.status for a in during)),
        "readyz": dict(Counter(a.status for a in ready)),
        "readyz longest": round(max(a.seconds for a in ready), 2),
        "readyz said no after": said_no and round(said_no.sent + said_no.seconds - dropped, 2),
        "readyz said yes after": said_yes and round(said_yes.sent + said_yes.seconds - healed, 2),
        "healed: first 201 after": first_success_after(ledger, healed),
        "healthz longest": round(max(a.seconds for a in watch.answers["/healthz"]), 2),
    }
    print(f"\n{seen}")
    for answer in ledger.answers:
        assert answer.status in (201, 503), (answer.status, answer.body)
        if answer.status == 503:
            assert_unavailable(answer)
        assert answer.seconds < ANSWER_WITHIN, f"a place took {answer.seconds:.1f} s"
    assert during and all(a.status == 503 for a in during), Counter(a.status for a in during)
    for answer in ready:
        assert answer.seconds < READY_ANSWERS_WITHIN, f"/readyz took {answer.seconds:.1f} s"
    for answer in watch.answers["/healthz"]:
        assert answer.status == 200 and answer.seconds < HEALTH_ANSWERS_WITHIN, answer
    assert said_no is not None, "/readyz never said no while the link dropped"
    assert said_no.sent + said_no.seconds - dropped < READY_SAYS_NO_WITHIN
    assert said_yes is not None, "/readyz never said yes again after the link healed"
    assert said_yes.sent + said_yes.seconds - healed < READY_SAYS_YES_WITHIN
    recovered = first_success_after(ledger, healed)
    assert recovered is not None and recovered < HEALED_WITHIN, recovered
    seen["checked"] = ledger.check_store(server.port, auth)
    seen["said no"] = said_no.json()["message"]
    return seen


def test_a_postgresql_link_that_drops_packets_gets_503s_within_the_bound_and_heals(
    postgres_relay: tuple[str, Relay], redis_url: str, redis_prefix: str, tmp_path: Path,
) -> None:
    database, relay = postgres_relay
    # Quotas on, in the shared Redis: every 503 of the drop carries the rate-limit headers.
    with serving(tmp_path, "--workers", "2", database=database, ratelimit_storage=redis_url,
                 ratelimit_key_prefix=redis_prefix) as server:
        auth = _auth(server)
        cursor = call(server.port, "GET", f"{FEED}?limit=1000", auth).json()["next"]
        seen = _drop(server, relay, auth, ledger := Ledger())
        assert str(seen["said no"]).startswith("Not ready: database: PostgreSQL: ")
        # A request that needs no database went on meanwhile: the console's static files.
        assert call(server.port, "GET", "/console/static/console.css").status == 200
        # The feed goes on from a cursor taken before the fault: every acknowledged order.
        assert set(ledger.acknowledged.values()) <= set(_fed(server, auth, cursor))


def _fed(server: Server, auth: dict[str, str], cursor: str) -> list[int]:
    """The ids of the orders the feed gives after cursor, in its order, following `next`
    to the end; a 503 soon after a heal is asked again after its Retry-After, as a client
    would, until HEALED_WITHIN has passed."""
    fed: list[int] = []
    deadline = time.monotonic() + HEALED_WITHIN
    while True:
        answer = call(server.port, "GET", f"{FEED}?after={cursor}&limit=1000", auth)
        if answer.status == 503 and time.monotonic() < deadline:
            assert_unavailable(answer)
            time.sleep(float(answer.headers["retry-after"]))  # as the answer asks
            continue
        assert answer.status == 200, (answer.status, answer.body)
        if not (orders := answer.json()["orders"]):
            return fed
        fed.extend(order["id"] for order in orders)
        cursor = answer.json()["next"]


def _first_of_each(received: list[Received]) -> list[Received]:
    """The messages received, each webhook-id once (the first time: delivery is at least
    once, so a message whose attempt could not be recorded comes again)."""
    first: dict[str, Received] = {}
    for got in received:
        first.setdefault(got.id, got)
    return list(first.values())


def test_the_webhooks_deliverer_goes_on_from_where_it_was_after_a_postgresql_link_heals(
    postgres_relay: tuple[str, Relay], redis_url: str, redis_prefix: str, tmp_path: Path,
) -> None:
    database, relay = postgres_relay
    with receiving() as receiver, serving(
            tmp_path, "--workers", "2", database=database, ratelimit_storage=redis_url,
            ratelimit_key_prefix=redis_prefix, webhook_allowed_networks="127.0.0.0/8") as server:
        auth = _auth(server)
        cursor = call(server.port, "GET", f"{FEED}?limit=1000", auth).json()["next"]
        created = call(server.port, "POST", "/v2/webhook-endpoints", auth,
                       {"url": receiver.url})
        assert created.status == 201, created.body
        ledger = Ledger()
        with Load(server.port, auth, ledger):
            # Orders placed before the drop are delivered on a link that works.
            receiver.wait_for(10, timeout=10)
            relay.drop()
            dropped = time.monotonic()
            time.sleep(DROP_SECONDS)
            relay.heal()
            healed = time.monotonic()
            # and after it: placed while the deliverer picks up again.
            deadline = healed + HEALED_WITHIN + 5
            while (first_success_after(ledger, healed) is None
                   or len([a for a in ledger.answers if a.sent > healed and a.status == 201])
                   < 20) and time.monotonic() < deadline:
                time.sleep(0.1)
        acknowledged = set(ledger.acknowledged.values())
        during = [a for a in ledger.answers if dropped < a.sent < healed]
        assert {a.status for a in during} <= {201, 503} and during, Counter(
            a.status for a in during)
        assert {a.status for a in ledger.answers} <= {201, 503}, ledger.statuses()
        assert [a for a in ledger.answers if a.sent > healed and a.status == 201]
        # Every change of the feed since the endpoint was made, in the feed's order.
        fed = _fed(server, auth, cursor)
        assert acknowledged <= set(fed)
        received = receiver.wait_until(
            lambda got: {first.message["data"]["id"] for first in got} >= set(fed),
            timeout=DELIVERED_WITHIN)
        delivered = [got.message["data"]["id"] for got in _first_of_each(received)]
        # None skipped, none out of order (a change sent again comes right after itself).
        assert delivered == fed, (len(delivered), len(fed))
        last_arrival = max(got.at for got in received) - healed
        print(f"\n{dict(ledger.statuses())} acknowledged {len(acknowledged)}, changes "
              f"{len(fed)}, messages {len(received)}, duplicates "
              f"{len(received) - len(delivered)}, the last {last_arrival:.1f} s after the heal")
        ledger.check_store(server.port, auth)
        log = server.log.read_text()
    assert "Traceback" not in log and "never retrieved" not in log, log[-3000:]


@pytest.mark.parametrize("on_error", ["closed", "fallback"])
def test_a_redis_link_that_drops_packets_is_bounded_and_heals(
    redis_relay: tuple[str, Relay], redis_prefix: str, tmp_path: Path, on_error: str,
) -> None:
    storage, relay = redis_relay
    with serving(tmp_path, "--workers", "2", ratelimit_storage=storage,
                 ratelimit_key_prefix=redis_prefix, ratelimit_on_error=on_error) as server:
        auth = _auth(server)
        if on_error == "closed":
            seen = _drop(server, relay, auth)
            assert str(seen["said no"]).startswith("Not ready: quotas: ")
            return
        ledger = Ledger()
        with Watch(server.port) as watch, Load(server.port, auth, ledger):
            time.sleep(1.0)
            dropped = time.monotonic()
            relay.drop()
            time.sleep(DROP_SECONDS)
            relay.heal()
        # Counted in process memory meanwhile: every place answered, and soon.
        assert set(ledger.statuses()) == {201}, ledger.statuses()
        assert ledger.longest() < 2.0
        shown = [a.json()["checks"]["quotas"] for a in watch.answers["/readyz"]
                 if a.sent > dropped + READY_SAYS_NO_WITHIN and a.status == 200]
        assert "does not answer; counting in process memory" in shown
        assert all(a.status == 200 for a in watch.answers["/readyz"])
        ledger.check_store(server.port, auth)
