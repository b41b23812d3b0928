"""Signatures of the driver container's log (layer 3).

What gpu-driver-container's nvidia-driver scripts (ubuntu, rhel, rhcos with the
OpenShift Driver Toolkit, precompiled), nvidia-installer, apt/dnf, modprobe,
k8s-driver-manager and the validators print when the driver cannot be built or
loaded, when the host already has a driver, and when an NVSwitch system's
fabric manager is not running. Pure text matching over the log lines: any
prefix (`--timestamps`, `--prefix`, logrus, klog, bash xtrace `+ `), any case,
CRLF endings and terminal colour codes.
"""

from __future__ import annotations

import re

import msgspec

from layers.facts.logsigs import EVIDENCE_CHARS, Signature, clip, lines_of, strip_prefixes


def _sig(name: str, *phrases: str) -> Signature:
    """A case-insensitive signature; a space in a phrase matches any run of whitespace."""
    return Signature(name, tuple(p.replace(" ", r"\s+") for p in phrases))


_Q = r"""["'‘’`]?"""
MAX_LINE = EVIDENCE_CHARS  # per line: progress bars and glued messages can run to kilobytes


class Cause(msgspec.Struct, frozen=True):
    """One reason a driver could not be built or loaded, and what a person does about it."""

    name: str
    advice: str
    signature: Signature


