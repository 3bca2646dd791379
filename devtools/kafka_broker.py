"""A real single-node Apache Kafka broker (KRaft) for development, tests and CI.

The broker is assembled from Kafka's own jars on Maven Central (see ``kafka/README.md``):
``kafka/pom.xml`` lists them, ``mvn`` copies them once into ``kafka/libs/`` (git-ignored,
also cached in ``~/.m2``).  This module only needs the Python standard library, ``java``
(17+) and, for the first fetch, ``mvn``; the readiness check uses kafka-python when it is
installed (it is a project dependency) and falls back to the TCP check otherwise.

Python API::

    from devtools.kafka_broker import KafkaBroker, BrokerError

    with KafkaBroker() as broker:          # free loopback ports, fresh temporary data dir
        use(broker.bootstrap_servers)      # "127.0.0.1:PORT"
        broker.restart()                   # same ports and data, no reformat

Command line::

    python -m devtools.kafka_broker fetch                  # download the jars only
    python -m devtools.kafka_broker start [--port 9092] [--dir DIR]

Development tooling: run from the checkout, not installed with the ``streamtopics`` package.
"""

from __future__ import annotations

import argparse
import atexit
import base64
import contextlib
import hashlib
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import weakref
from pathlib import Path

__all__ = ["KafkaBroker", "BrokerError", "fetch_jars", "KAFKA_DIR", "LIBS_DIR"]

#: Folder holding pom.xml and the log4j2 configurations (override: STREAMTOPICS_KAFKA_DIR).
KAFKA_DIR = Path(
    os.environ.get("STREAMTOPICS_KAFKA_DIR")
    or Path(__file__).resolve().parent.parent / "kafka"
)
#: Where the broker jars are copied (override: STREAMTOPICS_KAFKA_LIBS).
LIBS_DIR = Path(os.environ.get("STREAMTOPICS_KAFKA_LIBS") or KAFKA_DIR / "libs")

_STAMP = ".fetched"  # in LIBS_DIR; holds the sha256 of the pom.xml that filled it
_DEP_PLUGIN = "org.apache.maven.plugins:maven-dependency-plugin:3.8.1:copy-dependencies"

# Single node, combined broker+controller, dynamic KRaft quorum (format with --standalone).
_SERVER_PROPERTIES = """\
# Written by devtools/kafka_broker.py -- single-node KRaft, combined broker+controller, loopback only.
process.roles=broker,controller
node.id=1
# dynamic quorum (KIP-853), storage formatted with --standalone; never also set controller.quorum.voters
controller.quorum.bootstrap.servers=127.0.0.1:{controller_port}
listeners=PLAINTEXT://127.0.0.1:{port},CONTROLLER://127.0.0.1:{controller_port}
advertised.listeners=PLAINTEXT://127.0.0.1:{port},CONTROLLER://127.0.0.1:{controller_port}
inter.broker.listener.name=PLAINTEXT
controller.listener.names=CONTROLLER
listener.security.protocol.map=CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT
log.dirs={log_dirs}
num.partitions=1
default.replication.factor=1
offsets.topic.replication.factor=1
offsets.topic.num.partitions=1
transaction.state.log.replication.factor=1
transaction.state.log.min.isr=1
transaction.state.log.num.partitions=1
share.coordinator.state.topic.replication.factor=1
share.coordinator.state.topic.min.isr=1
group.initial.rebalance.delay.ms=0
auto.create.topics.enable=true
# the log cleaner allocates this on the heap at startup (default 128 MiB); must stay > 1 MiB
log.cleaner.dedupe.buffer.size=16777216
num.network.threads=2
num.io.threads=2
"""


_RUNNING: "weakref.WeakSet[KafkaBroker]" = weakref.WeakSet()


@atexit.register
def _stop_all() -> None:  # never leave a broker JVM behind when Python exits normally
    for broker in list(_RUNNING):
        with contextlib.suppress(Exception):
            broker.stop()


class BrokerError(RuntimeError):
    """The broker could not be fetched, formatted, started or stopped."""


# --------------------------------------------------------------------------- jars


