"""A real single-node Apache Kafka broker (KRaft combined mode) on 127.0.0.1, for development, tests and CI.

The jars come from Maven Central through ``broker/pom.xml``; the broker runs as a Java process from them, so no
Docker is needed. Each broker has its own data directory (default ``.laggard/kafka-<port>``) holding its
configuration, storage, log and pid file, so several brokers can run side by side.

With ``Security`` it also listens with TLS (an SSL listener) and with TLS plus SASL/SCRAM (a SASL_SSL listener),
beside the PLAINTEXT one: the certificate is the operator's (a PKCS12 keystore), the SCRAM users are written into the
storage when it is formatted, the first time the broker starts.

``python -m laggard.kafka_local free-ports N`` prints N free TCP ports (used by ``make integration``).
"""

from __future__ import annotations

import base64
import contextlib
import os
import signal
import socket
import subprocess
import sys
import time
import uuid
from dataclasses import dataclass
from pathlib import Path

from laggard.kafka_log import bind_failure, fatal_cause

REPO_ROOT = Path(__file__).resolve().parents[1]
STATE_DIR = REPO_ROOT / ".laggard"
LIB_DIR = STATE_DIR / "kafka-lib"
POM = REPO_ROOT / "broker" / "pom.xml"
DEPENDENCY_PLUGIN = "org.apache.maven.plugins:maven-dependency-plugin:3.8.1:copy-dependencies"


class KafkaLocalError(RuntimeError):
    """Something the user can act on: the message says what."""


SCRAM_MECHANISMS = ("SCRAM-SHA-256", "SCRAM-SHA-512")


@dataclass(frozen=True)
class Security:
    """TLS and SASL/SCRAM listeners beside the PLAINTEXT one (which the broker keeps for itself and local tools).

    ``keystore``: a PKCS12 file with the broker's private key and its certificate chain, locked with
    ``keystore_password``; the certificate must name 127.0.0.1 (subjectAltName IP:127.0.0.1), as clients check
    the host. ``scram_users``: (name, password) pairs, each known with both SCRAM mechanisms.

    >>> Security(Path("b.p12"), "pw", ssl_port=9094, scram_users=(("alice", "x"),)).listeners()
    {'SSL': 9094}
    """

    keystore: Path
    keystore_password: str
    ssl_port: int | None = None
    sasl_ssl_port: int | None = None
    scram_users: tuple[tuple[str, str], ...] = ()

    def listeners(self) -> dict[str, int]:
        named = {"SSL": self.ssl_port, "SASL_SSL": self.sasl_ssl_port}
        return {name: port for name, port in named.items() if port is not None}


@dataclass(frozen=True)
class Broker:
    port: int = 9092
    controller_port: int = 9093
    data_dir: Path | None = None
    heap: str = "768m"
    security: Security | None = None

    @property
    def home(self) -> Path:
        return (self.data_dir or STATE_DIR / f"kafka-{self.port}").resolve()

    @property
    def bootstrap(self) -> str:
        return f"127.0.0.1:{self.port}"

    def address(self, listener: str) -> str:
        """HOST:PORT of the PLAINTEXT, SSL or SASL_SSL listener."""
        if listener == "PLAINTEXT":
            return self.bootstrap
        ports = self.security.listeners() if self.security else {}
        if listener not in ports:
            raise KafkaLocalError(f"this broker has no {listener} listener")
        return f"127.0.0.1:{ports[listener]}"

    @property
    def pid_file(self) -> Path:
        return self.home / "broker.pid"

    @property
    def log_file(self) -> Path:
        return self.home / "logs" / "server.log"


