"""Driving `gpubot serve` like Slack does: signed requests, a scenario cluster, the bot as a process.

Signatures are real (v0 HMAC-SHA256 over `v0:{timestamp}:{body}` with the
signing secret), so Bolt's verification runs as in production. The scenario
is built from the shared samples: a GPU node that lost one of eight GPUs to
Xid 79 (sample 06's device-plugin lines), a training pod on it, and three
healthy GPU nodes so one cordon stays inside the 25 % breaker.
"""

from __future__ import annotations

import atexit
import contextlib
import hashlib
import hmac
import itertools
import json
import os
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any, TypeVar
from urllib.parse import urlencode

import yaml

from tests import fixtures
from tests.services import free_port

SAMPLES = fixtures.SAMPLES
if not SAMPLES.exists():  # the repository's own copy when the shared folder is not mounted
    SAMPLES = Path(__file__).resolve().parents[1] / "samples"
SECRET = "8f742231b10e8888abcd99yyyzzz85a5"
BOT_TOKEN = "xoxb-0000-test-token"
APP_TOKEN = "xapp-1-test-app-token"
OPERATOR = "U0OPERATOR"
PLUGIN_POD = "nvidia-device-plugin-daemonset-x7k2p"
HOSTILE = ("<!channel>", "<@U0EVIL1>", "<http://evil.example/login|click to fix the GPU>")
T = TypeVar("T")


# --- signing ---------------------------------------------------------------------------------


def sign(body: str, ts: int | None = None, secret: str = SECRET) -> dict[str, str]:
    ts = int(time.time()) if ts is None else ts
    base = f"v0:{ts}:{body}".encode()
    sig = "v0=" + hmac.new(secret.encode(), base, hashlib.sha256).hexdigest()
    return {
        "X-Slack-Signature": sig,
        "X-Slack-Request-Timestamp": str(ts),
        "Content-Type": "application/x-www-form-urlencoded",
    }


_TRIGGERS = itertools.count(1)


def trigger_id() -> str:
    """Unique per request, as Slack's are (the bot drops a request whose trigger id it has seen)."""
    return f"{time.time_ns()}.{next(_TRIGGERS)}.a1b2c3"


def slash_body(text: str, user: str = "U0ASKER", channel: str = "C0INCIDENT") -> str:
    return urlencode(
        {
            "token": "legacy",
            "team_id": "T0FAKE",
            "team_domain": "fake",
            "channel_id": channel,
            "channel_name": "gpu-incidents",
            "user_id": user,
            "user_name": user.lower(),
            "command": "/gpu",
            "text": text,
            "api_app_id": "A0GPUBOT",
            "response_url": "http://127.0.0.1:9/response",
            "trigger_id": trigger_id(),
        }
    )


def action_payload(
    action_id: str,
    value: str,
    *,
    user: str = "U0ASKER",
    channel: str = "C0INCIDENT",
    block_id: str = "layer1_actions",
    message_ts: str = "1795000001.000100",
) -> dict[str, Any]:
    return {
        "type": "block_actions",
        "team": {"id": "T0FAKE", "domain": "fake"},
        "user": {"id": user, "username": user.lower(), "team_id": "T0FAKE"},
        "api_app_id": "A0GPUBOT",
        "token": "legacy",
        "container": {
            "type": "message",
            "message_ts": message_ts,
            "channel_id": channel,
            "is_ephemeral": False,
        },
        "trigger_id": trigger_id(),
        "channel": {"id": channel, "name": "gpu-incidents"},
        "message": {"type": "message", "ts": message_ts, "text": "gpubot"},
        "response_url": "http://127.0.0.1:9/response",
        "actions": [
            {
                "type": "button",
                "action_id": action_id,
                "block_id": block_id,
                "text": {"type": "plain_text", "text": action_id},
                "value": value,
                "action_ts": f"{time.time():.6f}",
            }
        ],
    }


def action_body(action_id: str, value: str, **kw: Any) -> str:
    return urlencode({"payload": json.dumps(action_payload(action_id, value, **kw))})


def post(url: str, body: str, headers: Mapping[str, str], timeout: float = 10.0) -> tuple[int, str]:
    req = urllib.request.Request(url, data=body.encode(), headers=dict(headers), method="POST")
    try:
        with urllib.request.urlopen(req, timeout=timeout) as r:
            return r.status, r.read().decode()
    except urllib.error.HTTPError as err:
        return err.code, err.read().decode()


