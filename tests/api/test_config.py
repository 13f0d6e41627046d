"""backend/config.py: every setting read from the environment in one place, with defaults,
validation that names the variable, and REDIS_URL read both prefixed and plain."""

from __future__ import annotations

import pytest

from backend.config import (
    APP_DEFAULTS,
    ConfigError,
    app_settings,
    log_level,
    redis_url,
    server_settings,
    worker_settings,
)


def test_defaults_without_any_variable():
    assert app_settings(environ={}) == APP_DEFAULTS
    server = server_settings(8, environ={})
    assert (server.bind, server.workers, server.threads, server.timeout) == \
        ("127.0.0.1:8000", 1, 4, 120)  # no Redis: one process keeps the state
    assert server.access_log is None and server.log_level == "info"
    worker = worker_settings(environ={})
    assert worker.redis_url is None and worker.test_job_delay == 0.0


def test_variables_then_overrides():
    env = {"CRANFIELD_MAX_TOPICS": "7", "CRANFIELD_SHARDS": "2"}
    settings = app_settings({"SHARDS": 3}, environ=env)
    assert settings["MAX_TOPICS"] == 7 and settings["SHARDS"] == 3


@pytest.mark.parametrize("env, url", [
    ({}, None),
    ({"REDIS_URL": "redis://a"}, "redis://a"),
    ({"CRANFIELD_REDIS_URL": "redis://b", "REDIS_URL": "redis://a"}, "redis://b"),
    ({"CRANFIELD_REDIS_URL": "", "REDIS_URL": "redis://a"}, "redis://a"),
])
def test_redis_url(env, url):
    assert redis_url(env) == url
    assert app_settings(environ=env)["REDIS_URL"] == url
    assert worker_settings(env).redis_url == url


def test_with_redis_gunicorn_scales_out_to_four_processes_at_most():
    assert server_settings(2, {"REDIS_URL": "redis://r"}).workers == 2
    assert server_settings(16, {"REDIS_URL": "redis://r"}).workers == 4
    assert server_settings(16, {"REDIS_URL": "redis://r", "CRANFIELD_WORKERS": "9"}).workers == 9


@pytest.mark.parametrize("call, message", [
    (lambda: app_settings(environ={"CRANFIELD_MAX_TOPICS": "x"}),
     "CRANFIELD_MAX_TOPICS must be an integer, got 'x'"),
    (lambda: app_settings(environ={"CRANFIELD_SHARDS": "0"}),
     "CRANFIELD_SHARDS must be positive, got 0"),
    (lambda: app_settings(environ={"CRANFIELD_TRUSTED_PROXIES": "-1"}),
     "CRANFIELD_TRUSTED_PROXIES must be 0 or a positive integer, got '-1'"),
    (lambda: app_settings(environ={"CRANFIELD_TRUSTED_PROXIES": "\uff11"}),
     "CRANFIELD_TRUSTED_PROXIES must be 0 or a positive integer, got '\uff11'"),
    (lambda: server_settings(2, {"CRANFIELD_THREADS": "-1"}),
     "CRANFIELD_THREADS must be a positive integer, got '-1'"),
    (lambda: log_level({"CRANFIELD_LOG_LEVEL": "Loud"}),
     "CRANFIELD_LOG_LEVEL must be debug, info, warning, error or critical, got 'Loud'"),
    (lambda: worker_settings({"CRANFIELD_TEST_JOB_DELAY": "soon"}),
     "CRANFIELD_TEST_JOB_DELAY must be a number, got 'soon'"),
])
def test_bad_values_name_the_variable(call, message):
    with pytest.raises(ConfigError) as info:
        call()
    assert str(info.value) == message


def test_log_level_is_case_insensitive():
    assert log_level({"CRANFIELD_LOG_LEVEL": "WARNING"}) == "warning"
    assert worker_settings({"CRANFIELD_TEST_JOB_DELAY": "1.5"}).test_job_delay == 1.5


@pytest.mark.parametrize("env, address", [
    ({}, ("127.0.0.1", 8000)),
    ({"CRANFIELD_BIND": "0.0.0.0:8011"}, ("0.0.0.0", 8011)),
    ({"CRANFIELD_BIND": "localhost"}, ("localhost", 8000)),
    ({"CRANFIELD_BIND": "[::1]:9000"}, ("[::1]", 9000)),
])
def test_bind_address(env, address):
    from backend.config import bind_address

    assert bind_address(env) == address


@pytest.mark.parametrize("text", ["host:port", "host:0", "host:70000"])
def test_a_bad_bind_names_the_variable(text):
    from backend.config import bind_address

    with pytest.raises(ConfigError, match=f"CRANFIELD_BIND must be HOST:PORT, got '{text}'"):
        bind_address({"CRANFIELD_BIND": text})


def test_cranfield_serve_binds_where_configured(monkeypatch):
    """``cranfield serve`` takes CRANFIELD_BIND (make run relies on it); --host/--port win."""
    import os

    from service import commands

    seen = []
    monkeypatch.setattr(os, "execv", lambda exe, argv: seen.append(argv))
    monkeypatch.setenv("CRANFIELD_BIND", "127.0.0.2:8123")
    args = type("Args", (), {"host": None, "port": None, "workers": None})
    commands.run_serve(args)
    args.port = 8200
    commands.run_serve(args)
    binds = [argv[argv.index("--bind") + 1] for argv in seen]
    assert binds == ["127.0.0.2:8123", "127.0.0.2:8200"]
