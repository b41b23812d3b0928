"""Signatures of the driver container's log (layer 3).

What gpu-driver-container's nvidia-driver script, nvidia-installer, apt/dnf,
k8s-driver-manager and the validators print when the driver cannot be built or
loaded, when the host already has a driver, and when an NVSwitch system's
fabric manager is not running. Pure text matching over the log lines.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from layers.logsigs import Signature, lines_of


def _sig(name: str, *phrases: str) -> Signature:
    """A case-insensitive signature; a space in a phrase matches any run of whitespace."""
    return Signature(name, tuple(re.compile(p.replace(" ", r"\s+"), re.IGNORECASE) for p in phrases))


_Q = r"""["'‘’`]?"""
# Build/load failures of the driver container (gpu-driver-container's nvidia-driver
# script, nvidia-installer, apt/dnf), most specific first: the first match names the cause.
BUILD_FAILURES: tuple[tuple[Signature, str], ...] = (
    (
        _sig("secure-boot", "not signed by a key that is trusted by the kernel", "key was rejected by service",
             "required key not available"),
        "the kernel refused the unsigned NVIDIA module (Secure Boot): sign the module, use signed "
        "precompiled drivers, or disable Secure Boot",
    ),
    (
        _sig("kernel-headers", "could not resolve linux kernel version", "could not locate linux kernel version string",
             "unable to find the kernel source tree", "unable to locate package linux-(?:headers|image|modules)",
             "no (?:package|match for argument:?) kernel-(?:headers|devel)",
             "unable to find a match:? kernel-(?:headers|devel|core)"),
        "no kernel headers/packages for the running kernel in the driver image's repositories: boot a "
        "kernel the driver supports, use precompiled drivers, or serve the packages (driver.repoConfig)",
    ),
    (
        _sig("package-cache", "failed to update (?:the )?package cache", r"\b[EW]: failed to fetch",
             "some index files failed to download", "temporary failure resolving", "could not resolve host",
             "failed to download metadata for repo", "cannot find a valid baseurl",
             "errors during downloading metadata", "could not retrieve mirrorlist", "cannot download repomd"),
        "the driver container cannot reach its package repositories: allow egress (or a proxy) from the "
        "node, or mirror them (driver.repoConfig)",
    ),
    (
        _sig("module-load", f"unable to load the (?:nvidia )?kernel module {_Q}nvidia",
             "kernel module failed to load", f"could not insert {_Q}nvidia", "modprobe: (?:fatal|error):.*nvidia"),
        "the NVIDIA kernel module was built but would not load: check that nouveau is blacklisted and the "
        "module matches the running kernel",
    ),
    (
        _sig("installer", "installation has failed", "an error occurred while performing the step",
             "failed to (?:build|install) the (?:nvidia )?kernel modules?",
             "error: failed to update the nvidia driver"),
        "nvidia-installer failed: read the driver container log and /var/log/nvidia-installer.log",
    ),
)  # fmt: skip
# The driver container finished its start-up: failures before it are history.
DRIVER_READY = _sig("driver-ready", "now waiting for signal")
# The host already has a driver (validator) or the module is held by one (driver container).
HOST_DRIVER = _sig(
    "host-driver", "detected a pre-?installed driver",
    "could not unload nvidia driver kernel modules?,? driver is in use",
    "an instance of the nvidia driver is already running", "module nvidia\\w* is in use",
    f"an nvidia kernel module {_Q}[\\w-]+{_Q} appears to (?:already be|be already) loaded",
)  # fmt: skip
FABRIC_NOT_READY = _sig(
    "system-not-yet-initialized", "system not yet initiali[sz]ed", "cudaErrorSystemNotReady",
    r"fabric\s*manager\b.*\b(?:fail|error|not running|exited|could not)",
    r"nv-fabricmanager.*\b(?:not found|failed|no such file)",
)  # fmt: skip
# The kernel the driver is built for, as the nvidia-driver script and nvidia-installer print it.
_KERNEL_IN_LOG = (
    re.compile(r"for\s+linux\s+kernel\s+version\s+(\S+)", re.IGNORECASE),
    re.compile(r"kernel\s+source\s+path:\s+'?/lib/modules/([^/'\s]+)", re.IGNORECASE),
)
# A k8s-driver-manager line worth showing next to a build failure.
MANAGER_PROBLEM = re.compile(r"\b(?:error|fail(?:ed|ure)?|could\s+not|unable)\b", re.IGNORECASE)


@dataclass
class DriverLogScan:
    """What one driver container log says after its last ready marker."""

    failures: list[tuple[str, str]] = field(default_factory=list)  # (cause, line), most specific cause
    host_driver: list[str] = field(default_factory=list)
    kernel: str | None = None  # the kernel the driver was built for, anywhere in the log


def scan_driver_log(text: str | None) -> DriverLogScan:
    """Build/load failures and host-driver lines after the last DRIVER_READY; the kernel it names."""
    scan = DriverLogScan()
    lines = lines_of(text)
    cut = max((i for i, ln in enumerate(lines) if DRIVER_READY.matches(ln)), default=-1)
    for ln in lines[cut + 1 :]:
        for sig, cause in BUILD_FAILURES:
            if sig.matches(ln):
                scan.failures.append((cause, ln))
                break
        if HOST_DRIVER.matches(ln):
            scan.host_driver.append(ln)
    for ln in lines:
        for rx in _KERNEL_IN_LOG:
            m = rx.search(ln)
            if m:
                scan.kernel = m.group(1)
    return scan