def get(url: str, timeout: float = 5.0) -> tuple[int, str]:
    try:
        with urllib.request.urlopen(url, timeout=timeout) as r:
            return r.status, r.read().decode()
    except urllib.error.HTTPError as err:
        return err.code, err.read().decode()


def wait_for(
    what: str, probe: Callable[[], T | None], timeout: float = 15.0, explain: Callable[[], str] | None = None
) -> T:
    """Poll until `probe` returns something truthy (listeners run after ack, on a pool).

    `explain` (e.g. a bot process's log) is added to the failure message.
    """
    deadline = time.monotonic() + timeout
    while True:
        got = probe()
        if got:
            return got
        if time.monotonic() > deadline:
            more = f"\n{explain()}" if explain else ""
            raise AssertionError(f"timed out after {timeout:g}s waiting for {what}{more}")
        time.sleep(0.02)


# --- the scenario -------------------------------------------------------------------------------


def _plugin_log(hostile: bool, many_xids: int = 0) -> str:
    lines = (SAMPLES / "06_node_7_of_8_gpus_device_plugin_xid79.txt").read_text().splitlines()
    kept = [ln.replace("I0624", "I1129") for ln in lines if "health.go" in ln or "server.go" in ln]
    xid = next(ln for ln in kept if "Xid=79" in ln)
    # Evidence longer than a message holds: one line per GPU, as a failing NVSwitch tray can produce.
    kept += [xid.replace("ddee5da83d07", f"{i:012d}") for i in range(many_xids)]
    if hostile:
        # A log line can carry anything; these must reach Slack inert.
        kept = [f"{ln} {' '.join(HOSTILE)} & more" if "Xid=79" in ln else ln for ln in kept]
    return "\n".join(kept) + "\n"


def node_object(
    name: str,
    labels: dict[str, str],
    capacity: dict[str, str],
    allocatable: dict[str, str],
    node_info: dict[str, str],
) -> dict[str, Any]:
    """A Ready GPU Node as the API serves it: labelled with its hostname and nvidia.com/gpu.present."""
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {
            "name": name,
            "labels": {"kubernetes.io/hostname": name, "nvidia.com/gpu.present": "true", **labels},
        },
        "spec": {},
        "status": {
            "capacity": capacity,
            "allocatable": allocatable,
            "conditions": [{"type": "Ready", "status": "True"}],
            "nodeInfo": node_info,
        },
    }


def _gpu_node(name: str, capacity: int, allocatable: int) -> dict[str, Any]:
    return node_object(
        name,
        {
            "nvidia.com/gpu.count": str(capacity),
            "nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3",
            "nvidia.com/cuda.driver-version.full": "550.90.07",
            "nvidia.com/gpu.deploy.device-plugin": "true",
        },
        {"cpu": "96", "memory": "1056Gi", "nvidia.com/gpu": str(capacity), "pods": "110"},
        {"cpu": "96", "memory": "1050Gi", "nvidia.com/gpu": str(allocatable), "pods": "110"},
        {"kernelVersion": "5.15.0-118-generic", "containerRuntimeVersion": "containerd://1.7.12"},
    )


def _pod(ns: str, name: str, node: str, labels: dict[str, str], container: str, gpus: int) -> dict[str, Any]:
    resources = {"limits": {"nvidia.com/gpu": str(gpus)}} if gpus else {}
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": name,
            "namespace": ns,
            "labels": labels,
            "creationTimestamp": "2026-11-29T10:00:00Z",
        },
        "spec": {"nodeName": node, "containers": [{"name": container, "image": "x", "resources": resources}]},
        "status": {
            "phase": "Running",
            "conditions": [{"type": "PodScheduled", "status": "True"}, {"type": "Ready", "status": "True"}],
            "containerStatuses": [
                {"name": container, "ready": True, "restartCount": 0, "state": {"running": {}}, "image": "x"}
            ],
        },
    }


