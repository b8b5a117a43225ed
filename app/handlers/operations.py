"""Handlers of the operations tagged `operations` (openapi/ops.yaml): liveness, readiness."""

from __future__ import annotations

from typing import Any

from app import health
from app.handlers import services


def get_health() -> tuple[dict[str, str], int]:
    """GET /healthz: the process answers."""
    return {"status": "ok"}, 200


def get_readiness() -> tuple[dict[str, Any], int]:
    """GET /readyz: the database (and, failing closed, the quota storage) answers."""
    current = services()
    return health.readiness(current.store, current.quota_probe), 200
