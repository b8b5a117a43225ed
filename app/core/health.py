"""What makes an instance ready to serve (D16): its database answers, and when quotas
fail closed, its quota storage too."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from app.core.errors import NotReady, StoreUnavailable
from app.core.storage import Store


def readiness(store: Store, quota_probe: Callable[[], bool] | None) -> dict[str, Any]:
    """The checks and their results; raises NotReady naming the first that failed."""
    checks = {"database": "ok", "quotas": "not checked"}
    try:
        store.check()
    except StoreUnavailable as exc:
        raise NotReady(f"database: {exc.message}") from exc
    if quota_probe is not None:
        if not quota_probe():
            raise NotReady("quotas: the quota storage does not answer")
        checks["quotas"] = "ok"
    return {"status": "ready", "checks": checks}
