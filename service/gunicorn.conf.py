"""gunicorn settings for the API.

    gunicorn -c service/gunicorn.conf.py 'service.app:create_app()'

Every setting can be overridden by an environment variable of the same name in capitals
with the ``CRANFIELD_`` prefix (e.g. ``CRANFIELD_WORKERS=4``)."""

import multiprocessing
import os

bind = os.environ.get("CRANFIELD_BIND", "127.0.0.1:8000")
workers = int(os.environ.get("CRANFIELD_WORKERS", str(min(4, multiprocessing.cpu_count()))))
threads = int(os.environ.get("CRANFIELD_THREADS", "1"))
# evaluations of large runs take seconds: keep the worker alive while it computes
timeout = int(os.environ.get("CRANFIELD_TIMEOUT", "120"))
graceful_timeout = 30
keepalive = 5
accesslog = os.environ.get("CRANFIELD_ACCESS_LOG", "-")
errorlog = "-"
loglevel = os.environ.get("CRANFIELD_LOG_LEVEL", "info")