def fetch_jars(quiet: bool = True) -> Path:
    """Fetch the broker's jars with Maven once; later calls return at once."""
    marker = LIB_DIR / ".fetched"
    if marker.exists():
        return LIB_DIR
    LIB_DIR.mkdir(parents=True, exist_ok=True)
    command = ["mvn", "-B", "-f", str(POM), DEPENDENCY_PLUGIN, "-DincludeScope=runtime",
               f"-DoutputDirectory={LIB_DIR}"]
    if quiet:
        command.insert(2, "-q")
    try:
        subprocess.run(command, check=True)
    except FileNotFoundError as exc:
        raise KafkaLocalError("Maven (mvn) is not installed; it fetches the Kafka jars") from exc
    except subprocess.CalledProcessError as exc:
        raise KafkaLocalError(f"Maven could not fetch the Kafka jars (exit {exc.returncode})") from exc
    marker.touch()
    return LIB_DIR


def new_cluster_id() -> str:
    """22 characters of url-safe base64 of a random UUID, as `kafka-storage random-uuid` makes them.

    Like Kafka's own Uuid.randomUuid, never one that starts with '-': the storage tool would read it as an option.
    """
    while True:
        candidate = base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("=")
        if not candidate.startswith("-"):
            return candidate


def _security_properties(security: Security) -> dict[str, str]:
    lines = {
        "ssl.keystore.type": "PKCS12",
        "ssl.keystore.location": str(security.keystore.resolve()),
        "ssl.keystore.password": security.keystore_password,
        "ssl.key.password": security.keystore_password,
    }
    if security.sasl_ssl_port is not None:
        lines["sasl.enabled.mechanisms"] = ",".join(SCRAM_MECHANISMS)
        for mechanism in SCRAM_MECHANISMS:  # the server side needs a login module per mechanism, no user of its own
            lines[f"listener.name.sasl_ssl.{mechanism.lower()}.sasl.jaas.config"] = (
                "org.apache.kafka.common.security.scram.ScramLoginModule required;")
    return lines


def _scram_arguments(security: Security | None) -> list[str]:
    """The storage tool's --add-scram arguments: each user with each mechanism."""
    if security is None:
        return []
    arguments = []
    for name, password in security.scram_users:
        if not name or any(c in name + password for c in ',[]="'):
            raise KafkaLocalError(f"SCRAM user {name!r}: names and passwords may not hold , [ ] = or \"")
        for mechanism in SCRAM_MECHANISMS:
            arguments += ["--add-scram", f"{mechanism}=[name={name},password={password}]"]
    return arguments


def _properties(broker: Broker) -> str:
    home = broker.home
    extra = broker.security.listeners() if broker.security else {}
    listeners = {"PLAINTEXT": broker.port, **extra}
    advertised = ",".join(f"{name}://127.0.0.1:{port}" for name, port in listeners.items())
    lines = {
        "process.roles": "broker,controller",
        "node.id": "1",
        "controller.quorum.voters": f"1@127.0.0.1:{broker.controller_port}",
        "listeners": f"{advertised},CONTROLLER://127.0.0.1:{broker.controller_port}",
        "advertised.listeners": advertised,
        "controller.listener.names": "CONTROLLER",
        "listener.security.protocol.map": ",".join(["CONTROLLER:PLAINTEXT", *(f"{n}:{n}" for n in listeners)]),
        "inter.broker.listener.name": "PLAINTEXT",
        "log.dirs": str(home / "data"),
        "offsets.topic.replication.factor": "1",
        "offsets.topic.num.partitions": "4",
        "transaction.state.log.replication.factor": "1",
        "transaction.state.log.min.isr": "1",
        "group.initial.rebalance.delay.ms": "0",
        "num.partitions": "1",
        "auto.create.topics.enable": "true",
        "log.cleaner.backoff.ms": "1000",
        **(_security_properties(broker.security) if broker.security else {}),
    }
    return "".join(f"{key}={value}\n" for key, value in lines.items())


def _log4j(broker: Broker) -> str:
    return (
        "log4j.rootLogger=INFO, file\n"
        "log4j.appender.file=org.apache.log4j.FileAppender\n"
        f"log4j.appender.file.File={broker.log_file}\n"
        "log4j.appender.file.layout=org.apache.log4j.PatternLayout\n"
        "log4j.appender.file.layout.ConversionPattern=[%d] %p %m (%c)%n\n"
        "log4j.logger.kafka=INFO\nlog4j.logger.org.apache.kafka=INFO\n"
    )


