"""The request path is declared once (app/web/chain.py): its order is checked when the app
is built, and a kept answer goes only to the key it was made for."""

from __future__ import annotations

import logging
from dataclasses import replace
from typing import Any

import pytest

from app.core.storage import Store
from app.web import chain
from tests.support import make_key


def _named(name: str) -> chain.Layer:
    return next(layer for layer in chain.LAYERS if layer.name == name)


def test_the_served_chain_keeps_every_dependency_of_its_layers() -> None:
    chain.check(chain.LAYERS)
    chain.check(chain.LONG_WAY)


@pytest.mark.parametrize(("moved", "before", "says"), [
    ("quotas", "caller", "the quotas layer relies on the caller's key"),
    ("security", "routed", "the security layer relies on the request's operation"),
    ("kept answers", "caller", "the kept answers layer relies on the caller's key"),
    ("long polls", "quotas", "the long polls layer must come after the quotas layer"),
])
def test_a_chain_whose_order_breaks_a_dependency_is_refused_naming_it(
    moved: str, before: str, says: str
) -> None:
    layers = [layer for layer in chain.LAYERS if layer.name != moved]
    layers.insert(next(i for i, layer in enumerate(layers) if layer.name == before),
                  _named(moved))
    with pytest.raises(chain.ChainError, match=says):
        chain.check(layers)


def test_a_layer_the_settings_leave_out_is_no_dependency_of_the_order() -> None:
    without_quotas = [layer for layer in chain.LAYERS if layer.name != "quotas"]
    chain.check(without_quotas)
    needs_counting = replace(_named("long polls"), needs=(chain.COUNTED,))
    with pytest.raises(chain.ChainError, match="relies on the request counted"):
        chain.check([needs_counting if layer.name == "long polls" else layer
                     for layer in without_quotas])


def test_a_kept_answer_is_served_only_to_the_key_it_was_made_for(
    client: Any, store: Store, auth: dict[str, str], caplog: pytest.LogCaptureFixture
) -> None:
    other = {"Authorization": f"Bearer {make_key(store)}"}
    with caplog.at_level(logging.INFO, "petstore.access"):
        first = client.get("/v2/store/orders?limit=2", headers=auth)
        again = client.get("/v2/store/orders?limit=2", headers=auth)
        theirs = client.get("/v2/store/orders?limit=2", headers=other)
        theirs_again = client.get("/v2/store/orders?limit=2", headers=other)
    assert first.status_code == again.status_code == theirs.status_code == 200
    assert first.content == theirs.content == theirs_again.content
    answered = [(r.key_id, r.answered_by) for r in caplog.records
                if r.name == "petstore.access"]
    assert answered == [(1, "long"), (1, "kept"), (2, "long"), (2, "kept")]
