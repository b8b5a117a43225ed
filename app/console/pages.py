"""register(): the console's pages on a Flask app (D35)."""

from __future__ import annotations

import flask

from app.console import (
    api_keys,
    auth,
    board,
    catalogue,
    confirm,
    errors,
    guard,
    home,
    hooks,
    inputs,
    times,
    users,
)
from app.console.blueprint import STATE, Console, console
from app.core.quotas.plans import Plan
from app.core.services import Services
from app.core.users.throttle import SignInThrottle

# Each module adds its pages (or checks, or error pages) to the blueprint as it loads.
PARTS = (guard, inputs, times, auth, board, catalogue, api_keys, hooks, users, confirm, home,
         errors)


def register(app: flask.Flask, services: Services, plans: dict[str, Plan]) -> None:
    """Serve the console's pages from app, over the service's services and the plans of
    x-plans (D11)."""
    app.extensions[STATE] = Console(services, SignInThrottle(services.settings), plans)
    app.url_map.converters["rest"] = errors.Rest  # before the blueprint's rules use it
    app.register_blueprint(console)
