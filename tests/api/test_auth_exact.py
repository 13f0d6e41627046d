"""service/auth.py, every number, message and status exact (issue #16: the mutants that
survived tests/api/test_auth.py). The key file's grammar and its error messages, roles as an
order, the rate limit's parsing, counting and Retry-After, and the 401/403/429 problems
whole. Every response through the app is checked against openapi.yaml (ContractClient).
"""

from __future__ import annotations

import hashlib
import re
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest
from conftest import ContractClient

from service import auth as auth_mod
from service.app import create_app
from service.auth import (
    ROLES,
    KeyFileError,
    KeyRing,
    MemoryCounter,
    Principal,
    RedisCounter,
    key_line,
    key_ring,
    new_key,
    parse_rate,
)

PROBLEM = "application/problem+json"
H = "ab" * 32  # a valid 64-hex-digit hash


def sha(key: str) -> str:
    return hashlib.sha256(key.encode()).hexdigest()


# --------------------------------------------------------------------------------------------
# The key file
# --------------------------------------------------------------------------------------------

def test_a_key_line_parses_to_its_principal():
    ring = KeyRing.parse(f"{sha('k')} write search nightly-ci", "src")
    assert len(ring) == 1
    assert ring.authenticate("k") == Principal("nightly-ci", "write", "search", sha("k")[:16])


def test_a_key_without_a_name_is_named_after_its_hash():
    p = KeyRing.parse(f"{sha('k')} read t", "src").authenticate("k")
    assert p.name == f"key-{sha('k')[:8]}" and p.key_id == sha("k")[:16]


def test_hash_prefix_case_comments_and_separators():
    text = (f"# header\n\n{sha('a')} read ta  # trailing comment\n"
            f"sha256:{sha('b')} write tb;{sha('c').upper()} admin tc c-name")
    ring = KeyRing.parse(text, "src")
    assert len(ring) == 3
    assert (ring.authenticate("a").role, ring.authenticate("a").tenant) == ("read", "ta")
    assert ring.authenticate("b").tenant == "tb"
    assert ring.authenticate("c").name == "c-name"
    assert ring.authenticate("a#") is None


def test_a_comment_starts_at_the_first_hash_sign():
    # everything after the first '#' is comment, '#' signs in it included
    ring = KeyRing.parse(f"{sha('k')} read t # first # second # third", "src")
    assert ring.authenticate("k").name == f"key-{sha('k')[:8]}"


@pytest.mark.parametrize("text, message", [
    (f"# c\n{H} read", "src line 2: expected 'SHA256 ROLE TENANT [NAME]', found 2 fields"),
    (f"{H} read t n extra", "src line 1: expected 'SHA256 ROLE TENANT [NAME]', found 5 fields"),
    (f"{'ab' * 31} read t", "src line 1: the first field must be the key's SHA-256 (64 hex "
                            "digits), never the key itself"),
    (f"{H}0 read t", "src line 1: the first field must be the key's SHA-256"),
    (f"x{H} read t", "src line 1: the first field must be the key's SHA-256"),
    (f"{H} Read t", "src line 1: role 'Read' is not one of read, write, admin"),
    (f"{H} read -t", "src line 1: tenant '-t' must be 1-64 letters, digits, '.', '_' or '-'"),
    (f"{H} read {'t' * 65}", f"src line 1: tenant '{'t' * 65}' must be 1-64"),
    (f"{H} read t\n{H.upper()} write u", "src: a key is listed twice"),
    ("  \n# nothing", "src: no keys (remove the setting to turn keys off)"),
])
def test_key_file_errors_say_where_and_what(text, message):
    with pytest.raises(KeyFileError) as err:
        KeyRing.parse(text, "src")
    assert str(err.value).startswith(message), str(err.value)


def test_tenant_grammar_bounds():
    for tenant in ("a", "A.b_c-9", "t" * 64, "9"):
        assert KeyRing.parse(f"{H} read {tenant}", "s").authenticate("x") is None
    for tenant in ("t" * 65, ".a", "_a", "-a", "a/b", "a:b"):
        with pytest.raises(KeyFileError, match="must be 1-64 letters"):
            KeyRing.parse(f"{H} read {tenant}", "s")


