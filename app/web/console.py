"""The console's pages at /console/ (D35) branch off the request path in the access layer
(app/web/chain.py), for the console's blueprint on a Flask app of its own (D42: the API
is Connexion's AsyncApp), through a2wsgi's WSGIMiddleware.

So the API's layers never see them: no API key opens them and no quota meters them (the
caller layer comes later), and their errors are pages, never the Error bodies
of Connexion's exception layer (which also comes later). Every answer of the console,
whoever made it, leaves with the security headers of D35 and the request id; a failure the
blueprint did not answer (it answers its own, app/console/errors.py) is a 500 page here.
"""

from __future__ import annotations

import logging

from starlette.types import ASGIApp, Message, Receive, Scope, Send

from app.web.exchange import Exchange, add_missing

log = logging.getLogger("petstore.console")

PREFIX = "/console"
# D35: scripts, styles and images of the console's own origin only (no inline script or
# style: an injected one does not run), no frame may hold a page, forms post only to the
# console, no other site learns the console's addresses from a Referer.
CONTENT_SECURITY_POLICY = ("default-src 'none'; script-src 'self'; style-src 'self'; "
                           "img-src 'self'; connect-src 'self'; form-action 'self'; "
                           "frame-ancestors 'none'; base-uri 'none'")
SECURITY_HEADERS = [
    (b"content-security-policy", CONTENT_SECURITY_POLICY.encode()),
    (b"x-content-type-options", b"nosniff"),
    (b"referrer-policy", b"same-origin"),
    (b"x-frame-options", b"DENY"),  # frame-ancestors for browsers before CSP 2
    (b"cross-origin-opener-policy", b"same-origin"),
    (b"cross-origin-resource-policy", b"same-origin"),
    (b"cache-control", b"no-store"),  # pages of orders stay out of shared caches
]
# Over HTTPS (directly, or through a proxy the settings trust), browsers keep to it.
HSTS = (b"strict-transport-security", b"max-age=31536000")
FAILED_PAGE = (b"<!doctype html><html lang=en><meta charset=utf-8><title>Something went wrong"
               b"</title><h1>Something went wrong</h1><p>The console failed to show this page;"
               b" it was logged as request %s.</p></html>")


def is_console(path: str) -> bool:
    """Whether a path is the console's."""
    return path == PREFIX or path.startswith(PREFIX + "/")


async def serve(pages: ASGIApp, found: Exchange, scope: Scope, receive: Receive,
                send: Send) -> None:
    """A console request answered by its pages (the console's Flask app), with the headers
    of every console page; a 500 page for a failure they did not answer."""
    found.answered_by = "console"
    headers = [*found.headers, *SECURITY_HEADERS]
    if scope.get("scheme") == "https":
        headers.append(HSTS)
    started = False

    async def answering(message: Message) -> None:
        nonlocal started
        if message["type"] == "http.response.start":
            started = True
            found.status = message["status"]
            message["headers"] = add_missing(message.get("headers", ()), headers)
        await send(message)

    try:
        await pages(scope, receive, answering)
    except Exception:
        log.exception("the console failed on %s", scope["method"],
                      extra={"request_id": found.request_id})
        if started:  # the page is half sent: the connection ends, as for any answer
            raise
        body = FAILED_PAGE % found.request_id.encode()
        await answering({"type": "http.response.start", "status": 500, "headers": [
            (b"content-type", b"text/html; charset=utf-8"),
            (b"content-length", str(len(body)).encode())]})
        await send({"type": "http.response.body", "body": body})
