"""Guessing keys costs no database read on the event loop (issue 24): a token that opens no
key is refused from the worker's set of every key's digest, which the store is asked for at
most once per DIGESTS_FRESH whatever the flood; a known key's lookup, when the store must
be read, is read from a thread. On both stores, through the whole app."""

from __future__ import annotations

import asyncio
import secrets
import time
from collections.abc import Iterator
from typing import Any

import pytest

from app.core.config import Settings
from app.core.keys import DIGESTS_FRESH
from app.core.storage import Store, open_store
from app.web import PetstoreApp, create_app
from tests.support import assert_error, make_key

LIST = "/v1/store/orders"


class CountingReads:
    """A store that counts the key reads made through it, and those made on a thread
    running an event loop."""

    def __init__(self, store: Store) -> None:
        self.store = store
        self.reads = 0
        self.on_the_loop = 0

    def __getattr__(self, name: str) -> Any:
        method = getattr(self.store, name)
        if name not in ("find_key", "key_digests"):
            return method

        def counted(*args: Any) -> Any:
            self.reads += 1
            if asyncio._get_running_loop() is not None:
                self.on_the_loop += 1
            return method(*args)

        return counted


@pytest.fixture(params=["sqlite", "postgresql"])
def store_settings(request: pytest.FixtureRequest, settings: Settings) -> Iterator[Settings]:
    if request.param == "postgresql":
        settings = settings.replace(database=request.getfixturevalue("postgres_database"))
    # Quotas high enough for the flood: an address has Free's numbers by default.
    yield settings.replace(ratelimit_storage="memory://", anonymous_plan="business")


def test_a_flood_of_random_tokens_costs_a_bounded_number_of_key_reads_off_the_loop(
        store_settings: Settings) -> None:
    store = open_store(store_settings)
    try:
        key = make_key(store, plan="business")
        app: PetstoreApp = create_app(store_settings)
        keyring = app.services.keyring
        counting = keyring.store = CountingReads(keyring.store)
        with app.test_client() as client:
            started = time.monotonic()
            for _ in range(300):
                token = "psk_" + secrets.token_urlsafe(32)
                assert_error(client.get(LIST, headers={"Authorization": f"Bearer {token}"}),
                             401, "invalid_api_key")
            elapsed = time.monotonic() - started
            assert counting.reads <= 2 + elapsed / DIGESTS_FRESH, (counting.reads, elapsed)
            assert counting.reads < 300 / 2
            # A key made during the flood works DIGESTS_FRESH later, when a miss reloads.
            fresh = make_key(store, plan="pro")
            time.sleep(DIGESTS_FRESH)
            assert client.get(LIST, headers={"Authorization": f"Bearer {fresh}"}
                              ).status_code == 200
            assert client.get(LIST, headers={"Authorization": f"Bearer {key}"}
                              ).status_code == 200
        assert counting.on_the_loop == 0
    finally:
        store.close()


def test_a_key_made_while_no_token_missed_works_at_once(settings: Settings,
                                                        store: Store) -> None:
    app: PetstoreApp = create_app(settings)
    with app.test_client() as client:
        assert client.get(LIST).status_code == 401  # the app is built and serving
        key = make_key(store)
        assert client.get(LIST, headers={"Authorization": f"Bearer {key}"}).status_code == 200
