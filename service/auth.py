"""API keys, roles, tenants and per-key rate limits.

Off by default. On when ``CRANFIELD_API_KEYS_FILE`` (a file) or ``CRANFIELD_API_KEYS`` (the
same lines, separated by newlines or ``;``) is set. Each line holds a key's SHA-256 (never the
key itself), its role and its tenant, and optionally a name::

    # sha256 of the key                                                role   tenant  name
    9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08  write  search  nightly-ci

``cranfield keys new --role write --tenant search`` makes a key and prints its line.
Every ``/v1`` request then needs ``Authorization: Bearer <key>``: the presented key is hashed
and compared with every stored hash in constant time. Roles: ``read`` (GET), ``write`` (also
POST evaluations, comparisons and pools, PUT qrels, cancel jobs), ``admin`` (also DELETE
qrels). Stored qrels and jobs belong to the key's tenant; another tenant's are answered 404,
as if they did not exist, so ids do not leak. Keys are never logged.
"""

from __future__ import annotations

import hashlib
import hmac
import re
import secrets
import threading
import time
from dataclasses import dataclass
from pathlib import Path

from flask import Flask, g, request

from backend import keys

from .problems import Problem

ROLES = ("read", "write", "admin")
TENANT = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$")
_HASH = re.compile(r"^(?:sha256:)?([0-9a-f]{64})$")


class KeyFileError(ValueError):
    """A keys file or variable that cannot be used: start-up stops with this message."""


@dataclass(frozen=True)
class Principal:
    """Who is calling: the key's name, role and tenant."""

    name: str
    role: str
    tenant: str
    key_id: str  # the first 16 hex digits of the key's SHA-256: safe to show, and unique

    def may(self, role: str) -> bool:
        return ROLES.index(self.role) >= ROLES.index(role)


@dataclass(frozen=True)
class _Entry:
    digest: bytes
    principal: Principal


class KeyRing:
    """The configured keys, as hashes."""

    def __init__(self, entries: list[_Entry]):
        self._entries = entries

    def __len__(self) -> int:
        return len(self._entries)

    @classmethod
    def parse(cls, text: str, source: str) -> KeyRing:
        entries: list[_Entry] = []
        lines = text.replace(";", "\n").splitlines()
        for number, line in enumerate(lines, 1):
            fields = line.split("#", 1)[0].split()
            if not fields:
                continue
            where = f"{source} line {number}"
            if len(fields) not in (3, 4):
                raise KeyFileError(f"{where}: expected 'SHA256 ROLE TENANT [NAME]', found "
                                   f"{len(fields)} fields")
            match = _HASH.match(fields[0].lower())
            if match is None:
                raise KeyFileError(f"{where}: the first field must be the key's SHA-256 (64 "
                                   "hex digits), never the key itself")
            role, tenant = fields[1], fields[2]
            if role not in ROLES:
                raise KeyFileError(f"{where}: role {role!r} is not one of {', '.join(ROLES)}")
            if not TENANT.match(tenant):
                raise KeyFileError(f"{where}: tenant {tenant!r} must be 1-64 letters, digits, "
                                   "'.', '_' or '-'")
            name = fields[3] if len(fields) == 4 else f"key-{match[1][:8]}"
            entries.append(_Entry(bytes.fromhex(match[1]),
                                  Principal(name, role, tenant, match[1][:16])))
        if not entries:
            raise KeyFileError(f"{source}: no keys (remove the setting to turn keys off)")
        digests = [e.digest for e in entries]
        if len(set(digests)) != len(digests):
            raise KeyFileError(f"{source}: a key is listed twice")
        return cls(entries)

    def authenticate(self, key: str) -> Principal | None:
        """The principal whose hash matches ``key``. Every stored hash is compared, each in
        constant time, so the time taken tells nothing about which (if any) matched."""
        presented = hashlib.sha256(key.encode("utf-8", "surrogateescape")).digest()
        found = None
        for entry in self._entries:
            if hmac.compare_digest(presented, entry.digest):
                found = entry.principal
        return found


def key_ring(config: dict) -> KeyRing | None:
    """The keys configured (``API_KEYS_FILE`` or ``API_KEYS``), or None when keys are off."""
    path, inline = config.get("API_KEYS_FILE"), config.get("API_KEYS")
    if path and inline:
        raise KeyFileError("set CRANFIELD_API_KEYS_FILE or CRANFIELD_API_KEYS, not both")
    if path:
        try:
            text = Path(path).read_text()
        except OSError as exc:
            raise KeyFileError(f"CRANFIELD_API_KEYS_FILE: cannot read {path}: "
                               f"{exc.strerror}") from None
        return KeyRing.parse(text, str(path))
    if inline:
        return KeyRing.parse(inline, "CRANFIELD_API_KEYS")
    return None


