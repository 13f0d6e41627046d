"""gunicorn settings for the API.

    gunicorn -c service/gunicorn.conf.py 'service.app:create_app()'

Every setting can be overridden by an environment variable of the same name in capitals
with the ``CRANFIELD_`` prefix (e.g. ``CRANFIELD_WORKERS=4``)."""

import glob
import multiprocessing
import os
import re
import shutil
import tempfile

from backend.config import ConfigError, app_settings, metrics_dir, server_settings
from backend.telemetry import logging_config

try:  # every setting from backend/config.py, the one place configuration is read
    _settings = server_settings(multiprocessing.cpu_count())
except ConfigError as exc:
    raise SystemExit(f"cranfield: {exc}") from None

bind = _settings.bind
# Without Redis one process (with threads), with Redis up to one per core (config.py)
workers = _settings.workers
# Threads in every mode: a client that sends its body slowly holds one thread, not a whole
# process (sync workers let three slow clients stall two processes), and keep-alive works.
# Still one thread per slow client until its request has arrived: alone (make run, 1 × 4)
# gunicorn answers beside 3 of them, not 4. Exposed to others, it runs behind nginx, which
# reads requests whole first (docker-compose.yml, deploy/nginx.conf.template; issue #27).
threads = _settings.threads
# evaluations of large runs take seconds: keep the worker alive while it computes
timeout = _settings.timeout
graceful_timeout = 30
keepalive = 5
# The longest request line gunicorn takes (its maximum; default 4094): a query of every
# parameter openapi.yaml allows at its longest, percent-encoded (a system name and a measure
# of 200 characters, 12 bytes each as %XX of 4-byte UTF-8), fits, so the API answers such a
# request itself (a documented status) rather than gunicorn with 414.
limit_request_line = 8190
# The app writes one JSON access line per request (service/observability.py); gunicorn's own
# access log only when asked for (a path, or "-")
accesslog = _settings.access_log
errorlog = "-"
loglevel = _settings.log_level
# every log record, gunicorn's and the app's, as one JSON object per line on stderr
logconfig_dict = logging_config(loglevel, accesslog)


def on_starting(server):
    """In the master, before the workers fork: check the configuration (a bad value stops
    start-up with one line), migrate the results database to head (so that the workers,
    which each migrate too, find it there; backend.results.migrate makes processes take turns)
    and set up Prometheus's multiprocess mode."""
    from service.app import check_configuration, open_results

    try:
        check_configuration()
    except ConfigError as exc:
        raise SystemExit(f"cranfield: {exc}") from None
    try:
        open_results(app_settings()).close()
    except Exception as exc:  # unreachable, refused, a migration that fails: one line
        raise SystemExit(f"cranfield: cannot open the results database "
                         f"(CRANFIELD_DATABASE_URL): {exc.__class__.__name__}: "
                         f"{str(exc).splitlines()[0] if str(exc) else ''}") from None
    _metrics_directory(server)


def _metrics_directory(server) -> None:
    """Every worker process writes its HTTP metrics to files in ``PROMETHEUS_MULTIPROC_DIR``
    and /metrics sums them all. Not set: a fresh directory of our own, removed on exit. Set
    by the operator: emptied of metric files (those of an earlier run would be added in).
    Set here rather than when this file is read, so that reading it (tests do) changes
    nothing; before the workers fork, which import the app, and prometheus_client with it.
    (With ``--preload`` the app is imported first: each process then counts on its own.)"""
    path = metrics_dir()
    if path:
        for stale in glob.glob(os.path.join(path, "*.db")):
            os.remove(stale)
    else:
        path = server._cranfield_metrics_dir = tempfile.mkdtemp(prefix="cranfield-metrics-")
        os.environ["PROMETHEUS_MULTIPROC_DIR"] = path
    if server.cfg.preload_app:
        server.log.warning("--preload: /metrics counts the requests of the process that "
                           "answers it only")


_ASCII_DIGITS = re.compile(r"[0-9]+")
_body_limit: list[int] = []  # MAX_CONTENT_LENGTH, read once per worker process


def pre_request(worker, req):
    """A body declared longer than the API's limit is never read (the answer is 413, or an
    earlier 401): gunicorn then closes the connection (it drains at most 64 KiB of a body
    left unread), so its answer says ``Connection: close`` rather than keep-alive. Shorter
    bodies a route did not read are read and dropped by the app (service/request_body.py)."""
    worker.log.debug("%s %s", req.method, req.path)  # gunicorn's own pre_request
    if not _body_limit:
        _body_limit.append(app_settings()["MAX_CONTENT_LENGTH"])
    for name, value in req.headers:
        if name == "CONTENT-LENGTH":
            # ASCII decimal only: str.isdigit() also takes "１" or "٣" (and int() reads
            # them), a length the client did not write as HTTP writes one
            if _ASCII_DIGITS.fullmatch(value) and int(value) > _body_limit[0]:
                req.must_close = True
            break


def child_exit(server, worker):
    """A worker process is gone: drop its live-gauge files (its counters stay counted)."""
    from prometheus_client import multiprocess

    multiprocess.mark_process_dead(worker.pid)


def on_exit(server):
    own = getattr(server, "_cranfield_metrics_dir", None)
    if own:
        shutil.rmtree(own, ignore_errors=True)
