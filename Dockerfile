# One image for the API and the workers; the command chooses the role:
#   docker run -p 127.0.0.1:8000:8000 -e CRANFIELD_API_KEYS=... cranfield  # the API (default)
#   docker run --no-healthcheck -e REDIS_URL=redis://host:6379/0 cranfield cranfield worker
# Checked statically by tests/deploy/test_container_files.py (and hadolint).

# Python 3.11 on Debian 12: the tag names the Debian release too, so a rebuild does not move
# to a new one unnoticed (plain 3.11-slim follows Debian's current stable).
FROM python:3.11-slim-bookworm AS builder

# A C compiler, in this stage only, for cranfield/inputs/_mapscan.c and _jsonscan.c (the engine's one
# compiled accelerator: plain TREC run lines, Python mappings, per-topic joins and large JSON
# bodies; docs/performance.md has the figures): the runtime stage gets the compiled module
# with /app, and no compiler.
# Not pinned to Debian versions (hadolint's DL3008), on purpose: libc6-dev must be the exact
# version of the libc6 the base image already has, which moves with every rebuild of
# python:3.11-slim-bookworm, and Debian's archive keeps only the newest point release of
# each, so a pinned `libc6-dev=2.36-9+deb12uN` stops building at the next security update.
# The tag above fixes the release (bookworm: gcc 12); nothing from apt reaches the runtime
# image; the build fails below if the module was not compiled.
# hadolint ignore=DL3008
RUN apt-get update \
 && apt-get install -y --no-install-recommends gcc libc6-dev \
 && rm -rf /var/lib/apt/lists/*

ENV PIP_DISABLE_PIP_VERSION_CHECK=1 \
    PYTHONDONTWRITEBYTECODE=1
RUN python -m venv /opt/venv
ENV PATH=/opt/venv/bin:$PATH
WORKDIR /app

# Dependencies first, from pyproject.toml alone, so that a code change does not reinstall them;
# at the versions constraints.txt pins (the ones CI tests with), so that a rebuild next month
# runs what passed, not whatever was released since. Every dependency ships wheels for this
# platform.
COPY pyproject.toml README.md constraints.txt ./
RUN python -c "import tomllib; print(*tomllib.load(open('pyproject.toml', 'rb'))['project']['dependencies'], sep='\n')" > /tmp/requirements.txt \
 && pip install --no-cache-dir -c constraints.txt -r /tmp/requirements.txt

# Where the code lives: the source tree at /app, installed in editable mode, so the one copy of
# the code is /app whatever imports it (gunicorn started in /app, or the `cranfield` script
# from anywhere), /app/openapi.yaml is the contract service/docs.py serves, `-c
# service/gunicorn.conf.py` is a path relative to WORKDIR, and the extension compiled in place
# below is the one both roles load.
COPY openapi.yaml ./
COPY cranfield/ cranfield/
COPY backend/ backend/
COPY service/ service/
COPY worker/ worker/
# The editable install compiles the extension in place (/app/cranfield/inputs/_mapscan.*.so, from
# cranfield/inputs/_mapscan.c and cranfield/inputs/_jsonscan.c).
# pyproject marks the extension optional, so a failed compile would only be a warning: the
# import makes it an error here, rather than an image that quietly runs the slower paths.
# checked-hash .pyc files stay valid whatever timestamps COPY gives the sources
RUN pip install --no-cache-dir --no-deps --editable . \
 && python -c "import cranfield.inputs._mapscan" \
 && python -m compileall -q --invalidation-mode checked-hash cranfield service worker


FROM python:3.11-slim-bookworm AS runtime

ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PATH=/opt/venv/bin:$PATH \
    CRANFIELD_BIND=0.0.0.0:8000

# A fixed numeric id, so that Kubernetes' runAsNonRoot can check it.
RUN groupadd --system --gid 10001 cranfield \
 && useradd --system --no-log-init --uid 10001 --gid cranfield \
            --create-home --home-dir /home/cranfield --shell /usr/sbin/nologin cranfield

# Code and virtualenv belong to root: the service user can read them, not change them.
COPY --from=builder /opt/venv /opt/venv
COPY --from=builder /app /app
WORKDIR /app
USER 10001:10001

# Import the compiled module here, as the user who runs the service, where it runs (no
# compiler in this stage): it must have come with /app and load against this stage's libc; and
# read a JSON body with its scan (json_body.warm_up(): nothing is compiled at run time, so
# neither gunicorn nor a worker has a warm-up to pay at start).
RUN python -c "import cranfield.inputs._mapscan; from cranfield.inputs.json_body import warm_up; assert warm_up()"

EXPOSE 8000
# Liveness of the API (no curl in the slim image): /healthz on the port of CRANFIELD_BIND.
# Worker containers have no HTTP server: run them with --no-healthcheck, or a check of their
# own (docker-compose.yml's checks that the worker is registered in Redis).
HEALTHCHECK --interval=30s --timeout=5s --start-period=30s --retries=3 \
  CMD ["python", "-c", "import os, urllib.request; port = os.environ.get('CRANFIELD_BIND', ':8000').rpartition(':')[2]; urllib.request.urlopen(f'http://127.0.0.1:{port}/healthz', timeout=4)"]

# The API under gunicorn with the repository's settings (CRANFIELD_WORKERS, CRANFIELD_TIMEOUT,
# ...; see service/gunicorn.conf.py). For a worker: `cranfield worker` (REDIS_URL or
# --redis-url).
CMD ["gunicorn", "-c", "service/gunicorn.conf.py", "service.app:create_app()"]