def scenario_doc(hostile: bool = False, many_xids: int = 0) -> dict[str, Any]:
    nodes = [_gpu_node("gpu-7", 8, 7)] + [_gpu_node(f"gpu-{i}", 8, 8) for i in (1, 2, 3)]
    pods = [
        _pod("ml", "trainer-0", "gpu-7", {"app": "trainer"}, "trainer", 8),
        _pod(
            "gpu-operator",
            PLUGIN_POD,
            "gpu-7",
            {"app": "nvidia-device-plugin-daemonset"},
            "nvidia-device-plugin",
            0,
        ),
    ]
    return {
        "kind": "Scenario",
        "name": "slack-xid79" + ("-hostile" if hostile else ""),
        "description": "gpu-7 lost one of eight GPUs to Xid 79; trainer-0 runs there.",
        "now": "2026-11-29T12:00:00Z",
        "objects": nodes + pods,
        "logs": {f"gpu-operator/{PLUGIN_POD}/nvidia-device-plugin": _plugin_log(hostile, many_xids)},
    }


def write_scenario(folder: Path, hostile: bool = False, many_xids: int = 0) -> Path:
    name = "hostile" if hostile else f"xid79-{many_xids}" if many_xids else "xid79"
    path = folder / f"{name}.yaml"
    path.write_text(yaml.safe_dump(scenario_doc(hostile, many_xids), sort_keys=False))
    return path


# --- the bot as a process -------------------------------------------------------------------------


def bot_env(slack_url: str, **extra: str) -> dict[str, str]:
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("SLACK_", "GPUBOT_", "REDIS_", "PROMETHEUS_"))
    }
    env.update(
        {
            "SLACK_BOT_TOKEN": BOT_TOKEN,
            "SLACK_SIGNING_SECRET": SECRET,
            "SLACK_API_URL": slack_url,
            "GPUBOT_OPERATORS": OPERATOR,
            "PYTHONUNBUFFERED": "1",
            # The root lookup these tests were written with (an install opts in: docs/slack-app.md);
            # tests/test_slack_history.py runs without it.
            "GPUBOT_SLACK_HISTORY": "true",
            # Posts as fast as the fake takes them; tests/test_slack_pace.py runs Slack's own pace.
            "GPUBOT_SLACK_CHANNEL_PACE_SECONDS": "0",
            # Every command runs, however often: tests/test_flood.py runs the coalescing and the limit.
            "GPUBOT_SAME_REQUEST_SECONDS": "0",
            "GPUBOT_USER_REQUESTS_PER_MINUTE": "0",
        }
    )
    env.update(extra)
    return env


# Bots started and not yet stopped: at the test process's exit, a fixture that failed half-way
# (its agent never became ready, say) leaves no `gpubot serve` behind to load the machine for
# the rest of the run.
_LIVE: set[BotProcess] = set()


@atexit.register
def _stop_leftovers() -> None:
    for bot in list(_LIVE):
        if bot.proc.poll() is None:
            bot.proc.kill()
            bot.proc.wait(timeout=5)


class BotProcess:
    """`gpubot serve` (HTTP by default here) in a subprocess on 127.0.0.1 and a free port."""

    def __init__(
        self, args: list[str], env: dict[str, str], log_path: Path, *, http: bool = True, ready: bool = True
    ) -> None:
        """Started and, unless `ready` is False (then call `wait_ready`), answering /readyz."""
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.log_path = log_path
        mode = ["--http"] if http else []  # without: Socket Mode, health on the port
        cmd = [sys.executable, "-m", "bot.serve", *mode, "--port", str(self.port), *args]
        self._log = log_path.open("ab")
        root = Path(__file__).resolve().parents[1]
        self.proc = subprocess.Popen(cmd, env=env, cwd=root, stdout=self._log, stderr=subprocess.STDOUT)
        _LIVE.add(self)
        self._terminated = False
        if ready:
            try:
                self.wait_ready()
            except BaseException:
                self.stop()  # the caller never gets this bot to stop it
                raise

    def wait_ready(self, timeout: float = 60.0) -> None:
        # Generous: a start-up is seconds alone, far more on a loaded 2-core CI machine.
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise AssertionError(f"gpubot serve exited {self.proc.returncode}:\n{self.log()}")
            with contextlib.suppress(OSError):
                if get(self.url + "/readyz", timeout=1)[0] == 200:
                    return
            time.sleep(0.05)
        raise AssertionError(f"gpubot serve did not become ready:\n{self.log()}")

    def log(self) -> str:
        return self.log_path.read_text(errors="replace")[-4000:]

    def command(
        self, text: str, user: str = "U0ASKER", channel: str = "C0INCIDENT", ts: int | None = None
    ) -> tuple[int, str]:
        body = slash_body(text, user, channel)
        return post(self.url + "/slack/events", body, sign(body, ts))

    def click(self, action_id: str, value: str, **kw: Any) -> tuple[int, str]:
        body = action_body(action_id, value, **kw)
        return post(self.url + "/slack/events", body, sign(body))

    def terminate(self) -> None:
        """SIGTERM, once: a second one must not cut a drain short."""
        if not self._terminated and self.proc.poll() is None:
            self.proc.terminate()
        self._terminated = True

    def stop(self) -> int:
        """SIGTERM, as Kubernetes does; the exit status says whether it stopped cleanly."""
        _LIVE.discard(self)
        if self.proc.poll() is None:
            self.terminate()
            try:
                self.proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(timeout=5)
        self._log.close()
        return self.proc.returncode


