"""Handlers of the operations tagged `operations` (openapi/ops.yaml): liveness, readiness."""

from __future__ import annotations

from typing import Any

import flask

from app.core import metrics
from app.web.handlers import services


def get_health() -> tuple[dict[str, str], int]:
    """GET /healthz: the process answers."""
    return {"status": "ok"}, 200


def get_readiness() -> tuple[dict[str, Any], int]:
    """GET /readyz: the database (and, failing closed, the quota storage) answered its
    last check, run off the request's path (D41)."""
    current = services()
    return current.readiness.report(), 200


def get_metrics() -> flask.Response:
    """GET /metrics: Prometheus metrics, only to PETSTORE_METRICS_ALLOW."""
    current = services()
    settings = current.settings
    if not (settings.metrics_enabled
            and metrics.allowed(flask.request.remote_addr, settings.metrics_allow)):
        flask.abort(404)
    body, content_type = metrics.render(current.store)
    return flask.Response(body, content_type=content_type)
