"""gunicorn's configuration for `petstore serve` (`gunicorn -c app/web/gunicorn_conf.py`).

Everything comes from the PETSTORE_* settings, so the service is configured in one place.
"""

import atexit
import os
from typing import Any

from app.core import metrics
from app.core.config import Settings
from app.core.logs import gunicorn_logconfig

settings = Settings.from_env()

worker_class = "app.web.worker.Worker"  # uvicorn's, accepting every waiting connection
bind = settings.bind
workers = settings.workers
# A worker silent this long is restarted; requests in flight at SIGTERM get
# graceful_timeout seconds to finish before workers are stopped.
timeout = 30
graceful_timeout = settings.graceful_timeout
keepalive = settings.keepalive_timeout  # uvicorn's timeout_keep_alive
forwarded_allow_ips = settings.forwarded_allow_ips
# gunicorn 27 otherwise opens a control socket in the home folder.
control_socket_disable = True
loglevel = settings.log_level
accesslog = None  # the service writes its own access line (app/web/access.py)
logconfig_dict = gunicorn_logconfig(settings)


def child_exit(server: Any, worker: Any) -> None:
    """Retire a dead worker's live gauges from the multiprocess metrics, so that /metrics
    shows only the workers alive (petstore_workers among them)."""
    metrics.worker_exited(worker.pid)


def _master_exits(master: int = os.getpid()) -> None:
    # Forked workers inherit this handler; only the master's exit removes the folder.
    if os.getpid() == master:
        metrics.remove_folder_made_for_this_run()


# atexit rather than gunicorn's on_exit hook: it runs too when the master gives up before
# its hooks are set up (an address already in use), as well as after SIGTERM, SIGINT and a
# worker that failed to boot.
atexit.register(_master_exits)


def post_worker_init(worker: Any) -> None:
    """This worker counts in petstore_workers. (Its long-lived objects are frozen out of
    the garbage collector's walks once the app is built: worker.freeze_what_lives.)"""
    metrics.worker_started()
