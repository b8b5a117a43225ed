"""gunicorn's configuration for `petstore serve` (`gunicorn -c app/gunicorn_conf.py`).

Everything comes from the PETSTORE_* settings, so the service is configured in one place.
"""

from typing import Any

from app import metrics
from app.config import Settings

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
accesslog = None  # the service writes its own access line (app/access.py)
if settings.log_format == "json":
    logconfig_dict = {
        "version": 1,
        "disable_existing_loggers": False,
        "formatters": {"json": {
            "()": "pythonjsonlogger.json.JsonFormatter",
            "fmt": "{asctime}{levelname}{name}{message}",
            "style": "{",
            "rename_fields": {"asctime": "time", "levelname": "level", "name": "logger"},
        }},
        "handlers": {"stderr": {"class": "logging.StreamHandler", "formatter": "json",
                                "stream": "ext://sys.stderr"}},
        # The app configures the root logger itself (app/access.py).
        "root": {"level": loglevel.upper(), "handlers": []},
        "loggers": {
            "gunicorn.error": {"handlers": ["stderr"], "level": loglevel.upper(),
                               "propagate": False},
            "uvicorn.error": {"handlers": ["stderr"], "level": loglevel.upper(),
                              "propagate": False},
        },
    }


def child_exit(server: Any, worker: Any) -> None:
    """Drop a dead worker's share of the multiprocess metrics."""
    metrics.worker_exited(worker.pid)
