"""What the compiled JSON scan costs and earns (issue #29: one compiled accelerator): the
figures of docs/performance.md's "One compiled accelerator" section, measured the same way
before (numba kernels) and after (the C extension).

* install size: the site-packages directories of numba and llvmlite (0 when not installed)
  and of the extension's shared object;
* worker start-up: ``cranfield worker --burst`` on an empty, private redis-server, launch to
  exit, and ``worker.cli.preload()`` in a fresh process (medians of ``--repeat``);
* the JSON body read at M: bench/datagen.py's M run (6,980 topics x 1,000 docs) as a
  ``{"run": {topic: {docid: score}}}`` body, read by ``json_body.decode_body`` (the compiled
  scan) and by ``json_body.loads`` + ``read_run`` (the path without it), medians.

    python bench/accelerator.py [--repeat 5] [--data-dir bench/data] [--skip-startup]
"""

from __future__ import annotations

import sys

if sys.path and sys.path[0] == __import__("os").path.dirname(__file__):
    sys.path[0] = __import__("os").path.dirname(sys.path[0])

import argparse  # noqa: E402
import importlib.util  # noqa: E402
import os  # noqa: E402
import shutil  # noqa: E402
import socket  # noqa: E402
import statistics  # noqa: E402
import subprocess  # noqa: E402
import tempfile  # noqa: E402
import time  # noqa: E402
from pathlib import Path  # noqa: E402

from bench.datagen import DEFAULT_DATA_DIR, ensure_dataset  # noqa: E402


def du(path: Path) -> int:
    if path.is_file():
        return path.stat().st_size
    return sum(p.stat().st_size for p in path.rglob("*") if p.is_file() and not p.is_symlink())


def install_sizes() -> None:
    for name in ("numba", "llvmlite"):
        spec = importlib.util.find_spec(name)
        size = du(Path(spec.origin).parent) if spec and spec.origin else 0
        print(f"  {name:10s} {size / 2**20:7.1f} MB" + ("" if spec else " (not installed)"))
    spec = importlib.util.find_spec("cranfield.inputs._mapscan")
    if spec and spec.origin:
        print(f"  cranfield.inputs._mapscan {du(Path(spec.origin)) / 2**10:.0f} KB ({spec.origin})")
    else:
        print("  cranfield.inputs._mapscan not built")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def startup(repeat: int) -> None:
    python = sys.executable
    cranfield = str(Path(python).with_name("cranfield"))
    preload = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        subprocess.run([python, "-c", "import worker.cli as w; w.preload()"], check=True,
                       capture_output=True)
        preload.append(time.perf_counter() - t0)
    print(f"  python -c 'worker.cli.preload()' (fresh process)  median "
          f"{statistics.median(preload):.2f} s  ({' '.join(f'{t:.2f}' for t in preload)})")
    redis = shutil.which("redis-server")
    if redis is None:
        print("  no redis-server: worker --burst not measured")
        return
    port = _free_port()
    with tempfile.TemporaryDirectory() as tmp:
        server = subprocess.Popen([redis, "--port", str(port), "--save", "", "--appendonly",
                                   "no", "--dir", tmp], stdout=subprocess.DEVNULL)
        try:
            url = f"redis://127.0.0.1:{port}/0"
            for _ in range(100):  # until it answers
                try:
                    socket.create_connection(("127.0.0.1", port), timeout=1).close()
                    break
                except OSError:
                    time.sleep(0.05)
            env = dict(os.environ, CRANFIELD_DATABASE_URL=f"sqlite:///{tmp}/results.db")
            burst = []
            for _ in range(repeat):
                t0 = time.perf_counter()
                subprocess.run([cranfield, "worker", "--burst", "--redis-url", url],
                               check=True, capture_output=True, env=env)
                burst.append(time.perf_counter() - t0)
            print(f"  cranfield worker --burst (empty queue)           median "
                  f"{statistics.median(burst):.2f} s  ({' '.join(f'{t:.2f}' for t in burst)})")
        finally:
            server.terminate()
            server.wait()


def json_read(data_dir: Path, repeat: int) -> None:
    import orjson

    import cranfield
    from cranfield.inputs import json_body

    ds = ensure_dataset("M", data_dir=data_dir)
    run = cranfield.read_run(str(ds.run_path))
    body = orjson.dumps({"run": run.to_dict()})
    del run
    t0 = time.perf_counter()
    ready = json_body.warm_up()
    print(f"  compiled scan loaded: {ready} ({time.perf_counter() - t0:.2f} s in this process)")
    print(f"  body: {len(body) / 2**20:.0f} MB")

    def scan():
        got = json_body.decode_body(body, min_bytes=0)
        assert got is not None and isinstance(got["run"], json_body.Columns)
        return got["run"].value

    def without():
        return cranfield.read_run(json_body.loads(body)["run"], name="run")

    def python_only():  # as an install without the compiled extension reads it
        from tests.extension_off import extension_off  # every module importing it, patched

        with extension_off():
            assert json_body.decode_body(body, min_bytes=0) is None
            return without()

    results = {}
    for name, fn in (("json_body.decode_body (compiled scan)", scan),
                     ("json_body.loads + read_run (no compiled scan)", without),
                     ("the same, no compiled code at all (no extension)", python_only)):
        if name.startswith("json_body.decode_body") and not ready:
            print(f"  {name:48s} not available")
            continue
        times = []
        for _ in range(repeat):
            t0 = time.perf_counter()
            results[name] = fn()
            times.append(time.perf_counter() - t0)
        print(f"  {name:48s} median {statistics.median(times):.3f} s  "
              f"({' '.join(f'{t:.2f}' for t in times)})")
    digests = {json_body.columns_sha256(r) for r in results.values()}
    assert len(digests) == 1
    print(f"  every read gives the same run (columns_sha256 equal: {len(results)} reads)")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--data-dir", type=Path, default=DEFAULT_DATA_DIR)
    ap.add_argument("--skip-startup", action="store_true")
    args = ap.parse_args()
    import cranfield

    print(f"cranfield from {Path(cranfield.__file__).parent}; load "
          f"{' '.join(f'{x:.2f}' for x in os.getloadavg())}; {os.cpu_count()} cores")
    print("install size:")
    install_sizes()
    if not args.skip_startup:
        print("worker start-up:")
        startup(args.repeat)
    print("the JSON body read at M:")
    json_read(args.data_dir, args.repeat)
    return 0


if __name__ == "__main__":
    sys.exit(main())
