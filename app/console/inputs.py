"""What the console takes of a request's text: no NUL (U+0000) in any query parameter or
form field, in its name or its value. No field of the console has a use for one, and
PostgreSQL's text refuses it (psycopg's DataError: a 500 there, where SQLite kept it), so a
request that holds one is a 400 page before any page reads it, whichever the store: no
input is a 500 (D7's spirit, the API's: a NUL is never a value)."""

from __future__ import annotations

import flask

from app.console import guard  # noqa: F401  (its checks come first: the order registered)
from app.console.blueprint import console

NUL = "\x00"


@console.before_request
def no_nul() -> None:
    """A 400 page for a request whose query or form holds a NUL, after the guard's checks."""
    request = flask.request
    for fields in (request.args, request.form):
        for name, value in fields.items(multi=True):
            if NUL in name or NUL in value:
                flask.abort(400, description="This request holds a NUL character, which no "
                                             "field of the console takes.")
