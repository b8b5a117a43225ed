"""v1 is frozen (DESIGN.md D17): a client generated from release 1.0.0 of the v1 document
(openapi/released/petstore-v1-1.0.0.yaml, never edited) by openapi-python-client lists and
cancels against today's service over real HTTP. A change to v1 that would break such a
client fails here."""

from __future__ import annotations

import importlib
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

from tests.support import Server, serving

pytestmark = [pytest.mark.slow, pytest.mark.contract]

ROOT = Path(__file__).resolve().parents[2]
RELEASED = ROOT / "openapi" / "released" / "petstore-v1-1.0.0.yaml"
PACKAGE = "petstore_v1_1_0_0_client"


@pytest.fixture(scope="module")
def generated(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, ModuleType]]:
    """The client generated from the released document, imported."""
    folder = tmp_path_factory.mktemp("client")
    bin_dir = Path(sys.executable).parent
    result = subprocess.run(
        [str(bin_dir / "openapi-python-client"), "generate", "--path", str(RELEASED),
         "--meta", "none", "--output-path", str(folder / PACKAGE)],
        capture_output=True, text=True, timeout=120,
        env={**os.environ, "PATH": f"{bin_dir}{os.pathsep}{os.environ.get('PATH', '')}"},
    )
    assert result.returncode == 0, result.stdout + result.stderr
    sys.path.insert(0, str(folder))
    try:
        yield {name: importlib.import_module(f"{PACKAGE}.{name}")
               for name in ("client", "api.orders.list_orders", "api.orders.cancel_order",
                            "models")}
    finally:
        sys.path.remove(str(folder))
        for name in [n for n in sys.modules if n.startswith(PACKAGE)]:
            del sys.modules[name]


@pytest.fixture
def service(tmp_path: Path) -> Iterator[tuple[Server, str]]:
    with serving(tmp_path) as server:
        key = server.petstore("init", "--demo").stdout.strip()
        yield server, key


def test_the_released_document_is_release_1_0_0_of_v1() -> None:
    text = RELEASED.read_text()
    assert "\n  version: 1.0.0\n" in text and "\n  - url: /v1\n" in text


def test_a_client_generated_from_release_1_0_0_lists_and_cancels(
        generated: dict[str, Any], service: tuple[Server, str]) -> None:
    server, key = service
    client = generated["client"].AuthenticatedClient(
        base_url=f"http://127.0.0.1:{server.port}/v1", token=key,
        raise_on_unexpected_status=True)
    list_orders, cancel_order = generated["api.orders.list_orders"], generated[
        "api.orders.cancel_order"]
    models = generated["models"]
    with client:
        listed = list_orders.sync_detailed(client=client)
        assert listed.status_code == 200
        orders = listed.parsed
        assert [order.id for order in orders] == [1, 2, 3, 4, 5, 6]
        assert all(isinstance(order, models.Order) for order in orders)
        assert orders[3].status == models.OrderStatus.SHIPPED
        assert orders[3].ship_date.isoformat() == "2026-11-20T10:00:00+00:00"

        assert cancel_order.sync_detailed(1, client=client).status_code == 204
        assert cancel_order.sync_detailed(1, client=client).status_code == 204
        shipped = cancel_order.sync_detailed(4, client=client)
        assert shipped.status_code == 409
        assert isinstance(shipped.parsed, models.Error)
        assert shipped.parsed.code == "order_already_shipped"
        unknown = cancel_order.sync_detailed(999, client=client)
        assert unknown.status_code == 404 and unknown.parsed.code == "order_not_found"

        after = list_orders.sync_detailed(client=client).parsed
        assert after[0].status == models.OrderStatus.CANCELLED

        # The 304 of the list, as the released document describes it.
        tag = listed.headers["etag"]
        fresh = list_orders.sync_detailed(client=client, if_none_match=tag)
        assert fresh.status_code == 200  # order 1 changed since
        again = list_orders.sync_detailed(client=client, if_none_match=fresh.headers["etag"])
        assert again.status_code == 304
