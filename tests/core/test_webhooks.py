"""The rules of webhooks (D28) without a network: which URLs and addresses are
refused, the retry schedule, the message and its signatures."""

from __future__ import annotations

import base64
import datetime as dt
import ipaddress
import re
import time
from collections.abc import Iterator

import orjson
import pytest
from standardwebhooks.webhooks import Webhook, WebhookVerificationError

from app.core import webhook_urls, webhooks
from app.core.errors import InvalidParameter, WebhookUrlNotAllowed
from app.core.storage.records import Change, WebhookEndpoint

LOOPBACK = webhook_urls.networks("127.0.0.0/8")


def _resolver(table: dict[str, list[str]]) -> webhook_urls.Resolver:
    def resolve(host: str, port: int) -> list[str]:
        if host not in table:
            raise OSError("no such name")
        return table[host]
    return resolve


PUBLIC = _resolver({"hooks.example.com": ["93.184.215.14"],
                    "sneaky.example.com": ["93.184.215.14", "127.0.0.1"],
                    "loopback.example.com": ["127.0.0.1"]})


@pytest.mark.parametrize("url", [
    "http://127.0.0.1/", "http://[::1]/", "http://169.254.169.254/latest/meta-data",
    "http://10.0.0.1/", "http://[::ffff:127.0.0.1]/", "http://0/", "http://2130706433/",
    "http://127.1/", "http://0x7f.0.0.1/", "http://[fd00::1]/", "http://224.0.0.1/",
    "http://240.0.0.1/", "http://100.64.0.1/", "http://192.168.1.1/", "http://[fe80::1]/",
    "http://loopback.example.com/", "http://sneaky.example.com/", "http://unknown.invalid/",
    "http://[64:ff9b::7f00:1]/",
    # IPv6 forms that Python 3.11's ipaddress counts as global, each refused by a rule of
    # ours: 6to4 of a private and of a public IPv4 address (refused whatever it holds),
    # the IPv4-compatible form of 127.0.0.1 (reserved), site-local, and global multicast.
    "http://[2002:a00:1::]/", "http://[2002:808:808::]/", "http://[::7f00:1]/",
    "http://[fec0::1]/", "http://[ff0e::1]/",
    # Teredo, which ipaddress counts as private as well: refused twice over.
    "http://[2001:0:4136:e378:8000:63bf:3fff:fdd2]/",
])
def test_a_url_that_reaches_a_refused_address_is_not_allowed(url: str) -> None:
    with pytest.raises(WebhookUrlNotAllowed):
        webhook_urls.addresses(webhook_urls.check_url(url), (), PUBLIC)


def test_a_public_name_is_allowed_and_an_allowed_network_opens_loopback() -> None:
    target = webhook_urls.check_url("https://hooks.example.com/in")
    assert webhook_urls.addresses(target, (), PUBLIC) == [ipaddress.ip_address("93.184.215.14")]
    assert target.port == 443
    public_v6 = webhook_urls.check_url("http://[2606:4700:4700::1111]/")
    assert webhook_urls.addresses(public_v6, (), PUBLIC) == \
        [ipaddress.ip_address("2606:4700:4700::1111")]
    loop = webhook_urls.check_url("http://127.0.0.1:8123/")
    assert webhook_urls.addresses(loop, LOOPBACK, PUBLIC)
    # An IPv4-mapped address stays refused: 127.0.0.0/8 is an IPv4 network.
    with pytest.raises(WebhookUrlNotAllowed):
        webhook_urls.addresses(webhook_urls.check_url("http://[::ffff:127.0.0.1]/"), LOOPBACK,
                               PUBLIC)


@pytest.mark.parametrize("host", ["unknown.invalid", "empty.example.com"])
def test_a_name_that_resolves_to_nothing_is_refused_saying_so(host: str) -> None:
    """Whether the resolver fails or gives no address at all."""
    resolve = _resolver({"empty.example.com": []})
    with pytest.raises(WebhookUrlNotAllowed) as raised:
        webhook_urls.addresses(webhook_urls.check_url(f"http://{host}/in"), (), resolve)
    assert str(raised.value) == f"The host {host} of the webhook URL does not resolve."


def test_a_link_local_address_with_its_zone_is_the_address() -> None:
    """A resolver may give a link-local address with its zone (`%eth0`): the zone says
    which interface, not where, and is dropped, so it is refused as any link-local address,
    or allowed by the same network."""
    scoped = _resolver({"printer.local": ["fe80::1%eth0"]})
    target = webhook_urls.check_url("http://printer.local/")
    with pytest.raises(WebhookUrlNotAllowed) as raised:
        webhook_urls.addresses(target, (), scoped)
    assert str(raised.value) == (
        "The webhook URL reaches fe80::1, an address that is not public (loopback, private, "
        "link-local, site-local, multicast, reserved, or an IPv4 address in IPv6 form); the "
        "service does not send there.")
    assert webhook_urls.addresses(target, webhook_urls.networks("fe80::/10"), scoped) == \
        [ipaddress.ip_address("fe80::1")]


