"""Flask test client whose every response is checked against openapi.yaml."""

from __future__ import annotations

import shutil
import time
from pathlib import Path

import orjson
import pytest
from openapi_core import Config, OpenAPI
from openapi_core.testing import MockRequest, MockResponse

from service.app import create_app

ROOT = Path(__file__).resolve().parents[2]
SPEC = OpenAPI.from_file_path(
    str(ROOT / "openapi.yaml"),
    config=Config(extra_media_type_deserializers={"application/problem+json": orjson.loads}))
TEXT_TYPES = ("text/plain", "text/csv", "text/html", "application/yaml")


class ContractClient:
    """Wraps the test client: each response must match the contract (route, status,
    content type and body), unless a test opts out for a route outside it."""

    def __init__(self, client):
        self.client = client

    def open(self, *args, check: bool = True, **kwargs):
        resp = self.client.open(*args, **kwargs)
        if check:
            req = resp.request
            # the route is found from method, path and query; the body was consumed already
            SPEC.validate_response(
                MockRequest("http://127.0.0.1:8000", req.method.lower(), req.path,
                            args=dict(req.args)),
                MockResponse(resp.get_data(as_text=resp.mimetype in TEXT_TYPES),
                             status_code=resp.status_code,
                             headers=dict(resp.headers), content_type=resp.mimetype))
        return resp

    def get(self, *args, **kwargs):
        return self.open(*args, method="GET", **kwargs)

    def post(self, *args, **kwargs):
        return self.open(*args, method="POST", **kwargs)

    def put(self, *args, **kwargs):
        return self.open(*args, method="PUT", **kwargs)

    def delete(self, *args, **kwargs):
        return self.open(*args, method="DELETE", **kwargs)



def finished_job(client, location: str, *, headers: dict | None = None,
                 timeout: float = 30) -> dict:
    """The job at ``location`` once it has finished or failed (polled every 20 ms; the test
    fails after ``timeout`` seconds)."""
    deadline = time.monotonic() + timeout
    while (job := client.get(location, headers=headers or {}).get_json())["status"] not in (
            "finished", "failed"):
        assert time.monotonic() < deadline, job
        time.sleep(0.02)
    return job


def finished_rescore(client, rescore_id: str, *, headers: dict | None = None,
                     timeout: float = 120) -> dict:
    """``GET /v1/rescores/{id}`` once its state is finished, or as it stands when the
    embedded queue's thread has run every job it was given (a GET that queued one again
    is waited on too) or after ``timeout`` seconds: the caller's assertions on its counts
    say what did not finish. Waits on the queue's thread running the jobs, not the clock."""
    from backend.rescoring import wait_embedded

    deadline, before = time.monotonic() + timeout, None
    while True:
        wait_embedded(max(deadline - time.monotonic(), 0.001))
        doc = client.get(f"/v1/rescores/{rescore_id}", headers=headers or {}).get_json()
        # finished; or nothing changed though every job given has run (nothing left to run)
        if doc["state"] == "finished" or doc == before or time.monotonic() >= deadline:
            return doc
        before = doc

@pytest.fixture(scope="session")
def _results_template(tmp_path_factory) -> Path:
    """An empty results database at head, migrated once: each test gets a copy."""
    from backend.results import migrate

    path = tmp_path_factory.mktemp("results") / "template.db"
    migrate(f"sqlite:///{path}")
    return path


def pytest_generate_tests(metafunc):
    """A module that sets ``RESULTS_ON_POSTGRES = True`` runs each of its tests twice: with
    the results in SQLite and in PostgreSQL (skipped without a server, failing under
    CI=true)."""
    if getattr(metafunc.module, "RESULTS_ON_POSTGRES", False) \
            and "results_database" in metafunc.fixturenames:
        metafunc.parametrize("results_database", ["sqlite", "postgresql"], indirect=True)


@pytest.fixture(scope="session")
def _postgres_results():
    """A PostgreSQL database at head for this test session (None: no server), dropped at the
    end."""
    import sys

    from backend.results import migrate

    sys.path.insert(0, str(ROOT / "tests" / "integration"))
    from servers import postgres_database

    with postgres_database("cranfield_api_") as url:
        if url is not None:
            migrate(url)
        yield url


@pytest.fixture(scope="module")
def redis_server():
    """A private redis-server for each test module that asks for one (skipped without one;
    failing with CI=true), as tests/integration/conftest.py gives its modules."""
    import sys

    sys.path.insert(0, str(ROOT / "tests" / "integration"))
    from servers import running_redis

    with running_redis() as server:
        yield server


@pytest.fixture(autouse=True)
def results_database(request, _results_template, tmp_path, monkeypatch, require) -> str:
    """Every app a test makes (this directory's fixtures, or create_app called by the test)
    records results in a database of the test's own: CRANFIELD_DATABASE_URL points there,
    so a test run never touches the shared instance/cranfield.db. A SQLite file by default;
    on PostgreSQL (see :func:`pytest_generate_tests`) the session's database with its
    tables emptied, and every store the test opened closed at its end (their pools would
    otherwise hold the server's connections)."""
    if getattr(request, "param", "sqlite") == "postgresql":
        from backend.results import Base, ResultStore

        url = request.getfixturevalue("_postgres_results")
        require(url is not None, "PostgreSQL on 127.0.0.1:5432 (user postgres, trust)")
        opened = []
        init = ResultStore.__init__

        def tracked(self, *args, **kwargs):
            init(self, *args, **kwargs)
            opened.append(self)

        monkeypatch.setattr(ResultStore, "__init__", tracked)
        cleaner = ResultStore(url)
        with cleaner.engine.begin() as connection:
            for table in reversed(Base.metadata.sorted_tables):
                connection.execute(table.delete())
        monkeypatch.setenv("CRANFIELD_DATABASE_URL", url)
        yield url
        for store in opened:
            store.close()
        return
    path = tmp_path / "results.db"
    shutil.copyfile(_results_template, path)
    url = f"sqlite:///{path}"
    monkeypatch.setenv("CRANFIELD_DATABASE_URL", url)
    yield url


@pytest.fixture
def app():
    return create_app({"TESTING": True, "MAX_CONTENT_LENGTH": 2_000_000, "MAX_TOPICS": 1000,
                       "MAX_DOCS_PER_TOPIC": 2000})


@pytest.fixture
def client(app):
    return ContractClient(app.test_client())


@pytest.fixture
def served(app):
    """The app on a loopback port, its URL (the CLI and the client speak HTTP)."""
    import threading

    from werkzeug.serving import make_server

    server = make_server("127.0.0.1", 0, app, threaded=True)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_port}"
    server.shutdown()
    thread.join()