def _pid(broker: Broker) -> int | None:
    try:
        pid = int(broker.pid_file.read_text().strip())
    except (FileNotFoundError, ValueError):
        return None
    try:
        cmdline = Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return None
    # A stale pid file may name a recycled pid: only a Kafka JVM with our configuration counts.
    if b"kafka.Kafka" not in cmdline or str(broker.home).encode() not in cmdline:
        return None
    if Path(f"/proc/{pid}/stat").read_text().split(") ")[-1].startswith("Z"):
        return None  # exited, waiting to be reaped
    return pid


def port_open(port: int) -> bool:
    """Whether something accepts connections on 127.0.0.1:``port`` (a quick look before a Kafka client's)."""
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=0.5):
            return True
    except OSError:
        return False


def _still_open(port: int, grace_s: float = 15.0) -> bool:
    """Whether something keeps accepting on ``port`` for ``grace_s``: a broker killed a moment ago (SIGKILL)
    shows as exited while the kernel is still closing its listening sockets."""
    deadline = time.monotonic() + grace_s
    while port_open(port):
        if time.monotonic() > deadline:
            return True
        time.sleep(0.3)
    return False


def _port_bindable(port: int) -> bool:
    """Whether the broker could listen on ``port``: a bind with SO_REUSEADDR, as the JVM's server sockets do
    (``sun.nio.ch.Net.serverSocket``). Connections of a broker that just stopped linger in TIME_WAIT on its port
    for a minute; they do not keep a JVM from listening there again, so they must not keep us from starting it:
    a broker restarts in place, at once, as a real one does."""
    with socket.socket() as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind(("127.0.0.1", port))
            return True
        except OSError:
            return False


def answers_metadata(bootstrap: str, timeout_ms: int = 3000) -> bool:
    """True when a client can fetch cluster metadata from ``bootstrap``."""
    from kafka import KafkaAdminClient
    from kafka.errors import KafkaError

    try:
        client = KafkaAdminClient(bootstrap_servers=bootstrap, request_timeout_ms=timeout_ms,
                                  bootstrap_timeout_ms=timeout_ms)  # its default, 30 s, against a non-Kafka port
    except (KafkaError, OSError):
        return False
    try:
        client.list_topics()
        return True
    except (KafkaError, OSError):
        return False
    finally:
        client.close()


def serving(broker: Broker) -> bool:
    """Whether a Kafka broker answers on ``broker``'s port, this one or another (a quick look, then metadata)."""
    return port_open(broker.port) and answers_metadata(broker.bootstrap)


def status(broker: Broker) -> int | None:
    """The pid of the running broker, or None."""
    return _pid(broker)