def _pom_digest() -> str:
    return hashlib.sha256((KAFKA_DIR / "pom.xml").read_bytes()).hexdigest()


def jars_present() -> bool:
    """True when LIBS_DIR was completely filled from the current pom.xml."""
    stamp = LIBS_DIR / _STAMP
    try:
        return stamp.read_text().strip() == _pom_digest() and any(LIBS_DIR.glob("kafka_2.13-*.jar"))
    except OSError:
        return False


def fetch_jars(force: bool = False, quiet: bool = True) -> Path:
    """Copy the broker classpath from Maven Central (or ~/.m2) into LIBS_DIR; return it.

    Does nothing when the jars for the current pom.xml are already there.  Safe to call
    from several processes at once (file lock).
    """
    if not force and jars_present():
        return LIBS_DIR
    if not (KAFKA_DIR / "pom.xml").is_file():
        raise BrokerError(f"{KAFKA_DIR / 'pom.xml'} not found (set STREAMTOPICS_KAFKA_DIR to the "
                          "project's kafka/ folder)")
    mvn = shutil.which("mvn")
    if mvn is None:
        raise BrokerError("`mvn` not found on PATH; it is needed once to fetch the Kafka jars")
    LIBS_DIR.mkdir(parents=True, exist_ok=True)
    with open(LIBS_DIR / ".lock", "w") as lock:
        try:
            import fcntl

            fcntl.flock(lock, fcntl.LOCK_EX)
        except ImportError:  # pragma: no cover - non-POSIX
            pass
        if not force and jars_present():  # another process did it while we waited
            return LIBS_DIR
        # start clean so jars of another Kafka version never end up on the classpath
        (LIBS_DIR / _STAMP).unlink(missing_ok=True)
        for jar in LIBS_DIR.glob("*.jar"):
            jar.unlink()
        cmd = [mvn, "-B", "-f", str(KAFKA_DIR / "pom.xml"), _DEP_PLUGIN,
               "-DincludeScope=runtime", f"-DoutputDirectory={LIBS_DIR}"]
        if quiet:
            cmd.insert(2, "-q")
        proc = subprocess.run(cmd, cwd=KAFKA_DIR, stdout=subprocess.PIPE,
                              stderr=subprocess.STDOUT, text=True)
        if proc.returncode != 0 or not any(LIBS_DIR.glob("kafka_2.13-*.jar")):
            tail = "\n".join(proc.stdout.splitlines()[-40:])
            raise BrokerError(f"fetching the Kafka jars failed (mvn exit {proc.returncode}):\n{tail}")
        (LIBS_DIR / _STAMP).write_text(_pom_digest() + "\n")
    return LIBS_DIR


# --------------------------------------------------------------------------- helpers


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _port_open(port: int, timeout: float = 1.0) -> bool:
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=timeout):
            return True
    except OSError:
        return False


def _cluster_id() -> str:
    """A random Kafka Uuid string (22 chars URL-safe base64), like StorageTool random-uuid."""
    while True:
        uid = base64.urlsafe_b64encode(os.urandom(16)).decode().rstrip("=")
        if not uid.startswith("-"):  # Kafka avoids ids that look like a command-line flag
            return uid


def _java() -> str:
    home = os.environ.get("JAVA_HOME")
    if home and (Path(home) / "bin" / "java").exists():
        return str(Path(home) / "bin" / "java")
    java = shutil.which("java")
    if java is None:
        raise BrokerError("`java` (17+) not found on PATH or in JAVA_HOME")
    return java


def _parent_death_signal():
    """preexec_fn that makes Linux SIGTERM the JVM when this (main) thread dies, or None.

    Keeps an orphan broker from outliving a killed test run.  Only used from the main
    thread, since Linux sends the signal when the *thread* that forked exits.
    """
    if not sys.platform.startswith("linux") or threading.current_thread() is not threading.main_thread():
        return None
    try:
        import ctypes

        prctl = ctypes.CDLL(None, use_errno=True).prctl  # resolved before fork
    except (OSError, AttributeError):
        return None

    def preexec():  # runs in the child between fork and exec
        prctl(1, signal.SIGTERM, 0, 0, 0)  # PR_SET_PDEATHSIG = 1

    return preexec


