"""What app/outbound.py puts on the wire (D28), against a real receiver on
loopback: the request goes to the address that was checked, yet carries the URL's own
Host, path and query; the answer's status, Retry-After and first KiB are what the attempts
log keeps; a redirect is a failure that is not followed."""

from __future__ import annotations

from app.core import webhook_urls, webhooks
from app.outbound import USER_AGENT, send_now
from tests.receivers import receiving

LOOPBACK = webhook_urls.networks("127.0.0.0/8")
BODY = b'{"type":"ping","timestamp":"2026-11-25T00:00:00Z","data":{"endpointId":1}}'
HEADERS = {"webhook-id": "msg_ping_1", "webhook-timestamp": "1764028800",
           "webhook-signature": "v1,c2lnbmF0dXJl", "content-type": "application/json"}


def test_a_name_is_sent_to_its_checked_address_with_its_own_host_path_and_query() -> None:
    with receiving() as receiver:
        url = f"http://localhost:{receiver.port}/in/bücher?source=petstore&x=%2F"
        outcome = send_now(url, HEADERS, BODY, 2.0, LOOPBACK)
        (got,) = receiver.wait_for(1)
    assert outcome.status == 204 and outcome.delivered and outcome.error is None
    assert got.target == "/in/b%C3%BCcher?source=petstore&x=%2F"
    assert got.headers["host"] == f"localhost:{receiver.port}"
    assert got.headers["user-agent"] == USER_AGENT
    assert got.headers["content-type"] == "application/json"
    assert {k: got.headers[k] for k in HEADERS} == HEADERS
    assert got.body == BODY


def test_the_answer_keeps_its_status_retry_after_and_first_kib() -> None:
    answer = (503, {"Retry-After": "7", "Content-Type": "text/plain"}, b"x" * 5000)
    with receiving(answer=lambda got: answer) as receiver:
        outcome = send_now(receiver.url, HEADERS, BODY, 2.0, LOOPBACK)
    assert outcome.status == 503 and not outcome.delivered
    assert outcome.retry_after == "7"
    assert outcome.response == "x" * webhooks.RESPONSE_KEPT


def test_a_redirect_fails_and_is_not_followed() -> None:
    with receiving() as elsewhere:
        moved = (302, {"Location": elsewhere.url}, b"")
        with receiving(answer=lambda got: moved) as receiver:
            outcome = send_now(receiver.url, HEADERS, BODY, 2.0, LOOPBACK)
            assert len(receiver.wait_for(1)) == 1
        assert elsewhere.received == []
    assert outcome.status == 302 and not outcome.delivered
    assert outcome.failure() == "answered 302 (redirects are not followed)"


def test_a_refused_address_gets_nothing_and_the_failure_says_why() -> None:
    with receiving() as receiver:
        outcome = send_now(receiver.url, HEADERS, BODY, 2.0, ())
        assert receiver.received == []
    assert outcome.status is None
    assert outcome.error is not None and "127.0.0.1" in outcome.error


def test_nobody_listening_is_a_failure_naming_the_error() -> None:
    with receiving() as receiver:
        url = receiver.url
    outcome = send_now(url, HEADERS, BODY, 2.0, LOOPBACK)
    assert outcome.status is None and not outcome.delivered
    assert outcome.error is not None and "Connect" in outcome.error
