"""Layer 5's read incidents, written out as YAML: `python -m tests.incidents.reads.build`.

Time-sliced replicas counted as GPUs (issue 9 item 7) and the device plugin's log read by time and
size rather than its last 500 lines (item 8). The committed YAML files are what the tests read; this
script is how they were made, so a change to an incident is a reviewed change to its recipe.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from tests.incidents.fleets import NS, Fleet, Recipe, uuid_of, write_recipes

HERE = Path(__file__).resolve().parent

# The plugin's start-up with a time-slicing config, as v0.17 prints it (klog lines of main.go, the
# "Running with config:" JSON of k8s-device-plugin issue 732, the sharing block of the README's
# time-slicing example and of issue 1433's ConfigMap).
SLICED_START = """\
I1123 10:12:31.313485       1 main.go:235] "Starting NVIDIA Device Plugin" version=<
	8d6e2c2b
	commit: 8d6e2c2bbb2cd0ac8e2bb0d4ebb5b9e7b8d2c0a1
 >
I1123 10:12:31.313679       1 main.go:238] Starting FS watcher for /var/lib/kubelet/device-plugins
I1123 10:12:31.313873       1 main.go:245] Starting OS watcher.
I1123 10:12:31.314068       1 main.go:260] Starting Plugins.
I1123 10:12:31.314081       1 main.go:317] Loading configuration.
I1123 10:12:31.315229       1 main.go:342] Updating config with default resource matching patterns.
I1123 10:12:31.315529       1 main.go:353]
Running with config:
{
  "version": "v1",
  "flags": {
    "migStrategy": "none",
    "failOnInitError": true,
    "mpsRoot": "/run/nvidia/mps",
    "nvidiaDriverRoot": "/run/nvidia/driver",
    "gdsEnabled": false,
    "mofedEnabled": false,
    "useNodeFeatureAPI": null,
    "deviceDiscoveryStrategy": "auto",
    "plugin": {
      "passDeviceSpecs": true,
      "deviceListStrategy": [
        "envvar"
      ],
      "deviceIDStrategy": "uuid",
      "cdiAnnotationPrefix": "cdi.k8s.io/",
      "nvidiaCTKPath": "/usr/bin/nvidia-ctk",
      "containerDriverRoot": "/driver-root"
    }
  },
  "resources": {
    "gpus": [
      {
        "pattern": "*",
        "name": "nvidia.com/gpu"
      }
    ]
  },
  "sharing": {
    "timeSlicing": {
      "failRequestsGreaterThanOne": true,
      "resources": [
        {
          "name": "nvidia.com/gpu",
          "devices": "all",
          "replicas": 4
        }
      ]
    }
  }
}
I1123 10:12:31.315541       1 main.go:356] Retrieving plugins.
I1123 10:12:31.394067       1 server.go:195] Starting GRPC server for 'nvidia.com/gpu'
I1123 10:12:31.474164       1 server.go:139] Starting to serve 'nvidia.com/gpu' on /var/lib/kubelet/device-plugins/nvidia-gpu.sock
I1123 10:12:31.474358       1 server.go:146] Registered device plugin for 'nvidia.com/gpu' with Kubelet
"""


def _replica_marks(uuid: str, xid: int, replicas: int, at: str) -> str:
    """Xid on a shared GPU, as the plugin prints it since the fix for k8s-device-plugin issue 1929
    (PR 1930): every replica `<uuid>::<n>` of the physical GPU is marked, one line each."""
    out = [
        f"I1129 {at}.486593       1 health.go:159] Processing event {{Device:{{Handle:0x7f7597647848}} "
        f"EventType:8 EventData:{xid} GpuInstanceId:4294967295 ComputeInstanceId:4294967295}}"
    ]
    out += [
        f"I1129 {at}.4867{n:02d}       1 health.go:185] XidCriticalError: Xid={xid} on Device={uuid}::{n}; "
        "marking device as unhealthy."
        for n in range(replicas)
    ]
    out += [
        f"I1129 {at}.4868{n:02d}       1 server.go:276] 'nvidia.com/gpu' device marked unhealthy: {uuid}::{n}"
        for n in range(replicas)
    ]
    return "\n".join(out) + "\n"


def time_sliced_l4_replica_ids_one_gpu_lost() -> tuple[Fleet, dict[str, Any]]:
    f = Fleet(
        "time-sliced-l4-replica-ids-one-gpu-lost",
        "Built on sample 06 (Xid 79, the plugin's klog lines), sample 31's sharing labels, k8s-device-plugin issue 732 (the 'Running with config:' dump), with the README's time-slicing "
        "config (replicas: 4) and issue 1929 / PR 1930 (every replica <uuid>::<n> of a GPU marked "
        "unhealthy on an Xid): the notebook pool's L4 nodes share 4 GPUs 4 ways (capacity 16). GPU 1 of "
        "l4-nb-01 fell off the bus (Xid 79): the plugin marks its four replicas, allocatable drops to 12. "
        "A notebook runs there; its walk must say one GPU (4 replicas), never four devices. "
        "Elsewhere an H100 lost a GPU and an A100 has rising rows (noise for this pod).",
    )
    f.control_plane()
    f.cpu_node("cpu-01")
    for i in (1, 2, 3):
        f.gpu_node(f"l4-nb-0{i}", "l4", gpus=4, replicas=4, pool="notebooks", series=True)
        key = f"{NS}/{f._plugins[f'l4-nb-0{i}']}/nvidia-device-plugin"
        f.logs[key] = SLICED_START
    sick = "l4-nb-01"
    f.node(sick)["status"]["allocatable"]["nvidia.com/gpu"] = "12"
    f.plugin_log(sick, _replica_marks(uuid_of(sick, 1), 79, 4, "09:58:05"))
    # The GPU off the bus has no DCGM series any more.
    f.metrics = [m for m in f.metrics if m["metric"].get("UUID") != uuid_of(sick, 1)]
    for i in range(1, 5):
        f.gpu_node(f"h100-infer-0{i}", "h100", pool="infer", operands="plugin")
    f.sick_lost_gpu("h100-infer-03", xid=94, gpu=6)
    for i in range(1, 4):
        f.gpu_node(f"a100-train-0{i}", "a100", pool="train", operands="plugin", series=True)
    f.sick_rows_rising("a100-train-02", "a100")
    f.running_pod("jupyter-ana-7c9f4", "notebooks", sick, 1)
    return f, {
        "target": "notebooks/jupyter-ana-7c9f4",
        "walk": [1, 5],
        "verdict": "L5_XID",
        "codes": ["L1_POD_SCHEDULED", "L1_ALLOCATABLE_BELOW_CAPACITY", "L5_ALLOCATABLE_BELOW_CAPACITY",
                  "L5_DEVICE_UNHEALTHY", "L5_XID"],
        "absent": ["L5_OK"],
    }  # fmt: skip


def _chatter(events: int, start_min: int, gpus: tuple[str, ...]) -> str:
    """A job crash-looping on other GPUs: Xid 13, 31 and 43 every minute, which the plugin
    skips by default (its ignore list 13, 31, 43, 45, 68, 109): two klog lines per event."""
    out = []
    for i in range(events):
        minute = start_min + i
        at = f"{minute // 60:02d}:{minute % 60:02d}:{(7 * i) % 60:02d}"
        xid = (13, 31, 43)[i % 3]
        handle = gpus[i % len(gpus)]
        event = f"{{Device:{{Handle:{handle}}} EventType:8 EventData:{xid} GpuInstanceId:4294967295 ComputeInstanceId:4294967295}}"
        out.append(f"I1129 {at}.{(31 * i) % 1000000:06d}       1 health.go:159] Processing event {event}")
        out.append(f"I1129 {at}.{(31 * i + 9) % 1000000:06d}       1 health.go:163] Skipping event {event}")
    return "\n".join(out) + "\n"


def unhealthy_mark_buried_under_xid13_chatter() -> tuple[Fleet, dict[str, Any]]:
    f = Fleet(
        "unhealthy-mark-buried-under-xid13-chatter",
        "Built on sample 22 (Xid 119, GSP RPC timeout: DCGM cannot report it), sample 06 (the plugin's "
        "klog marking line) and sample 23 (Xid 13 from a faulting kernel, in the plugin's default ignore "
        "list): at 02:10 GPU 5 of h100-train-02 timed out and the plugin marked it unhealthy, once. A user's "
        "job then crash-looped on GPUs 0-3 for five hours: 300 Xid 13/31/43 events, two 'Processing / "
        "Skipping event' lines each (600 lines), so the plugin's last 500 lines no longer hold the mark. The log must be "
        "read by time, not by its tail: the walk names Xid 119 on GPU 5, not only the chatter.",
    )
    f.control_plane()
    f.cpu_node("cpu-01")
    sick = "h100-train-02"
    for i in (1, 2, 3, 4):
        f.gpu_node(f"h100-train-0{i}", "h100", pool="train", series=True)
    f.node(sick)["status"]["allocatable"]["nvidia.com/gpu"] = "7"
    uuid = uuid_of(sick, 5)
    f.plugin_log(
        sick,
        "I1129 02:10:44.918233       1 health.go:159] Processing event {Device:{Handle:0x7f2d4c0b9e30} "
        "EventType:8 EventData:119 GpuInstanceId:4294967295 ComputeInstanceId:4294967295}\n"
        f"I1129 02:10:44.918341       1 health.go:185] XidCriticalError: Xid=119 on Device={uuid}; "
        "marking device as unhealthy.\n"
        f"I1129 02:10:44.918377       1 server.go:276] 'nvidia.com/gpu' device marked unhealthy: {uuid}\n"
        + _chatter(
            300, 2 * 60 + 20, ("0x7f2d4c0b8a10", "0x7f2d4c0b8f58", "0x7f2d4c0b94a0", "0x7f2d4c0b99e8")
        ),
    )
    f.metrics = [m for m in f.metrics if m["metric"].get("UUID") != uuid]  # a timed-out GPU reports nothing
    for i in (1, 2):
        f.gpu_node(f"l40s-render-0{i}", "l40s", gpus=4, pool="render", operands="plugin")
    f.sick_lost_gpu("l40s-render-02", xid=79)
    f.running_pod("llm-pretrain-0", "research", sick, 8)
    return f, {
        "target": "research/llm-pretrain-0",
        "walk": [1, 5],
        "verdict": "L5_XID",
        "codes": ["L1_ALLOCATABLE_BELOW_CAPACITY", "L5_ALLOCATABLE_BELOW_CAPACITY", "L5_DEVICE_UNHEALTHY", "L5_XID"],
        "absent": ["L5_OK"],
    }  # fmt: skip


RECIPES: tuple[Recipe, ...] = (
    time_sliced_l4_replica_ids_one_gpu_lost,
    unhealthy_mark_buried_under_xid13_chatter,
)


def main() -> None:
    write_recipes(RECIPES, HERE)


if __name__ == "__main__":
    main()