# --------------------------------------------------------------------------- broker


class KafkaBroker:
    """One Kafka 4.x broker+controller JVM on 127.0.0.1, with its own data directory.

    ``workdir``: folder for server.properties, the data dir (``data/``) and ``broker.log``;
    a fresh temporary folder by default (removed again when the ``with`` block ends).  A
    given folder that already holds formatted storage is reused (same ports as recorded
    in its server.properties unless others are given).
    ``port`` / ``controller_port``: fixed ports, or ``None`` for free ones picked at start.
    ``heap``: the JVM's -Xmx.
    """

    def __init__(self, workdir=None, port=None, controller_port=None, heap="512m"):
        self._own_workdir = workdir is None
        self.workdir = Path(workdir).resolve() if workdir is not None else None
        self.port = port
        self.controller_port = controller_port
        self.heap = heap
        self.proc: subprocess.Popen | None = None
        self.start_seconds: float | None = None  # duration of the last successful start
        self._ports_fixed = port is not None and controller_port is not None

    # ------------------------------------------------------------ paths / properties
    @property
    def bootstrap_servers(self) -> str:
        if self.port is None:
            raise BrokerError("broker not started yet (no port chosen)")
        return f"127.0.0.1:{self.port}"

    @property
    def data_dir(self) -> Path:
        return self.workdir / "data"

    @property
    def log_path(self) -> Path:
        return self.workdir / "broker.log"

    @property
    def properties_path(self) -> Path:
        return self.workdir / "server.properties"

    @property
    def running(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def log_tail(self, n: int = 60) -> str:
        """The last ``n`` lines of the broker's stdout/stderr log ('' if none yet)."""
        if self.workdir is None:
            return ""
        try:
            with open(self.log_path, "rb") as f:
                f.seek(0, os.SEEK_END)
                size = f.tell()
                f.seek(max(0, size - 256 * 1024))
                lines = f.read().decode("utf-8", "replace").splitlines()
        except OSError:
            return ""
        return "\n".join(lines[-n:])

    def _recorded_ports(self):
        try:
            text = self.properties_path.read_text()
        except OSError:
            return None, None
        m = re.search(r"^listeners=PLAINTEXT://[^:]+:(\d+),CONTROLLER://[^:]+:(\d+)", text, re.M)
        return (int(m.group(1)), int(m.group(2))) if m else (None, None)

    def _classpath(self) -> str:
        return str(LIBS_DIR / "*")  # java expands the wildcard itself

    def _log4j(self, name: str) -> str:
        return f"-Dlog4j2.configurationFile={KAFKA_DIR / name}"

    # ------------------------------------------------------------ lifecycle
    def start(self, timeout: float = 180) -> "KafkaBroker":
        """Fetch jars if missing, format storage if new, start the JVM, wait until ready."""
        if self.running:
            return self
        t0 = time.monotonic()
        fetch_jars()
        if self.workdir is None:
            self.workdir = Path(tempfile.mkdtemp(prefix="streamtopics-kafka-"))
        self.workdir.mkdir(parents=True, exist_ok=True)
        formatted = (self.data_dir / "meta.properties").exists()
        if formatted:
            rec_port, rec_ctrl = self._recorded_ports()
            if self.controller_port is None:
                self.controller_port = rec_ctrl
            elif rec_ctrl is not None and rec_ctrl != self.controller_port:
                raise BrokerError(
                    f"{self.data_dir} was formatted for controller port {rec_ctrl} "
                    f"(recorded in the KRaft voter set); use that port or a fresh dir")
            if self.port is None:
                self.port = rec_port
        auto_port, auto_ctrl = self.port is None, self.controller_port is None
        for attempt in range(3):
            if auto_port:
                self.port = _free_port()
            if auto_ctrl:
                self.controller_port = _free_port()
                while self.controller_port == self.port:
                    self.controller_port = _free_port()
            busy = [p for p in (self.port, self.controller_port) if _port_open(p, 0.5)]
            if busy:
                if (auto_port or auto_ctrl) and attempt < 2 and not formatted:
                    continue
                raise BrokerError(f"port(s) {busy} on 127.0.0.1 already in use (another broker?)")
            self._write_properties()
            if not formatted:
                self._format()
            self._launch()
            try:
                self._wait_ready(t0 + timeout)
                break
            except BrokerError as exc:
                # a port picked here was taken by someone else between pick and bind: pick
                # again (the controller port is recorded at format, so start from fresh storage)
                if (attempt == 2 or formatted or not (auto_port or auto_ctrl)
                        or "Address already in use" not in str(exc)):
                    raise
                shutil.rmtree(self.data_dir, ignore_errors=True)
        self.start_seconds = time.monotonic() - t0
        _RUNNING.add(self)
        return self

    def _write_properties(self) -> None:
        self.properties_path.write_text(_SERVER_PROPERTIES.format(
            port=self.port, controller_port=self.controller_port, log_dirs=self.data_dir))

    def _format(self) -> None:
        cmd = [_java(), "-Xmx256m", self._log4j("tools-log4j2.properties"), "-cp", self._classpath(),
               "kafka.tools.StorageTool", "format", "--standalone", "-t", _cluster_id(),
               "-c", str(self.properties_path)]
        proc = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                              cwd=self.workdir)
        with open(self.log_path, "a") as log:
            log.write(f"=== format storage {self.data_dir} (exit {proc.returncode})\n{proc.stdout}")
        if proc.returncode != 0:
            raise BrokerError(f"formatting KRaft storage failed (exit {proc.returncode}):\n{proc.stdout}")

    def _launch(self) -> None:
        cmd = [_java(), f"-Xmx{self.heap}", "-XX:+UseG1GC", "-XX:MaxGCPauseMillis=20",
               "-XX:+ExitOnOutOfMemoryError", "-Djava.awt.headless=true",
               self._log4j("log4j2.properties"), "-cp", self._classpath(),
               "kafka.Kafka", str(self.properties_path)]
        with open(self.log_path, "a") as log:
            log.write(f"=== start {time.strftime('%Y-%m-%d %H:%M:%S')} "
                      f"port={self.port} controller_port={self.controller_port}\n")
            log.flush()
            self.proc = subprocess.Popen(
                cmd, cwd=self.workdir, stdin=subprocess.DEVNULL, stdout=log,
                stderr=subprocess.STDOUT, start_new_session=True,
                preexec_fn=_parent_death_signal())

    def _errors_since_start(self, limit: int = 20) -> str:
        """ERROR/FATAL and 'Caused by' lines the broker logged since its last start."""
        text = self.log_tail(100000)
        text = text[text.rfind("=== start "):]
        lines = [ln for ln in text.splitlines()
                 if " ERROR " in ln or " FATAL " in ln or ln.startswith("Caused by:")]
        return "\n".join(lines[:limit])

    def _fail(self, msg: str) -> None:
        self.stop()  # first, so the log is complete
        errors = self._errors_since_start()
        if errors:
            msg += "\n--- errors logged ---\n" + errors
        raise BrokerError(f"{msg}\n--- last lines of {self.log_path} ---\n{self.log_tail()}")

    def _wait_ready(self, deadline: float) -> None:
        # 1) TCP port accepts connections
        while not _port_open(self.port, timeout=0.5):
            if self.proc.poll() is not None:
                self._fail(f"Kafka broker exited with code {self.proc.returncode} during start")
            if time.monotonic() > deadline:
                self._fail(f"Kafka broker did not open port {self.port} in time")
            time.sleep(0.2)
        # 2) a real admin request succeeds
        try:
            from kafka import KafkaAdminClient
        except ImportError:  # pragma: no cover - kafka-python is a project dependency
            return
        last_exc = None
        while True:
            if self.proc.poll() is not None:
                self._fail(f"Kafka broker exited with code {self.proc.returncode} during start")
            left_ms = int((deadline - time.monotonic()) * 1000)
            if left_ms <= 0:
                self._fail(f"Kafka broker did not answer list_topics in time (last error: {last_exc!r})")
            step = max(1000, min(10000, left_ms))
            admin = None
            try:
                admin = KafkaAdminClient(bootstrap_servers=self.bootstrap_servers,
                                         client_id="streamtopics-broker-check",
                                         request_timeout_ms=step, bootstrap_timeout_ms=step)
                admin.list_topics()
                return
            except Exception as exc:  # broker still starting: NoBrokersAvailable, timeouts, ...
                last_exc = exc
                time.sleep(0.5)
            finally:
                if admin is not None:
                    with contextlib.suppress(Exception):
                        admin.close()

    def stop(self, timeout: float = 30) -> None:
        """SIGTERM the broker's process group, wait up to ``timeout`` s, then SIGKILL it."""
        proc, self.proc = self.proc, None
        _RUNNING.discard(self)
        if proc is None:
            return
        if proc.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGTERM)
            try:
                proc.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                pass
        # the process group may still hold children even if the JVM itself is gone
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(proc.pid, signal.SIGKILL)
        with contextlib.suppress(subprocess.TimeoutExpired):
            proc.wait(timeout=10)

    def restart(self, timeout: float = 180) -> "KafkaBroker":
        """Stop, then start again on the same ports and data dir (no reformat)."""
        self.stop()
        self._wait_port_free()
        return self.start(timeout=timeout)

    def _wait_port_free(self, wait: float = 10) -> None:
        end = time.monotonic() + wait
        while time.monotonic() < end and (_port_open(self.port, 0.2) or _port_open(self.controller_port, 0.2)):
            time.sleep(0.2)

    def cleanup(self) -> None:
        """Stop the broker and delete the workdir if this object created it."""
        self.stop()
        if self._own_workdir and self.workdir is not None:
            shutil.rmtree(self.workdir, ignore_errors=True)
            self.workdir = None

    def __enter__(self) -> "KafkaBroker":
        return self.start()

    def __exit__(self, *exc) -> None:
        self.cleanup()

    def __repr__(self) -> str:
        state = "running" if self.running else "stopped"
        return f"KafkaBroker({self.bootstrap_servers if self.port else '?'}, {state}, workdir={self.workdir})"


