"""The driver container's log signatures on real driver logs and their real-world variants.

Log lines come from the samples (13–16, 18, 26) and from GitHub issue threads, cited
beside each; where a test builds a variant (prefix, case, CRLF, colour codes) it says so.
"""

from __future__ import annotations

import pytest

from layers.facts import driverlogs as dl
from layers.facts import fleet
from tests.layers import builders as b
from tests.layers.fake_telemetry import sample_text


def with_timestamps(text: str) -> str:
    """As `kubectl logs --timestamps` prints it."""
    return "\n".join(
        f"2026-11-29T10:00:{i % 60:02d}.123456789Z {ln}" for i, ln in enumerate(text.splitlines())
    )


def cause_of(text: str) -> str:
    scan = dl.scan_driver_log(text)
    cause = dl.most_specific(scan.failures)
    assert cause is not None, text
    return next(c.name for c in dl.CAUSES if c.advice == cause)


def test_unresolved_kernel_names_the_cause_and_the_kernel_sample_14() -> None:
    for text in (sample_text("14_"), with_timestamps(sample_text("14_"))):
        scan = dl.scan_driver_log(text)
        assert scan.kernel == "3.10.0-862.el7.x86_64"
        cause, line = scan.failures[0]
        assert cause.startswith("no kernel headers/packages for the running kernel")
        assert line.endswith("Could not resolve Linux kernel version")
        assert scan.host_driver == []


def test_unsigned_module_is_secure_boot_first_sample_15() -> None:
    failed = dl.scan_driver_log(sample_text("15_"))
    causes = [cause for cause, _ in failed.failures]
    assert causes[0].startswith("the kernel refused the unsigned NVIDIA module")
    assert any(c.startswith("the NVIDIA kernel module was built but would not load") for c in causes)


def test_failures_before_the_ready_marker_are_history_sample_14() -> None:
    recovered = dl.scan_driver_log(sample_text("14_") + "\nDone, now waiting for signal\n")
    # The kernel is read from the whole log; failures only after the last ready marker.
    assert recovered.failures == [] and recovered.kernel == "3.10.0-862.el7.x86_64"


def test_fleet_majority_and_split() -> None:
    nodes = [b.gpu_node(f"n{i}") for i in range(3)]
    versions = {"n0": "550.90.07", "n1": "550.90.07", "n2": "535.183.01"}
    spread = fleet.spread(nodes, "driver", lambda n: versions[n["metadata"]["name"]])
    assert spread.majority == "550.90.07" and spread.odd_nodes == ["n2"]
    assert spread.odd("n2") and not spread.odd("n0")
    split = fleet.spread(nodes[1:], "driver", lambda n: versions[n["metadata"]["name"]])
    assert split.majority is None and split.odd("n1") and split.odd("n2")