# Most specific first: among all failing lines, the cause listed first names the failure.
CAUSES: tuple[Cause, ...] = (
    Cause(
        "secure-boot",
        "the kernel refused the unsigned NVIDIA module (Secure Boot): sign the module, use signed "
        "precompiled drivers, or disable Secure Boot",
        _sig("secure-boot", "not signed by a key that is trusted by the kernel", "key was rejected by service",
             "required key not available", "signed kernel module failed to load",
             "unsigned module loading is restricted",
             "loading of (?:unsigned )?module (?:with unavailable key )?is rejected"),
    ),
    Cause(
        "nouveau",
        "the nouveau driver holds the GPU: blacklist nouveau on the node (modprobe.d and initramfs) and reboot",
        _sig("nouveau", "nouveau kernel driver is currently in use", "failed to unload nouveau",
             "module nouveau is in use",
             r"\bnouveau (?:kernel )?(?:driver |module )?is (?:loaded|in use|active)\b"),
    ),
    Cause(
        "precompiled",
        "no precompiled NVIDIA driver package for the running kernel: boot a kernel the precompiled "
        "driver supports, or set driver.usePrecompiled=false to compile it",
        _sig("precompiled", "unable to locate package linux-(?:objects|signatures|modules)-nvidia",
             "couldn't find any package by (?:glob|regex) ['\"]?linux-(?:objects|signatures|modules)-nvidia",
             "package ['\"]?linux-(?:objects|signatures|modules)-nvidia\\S*['\"]? has no installation candidate",
             "unable to find a match:? .*kmod-nvidia", "no match for argument:? kmod-nvidia"),
    ),
    Cause(
        "package-cache",
        "the driver container cannot reach its package repositories: allow egress (or a proxy) from the "
        "node, or mirror them (driver.repoConfig); on RHEL/OpenShift check the entitlement",
        _sig("package-cache", "failed to update (?:the )?package cache", r"\bE: failed to fetch",
             r"\bE: some index files failed to download", "failed to reach .*package repositories",
             "failed to update the dnf metadata cache", "failed to download metadata for repo",
             "cannot find a valid baseurl", "errors during downloading metadata", "could not retrieve mirrorlist",
             "cannot download repomd", "rhel entitlement may be improperly deployed",
             "not registered with an entitlement server", r"curl: \(\d+\) could not resolve host",
             r"curl error \(\d+\)", "couldn't resolve host name"),
    ),
    Cause(
        "kernel-headers",
        "no kernel headers/packages for the running kernel in the driver image's repositories: boot a "
        "kernel the driver supports, use precompiled drivers, or serve the packages (driver.repoConfig)",
        _sig("kernel-headers", "could not resolve linux kernel version", "could not locate linux kernel version string",
             "unable to find the kernel source tree", "unable to locate package linux-",
             "couldn't find any package by (?:glob|regex) ['\"]?linux-",
             "package ['\"]?linux-(?:headers|image|modules)\\S*['\"]? has no installation candidate",
             "can't select (?:candidate|installed) version from package linux-",
             "no (?:package|match for argument:?) kernel-(?:headers|devel|core)",
             "unable to find a match:? .*kernel-(?:headers|devel|core)",
             "could not find (?:the )?kernel headers", "kernel headers (?:for \\S+ )?(?:are )?not (?:found|available)",
             "could not extract /lib/modules/"),
    ),
    Cause(
        "compiler",
        "the driver image has no compiler matching the one the kernel was built with: use the driver "
        "image for this OS release, or precompiled drivers",
        _sig("compiler", "unable to find the development tool", "cc version check failed",
             "the kernel was built (?:with|by) .* but the current compiler", "cannot find a compiler",
             "unable to find a match:? .*\\bgcc-\\d", "gcc: (?:command )?not found"),
    ),
    Cause(
        "module-load",
        "the NVIDIA kernel module was built but would not load: check that nouveau is blacklisted and the "
        "module matches the running kernel",
        _sig("module-load", f"unable to load the (?:nvidia )?kernel module {_Q}nvidia",
             "kernel module failed to load", f"could not insert (?:module )?{_Q}nvidia",
             "modprobe: (?:fatal|error):.*nvidia", "nvrm: no nvidia (?:gpus|devices) (?:probed|found)",
             "nvrm: the nvidia probe routine (?:was not called|failed)"),
    ),
    Cause(
        "vgpu-guest",
        "no vGPU guest driver in the driver image is compatible with the host's vGPU manager: use a "
        "driver image (vgpuDriverCatalog) that matches the host",
        _sig("vgpu-guest", "cannot find match for compatible vgpu driver"),
    ),
    Cause(
        "compile",
        "the NVIDIA kernel module did not compile against the running kernel: the driver version is likely "
        "older than the kernel supports; use a driver release that supports this kernel",
        _sig("compile", r"make(?:\[\d+\])?: \*\*\* \[[^\]]*\] error \d+",
             r"\.c:\d+:\d+: error: "),
    ),
    Cause(
        "installer",
        "nvidia-installer failed: read the driver container log and /var/log/nvidia-installer.log",
        _sig("installer", "installation has failed", "an error occurred while performing the step",
             "failed to (?:build|install) the (?:nvidia )?kernel modules?",
             "error: failed to update the nvidia driver", "no nvidia driver generated",
             r"failed to run .*(?:nvidia-installer|dkms|mkprecompiled)"),
    ),
)  # fmt: skip
_RANK = {c.advice: i for i, c in enumerate(CAUSES)}
ADVICE = {c.name: c.advice for c in CAUSES}
# apt warnings (`W: Failed to fetch …`) let the install go on: evidence only, never a failure alone.
_SOFT = re.compile(r"^W:\s")
_SOFT_NETWORK = _sig(
    "apt-warning", "failed to fetch", "some index files failed to download", "temporary failure resolving",
    "could not connect to", "could not resolve",
)  # fmt: skip

