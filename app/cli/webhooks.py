"""`petstore webhooks`: the operator's view of every webhook endpoint (D28), and
`listen`, a receiver for a developer's terminal (what `stripe listen` is)."""

from __future__ import annotations

import json
import os
import signal
import sys
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import click
from standardwebhooks.webhooks import Webhook, WebhookVerificationError

from app.cli._shared import current_settings, current_store, echo_table, say
from app.core import webhook_urls, webhooks
from app.core.errors import PetstoreError
from app.outbound import send_test


@click.group("webhooks")
def webhooks_group() -> None:
    """Webhook endpoints: URLs that every change of an order is pushed to, signed.

    The operator sees every endpoint, whichever API key made it. Messages go from the
    running service (`petstore serve`); these commands change what it sends where.
    """


def _fail(exc: PetstoreError) -> click.ClickException:
    name = getattr(exc, "name", None)
    return click.ClickException(f"{name} {exc.message}" if name else exc.message)


def _allowed() -> tuple[webhook_urls.Network, ...]:
    return webhook_urls.networks(current_settings().webhook_allowed_networks)


def _print(value: Any) -> None:
    click.echo(json.dumps(value, indent=2))


@webhooks_group.command("add")
@click.argument("url")
@click.option("--type", "types", multiple=True, type=click.Choice(webhooks.TYPES),
              help="A message type to send (repeat for several); all types without it.")
@click.option("--description", default="", help="A note of your own.")
@click.option("--key", "key_id", type=int, default=None,
              help="The API key that owns it (sees it in the API); none by default.")
def webhooks_add(url: str, types: tuple[str, ...], description: str,
                 key_id: int | None) -> None:
    """Add an endpoint at URL; print it, with its secret (shown this once), as JSON.

    It receives every change committed from now on. The URL's host must be public, or
    inside PETSTORE_WEBHOOK_ALLOWED_NETWORKS.
    """
    try:
        endpoint, secret = webhooks.create(current_store(), key_id, url, list(types),
                                           description, _allowed())
    except PetstoreError as exc:
        raise _fail(exc) from None
    say(f"Added endpoint {endpoint.id}; its secret is shown this once.")
    _print({**webhooks.view(endpoint), "secret": secret})


@webhooks_group.command("list")
@click.option("--json", "as_json", is_flag=True, help="Print a JSON array on standard output.")
def webhooks_list(as_json: bool) -> None:
    """Every endpoint: its id, state, owner key, types, URL and description."""
    found = webhooks.endpoints(current_store(), None)
    if as_json:
        _print([webhooks.view(endpoint) for endpoint in found])
        return
    rows = [(str(e.id), _state(e), str(e.api_key_id or "-"), ",".join(e.types) or "all",
             e.url, e.description) for e in found]
    echo_table(("ID", "STATE", "KEY", "TYPES", "URL", "DESCRIPTION"), rows,
               right=frozenset({0}))


def _state(endpoint: Any) -> str:
    if not endpoint.enabled:
        return "disabled"
    return f"failing ({endpoint.attempt})" if endpoint.attempt else "enabled"


@webhooks_group.command("show")
@click.argument("endpoint_id", type=int)
def webhooks_show(endpoint_id: int) -> None:
    """Show one endpoint as JSON: its state, why it is disabled, its failing attempts."""
    try:
        _print(webhooks.view(webhooks.find(current_store(), None, endpoint_id)))
    except PetstoreError as exc:
        raise _fail(exc) from None


@webhooks_group.command("remove")
@click.argument("endpoint_id", type=int)
def webhooks_remove(endpoint_id: int) -> None:
    """Remove an endpoint and its log of attempts."""
    try:
        webhooks.delete(current_store(), None, endpoint_id)
    except PetstoreError as exc:
        raise _fail(exc) from None
    say(f"Removed endpoint {endpoint_id}.")


def _set_enabled(endpoint_id: int, enabled: bool) -> None:
    try:
        endpoint = webhooks.update(current_store(), None, endpoint_id, {"enabled": enabled})
    except PetstoreError as exc:
        raise _fail(exc) from None
    say(f"Endpoint {endpoint.id} is {'enabled' if endpoint.enabled else 'disabled'}.")


@webhooks_group.command("enable")
@click.argument("endpoint_id", type=int)
def webhooks_enable(endpoint_id: int) -> None:
    """Enable an endpoint: it goes on from where it stopped, nothing skipped."""
    _set_enabled(endpoint_id, True)


@webhooks_group.command("disable")
@click.argument("endpoint_id", type=int)
def webhooks_disable(endpoint_id: int) -> None:
    """Disable an endpoint: nothing is sent until it is enabled again."""
    _set_enabled(endpoint_id, False)


@webhooks_group.command("rotate-secret")
@click.argument("endpoint_id", type=int)
@click.option("--grace", type=click.IntRange(0, webhooks.GRACE_MAX),
              default=webhooks.GRACE_DEFAULT, show_default=True,
              help="Seconds the old secret keeps signing beside the new one.")
def webhooks_rotate_secret(endpoint_id: int, grace: int) -> None:
    """Give an endpoint a new secret, printed on standard output (shown this once)."""
    try:
        _, secret = webhooks.rotate(current_store(), None, endpoint_id, grace)
    except PetstoreError as exc:
        raise _fail(exc) from None
    say(f"Endpoint {endpoint_id} has a new secret; the old one signs too for {grace} s.")
    click.echo(secret)