def start(broker: Broker, timeout_s: float = 90.0) -> tuple[int, bool]:
    """Start the broker (idempotent); returns (pid, started_now) once it answers a metadata request."""
    pid = _pid(broker)
    if pid is not None:
        return pid, False
    extra = list(broker.security.listeners().values()) if broker.security else []
    if broker.security and not broker.security.keystore.is_file():
        raise KafkaLocalError(f"no keystore at {broker.security.keystore}")
    if serving(broker):
        # not a broker of this data directory stopping (it would have to be dead to be started again): at once
        raise KafkaLocalError(f"a Kafka broker already answers on 127.0.0.1:{broker.port}, not the one of "
                              f"{broker.home}: use it (--bootstrap 127.0.0.1:{broker.port}), or choose another --port")
    ours = broker.pid_file.exists()  # a broker of this directory may have died a moment ago: give its ports time
    for port in (broker.port, broker.controller_port, *extra):
        if _still_open(port, 15.0 if ours else 0.0):
            raise KafkaLocalError(f"port {port} is already in use by another process; choose other ports")
        if not _port_bindable(port):
            raise KafkaLocalError(
                f"port {port} cannot be bound (held by another process); choose other ports"
            )
    lib = fetch_jars()
    home = broker.home
    (home / "logs").mkdir(parents=True, exist_ok=True)
    (home / "server.properties").write_text(_properties(broker))
    (home / "log4j.properties").write_text(_log4j(broker))
    cluster_file = home / "cluster.id"
    if not cluster_file.exists():
        cluster_file.write_text(new_cluster_id())
    classpath = f"{lib}/*"
    java_opts = ["-Xms256m", f"-Xmx{broker.heap}", "-XX:+UseG1GC", "-XX:+ExitOnOutOfMemoryError",
                 f"-Dlog4j.configuration=file:{home / 'log4j.properties'}", f"-Dkafka.logs.dir={home / 'logs'}"]
    formatted = subprocess.run(
        ["java", *java_opts, "-cp", classpath, "kafka.tools.StorageTool", "format", "-t",
         cluster_file.read_text().strip(), "-c", str(home / "server.properties"), "--ignore-formatted",
         *_scram_arguments(broker.security)],
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
    )
    if formatted.returncode != 0:
        last = (formatted.stdout.strip().splitlines() or ["no output"])[-1]
        raise KafkaLocalError(f"formatting the broker's storage in {home} failed: {last}")
    with open(home / "logs" / "stdout.log", "ab") as out:
        process = subprocess.Popen(
            ["java", *java_opts, "-cp", classpath, "kafka.Kafka", str(home / "server.properties")],
            stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, start_new_session=True,
        )
    broker.pid_file.write_text(str(process.pid))
    try:
        return _wait_until_up(broker, process, timeout_s)
    except KeyboardInterrupt:  # Ctrl-C while it starts: nothing left running (it went on in the background)
        stop(broker)
        raise


def _wait_until_up(broker: Broker, process: subprocess.Popen[bytes], timeout_s: float) -> tuple[int, bool]:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if process.poll() is not None:
            broker.pid_file.unlink(missing_ok=True)
            unbound, cause = bind_failure(broker.log_file), fatal_cause(broker.log_file)
            why = (f": port {unbound} could not be bound (in use); choose other ports" if unbound
                   else f": {cause}" if cause else "")
            raise KafkaLocalError(f"the broker exited with {process.returncode}{why}; see {broker.log_file}")
        if serving(broker):
            return process.pid, True
        time.sleep(0.5)
    stop(broker)
    raise KafkaLocalError(f"the broker did not answer within {timeout_s:.0f} s; see {broker.log_file}")


def stop(broker: Broker, timeout_s: float = 60.0) -> int | None:
    """Stop the broker with SIGTERM (clean shutdown); SIGKILL only if it hangs. Returns the pid stopped."""
    pid = _pid(broker)
    if pid is None:
        broker.pid_file.unlink(missing_ok=True)
        return None
    os.kill(pid, signal.SIGTERM)
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline and _pid(broker) is not None:
        _reap(pid)
        time.sleep(0.2)
    if _pid(broker) is not None:
        print(f"broker {pid} ignored SIGTERM for {timeout_s:.0f} s; killing it", file=sys.stderr)
        os.kill(pid, signal.SIGKILL)
        time.sleep(0.5)
        _reap(pid)
    broker.pid_file.unlink(missing_ok=True)
    return pid


def _reap(pid: int) -> None:
    # When this process started the broker it is our child: collect it so it does not linger as a zombie.
    with contextlib.suppress(ChildProcessError):
        os.waitpid(pid, os.WNOHANG)


def free_ports(count: int) -> list[int]:
    sockets = []
    try:
        for _ in range(count):
            sock = socket.socket()
            sock.bind(("127.0.0.1", 0))
            sockets.append(sock)
        return [sock.getsockname()[1] for sock in sockets]
    finally:
        for sock in sockets:
            sock.close()


if __name__ == "__main__":
    if len(sys.argv) == 3 and sys.argv[1] == "free-ports":
        print(" ".join(str(port) for port in free_ports(int(sys.argv[2]))))
    else:
        print("usage: python -m laggard.kafka_local free-ports N", file=sys.stderr)
        sys.exit(2)