# --- variants of the build/load failures -------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "cause", "line"),
    [
        # gpu-operator#234 (OCP 4.7, rhel8 image, bash xtrace): dnf cannot find the running kernel's headers
        (
            "Installing Linux kernel headers...\n"
            "+ echo 'Installing Linux kernel headers...'\n"
            "+ dnf -q -y --releasever=8.3 install kernel-headers-4.18.0-240.23.2.el8_3.x86_64 "
            "kernel-devel-4.18.0-240.23.2.el8_3.x86_64\n"
            "Error: Unable to find a match: kernel-headers-4.18.0-240.23.2.el8_3.x86_64 "
            "kernel-devel-4.18.0-240.23.2.el8_3.x86_64\n",
            "kernel-headers",
            "Error: Unable to find a match: kernel-headers-4.18.0-240.23.2.el8_3.x86_64 "
            "kernel-devel-4.18.0-240.23.2.el8_3.x86_64",
        ),
        # gpu-operator#190: only kernel-devel is missing
        (
            "**Error: Unable to find a match: kernel-devel-4.18.0-240.22.1.el8_3.x86_64**\n",
            "kernel-headers",
            "**Error: Unable to find a match: kernel-devel-4.18.0-240.22.1.el8_3.x86_64**",
        ),
        # ubuntu22.04 script: apt has no headers for a cloud kernel (apt's E: on stderr)
        (
            "Installing Linux kernel headers...\nE: Unable to locate package linux-headers-6.8.0-1015-aws\n",
            "kernel-headers",
            "E: Unable to locate package linux-headers-6.8.0-1015-aws",
        ),
        (
            "E: Couldn't find any package by glob 'linux-image-5.15.0-1040-azure'\n",
            "kernel-headers",
            "E: Couldn't find any package by glob 'linux-image-5.15.0-1040-azure'",
        ),
        # precompiled ubuntu image (precompiled/nvidia-driver apt-get install linux-objects-nvidia-…)
        (
            "Starting installation of NVIDIA driver branch 550 for Linux kernel version 6.8.0-1015-aws\n"
            "Installing Closed NVIDIA driver kernel modules...\n"
            "E: Unable to locate package linux-objects-nvidia-550-server-6.8.0-1015-aws\n"
            "E: Unable to locate package linux-modules-nvidia-550-server-6.8.0-1015-aws\n",
            "precompiled",
            "E: Unable to locate package linux-objects-nvidia-550-server-6.8.0-1015-aws",
        ),
        # gpu-operator#338 then the rhel9 script's own verdict on the entitlement
        (
            "Error: Unable to find a match: elfutils-libelf-devel.x86_64\n"
            "FATAL: failed to install elfutils-libel-devel. RHEL entitlement may be improperly deployed.\n",
            "package-cache",
            "FATAL: failed to install elfutils-libel-devel. RHEL entitlement may be improperly deployed.",
        ),
        (
            "FATAL: failed to reach RHEL package repositories.  Ensure that the cluster can access the "
            "proper networks.\n",
            "package-cache",
            "FATAL: failed to reach RHEL package repositories.  Ensure that the cluster can access the "
            "proper networks.",
        ),
        # Secure Boot as modprobe (xtrace around it in _load_driver) and the kernel lockdown say it
        (
            "+ modprobe nvidia\nmodprobe: ERROR: could not insert 'nvidia': Key was rejected by service\n",
            "secure-boot",
            "modprobe: ERROR: could not insert 'nvidia': Key was rejected by service",
        ),
        (
            "Lockdown: modprobe: unsigned module loading is restricted; see man kernel_lockdown.7\n",
            "secure-boot",
            "Lockdown: modprobe: unsigned module loading is restricted; see man kernel_lockdown.7",
        ),
        # nvidia-installer's compiler check (nvidia-installer/ README text)
        (
            "ERROR: Unable to find the development tool `cc` in your path; please make sure that you have "
            "the package 'gcc' installed.\n",
            "compiler",
            "ERROR: Unable to find the development tool `cc` in your path; please make sure that you have "
            "the package 'gcc' installed.",
        ),
        (
            "Error: Unable to find a match: gcc-11.4.1\n",
            "compiler",
            "Error: Unable to find a match: gcc-11.4.1",
        ),
        # nouveau holds the GPU (troubleshooting.rst, nvidia-installer)
        (
            "ERROR: The Nouveau kernel driver is currently in use by your system.  This driver is "
            "incompatible with the NVIDIA driver.\n",
            "nouveau",
            "ERROR: The Nouveau kernel driver is currently in use by your system.  This driver is "
            "incompatible with the NVIDIA driver.",
        ),
        # module build breaks on a kernel newer than the driver
        (
            "make[2]: *** [scripts/Makefile.build:243: /usr/src/nvidia-535.104.05/kernel/nvidia/nv.o] Error 1\n",
            "compile",
            "make[2]: *** [scripts/Makefile.build:243: /usr/src/nvidia-535.104.05/kernel/nvidia/nv.o] Error 1",
        ),
        # modprobe finds no module for the kernel, insmod form of the refusal
        (
            "modprobe: FATAL: Module nvidia not found in directory /lib/modules/6.8.0-35-generic\n",
            "module-load",
            "modprobe: FATAL: Module nvidia not found in directory /lib/modules/6.8.0-35-generic",
        ),
        (
            "insmod: ERROR: could not insert module nvidia.ko: Invalid module format\n",
            "module-load",
            "insmod: ERROR: could not insert module nvidia.ko: Invalid module format",
        ),
        # OpenShift Driver Toolkit container
        ("FATAL: no NVIDIA driver generated ...\n", "installer", "FATAL: no NVIDIA driver generated ..."),
        # vGPU guest driver (nvidia-driver _find_vgpu_driver_version)
        (
            "cannot find match for compatible vgpu driver from available list, please check "
            "/var/log/vgpu-util.log for more details...\n",
            "vgpu-guest",
            "cannot find match for compatible vgpu driver from available list, please check "
            "/var/log/vgpu-util.log for more details...",
        ),
    ],
)
def test_failure_variants_name_their_cause(text: str, cause: str, line: str) -> None:
    for variant in (text, with_timestamps(text)):
        assert cause_of(variant) == cause
        assert any(ln.endswith(line) for _, ln in dl.scan_driver_log(variant).failures)
    assert cause_of(text.upper()) == cause  # case differences between images and versions