@pytest.mark.parametrize(("url", "says"), [
    ("hooks.example.com/in", "http"), ("ftp://hooks.example.com/", "http"),
    ("http://user:pw@hooks.example.com/", "userinfo"),
    ("http://hooks.example.com/" + "a" * 2048, "2048"), ("http:///x", "no host"),
    ("http://hooks.example.com:99999/", "port"), (42, "http"),
    ("http://hooks.example.com:0/", "port"), ("http://[::1/", "not a valid URL"),
    ("http://hooks.example.com/a b", "spaces or control characters"),
    ("http://hooks.example.com/\x01", "spaces or control characters"),
    ("http://hooks.example.com/in#top", "#fragment"),
])
def test_a_malformed_url_is_refused_naming_the_problem(url: object, says: str) -> None:
    with pytest.raises(InvalidParameter) as raised:
        webhook_urls.check_url(url)
    assert raised.value.name == "url" and says in raised.value.message


def test_a_webhook_url_names_its_scheme_host_and_port_the_scheme_s_by_default() -> None:
    longest = "http://hooks.example.com/" + "a" * (webhook_urls.URL_MAX - 25)
    assert len(longest) == webhook_urls.URL_MAX
    assert webhook_urls.check_url(longest) == webhook_urls.Target("http", "hooks.example.com",
                                                                  80)
    assert webhook_urls.check_url("https://Hooks.Example.com/in?x=1") == \
        webhook_urls.Target("https", "hooks.example.com", 443)
    assert webhook_urls.check_url("http://[2606:4700::1]:8080/") == \
        webhook_urls.Target("http", "2606:4700::1", 8080)


def test_types_are_the_twelve_of_the_design() -> None:
    assert webhooks.TYPES == (
        "order.placed", "order.shipped", "order.completed", "order.cancelled",
        "order.changed", "pet.created", "pet.updated", "pet.withdrawn", "pet.restored",
        "pet.out_of_stock", "pet.back_in_stock", "pet.changed")
    assert webhooks.check_types(["order.shipped", "pet.created", "order.placed",
                                 "order.shipped"]) == \
        ("order.placed", "order.shipped", "pet.created")
    assert webhooks.check_types(None) == ()
    for unknown in ("order.deleted", "pet.deleted", "pet.*"):
        with pytest.raises(InvalidParameter, match=re.escape(unknown)):
            webhooks.check_types([unknown])


@pytest.mark.parametrize(("types", "feeds", "wanted"), [
    ((), ("order",), {"order.placed", "order.shipped", "order.changed"}),  # no pet.*
    (("order.shipped",), ("order",), {"order.shipped"}),
    (("pet.out_of_stock",), ("pet",), {"pet.out_of_stock"}),
    (("order.placed", "pet.changed"), ("order", "pet"), {"order.placed", "pet.changed"}),
])
def test_an_endpoint_reads_only_the_feeds_it_wants_and_gets_only_its_types(
        types: tuple[str, ...], feeds: tuple[str, ...], wanted: set[str]) -> None:
    endpoint = _endpoint(types=types)
    assert webhooks.feeds(endpoint) == feeds
    changes = [Change("{}", 1, 1, kind, "order") for kind in
               ("placed", "shipped", "changed")] + [
        Change("{}", 1, 1, kind, "pet") for kind in ("out_of_stock", "changed")]
    assert {webhooks.message_type(c) for c in changes if webhooks.wanted(endpoint, c)} == wanted
    assert {webhooks.webhook_id(c) for c in changes} == {"msg_1_1", "msg_pet_1_1"}


def test_the_schedule_is_standard_webhooks_and_retry_after_lengthens_it() -> None:
    assert [webhooks.next_attempt(n) for n in range(10)] == \
        [0, 5, 300, 1800, 7200, 18000, 36000, 50400, 72000, 86400]
    assert webhooks.next_attempt(10) is None
    assert webhooks.next_attempt(1, webhooks.retry_after("120", 0)) == 120
    assert webhooks.next_attempt(2, webhooks.retry_after("120", 0)) == 300
    assert webhooks.retry_after("Wed, 21 Oct 2015 07:28:00 GMT", 1445412480 - 60) == 60
    assert webhooks.retry_after("soon", 0) is None


def _endpoint(**changes: object) -> WebhookEndpoint:
    values: dict[str, object] = dict(
        id=1, api_key_id=1, url="https://hooks.example.com/", types=(), description="",
        enabled=True, disabled_reason=None, secret=webhooks.new_secret(), previous_secret=None,
        previous_until=None, position=0, order_id=0, lease_owner=None, lease_until=None,
        attempt=0, next_attempt_at=None, created_at="2026-11-24T10:00:00Z")
    values.update(changes)
    return WebhookEndpoint(**values)  # type: ignore[arg-type]


