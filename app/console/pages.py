"""register(): the console's pages on a Flask app (D35)."""

from __future__ import annotations

import flask

from app.console import auth, board, catalogue, errors, guard, home
from app.console.blueprint import STATE, Console, console
from app.core.services import Services
from app.core.users.throttle import SignInThrottle

# Each module adds its pages (or checks, or error pages) to the blueprint as it loads.
PARTS = (guard, auth, board, catalogue, home, errors)


def register(app: flask.Flask, services: Services) -> None:
    """Serve the console's pages from app, over the service's services."""
    app.extensions[STATE] = Console(services, SignInThrottle(services.settings))
    app.register_blueprint(console)