def test_most_specific_cause_wins_whatever_the_log_order() -> None:
    # nvidia-installer prints its generic failure before the Secure Boot detail in some versions.
    text = (
        "ERROR: Installation has failed.  Please see the file '/var/log/nvidia-installer.log' for details.\n"
        "ERROR: The kernel module failed to load. Secure boot is enabled on this system, so this is likely "
        "because it was not signed by a key that is trusted by the kernel.\n"
    )
    assert cause_of(text) == "secure-boot"


def test_apt_warnings_alone_are_not_a_failure_but_explain_a_missing_package() -> None:
    warn = (
        "W: Failed to fetch http://archive.ubuntu.com/ubuntu/dists/jammy/InRelease  "
        "Temporary failure resolving 'archive.ubuntu.com'\n"
        "W: Some index files failed to download. They have been ignored, or old ones used instead.\n"
    )
    alone = dl.scan_driver_log(warn + "Resolving Linux kernel version...\n")
    assert alone.failures == [] and len(alone.soft) == 2
    both = dl.scan_driver_log(warn + "Could not resolve Linux kernel version\n")
    assert dl.most_specific(both.failures) == dl.ADVICE["kernel-headers"] and both.soft[0].startswith(
        "W: Failed to fetch"
    )


@pytest.mark.parametrize(
    "line",
    [
        # kernel taint notice when Secure Boot is off: the module loaded fine
        "nvidia: module verification failed: signature and/or required key missing - tainting kernel",
        # kbuild warning the script silences with IGNORE_CC_MISMATCH
        "warning: the compiler differs from the one used to build the kernel",
        # rhel9 script: falls back to the major version and goes on
        "Unable to resolve RHEL version from kernel version",
        # the fast path of a healthy restart
        "The NVIDIA driver is already loaded with the desired configuration, performing userspace-only install",
        # old k8s-driver-manager: the previous containerized driver, about to be evicted and unloaded
        "nvidia driver module is already loaded with refcount 236",
        "Unloading NVIDIA driver kernel modules...",
        "Stopping NVIDIA fabric manager daemon...",
        "Starting NVIDIA fabric manager daemon...",
        # nvidia-installer's notes on a healthy install (gpu-operator#163)
        "Unable to determine if Secure Boot is enabled: No such file or directory",
        "WARNING: Unable to determine the default X library path. The path /tmp/null/lib will be used",
        # samples/26: an NVSwitch non-fatal error in fabricmanager.log is not FM missing
        "[Feb 27 2025 15:10:02] [ERROR] [tid 12727] detected NVSwitch non-fatal error 12028 on fid 0 on "
        "NVSwitch pci bus id 00000000:86:00.0 physical id 3 port 61",
    ],
)
def test_near_misses_are_not_failures(line: str) -> None:
    scan = dl.scan_driver_log(line)
    assert scan.failures == [] and scan.host_driver == []
    assert not dl.FABRIC_NOT_READY.matches(line)


def test_sample_16_mentions_nouveau_but_is_a_module_load_failure() -> None:
    assert cause_of(sample_text("16_")) == "module-load"


@pytest.mark.parametrize(
    "line",
    [
        # nvidia-installer (Apollo#6308, nvidia-docker#62): module held by the host's driver
        "ERROR: An NVIDIA kernel module 'nvidia-drm' appears to already be loaded in your kernel.  This may "
        "be because it is in use (for example, by an X server, a CUDA program, or the NVIDIA Persistence "
        "Daemon)",
        "WARNING: An NVIDIA kernel module 'nvidia-uvm' appears to be already loaded in your kernel.",
        # rmmod (tinygrad/open-gpu-kernel-modules#20)
        "rmmod: ERROR: Module nvidia_drm is in use",
        "rmmod: ERROR: Module nvidia is in use by: nvidia_uvm nvidia_modeset",
        # k8s-driver-manager (Go, logrus with DisableQuote) and the validator (logrus, quoted)
        "time=2026-02-25T08:26:01Z level=info msg=Host driver detected: 550.127.05",
        "time=2026-02-25T08:26:01Z level=info msg=NVIDIA GPU driver is already pre-installed on the node, "
        "disabling the containerized driver",
        "time=2026-02-25T08:27:01Z level=fatal msg=driver is pre-installed on host",
        'time="2025-03-19T20:41:03Z" level=info msg="Detected a pre-installed driver on the host"',
    ],
)
def test_host_driver_variants(line: str) -> None:
    assert dl.HOST_DRIVER.matches(line)