# The driver container finished its start-up: failures before it are history.
DRIVER_READY = _sig("driver-ready", "now waiting for signal")
# The OpenShift Driver Toolkit container built the modules (or found them built).
DTK_READY = _sig("dtk-ready", "nvidia drivers (?:already )?generated")
# What only a host-installed driver makes k8s-driver-manager say. Its `Could not unload NVIDIA driver
# kernel modules, driver is in use` is the operator's own module held by GPU pods during an upgrade
# (gpu-operator issues 304, 416, 2166): the manager is stuck, no host driver is implied.
MANAGER_HOST_DRIVER = _sig(
    "manager-host-driver", "detected a pre-?installed driver", "host driver detected",
    "driver is pre-?installed on (?:the )?(?:host|node)", "already pre-?installed on the (?:host|node)",
)  # fmt: skip
# The host already has a driver (validator, k8s-driver-manager) or the module is held (driver container).
HOST_DRIVER = _sig(
    "host-driver", "detected a pre-?installed driver", "host driver detected",
    "driver is pre-?installed on (?:the )?(?:host|node)", "already pre-?installed on the (?:host|node)",
    "could not unload nvidia driver kernel modules?,? driver is in use", "unable to unload (?:the )?nvidia driver",
    "an instance of the nvidia driver is already running", r"module nvidia\w* is in use",
    f"an nvidia kernel module {_Q}[\\w-]+{_Q} appears to (?:already be|be already) loaded",
)  # fmt: skip
FABRIC_NOT_READY = _sig(
    "system-not-yet-initialized", "system not yet initiali[sz]ed", "cudaErrorSystemNotReady",
    "CUDA_ERROR_SYSTEM_NOT_READY", r"\berror(?: code)? 802\b",
    r"fabric\s*manager\b(?:(?!fabric\s*manager).)*?\b(?:fail|error|not running|exited|could not)",
    r"nv-fabricmanager(?:(?!nv-fabricmanager).)*?\b(?:not found|failed|no such file)",
)  # fmt: skip
# The kernel the driver is built for, as the nvidia-driver script and nvidia-installer print it.
_KERNEL = r"(\d[\w.+~-]*[\w+~])"
_KERNEL_IN_LOG = (
    re.compile(rf"for\s+linux\s+kernel\s+version\s+{_KERNEL}", re.IGNORECASE),
    re.compile(rf"kernel\s+source\s+path:\s+'?/lib/modules/{_KERNEL}", re.IGNORECASE),
    re.compile(rf"^\++\s+KERNEL_VERSION={_KERNEL}\s*$"),  # bash xtrace of the rhel/rhcos scripts
)
# A k8s-driver-manager line worth showing next to a driver failure.
MANAGER_PROBLEM = re.compile(
    r"\b(?:error|fail(?:ed|ure)?|could\s+not|cannot|unable|timed\s+out|level=(?:error|fatal))\b",
    re.IGNORECASE,
)


def excerpt(line: str, sig: Signature | None = None) -> str:
    """The line as evidence: whole when short, else a window around what the signature matched."""
    # Signature.search would apply `unless`; the line already matched, only where matters here.
    at = next((m.start() for p in (sig.compiled if sig else ()) if (m := p.search(line))), 0)
    return clip(line, at)


class DriverLogScan(msgspec.Struct):
    """What one driver container log says after its last ready marker."""

    failures: list[tuple[str, str]] = msgspec.field(default_factory=list)  # (advice, line) in log order
    soft: list[str] = msgspec.field(default_factory=list)  # apt warnings about unreachable mirrors
    host_driver: list[str] = msgspec.field(default_factory=list)
    kernel: str | None = None  # the kernel the driver was built for, anywhere in the log


def most_specific(failures: list[tuple[str, str]]) -> str | None:
    """The most specific cause among the failures (CAUSES order), None without one."""
    return min((advice for advice, _ in failures), key=lambda a: _RANK.get(a, len(_RANK)), default=None)


def failure_of(line: str) -> tuple[str, str] | None:
    """(advice, evidence) when a line says the driver could not be built or loaded."""
    for cause in CAUSES:
        if cause.signature.matches(line):
            return cause.advice, excerpt(line, cause.signature)
    return None


def scan_driver_log(text: str | None, ready: Signature = DRIVER_READY) -> DriverLogScan:
    """Build/load failures and host-driver lines after the last `ready` marker; the kernel it names."""
    scan = DriverLogScan()
    lines = lines_of(text)
    cut = max((i for i, ln in enumerate(lines) if ready.matches(ln)), default=-1)
    for ln in lines[cut + 1 :]:
        if _SOFT.match(strip_prefixes(ln)):
            if _SOFT_NETWORK.matches(ln):
                scan.soft.append(excerpt(ln))
            continue
        hit = failure_of(ln)
        if hit:
            scan.failures.append(hit)
        if HOST_DRIVER.matches(ln):
            scan.host_driver.append(excerpt(ln, HOST_DRIVER))
    for ln in lines:
        for rx in _KERNEL_IN_LOG:
            m = rx.search(strip_prefixes(ln))
            if m:
                scan.kernel = m.group(1)
    return scan