# --------------------------------------------------------------------------- CLI


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python -m devtools.kafka_broker",
                                     description="Local single-node Kafka broker (KRaft).")
    sub = parser.add_subparsers(dest="cmd", required=True)
    sub.add_parser("fetch", help="download the broker jars into kafka/libs and exit")
    p_start = sub.add_parser("start", help="run a broker in the foreground until Ctrl-C / SIGTERM")
    p_start.add_argument("--port", type=int, default=9092, help="client port (default 9092; 0 = any free)")
    p_start.add_argument("--controller-port", type=int, default=None, help="KRaft controller port (default: free)")
    p_start.add_argument("--dir", default=None, help="work/data folder to use or reuse (default: temporary)")
    p_start.add_argument("--heap", default="512m", help="JVM -Xmx (default 512m)")
    p_start.add_argument("--timeout", type=float, default=180, help="seconds to wait for readiness")
    args = parser.parse_args(argv)

    if args.cmd == "fetch":
        path = fetch_jars(quiet=False)
        print(f"Kafka jars in {path}")
        return 0

    stop_event = threading.Event()

    def on_signal(signum, frame):
        stop_event.set()

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    broker = KafkaBroker(workdir=args.dir, port=args.port or None,
                         controller_port=args.controller_port, heap=args.heap)
    try:
        broker.start(timeout=args.timeout)
        print(f"Kafka broker ready at {broker.bootstrap_servers} "
              f"(started in {broker.start_seconds:.1f} s; log {broker.log_path})", flush=True)
        while not stop_event.wait(1.0):
            if not broker.running:
                print("Kafka broker exited unexpectedly:\n" + broker.log_tail(), file=sys.stderr)
                return 1
        print("stopping Kafka broker ...", flush=True)
        return 0
    except BrokerError as exc:
        print(exc, file=sys.stderr)
        return 1
    finally:
        if args.dir is None:
            broker.cleanup()
        else:
            broker.stop()


if __name__ == "__main__":
    sys.exit(main())
