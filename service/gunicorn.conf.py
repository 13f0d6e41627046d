"""gunicorn settings for the API.

    gunicorn -c service/gunicorn.conf.py 'service.app:create_app()'

Every setting can be overridden by an environment variable of the same name in capitals
with the ``CRANFIELD_`` prefix (e.g. ``CRANFIELD_WORKERS=4``)."""

import multiprocessing
import os

bind = os.environ.get("CRANFIELD_BIND", "127.0.0.1:8000")
# Without Redis, stored qrels and queued jobs live in the serving process: one process (with
# threads) keeps them visible to every request. With Redis, processes scale out.
_shared_state = bool(os.environ.get("REDIS_URL") or os.environ.get("CRANFIELD_REDIS_URL"))
workers = int(os.environ.get("CRANFIELD_WORKERS",
                             str(min(4, multiprocessing.cpu_count()) if _shared_state else 1)))
threads = int(os.environ.get("CRANFIELD_THREADS", "1" if _shared_state else "4"))
# evaluations of large runs take seconds: keep the worker alive while it computes
timeout = int(os.environ.get("CRANFIELD_TIMEOUT", "120"))
graceful_timeout = 30
keepalive = 5
accesslog = os.environ.get("CRANFIELD_ACCESS_LOG", "-")
errorlog = "-"
loglevel = os.environ.get("CRANFIELD_LOG_LEVEL", "info")


def on_starting(server):
    """Compile (or load from numba's cache) the large-JSON kernels once, in the master before
    the workers fork, so that no request pays for it."""
    from cranfield.json_body import warm_up

    warm_up()
