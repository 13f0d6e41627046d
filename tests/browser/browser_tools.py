"""Helpers (imported by conftest.py and the tests; a module of its own, since every test folder
has a ``conftest`` and a test importing ``conftest`` could get another folder's): a real
headless browser for the HTML reports: Debian's chromium driven from the command line
(``--dump-dom``, ``--screenshot``), and a pure-Python PNG decoder (zlib and the five PNG
filter types) to look at the screenshots.

The ``chromium`` fixture renders a file path or a URL (``http://…`` for a live service), so
the same helpers serve the report files written by these tests and pages the service returns.
Without /usr/bin/chromium the tests are skipped, except in CI (``CI=true``) where they fail.
"""

from __future__ import annotations

import os
import signal
import struct
import subprocess
import tempfile
import time
import zlib
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pytest

CHROMIUM = "/usr/bin/chromium"
TIMEOUT_S = 60
FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync",
         "--hide-scrollbars"]


@dataclass
class Image:
    width: int
    height: int
    pixels: np.ndarray  # (height, width, 3) uint8, RGB

    def colours(self) -> np.ndarray:
        """The distinct colours, as 0xRRGGBB ints."""
        p = self.pixels.astype(np.uint32)
        return np.unique((p[..., 0] << 16) | (p[..., 1] << 8) | p[..., 2])

    def share(self, rgb: tuple[int, int, int]) -> float:
        """The fraction of pixels of exactly this colour."""
        return float(np.all(self.pixels == np.array(rgb, np.uint8), axis=-1).mean())

    def non_white(self) -> float:
        return float(np.any(self.pixels < 250, axis=-1).mean())


def _unfilter(raw: bytes, width: int, height: int, bpp: int) -> bytearray:
    """Undo PNG's per-row filters (None, Sub, Up, Average, Paeth): PNG spec §9."""
    stride = width * bpp
    out = bytearray(height * stride)
    prev = bytearray(stride)
    pos = 0
    for y in range(height):
        ftype = raw[pos]
        row = bytearray(raw[pos + 1:pos + 1 + stride])
        pos += 1 + stride
        if ftype == 1:
            for i in range(bpp, stride):
                row[i] = (row[i] + row[i - bpp]) & 0xFF
        elif ftype == 2:
            row = bytearray((np.frombuffer(row, np.uint8) + np.frombuffer(prev, np.uint8))
                            .tobytes())  # uint8 addition wraps modulo 256
        elif ftype == 3:
            for i in range(stride):
                left = row[i - bpp] if i >= bpp else 0
                row[i] = (row[i] + ((left + prev[i]) >> 1)) & 0xFF
        elif ftype == 4:
            for i in range(stride):
                a = row[i - bpp] if i >= bpp else 0
                b = prev[i]
                c = prev[i - bpp] if i >= bpp else 0
                p = a + b - c
                pa, pb, pc = abs(p - a), abs(p - b), abs(p - c)
                pred = a if pa <= pb and pa <= pc else (b if pb <= pc else c)
                row[i] = (row[i] + pred) & 0xFF
        elif ftype != 0:
            raise ValueError(f"bad PNG filter type {ftype} in row {y}")
        out[y * stride:(y + 1) * stride] = row
        prev = row
    return out


def decode_png(data: bytes) -> Image:
    """8-bit RGB or RGBA, non-interlaced PNG (what chromium writes) → RGB pixels."""
    if data[:8] != b"\x89PNG\r\n\x1a\n":
        raise ValueError("not a PNG file")
    pos, idat, header = 8, [], None
    while pos < len(data):
        (n,) = struct.unpack(">I", data[pos:pos + 4])
        kind, body = data[pos + 4:pos + 8], data[pos + 8:pos + 8 + n]
        if zlib.crc32(kind + body) != struct.unpack(">I", data[pos + 8 + n:pos + 12 + n])[0]:
            raise ValueError(f"bad CRC in {kind!r} chunk")
        pos += 12 + n
        if kind == b"IHDR":
            header = struct.unpack(">IIBBBBB", body)
        elif kind == b"IDAT":
            idat.append(body)
        elif kind == b"IEND":
            break
    assert header is not None, "no IHDR chunk"
    width, height, depth, colour_type, _, _, interlace = header
    if depth != 8 or colour_type not in (2, 6) or interlace:
        raise ValueError(f"unsupported PNG: depth {depth}, colour type {colour_type}, "
                         f"interlace {interlace}")
    bpp = 3 if colour_type == 2 else 4
    pixels = _unfilter(zlib.decompress(b"".join(idat)), width, height, bpp)
    arr = np.frombuffer(bytes(pixels), np.uint8).reshape(height, width, bpp)
    return Image(width, height, np.ascontiguousarray(arr[..., :3]))


@dataclass
class Chromium:
    """Runs chromium headless on a page: ``target`` is a file path or a URL."""
    binary: str
    profile_dir: Path
    timings: list[tuple[str, float]] = field(default_factory=list)

    @staticmethod
    def url(target: str | os.PathLike) -> str:
        text = str(target)
        if text.startswith(("http://", "https://", "file://", "data:")):
            return text
        return Path(target).resolve().as_uri()

    def run(self, target: str | os.PathLike, *flags: str, timeout: float = TIMEOUT_S) -> str:
        """Chromium's stdout; kills the whole process group (renderers too) on timeout."""
        cmd = [self.binary, *FLAGS, f"--user-data-dir={self.profile_dir}", *flags,
               self.url(target)]
        start = time.perf_counter()
        with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
            proc = subprocess.Popen(cmd, stdout=out, stderr=err, stdin=subprocess.DEVNULL,
                                    start_new_session=True)
            try:
                code = proc.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()
                pytest.fail(f"chromium took over {timeout} s on {self.url(target)}")
            out.seek(0)
            err.seek(0)
            stdout, stderr = out.read().decode("utf-8", "replace"), err.read()
        self.timings.append((flags[0] if flags else "", time.perf_counter() - start))
        assert code == 0, f"chromium exited {code}: {stderr[-2000:].decode(errors='replace')}"
        return stdout

    def dump_dom(self, target: str | os.PathLike) -> str:
        """The serialized DOM after the page has loaded."""
        return self.run(target, "--dump-dom")

    def screenshot(self, target: str | os.PathLike, size: tuple[int, int] = (1280, 2000),
                   png: Path | None = None) -> Image:
        png = png or self.profile_dir.parent / "screenshot.png"
        self.run(target, f"--screenshot={png}", f"--window-size={size[0]},{size[1]}")
        return decode_png(png.read_bytes())