def test_authenticate_finds_the_last_match_among_many():
    ring = KeyRing.parse("\n".join(f"{sha(str(i))} read t{i}" for i in range(5)), "s")
    assert [ring.authenticate(str(i)).tenant for i in range(5)] == [f"t{i}" for i in range(5)]
    assert ring.authenticate("5") is None
    # a key that is not UTF-8 encodable does not raise
    assert ring.authenticate("\udcff") is None


def test_key_ring_from_file_or_variable(tmp_path):
    assert key_ring({}) is None
    assert key_ring({"API_KEYS_FILE": "", "API_KEYS": ""}) is None
    path = tmp_path / "keys"
    path.write_text(f"{sha('f')} admin tf\n")
    assert key_ring({"API_KEYS_FILE": str(path)}).authenticate("f").role == "admin"
    assert key_ring({"API_KEYS": f"{sha('v')} read tv"}).authenticate("v").tenant == "tv"
    with pytest.raises(KeyFileError) as err:
        key_ring({"API_KEYS_FILE": str(path), "API_KEYS": f"{sha('v')} read tv"})
    assert str(err.value) == "set CRANFIELD_API_KEYS_FILE or CRANFIELD_API_KEYS, not both"
    with pytest.raises(KeyFileError) as err:
        key_ring({"API_KEYS_FILE": str(tmp_path / "none")})
    assert str(err.value) == (f"CRANFIELD_API_KEYS_FILE: cannot read {tmp_path / 'none'}: "
                              "No such file or directory")
    path.write_text("")
    with pytest.raises(KeyFileError) as err:
        key_ring({"API_KEYS_FILE": str(path)})
    assert str(err.value) == f"{path}: no keys (remove the setting to turn keys off)"
    with pytest.raises(KeyFileError) as err:
        key_ring({"API_KEYS": "# none"})
    assert str(err.value) == "CRANFIELD_API_KEYS: no keys (remove the setting to turn keys off)"


def test_new_key_and_key_line():
    key = new_key()
    assert re.fullmatch(r"cf_[A-Za-z0-9_-]{43}", key)
    assert new_key() != key
    assert key_line("k", "read", "t") == f"{sha('k')} read t"
    assert key_line("k", "read", "t", "n") == f"{sha('k')} read t n"


def test_roles_are_an_order():
    assert ROLES == ("read", "write", "admin")
    grid = {(have, need): Principal("n", have, "t", "0" * 16).may(need)
            for have in ROLES for need in ROLES}
    assert grid == {("read", "read"): True, ("read", "write"): False,
                    ("read", "admin"): False, ("write", "read"): True,
                    ("write", "write"): True, ("write", "admin"): False,
                    ("admin", "read"): True, ("admin", "write"): True,
                    ("admin", "admin"): True}


# --------------------------------------------------------------------------------------------
# Rate limits
# --------------------------------------------------------------------------------------------

@pytest.mark.parametrize("text, expected", [
    (None, None), ("", None), ("600/60", (600, 60)), ("10/s", (10, 1)), ("10/sec", (10, 1)),
    ("5/min", (5, 60)), ("5/m", (5, 60)), ("2/h", (2, 3600)), ("2/hour", (2, 3600)),
    ("7/ min", (7, 60)), ("1/1", (1, 1)),
])
def test_parse_rate(text, expected):
    assert parse_rate(text) == expected


