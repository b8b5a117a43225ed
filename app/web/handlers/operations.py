"""Handlers of the operations tagged `operations` (openapi/ops.yaml): liveness, readiness."""

from __future__ import annotations

from typing import Any

import connexion
from connexion.lifecycle import ConnexionResponse
from starlette.exceptions import HTTPException

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


def get_metrics() -> ConnexionResponse:
    """GET /metrics: Prometheus metrics, only to PETSTORE_METRICS_ALLOW."""
    current = services()
    settings = current.settings
    client = connexion.request.client
    if not (settings.metrics_enabled
            and metrics.allowed(client.host if client else None, settings.metrics_allow)):
        raise HTTPException(404)
    body, content_type = metrics.render(current.store)
    return ConnexionResponse(status_code=200, content_type=content_type, body=body)
