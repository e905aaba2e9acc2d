"""A localhost NDIF server (ndif 0.1.2) for `make test-remote`: start it, run a command
against it, stop every process it started.

    python tests/remote/server.py [command ...]    # default: pytest tests/remote

The stack is ndif's own: Postgres with ndif's keys tables (`keys`), so that auth is on
as in a deployment, Redis, a Ray head, ndif's controller actor, its API under
gunicorn (which spawns the queue dispatcher), and one model actor per model, deployed
by the controller when the first request for it arrives; and an S3-compatible object
store (moto's server) for the results too large to come back on the response. Two classes are replaced
(`ndif_cpu`): the model actor loads on the CPU, and the controller carries a shim of
ndif for nnsight 0.8.1. So the run proves vlreg's traces through NDIF's queue,
serialization and actors, on a CPU actor; it does not prove NDIF's GPU placement (the
Ray head reports one logical GPU so that the controller, which manages GPU nodes only,
places the model at all).

Everything runs in a network namespace of its own with only loopback, and binds
127.0.0.1 (ndif's start scripts bind 0.0.0.0, so they are not used). Each process is
started in its own process group and stopped by group, SIGTERM then SIGKILL; then any
process still in the namespace (all of them ours) is killed by PID and the namespace
deleted, on success, failure or interrupt alike. The command runs inside the
namespace with ``VLREG_NDIF_URL`` set to the API and ``NDIF_API_KEY`` to the trusted
key (``VLREG_NDIF_UNTRUSTED_KEY``: the ordinary one); it and the start-up are bounded in
time.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import keys

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
BIN = Path(sys.executable).parent  # the venv with ndif, ray, vlreg and the plugins

API = "127.0.0.1:8001"
STORE = "127.0.0.1:9000"  # the object store (moto's S3 server)
#: ndif returns a result inline on the response when it fits Redis's pub/sub buffers
#: (``RedisProvider.max_publish_bytes``: the soft limit, or half the hard one); stock Redis
#: allows 8 MiB. Lowered so that a tiny model's long-prompt result passes it and goes
#: through the object store, while the other tests' results still come back inline.
INLINE_CAP = 256 << 10
REDIS_PORT = 6379
RAY_PORT = 6385
RAY_CLIENT_PORT = 10001
DASHBOARD_PORT = 8265
START_TIMEOUT = 600  # seconds for the stack to come up (about 2 minutes on two cores)
COMMAND_TIMEOUT = 1800  # seconds for the command run against it
STOP_GRACE = 40  # seconds between SIGTERM and SIGKILL (ray start --block takes ~30)
GiB = 1 << 30


class Stack:
    """The processes of one server, each its own process group, in one network namespace."""

    def __init__(self) -> None:
        self.namespace = f"vlreg-ndif-{os.getpid()}"
        self.scratch = Path(tempfile.mkdtemp(prefix="vlreg-ndif-"))
        self.logs = self.scratch / "logs"
        self.logs.mkdir()
        self.processes: dict[str, subprocess.Popen] = {}
        self.keys: dict[str, str] = {}  # each researcher's API key, by email (`keys_database`)
        self.env = {
            **os.environ,
            "PATH": f"{BIN}{os.pathsep}{os.environ.get('PATH', '')}",
            "PYTHONPATH": str(HERE),  # ndif_cpu, for the Ray workers
            "GRPC_ENABLE_FORK_SUPPORT": "0",  # as ndif's start script: Ray client's forks die otherwise
            "RAY_USAGE_STATS_ENABLED": "0",
            "NDIF_REDIS_URL": f"redis://127.0.0.1:{REDIS_PORT}",
            "NDIF_RAY_ADDRESS": f"ray://127.0.0.1:{RAY_CLIENT_PORT}",
            "NDIF_OBJECT_STORE_URL": f"http://{STORE}",  # uploads, and the presigned urls the client gets
            "NDIF_CONTROLLER_IMPORT_PATH": "ndif_cpu.Controller",
            "NDIF_MODEL_IMPORT_PATH": "ndif_cpu.CPUModelActor",
            "NDIF_DEFAULT_DTYPE": "float32",  # what the local runs it is compared with load in
            "NDIF_DEFAULT_EXECUTION_TIMEOUT_SECONDS": "300",
            "NDIF_DEFAULT_PADDING_BIAS": "0",
            "NDIF_STATUS_TTL_S": "1",  # /status as it is now, not a minute ago
            "NDIF_SANDBOX_POOL_SIZE": "1",  # runners kept warm per actor (ndif: 7; two cores here)
        }

    # -- starting ---------------------------------------------------------------

    def run(self, *argv: str, timeout: float = 60, stdin: str | None = None, **env: str) -> str:
        """Run a short command inside the namespace, to completion; its output."""
        done = subprocess.run(self._in_namespace(argv), env={**self.env, **env}, check=True, timeout=timeout,
                              input=stdin, stdout=subprocess.PIPE, text=True)
        return done.stdout

    def start(self, name: str, *argv: str, **env: str) -> None:
        """Start a long-running process in the namespace, in a process group of its own."""
        log = open(self.logs / f"{name}.log", "wb")
        self.processes[name] = subprocess.Popen(
            self._in_namespace(argv), env={**self.env, **env}, stdout=log, stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        log.close()

    def _in_namespace(self, argv) -> list[str]:
        return ["ip", "netns", "exec", self.namespace, *argv]

    def up(self) -> None:
        subprocess.run(["ip", "netns", "add", self.namespace], check=True)
        self.run("ip", "link", "set", "lo", "up")
        self.keys = self.keys_database()
        self.start(
            "redis", "redis-server", "--bind", "127.0.0.1", "--port", str(REDIS_PORT),
            "--save", "", "--appendonly", "no", "--dir", str(self.scratch),
            "--client-output-buffer-limit", f"pubsub {2 * INLINE_CAP} {INLINE_CAP} 60",
        )
        host, port = STORE.split(":")
        self.start("store", str(BIN / "moto_server"), "-H", host, "-p", port)
        self.start(
            "ray", "ray", "start", "--head", "--block",
            "--node-ip-address=127.0.0.1", f"--port={RAY_PORT}", f"--ray-client-server-port={RAY_CLIENT_PORT}",
            "--include-dashboard=true", "--dashboard-host=127.0.0.1", f"--dashboard-port={DASHBOARD_PORT}",
            "--num-cpus=4", "--num-gpus=1",
            "--resources=" + json.dumps({"head": 10, "cuda_memory_bytes": 8 * GiB, "cpu_memory_bytes": 8 * GiB}),
            f"--temp-dir={self.scratch / 'ray'}", "--disable-usage-stats",
        )
        self.wait("the object store", lambda: self.answers(f"http://{STORE}/"))
        self.wait("Ray", self.ray_ready)
        # ndif's controller launcher: schedules the detached controller actor and exits.
        self.run(
            str(BIN / "python"), "-m", "ndif.services.ray.deployments.controller.controller",
            timeout=300, RAY_ADDRESS=f"127.0.0.1:{RAY_PORT}",
        )
        self.start(
            "api", "gunicorn", "--config", "python:ndif.services.api.gunicorn_conf",
            "--bind", API, "--workers", "1", "ndif.services.api.app:app",
            NDIF_POSTGRES_URL=keys.url(),  # auth on: only the API reads the keys
        )
        self.wait("the API's dispatcher connected to Ray and the controller", self.api_connected)

    def keys_database(self) -> dict[str, str]:
        """Start Postgres with ndif's keys tables, make the rows of docs/remote.md's recipe,
        and return each researcher's API key by email."""
        data = self.scratch / "postgres"
        data.mkdir()
        keys.hand_over(data)
        self.run(*keys.initdb(data), timeout=120)
        self.start("postgres", *keys.server(data))
        ready = [str(keys.BIN / "pg_isready"), "-q", "-h", str(data), "-p", str(keys.PORT)]
        self.wait("Postgres", lambda: subprocess.run(self._in_namespace(ready), timeout=30).returncode == 0)
        self.run(*keys.psql(data), stdin=keys.TABLES)
        self.run(*keys.psql(data, keys.DATABASE), stdin=keys.recipe())
        listed = self.run(*keys.psql(data, keys.DATABASE), "-At", "-F", " ", "-c", keys.keys_query())
        return dict(line.split() for line in listed.splitlines())

    def ray_ready(self) -> bool:
        check = subprocess.run(
            self._in_namespace(["ray", "status", f"--address=127.0.0.1:{RAY_PORT}"]),
            env=self.env, capture_output=True, timeout=120,
        )
        return check.returncode == 0

    def api_connected(self) -> bool:
        """Whether ``/connected`` answers 200: the dispatcher reached Ray and found the controller."""
        return self.answers(f"http://{API}/connected")

    def answers(self, url: str) -> bool:
        """Whether ``url`` answers 200, asked from inside the namespace."""
        probe = f"import urllib.request; urllib.request.urlopen({url!r}, timeout=5)"
        check = subprocess.run(self._in_namespace([str(BIN / "python"), "-c", probe]), capture_output=True, timeout=60)
        return check.returncode == 0

    def wait(self, what: str, ready) -> None:
        deadline = time.monotonic() + START_TIMEOUT
        while not ready():
            for name, process in self.processes.items():
                if process.poll() is not None:
                    raise RuntimeError(f"{name} exited ({process.returncode}) before {what}; see {self.logs}")
            if time.monotonic() > deadline:
                raise TimeoutError(f"{what} not ready after {START_TIMEOUT} s; see {self.logs}")
            time.sleep(3)
        print(f"[test-remote] up: {what}", flush=True)

    # -- stopping ---------------------------------------------------------------

    def down(self) -> None:
        """Stop every process started here: each process group, SIGTERM then SIGKILL, then
        whatever is left in the namespace, by PID. Raises if any survives."""
        for sig in (signal.SIGINT, signal.SIGTERM):  # a second Ctrl-C must not cut the stop short
            signal.signal(sig, signal.SIG_IGN)
        seen = set(self.namespace_pids())
        for process in reversed(self.processes.values()):
            _signal_group(process.pid, signal.SIGTERM)
        deadline = time.monotonic() + STOP_GRACE
        for process in self.processes.values():
            try:
                process.wait(timeout=max(0.0, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                pass
            _signal_group(process.pid, signal.SIGKILL)
            process.wait()
        left = self.namespace_pids()
        for pid in left:
            _kill(pid)
        for _ in range(50):
            if not self.namespace_pids():
                break
            time.sleep(0.2)
        survivors = self.namespace_pids()
        if not survivors:
            subprocess.run(["ip", "netns", "del", self.namespace], check=True)
        print(
            f"[test-remote] stopped {len(seen)} processes: {len(self.processes)} process groups"
            + (f", then {len(left)} left in the namespace by PID" if left else ""),
            flush=True,
        )
        if survivors:
            raise RuntimeError(f"processes {survivors} outlived SIGKILL in namespace {self.namespace}")

    def namespace_pids(self) -> list[int]:
        listed = subprocess.run(["ip", "netns", "pids", self.namespace], capture_output=True, text=True)
        return [int(pid) for pid in listed.stdout.split()] if listed.returncode == 0 else []


def _signal_group(pid: int, sig: int) -> None:
    try:
        os.killpg(pid, sig)
    except ProcessLookupError:
        pass


def _kill(pid: int) -> None:
    try:
        os.kill(pid, signal.SIGKILL)
    except ProcessLookupError:
        pass


def main(argv: list[str]) -> int:
    command = argv or [sys.executable, "-m", "pytest", str(HERE), "-q", "-rs"]
    for tool in ("ip", "redis-server"):
        if shutil.which(tool) is None:
            sys.exit(f"test-remote needs `{tool}` (Debian: apt-get install iproute2 redis-server)")
    # A SIGTERM (or the make's Ctrl-C) unwinds through the finally below, like an error.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    stack = Stack()
    passed = False
    try:
        started = time.monotonic()
        stack.up()
        print(f"[test-remote] NDIF up in {time.monotonic() - started:.0f} s", flush=True)
        env = {
            **os.environ, "VLREG_NDIF_URL": f"http://{API}",
            "NDIF_API_KEY": stack.keys[keys.TRUSTED], "VLREG_NDIF_UNTRUSTED_KEY": stack.keys[keys.ORDINARY],
            "VLREG_NDIF_STORE": f"http://{STORE}", "VLREG_NDIF_INLINE_CAP": str(INLINE_CAP),
        }
        code = subprocess.run(stack._in_namespace(command), env=env, cwd=ROOT, timeout=COMMAND_TIMEOUT).returncode
        passed = code == 0
        return code
    finally:
        stack.down()
        if passed:
            shutil.rmtree(stack.scratch, ignore_errors=True)
        else:
            _show_logs(stack.logs)
            print(f"[test-remote] the server's logs are kept in {stack.scratch} (Ray's under ray/)", file=sys.stderr)


def _show_logs(logs: Path, lines: int = 40) -> None:
    for log in sorted(logs.glob("*.log")):
        tail = log.read_text(errors="replace").splitlines()[-lines:]
        print(f"--- {log.name} (last {len(tail)} lines)", *tail, sep="\n", file=sys.stderr)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