@pytest.mark.parametrize("text, message", [
    ("fast", "CRANFIELD_RATE_LIMIT must be COUNT/SECONDS (e.g. 600/60), got 'fast'"),
    ("10/day", "CRANFIELD_RATE_LIMIT must be COUNT/SECONDS (e.g. 600/60), got '10/day'"),
    ("x/s", "CRANFIELD_RATE_LIMIT must be COUNT/SECONDS (e.g. 600/60), got 'x/s'"),
    ("0/60", "CRANFIELD_RATE_LIMIT must be positive, got '0/60'"),
    ("-1/60", "CRANFIELD_RATE_LIMIT must be positive, got '-1/60'"),
    ("5/0", "CRANFIELD_RATE_LIMIT must be positive, got '5/0'"),
    ("5/-3", "CRANFIELD_RATE_LIMIT must be positive, got '5/-3'"),
])
def test_parse_rate_errors(text, message):
    with pytest.raises(KeyFileError) as err:
        parse_rate(text)
    assert str(err.value) == message


def test_memory_counter_counts_per_key_and_window(monkeypatch):
    now = [1000.25]
    monkeypatch.setattr(auth_mod, "time", SimpleNamespace(time=lambda: now[0]))
    c = MemoryCounter()
    assert c.hit("k", 60) == (1, 1020 - 1000.25)  # window [960, 1020)
    assert c.hit("k", 60) == (2, 1020 - 1000.25)
    assert c.hit("other", 60) == (1, 1020 - 1000.25)
    now[0] = 1020.0  # the next window starts afresh
    assert c.hit("k", 60) == (1, 60.0)


def test_memory_counter_forgets_old_windows_past_10000_entries(monkeypatch):
    now = [0.0]
    monkeypatch.setattr(auth_mod, "time", SimpleNamespace(time=lambda: now[0]))
    c = MemoryCounter()
    for i in range(10_001):
        c.hit(f"k{i}", 10)
    assert len(c._counts) == 10_001
    c.hit("k0", 10)  # more than 10 000, but all in the current window: all kept
    assert len(c._counts) == 10_001 and c._counts[("k0", 0)] == 2
    now[0] = 10.0
    c.hit("k1", 10)  # the old window's entries go
    assert c._counts == {("k1", 1): 1}


def test_memory_counter_keeps_exactly_10000_entries(monkeypatch):
    monkeypatch.setattr(auth_mod, "time", SimpleNamespace(time=lambda: 0.0))
    c = MemoryCounter()
    for i in range(10_000):
        c.hit(f"k{i}", 10)
    monkeypatch.setattr(auth_mod, "time", SimpleNamespace(time=lambda: 10.0))
    c.hit("new", 10)
    assert len(c._counts) == 10_001  # 10 000 is not more than 10 000: nothing dropped


class FakePipe:
    def __init__(self, store, calls):
        self.store, self.calls = store, calls

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False

    def incr(self, name):
        self.calls.append(("incr", name))

    def expire(self, name, seconds):
        self.calls.append(("expire", name, seconds))

    def execute(self):
        name = self.calls[-2][1]
        self.store[name] = self.store.get(name, 0) + 1
        return [self.store[name], True]


class FakeRedis:
    def __init__(self):
        self.store, self.calls, self.transactions = {}, [], []

    def pipeline(self, transaction=True):
        self.transactions.append(transaction)
        return FakePipe(self.store, self.calls)


def test_redis_counter_names_its_key_by_window_and_expires_it(monkeypatch):
    monkeypatch.setattr(auth_mod, "time", SimpleNamespace(time=lambda: 125.5))
    r = FakeRedis()
    c = RedisCounter(r)
    assert c.hit("kid", 60) == (1, 180 - 125.5)
    assert c.hit("kid", 60) == (2, 180 - 125.5)
    assert r.calls[:2] == [("incr", "cranfield:ratelimit:kid:2"),
                           ("expire", "cranfield:ratelimit:kid:2", 61)]
    assert r.transactions == [False, False]


# --------------------------------------------------------------------------------------------
# The request hook: 401, 403, 429, exact
# --------------------------------------------------------------------------------------------

KEYS = {"r": ("read", "ta"), "w": ("write", "ta"), "a": ("admin", "ta")}


def make_client(**config) -> ContractClient:
    lines = ";".join(key_line(k, role, tenant) for k, (role, tenant) in KEYS.items())
    return ContractClient(create_app({"TESTING": True, "API_KEYS": lines, **config})
                          .test_client())