def start_together(bots: Sequence[BotProcess]) -> list[BotProcess]:
    """Wait for bots started with `ready=False`: their start-ups overlap instead of queueing."""
    for bot in bots:
        bot.wait_ready()
    return list(bots)


def stop_together(bots: Sequence[BotProcess]) -> None:
    """SIGTERM to every bot first, then wait for each: their drains overlap."""
    for bot in bots:
        bot.terminate()
    for bot in bots:
        bot.stop()


@contextlib.contextmanager
def running_bot(args: list[str], env: dict[str, str], log_path: Path) -> Iterator[BotProcess]:
    bot = BotProcess(args, env, log_path)
    try:
        yield bot
    finally:
        bot.stop()


@contextlib.contextmanager
def scenario_bot(
    slack_url: str, folder: Path, scenario: Path | None = None, **env: str
) -> Iterator[BotProcess]:
    """`gpubot serve --http` over a scenario file (this harness's Xid 79 one unless given), its log in
    `folder`: a module's bot."""
    path = scenario if scenario is not None else write_scenario(folder)
    with running_bot(["--scenario", str(path)], bot_env(slack_url, **env), folder / "bot.log") as bot:
        yield bot


# --- the bot in-process (same app, no subprocess): for focused tests ----------------------------------


def inprocess_bot(
    slack_url: str, scenario: Path, state: Any = None, *, timeout_s: int = 30, **env: str
) -> Any:
    """build_app over a scenario, the real Poster against `slack_url` (each Web API call given up
    after `timeout_s`); returns the GpuBot."""
    from bot.ops.config import load_config
    from bot.slack.app import build_app
    from bot.slack.post import Poster
    from bot.slack.state import MemoryState
    from bot.sources.opener import open_sources

    cfg = load_config(bot_env(slack_url, **env), need_slack=True, http=True)
    sources = open_sources(cfg, scenario=str(scenario))
    poster = Poster(
        BOT_TOKEN,
        slack_url,
        backoff_s=0.01,
        timeout_s=timeout_s,
        history=cfg.slack_history,
        pace_s=cfg.slack_pace_s,
    )
    return build_app(
        cfg, sources, state if state is not None else MemoryState(), poster, client=poster.client
    )


@contextlib.contextmanager
def running_inprocess_bot(slack_url: str, scenario: Path, state: Any = None) -> Iterator[Any]:
    """`inprocess_bot`, shut down when the block ends."""
    bot = inprocess_bot(slack_url, scenario, state)
    try:
        yield bot
    finally:
        bot.shutdown()


def dispatch(bot: Any, body: str, ts: int | None = None) -> Any:
    """A signed request through Bolt's dispatch (signature check and routing as over HTTP)."""
    from slack_bolt.request import BoltRequest

    headers: dict[str, str | Sequence[str]] = {k.lower(): v for k, v in sign(body, ts).items()}
    return bot.app.dispatch(BoltRequest(body=body, headers=headers))


def posts(slack: Any, channel: str, thread_ts: str | None = None) -> list[Any]:
    """The fake Slack's chat.postMessage calls to a channel (and thread)."""
    return [
        c
        for c in slack.calls_to("chat.postMessage")
        if c.params.get("channel") == channel
        and (thread_ts is None or c.params.get("thread_ts") == thread_ts)
    ]


def told(slack: Any, user: str) -> list[str]:
    """The ephemeral texts a user was shown."""
    return [c.params["text"] for c in slack.calls_to("chat.postEphemeral") if c.params.get("user") == user]
