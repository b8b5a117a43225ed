"""The request path is declared once (app/web/chain.py): its order is checked when the app
is built, and a kept answer goes only to the key it was made for."""

from __future__ import annotations

import ast
import logging
from pathlib import Path
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
    ("caller", "access", "the caller layer relies on the request's Exchange"),
    ("security", "routing", "the security layer relies on the request's operation"),
    ("kept answers", "caller", "the kept answers layer relies on the caller's key"),
])
def test_a_chain_whose_order_breaks_a_dependency_is_refused_naming_it(
    moved: str, before: str, says: str
) -> None:
    layers = [layer for layer in chain.LAYERS if layer.name != moved]
    layers.insert(next(i for i, layer in enumerate(layers) if layer.name == before),
                  _named(moved))
    with pytest.raises(chain.ChainError, match=says):
        chain.check(layers)


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


def _writes_an_answer(tree: ast.AST) -> bool:
    """Whether a module makes an answer of its own: an ASGI response start it builds, a
    response object it constructs, an Error it sends, or a refusal the worker writes."""
    for node in ast.walk(tree):
        if isinstance(node, ast.Dict) and any(
                isinstance(k, ast.Constant) and k.value == "type"
                and isinstance(v, ast.Constant) and v.value == "http.response.start"
                for k, v in zip(node.keys, node.values, strict=True)):
            return True
        if isinstance(node, ast.Call):
            called = node.func
            name = called.attr if isinstance(called, ast.Attribute) else getattr(
                called, "id", None)
            if name in ("Response", "ConnexionResponse", "StreamingResponse",
                        "write_refusal", "json_response"):
                return True
    return False


def _site_of(path: Path) -> str:
    relative = path.relative_to(WEB).as_posix()
    return "handlers/" if relative.startswith("handlers/") else relative


WEB = Path(__file__).resolve().parents[2] / "app" / "web"


def test_every_module_that_writes_an_answer_is_a_declared_answer_site() -> None:
    writers = {_site_of(path) for path in WEB.rglob("*.py")
               if _writes_an_answer(ast.parse(path.read_text(encoding="utf-8")))}
    declared = {module for site in chain.ANSWER_SITES for module in site.modules}
    assert writers - declared == set(), "writes answers but is no declared answer site"
    assert declared - writers == set(), "declared as an answer site but writes none"
    api_sites = [site.name for site in chain.ANSWER_SITES if site.api]
    assert {"handler", "kept answer", "error"} <= set(api_sites)