def test_401_is_exact():
    client = make_client()
    for headers in ({}, {"Authorization": "Bearer nope"}, {"Authorization": "Bearer "},
                    {"Authorization": "Bearer"}, {"Authorization": "Basic r"},
                    {"Authorization": "Token r"}, {"Authorization": "r"},
                    {"Authorization": "Bearerr r"}):
        resp = client.get("/v1/measures", headers=headers)
        assert resp.status_code == 401, headers
        assert resp.mimetype == PROBLEM
        assert resp.headers["WWW-Authenticate"] == 'Bearer realm="cranfield"'
        assert resp.get_json() == {
            "type": "https://cranfield.dev/problems/unauthorized", "title": "Unauthorized",
            "status": 401, "detail": "send a valid API key: Authorization: Bearer <key>"}


def test_the_scheme_is_case_insensitive_and_the_token_trimmed():
    client = make_client()
    for header in ("Bearer r", "bearer r", "BEARER r", "Bearer  r ", "Bearer r\t"):
        assert client.get("/v1/measures",
                          headers={"Authorization": header}).status_code == 200, header


def test_only_v1_paths_need_a_key():
    client = make_client()
    assert client.get("/healthz").status_code == 200
    assert client.get("/openapi.yaml").status_code == 200
    assert client.get("/v1/measures").status_code == 401


def test_403_is_exact():
    client = make_client()
    resp = client.post("/v1/evaluations", json={}, headers={"Authorization": "Bearer r"})
    assert resp.status_code == 403 and resp.mimetype == PROBLEM
    assert resp.get_json() == {
        "type": "https://cranfield.dev/problems/forbidden", "title": "Forbidden", "status": 403,
        "detail": "this key's role (read) may not POST here; it needs write"}
    resp = client.delete("/v1/qrels/x", headers={"Authorization": "Bearer w"})
    assert resp.status_code == 403
    assert resp.get_json()["detail"] == \
        "this key's role (write) may not DELETE here; it needs admin"
    # admin passes the role check (then the qrels are not there)
    assert client.delete("/v1/qrels/x", headers={"Authorization": "Bearer a"}).status_code \
        == 404


def test_required_roles_by_method_and_path():
    client = make_client()
    r = {"Authorization": "Bearer r"}
    w = {"Authorization": "Bearer w"}
    assert client.get("/v1/measures", headers=r).status_code == 200
    assert client.open("/v1/measures", method="HEAD", headers=r, check=False).status_code == 200
    assert client.open("/v1/measures", method="OPTIONS", headers=r,
                       check=False).status_code != 403
    # deleting a job needs write, not admin (only qrels deletion is admin's)
    job = "/v1/jobs/" + "0" * 32
    assert client.delete(job, headers=r).status_code == 403
    assert client.delete(job, headers=w).status_code == 404
    assert client.put("/v1/qrels/x", json={"qrels": {"1": {"d": 1}}},
                      headers=r).status_code == 403
    assert client.put("/v1/qrels/x", json={"qrels": {"1": {"d": 1}}},
                      headers=w).status_code == 201


def test_429_is_exact_with_retry_after(monkeypatch):
    client = make_client(RATE_LIMIT="2/60")
    # 42.8 s to the window's end (auth's clock only: time.time elsewhere is untouched)
    monkeypatch.setattr(auth_mod, "time", SimpleNamespace(time=lambda: 6000.0 + 17.2))
    headers = {"Authorization": "Bearer r"}
    assert client.get("/v1/measures", headers=headers).status_code == 200
    assert client.get("/v1/measures", headers=headers).status_code == 200
    resp = client.get("/v1/measures", headers=headers)
    assert resp.status_code == 429 and resp.mimetype == PROBLEM
    assert resp.headers["Retry-After"] == "43"
    assert resp.get_json() == {
        "type": "https://cranfield.dev/problems/rate-limited", "title": "Too Many Requests",
        "status": 429, "detail": "this key may make 2 requests per 60 s; retry in 43 s"}