def test_colour_codes_crlf_and_kubectl_prefix_do_not_hide_a_failure() -> None:
    text = (
        "[pod/nvidia-driver-daemonset-8t4mg/nvidia-driver-ctr] Building kernel modules\r\n"
        "[pod/nvidia-driver-daemonset-8t4mg/nvidia-driver-ctr] \x1b[1;31mERROR:\x1b[0m Unable to load the "
        "kernel module 'nvidia.ko'.\r\n"
    )
    scan = dl.scan_driver_log(text)
    assert scan.failures == [
        (
            dl.ADVICE["module-load"],
            "[pod/nvidia-driver-daemonset-8t4mg/nvidia-driver-ctr] ERROR: Unable to load the kernel module "
            "'nvidia.ko'.",
        )
    ]


def test_a_failure_glued_to_a_progress_line_is_cut_around_the_match() -> None:
    # sample 14's glued message, after a kilobyte-long progress line
    line = (
        "Uncompressing NVIDIA Accelerated Graphics Driver"
        + "." * 5000
        + "Could not resolve Linux kernel version"
    )
    (_, evidence), *_ = dl.scan_driver_log(line).failures
    assert len(evidence) <= dl.MAX_LINE + 2 and evidence.endswith("Could not resolve Linux kernel version")
    assert evidence.startswith("…")


@pytest.mark.parametrize(
    ("text", "kernel"),
    [
        # bash xtrace of the echo (gpu-operator#144, OKD/Fedora): the quote and \n are not the kernel
        (
            "+ echo -e 'Starting installation of NVIDIA driver version 450.51.05 for Linux kernel version "
            "5.10.12-200.fc33.x86_64\\n'\n",
            "5.10.12-200.fc33.x86_64",
        ),
        # rhel8 xtrace (gpu-operator#110)
        ("++ uname -r\n+ KERNEL_VERSION=4.18.0-193.29.1.el8_2.x86_64\n", "4.18.0-193.29.1.el8_2.x86_64"),
        # precompiled banner (gpu-operator#457)
        (
            "Starting installation of NVIDIA driver branch 515 for Linux kernel version 5.4.0-1068-fips\n",
            "5.4.0-1068-fips",
        ),
    ],
)
def test_kernel_read_from_banner_variants(text: str, kernel: str) -> None:
    assert dl.scan_driver_log(text).kernel == kernel


@pytest.mark.parametrize(
    "line",
    [
        "Failed to allocate device vector A (error code system not yet initialized)!",  # samples/18
        # PyTorch on an NVSwitch node without fabric manager (gpu-operator#2781: CUDA error 802)
        "RuntimeError: Unexpected error from cudaGetDeviceCount(). Did you run some cuda functions before "
        "calling NumCudaDevices() that might have already set an error? Error 802: system not yet initialized",
        "cuInit failed: CUDA_ERROR_SYSTEM_NOT_READY",
        "CUDA error: cudaErrorSystemNotReady",
        # cube-studio#29: the fabric manager start-up script
        '"/usr/bin/nv-fabricmanager -c /usr/share/nvidia/nvswitch/fabricmanager.cfg" failed! Exit code: 1',
    ],
)
def test_fabric_manager_variants(line: str) -> None:
    assert dl.FABRIC_NOT_READY.matches(line)


def test_manager_problem_lines() -> None:
    assert dl.MANAGER_PROBLEM.search(
        "time=2026-02-25T08:31:00Z level=fatal msg=cannot proceed until all GPU pods are drained from the node"
    )
    assert dl.MANAGER_PROBLEM.search("Unable to cleanup driver modules, attempting again with node drain...")
    # client-go's in-cluster warning at every start (gpu-operator#2166) is not a problem
    assert not dl.MANAGER_PROBLEM.search(
        "W0225 08:26:00.486943 1515429 client_config.go:667] Neither --kubeconfig nor --master was specified."
        "  Using the inClusterConfig.  This might not work."
    )
