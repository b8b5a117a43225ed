"""The console's errors as pages (D35): 403, 404, 405, 409, 429 and 500 are HTML for a person,
never the API's Error bodies (the access layer keeps its requests away from Connexion's
exception middleware, app/web/console.py). Flask finds a blueprint's handlers only for
URLs routed to it, so any other path under /console/ is routed to not_found here: doubled
slashes included, which werkzeug would otherwise merge into a redirect raised outside the
blueprint (where only Connexion's handler, for the API's errors, would find it: a 500)."""

from __future__ import annotations

import logging

import flask
from werkzeug.exceptions import HTTPException, NotFound
from werkzeug.routing import PathConverter

from app.console.blueprint import PUBLIC, FormInFlight, Page, console, needs, render
from app.core.errors import StoreUnavailable

log = logging.getLogger("petstore.console")

TITLES = {400: "That request is not valid", 403: "Not allowed", 404: "No such page",
          405: "Not this way", 429: "Too many attempts",
          500: "Something went wrong", 503: "The database does not answer"}


METHODS = ["GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"]


@console.route("", methods=METHODS)
@needs(PUBLIC)
def bare() -> Page:
    """/console, without its slash: the console is at /console/."""
    return flask.redirect(flask.url_for("console.home"), 308)


class Rest(PathConverter):
    """The rest of a path, whatever it holds. werkzeug's path converter takes none that
    starts with a slash (/console//orders, /console///) or holds a newline: those would
    reach no rule of the blueprint. pages.register adds it to the app's URL map as
    "rest"."""

    regex = r"[\s\S]+?"
    part_isolating = False  # it takes slashes


@console.route("/", methods=[m for m in METHODS if m not in ("GET", "HEAD", "OPTIONS")],
               defaults={"rest": ""})
@console.route("/<rest:rest>", methods=METHODS)
@needs(PUBLIC)
def not_found(rest: str) -> Page:
    """Any path under /console/ that is no page of the console (one with a doubled slash
    too: a 404, as the API's are by D7, never a redirect), and any method a page does not
    take: a 404 page (Flask would send a path it routes to no view of the blueprint past
    the blueprint's error pages)."""
    raise NotFound()


@console.errorhandler(HTTPException)
def http_error(error: HTTPException) -> Page:
    status = error.code or 500
    if 300 <= status < 400:  # a routing redirect (RequestRedirect) stays one
        return error.get_response()
    headers = dict(error.get_headers())
    headers.pop("Content-Type", None)
    return render("error.html", status, headers, title=TITLES.get(status, "Not allowed"),
                  message=error.description)


@console.errorhandler(FormInFlight)
def form_in_flight(error: FormInFlight) -> Page:
    return render("error.html", 409, title="Sent already", back=error.back,
                  message="This form was sent before, and that sending has made nothing "
                          "yet: it is being applied, or it stopped midway. Look at what it "
                          "did before you send anything again.")


@console.errorhandler(StoreUnavailable)
def store_unavailable(error: StoreUnavailable) -> Page:
    log.warning("store unavailable: %s", error.message)
    return render("error.html", 503, {"Retry-After": "1"}, title=TITLES[503],
                  message="The service cannot reach its database right now; try again "
                          "in a moment.")


@console.errorhandler(Exception)
def failure(error: Exception) -> Page:
    log.error("the console failed on %s %s", flask.request.method, flask.request.path,
              exc_info=error)
    return render("error.html", 500, title=TITLES[500],
                  message="The console failed to show this page; it was logged, with the "
                          "X-Request-ID this answer carries.")
