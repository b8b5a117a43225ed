"""gunicorn's configuration for `petstore serve` (`gunicorn -c app/web/gunicorn_conf.py`).

Everything comes from the PETSTORE_* settings, so the service is configured in one place.
"""

from typing import Any

from app.core import metrics
from app.core.config import Settings
from app.core.logs import gunicorn_logconfig

settings = Settings.from_env()

worker_class = "uvicorn_worker.UvicornWorker"
bind = settings.bind
workers = settings.workers
# A worker silent this long is restarted; requests in flight at SIGTERM get
# graceful_timeout seconds to finish before workers are stopped.
timeout = 30
graceful_timeout = settings.graceful_timeout
keepalive = 5
forwarded_allow_ips = settings.forwarded_allow_ips
# gunicorn 27 otherwise opens a control socket in the home folder.
control_socket_disable = True
loglevel = settings.log_level
accesslog = None  # the service writes its own access line (app/web/access.py)
logconfig_dict = gunicorn_logconfig(settings)


def child_exit(server: Any, worker: Any) -> None:
    """Drop a dead worker's share of the multiprocess metrics."""
    metrics.worker_exited(worker.pid)
