"""The audit log's page (D35): newest first, filtered by user and by what was done (each
chosen from what the log holds), pages that keep the filters, every text as text."""

from __future__ import annotations

import re

from app.core.storage import Store
from app.core.users import accounts
from tests.console.conftest import Visitor

ROW = re.compile(r"<tr><td><time [^>]+>[^<]+ UTC</time></td><td>([^<]+)</td><td>[^<]+</td>"
                 r"<td>([^<]+)</td><td>([^<]*)</td></tr>")


def test_the_audit_log_is_filtered_by_user_and_by_what(signed_in: Visitor,
                                                       store: Store) -> None:
    for n in range(3):
        accounts.record(store, "ann", "10.0.0.1", "ship", f"order {n}")
        accounts.record(store, "bob", "10.0.0.2", "ship", f"order {10 + n}")
    accounts.record(store, "ann", "10.0.0.1", "key revoked", "key 1 (psk_abc...)")
    page = signed_in.get("/console/audit?user=ann").text
    assert ROW.findall(page) == [("ann", "key revoked", "key 1 (psk_abc...)"),
                                 ("ann", "ship", "order 2"), ("ann", "ship", "order 1"),
                                 ("ann", "ship", "order 0")]
    page = signed_in.get("/console/audit?user=bob&action=ship").text
    assert [detail for _, _, detail in ROW.findall(page)] == ["order 12", "order 11",
                                                              "order 10"]
    assert re.search(r'<option value="ann"\s*>ann</option>', page)
    assert re.search(r'<option value="bob"\s+selected>bob</option>', page)
    assert re.search(r'<option value="key revoked"\s*>key revoked</option>', page)
    assert ROW.findall(signed_in.get("/console/audit?user=nobody").text) == []


def test_the_audit_logs_older_pages_keep_the_filters(signed_in: Visitor,
                                                     store: Store) -> None:
    for n in range(130):
        accounts.record(store, "ann", None, "ship", f"order {n}")
        accounts.record(store, "bob", None, "ship", f"order {n}")
    page = signed_in.get("/console/audit?user=bob").text
    seen = [detail for _, _, detail in ROW.findall(page)]
    older = re.search(r'id="older" href="([^"]+)"', page)
    assert older is not None and "user=bob" in older.group(1)
    page = signed_in.get(older.group(1).replace("&amp;", "&")).text
    seen += [detail for who, _, detail in ROW.findall(page) if who == "bob"]
    assert seen == [f"order {n}" for n in reversed(range(130))]