def test_a_message_verifies_with_standardwebhooks_and_both_secrets_during_a_grace() -> None:
    old, new = webhooks.new_secret(), webhooks.new_secret()
    now = time.time()
    endpoint = _endpoint(secret=new, previous_secret=old, previous_until=now + 60)
    change = Change('{"id":7,"complete":false,"status":"shipped"}', 12, 7, "shipped")
    body = webhooks.message(webhooks.message_type(change), change.data, now)
    headers = webhooks.signed_headers(endpoint, webhooks.webhook_id(change), body, now)
    for secret in (old, new):
        verified = Webhook(secret).verify(body, headers)
        assert verified["type"] == "order.shipped" and verified["data"]["id"] == 7
    assert headers["webhook-id"] == "msg_7_12"
    after_grace = webhooks.signed_headers(endpoint, "m", body, now + 61)
    assert len(after_grace["webhook-signature"].split(" ")) == 1
    with pytest.raises(WebhookVerificationError):
        Webhook(webhooks.new_secret()).verify(body, headers)
    assert orjson.loads(body)["timestamp"].endswith("Z")


@pytest.mark.parametrize(("kind", "state", "seen", "sent"), [
    ("changed", (False, False), None, "pet.changed"),  # never read: its last change's kind
    ("out_of_stock", (False, False), None, "pet.out_of_stock"),
    ("changed", (False, False), (True, False), "pet.out_of_stock"),  # sold out, then shipped
    ("updated", (True, False), (False, False), "pet.back_in_stock"),  # restocked, renamed
    ("out_of_stock", (False, False), (False, False), "pet.changed"),  # back and out again
    ("back_in_stock", (True, False), (True, False), "pet.changed"),
    ("updated", (True, False), (True, False), "pet.updated"),
    ("changed", (False, True), (True, False), "pet.withdrawn"),  # withdrawn, with stock
    ("updated", (True, False), (False, True), "pet.restored"),
    ("withdrawn", (False, True), (False, True), "pet.changed"),
])
def test_a_pet_s_crossing_is_one_from_what_the_endpoint_last_read(
        kind: str, state: tuple[bool, bool], seen: tuple[bool, bool] | None,
        sent: str) -> None:
    """D39: whether it takes orders and whether it is withdrawn, now against what the
    endpoint last read; anything else is the kind of the pet's last change."""
    change = Change("{}", 9, 7, kind, "pet", state, seen)
    assert webhooks.message_type(change) == sent


@pytest.fixture
def five_hours_behind(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """The machine's local time zone five hours behind UTC: a rule that read a naive
    local time as UTC would be five hours out."""
    monkeypatch.setenv("TZ", "EST+5")
    time.tzset()
    yield
    monkeypatch.undo()
    time.tzset()


def test_a_retry_after_date_without_a_zone_is_utc_and_one_past_is_no_wait(
        five_hours_behind: None) -> None:
    now = 1445412480.0  # Wed, 21 Oct 2015 07:28:00 GMT
    assert webhooks.retry_after("Wed, 21 Oct 2015 07:29:00 -0000", now) == 60
    assert webhooks.retry_after("Wed, 21 Oct 2015 07:27:00 GMT", now) == 0.0
    assert webhooks.retry_after(" 30 ", now) == 30
    assert webhooks.retry_after("999999", now) == 86_400


@pytest.mark.parametrize(("outcome", "says"), [
    (webhooks.Outcome(300), "answered 300 (redirects are not followed)"),
    (webhooks.Outcome(399), "answered 399 (redirects are not followed)"),
    (webhooks.Outcome(400), "answered 400"),
    (webhooks.Outcome(299), "answered 299"),
    (webhooks.Outcome(None, error="refused"), "refused"),
])
def test_a_failure_says_why_in_a_few_words(outcome: webhooks.Outcome, says: str) -> None:
    assert outcome.failure() == says


def test_the_headers_of_a_message_are_the_standard_ones(five_hours_behind: None) -> None:
    endpoint = WebhookEndpoint(1, None, "http://127.0.0.1/", (), "", True, None,
                               webhooks.new_secret(), None, None, 0, 0, None, None, 0,
                               None, "2026-11-29T10:00:00Z")
    body = webhooks.message("order.placed", '{"id":1}', 1_800_000_000)
    headers = webhooks.signed_headers(endpoint, "msg_1_2", body, 1_800_000_000.7)
    assert set(headers) == {"webhook-id", "webhook-timestamp", "webhook-signature",
                            "content-type"}
    assert (headers["webhook-id"], headers["webhook-timestamp"], headers["content-type"]) == (
        "msg_1_2", "1800000000", "application/json")
    # Signed at the header's second, whatever the machine's time zone.
    assert headers["webhook-signature"] == Webhook(endpoint.secret).sign(
        "msg_1_2", dt.datetime.fromtimestamp(1_800_000_000, dt.UTC), body.decode())
    secret = base64.b64decode(endpoint.secret.removeprefix("whsec_"))
    assert len(secret) == 32


def test_the_allowed_networks_are_a_comma_separated_list() -> None:
    assert webhook_urls.networks(" 10.0.0.0/8, 127.0.0.1/8 ,, * ") == (
        ipaddress.ip_network("10.0.0.0/8"), ipaddress.ip_network("127.0.0.0/8"))
    assert webhook_urls.networks("*") == webhook_urls.networks("") == ()