@webhooks_group.command("deliveries")
@click.argument("endpoint_id", type=int)
@click.option("--limit", type=click.IntRange(1, webhooks.DELIVERIES_LIMIT_MAX), default=20,
              show_default=True, help="How many attempts, newest first.")
@click.option("--json", "as_json", is_flag=True, help="Print a JSON array on standard output.")
def webhooks_deliveries(endpoint_id: int, limit: int, as_json: bool) -> None:
    """The endpoint's latest delivery attempts, newest first."""
    try:
        found, _ = webhooks.deliveries(current_store(), None, endpoint_id, None, limit)
    except PetstoreError as exc:
        raise _fail(exc) from None
    if as_json:
        _print([webhooks.attempt_view(a) for a in found])
        return
    rows = [(a.attempted_at, a.webhook_id, a.type, str(a.attempt),
             str(a.status) if a.status is not None else "-", f"{a.duration_ms:.0f} ms",
             (a.error or "")[:60]) for a in found]
    echo_table(("AT", "WEBHOOK-ID", "TYPE", "TRY", "STATUS", "TOOK", "ERROR"), rows)


@webhooks_group.command("replay")
@click.argument("endpoint_id", type=int)
@click.option("--after", default=None,
              help="A cursor of the feed (`petstore orders changes` prints them); the "
                   "beginning without it.")
def webhooks_replay(endpoint_id: int, after: str | None) -> None:
    """Deliver again every change after a feed cursor, each order as it is now."""
    try:
        webhooks.replay(current_store(), None, endpoint_id, after)
    except PetstoreError as exc:
        raise _fail(exc) from None
    say(f"Endpoint {endpoint_id} goes on from {'the beginning' if not after else 'there'}.")


@webhooks_group.command("test")
@click.argument("endpoint_id", type=int)
def webhooks_test(endpoint_id: int) -> None:
    """Send a signed `ping` to the endpoint now, and print how it went as JSON."""
    store = current_store()
    try:
        endpoint = webhooks.find(store, None, endpoint_id)
    except PetstoreError as exc:
        raise _fail(exc) from None
    msg_id, outcome = send_test(store, endpoint, current_settings().webhook_timeout,
                                _allowed())
    _print(webhooks.test_result(msg_id, outcome))
    if not outcome.delivered:
        sys.exit(1)


@webhooks_group.command("listen")
@click.option("--port", type=click.IntRange(0, 65535), required=True,
              help="The port to receive on, at 127.0.0.1.")
@click.option("--secret", required=True, envvar="PETSTORE_WEBHOOK_SECRET",
              help="The endpoint's secret (whsec_...), to verify each message with.")
def webhooks_listen(port: int, secret: str) -> None:
    """Receive webhooks on 127.0.0.1:PORT, verify each, print it as a JSON line.

    Point an endpoint at http://127.0.0.1:PORT/ (with PETSTORE_WEBHOOK_ALLOWED_NETWORKS
    set to 127.0.0.0/8 on the service). Each verified message is answered 204 and printed
    on standard output with its webhook-id; one that does not verify is answered 400 and
    said on standard error. Ctrl-C or SIGTERM stops it.
    """
    try:
        verifier = Webhook(secret)
    except Exception:
        raise click.BadParameter("is not a webhook secret (whsec_...)",
                                 param_hint="--secret") from None

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def do_POST(self) -> None:
            body = self.rfile.read(int(self.headers.get("content-length") or 0))
            headers = {k.lower(): v for k, v in self.headers.items()}
            try:
                message = verifier.verify(body, headers)
            except (WebhookVerificationError, ValueError) as exc:
                say(f"refused a message that does not verify ({exc})")
                self._answer(400)
                return
            click.echo(json.dumps({"webhook-id": headers.get("webhook-id"), **message}))
            sys.stdout.flush()
            self._answer(204)

        def _answer(self, status: int) -> None:
            self.send_response(status)
            self.send_header("content-length", "0")
            self.end_headers()

        def log_message(self, format: str, *args: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", port), Handler)
    server.daemon_threads = True
    signal.signal(signal.SIGTERM, _interrupt)
    say(f"Listening on http://127.0.0.1:{server.server_address[1]}/ (Ctrl-C stops).")
    try:
        server.serve_forever(0.1)
    except KeyboardInterrupt:
        pass
    finally:
        server.server_close()
    say("Stopped.")


@webhooks_group.command("deliver")
def webhooks_deliver() -> None:
    """Deliver webhooks from a process of its own, until Ctrl-C or SIGTERM.

    Each worker of `petstore serve` runs a deliverer on its event loop unless
    PETSTORE_WEBHOOKS_ENABLED is false; this runs the same deliverer alone (the same
    settings, leases, retries and order), for an operator who keeps deliveries off the
    request workers (docs/performance.md measures both). Any number may run, on any hosts
    sharing the database: each endpoint is delivered to by one at a time. At a stop, a
    message in flight may finish and the leases are given back.
    """
    current_store().migrate()  # a bad setting or database is said here, as serve says it
    # The deliverer is the HTTP wing's (app.web.deliverer), which the CLI does not import:
    # it runs as that module's own program, as serve runs gunicorn.
    os.execv(sys.executable, [sys.executable, "-m", "app.web.deliverer"])


def _interrupt(signum: int, frame: Any) -> None:
    raise KeyboardInterrupt