def test_retry_after_is_at_least_one_second(monkeypatch):
    client = make_client(RATE_LIMIT="1/10")
    monkeypatch.setattr(auth_mod, "time", SimpleNamespace(time=lambda: 9.9999))  # 0.0001 s left
    headers = {"Authorization": "Bearer r"}
    assert client.get("/v1/measures", headers=headers).status_code == 200
    resp = client.get("/v1/measures", headers=headers)
    assert resp.status_code == 429 and resp.headers["Retry-After"] == "1"
    assert resp.get_json()["detail"].endswith("retry in 1 s")


def test_retry_after_rounds_up_whole_seconds(monkeypatch):
    client = make_client(RATE_LIMIT="1/10")
    monkeypatch.setattr(auth_mod, "time", SimpleNamespace(time=lambda: 7.0))  # exactly 3 s left
    headers = {"Authorization": "Bearer r"}
    assert client.get("/v1/measures", headers=headers).status_code == 200
    assert client.get("/v1/measures", headers=headers).headers["Retry-After"] == "3"


def test_the_limit_itself_passes():
    client = make_client(RATE_LIMIT="1/3600")
    headers = {"Authorization": "Bearer w"}
    assert client.get("/v1/measures", headers=headers).status_code == 200
    assert client.get("/v1/measures", headers=headers).status_code == 429


def test_no_keys_no_hook():
    app = create_app({"TESTING": True, "RATE_LIMIT": "1/3600"})
    assert app.extensions["cranfield_keys"] is None
    client = ContractClient(app.test_client())
    for _ in range(3):  # no key needed, and no rate limit without keys
        assert client.get("/v1/measures").status_code == 200


def test_keys_off_routes_use_the_one_shared_space():
    # current_tenant() is None without keys: stored qrels are put and read back
    client = ContractClient(create_app({"TESTING": True}).test_client())
    assert client.put("/v1/qrels/open", json={"qrels": {"1": {"d": 1}}}).status_code == 201
    assert client.get("/v1/qrels/open").get_json()["judgments"] == 1
    assert client.get("/v1/qrels").get_json()["total"] == 1


def test_the_key_ring_is_kept_on_the_app():
    app = create_app({"TESTING": True, "API_KEYS": key_line("k", "read", "t")})
    ring = app.extensions["cranfield_keys"]
    assert isinstance(ring, KeyRing) and len(ring) == 1
    assert ring.authenticate("k").tenant == "t"


# --------------------------------------------------------------------------------------------
# With Redis, the rate limit's counts are in Redis (shared by every API process)
# --------------------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def redis_url():
    """A private redis-server's URL (tests/integration/servers.py's running_redis)."""
    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "integration"))
    from servers import running_redis

    with running_redis() as server:
        yield server.url


def test_with_redis_the_rate_limit_counts_in_redis(redis_url, monkeypatch):
    import redis

    conn = redis.Redis.from_url(redis_url)
    conn.flushdb()
    # window 100 of 60 s
    monkeypatch.setattr(auth_mod, "time", SimpleNamespace(time=lambda: 6017.0))
    app = create_app({"TESTING": True, "REDIS_URL": redis_url,
                      "API_KEYS": key_line("k", "read", "t"), "RATE_LIMIT": "2/60"})
    client = ContractClient(app.test_client())
    headers = {"Authorization": "Bearer k"}
    assert client.get("/v1/measures", headers=headers).status_code == 200
    name = f"cranfield:ratelimit:{sha('k')[:16]}:100"
    assert conn.get(name) == b"1" and 0 < conn.ttl(name) <= 61
    # a second app (another API process) shares the count
    other = ContractClient(create_app({"TESTING": True, "REDIS_URL": redis_url,
                                       "API_KEYS": key_line("k", "read", "t"),
                                       "RATE_LIMIT": "2/60"}).test_client())
    assert other.get("/v1/measures", headers=headers).status_code == 200
    resp = client.get("/v1/measures", headers=headers)
    assert resp.status_code == 429 and resp.headers["Retry-After"] == "43"
    assert conn.get(name) == b"3"