def new_key() -> str:
    """A fresh API key (256 bits, URL-safe)."""
    return "cf_" + secrets.token_urlsafe(32)


def key_line(key: str, role: str, tenant: str, name: str | None = None) -> str:
    digest = hashlib.sha256(key.encode()).hexdigest()
    return " ".join([digest, role, tenant] + ([name] if name else []))


# --------------------------------------------------------------------------------------------
# Rate limits
# --------------------------------------------------------------------------------------------

def parse_rate(text: str | None) -> tuple[int, int] | None:
    """``"600/60"`` (600 requests per 60 s), ``"10/s"``, ``"600/min"``; None: no limit."""
    if not text:
        return None
    count, _, per = str(text).partition("/")
    seconds = {"s": 1, "sec": 1, "min": 60, "m": 60, "h": 3600, "hour": 3600}.get(per.strip())
    try:
        n = int(count)
        window = seconds if seconds is not None else int(per)
    except ValueError:
        raise KeyFileError(f"CRANFIELD_RATE_LIMIT must be COUNT/SECONDS (e.g. 600/60), got "
                           f"{text!r}") from None
    if n <= 0 or window <= 0:
        raise KeyFileError(f"CRANFIELD_RATE_LIMIT must be positive, got {text!r}")
    return n, window


class MemoryCounter:
    """Fixed-window counts in this process (the embedded mode has one process)."""

    def __init__(self):
        self._lock = threading.Lock()
        self._counts: dict[tuple[str, int], int] = {}

    def hit(self, key: str, window: int) -> tuple[int, float]:
        now = time.time()
        slot = int(now // window)
        with self._lock:
            if len(self._counts) > 10_000:  # old windows
                self._counts = {k: v for k, v in self._counts.items() if k[1] >= slot}
            count = self._counts.get((key, slot), 0) + 1
            self._counts[(key, slot)] = count
        return count, (slot + 1) * window - now


class RedisCounter:
    """Fixed-window counts in Redis, shared by every API process."""

    def __init__(self, redis):
        self.redis = redis

    def hit(self, key: str, window: int) -> tuple[int, float]:
        now = time.time()
        slot = int(now // window)
        name = keys.rate_window(key, slot)
        with self.redis.pipeline(transaction=False) as pipe:
            pipe.incr(name)
            pipe.expire(name, window + 1)
            count, _ = pipe.execute()
        return int(count), (slot + 1) * window - now


# --------------------------------------------------------------------------------------------
# The request hook
# --------------------------------------------------------------------------------------------

def required_role() -> str:
    if request.method in ("GET", "HEAD", "OPTIONS"):
        return "read"
    if request.method == "DELETE" and request.path.startswith(("/v1/qrels",
                                                                "/v1/topic-metadata")):
        return "admin"
    return "write"


def current_tenant() -> str | None:
    """The caller's tenant (None when keys are off: one shared space, as before)."""
    principal = g.get("principal")
    return principal.tenant if principal is not None else None


def init_app(app: Flask) -> None:
    ring = key_ring(app.config)
    rate = parse_rate(app.config.get("RATE_LIMIT"))
    app.extensions["cranfield_keys"] = ring
    if ring is None:
        return
    backend = app.extensions["cranfield"]  # made before this hook: create_app's order
    counter = RedisCounter(backend.redis) if backend.kind == "redis" else MemoryCounter()

    @app.before_request
    def _authenticate():
        if not request.path.startswith("/v1/"):
            return None  # health, metrics, the contract and its docs stay open
        header = request.headers.get("Authorization", "")
        scheme, _, token = header.partition(" ")
        principal = ring.authenticate(token.strip()) if scheme.lower() == "bearer" and \
            token.strip() else None
        if principal is None:
            raise Problem(401, "Unauthorized", "send a valid API key: Authorization: Bearer "
                          "<key>", kind="unauthorized",
                          headers={"WWW-Authenticate": 'Bearer realm="cranfield"'})
        need = required_role()
        if not principal.may(need):
            raise Problem(403, "Forbidden", f"this key's role ({principal.role}) may not "
                          f"{request.method} here; it needs {need}", kind="forbidden")
        g.principal = principal
        if rate is not None:
            limit, window = rate
            count, reset = counter.hit(principal.key_id, window)
            if count > limit:
                retry = max(1, int(reset + 0.999))
                raise Problem(429, "Too Many Requests", f"this key may make {limit} requests "
                              f"per {window} s; retry in {retry} s", kind="rate-limited",
                              headers={"Retry-After": str(retry)})
        return None

