"""What machine a benchmark ran on, written next to every result."""

from __future__ import annotations

import os
import platform

import torch


def describe_machine() -> dict:
    """Processor, core count, memory, Python/torch versions and the accelerator, if any."""
    memory_gib = None
    if hasattr(os, "sysconf") and "SC_PHYS_PAGES" in os.sysconf_names:
        memory_gib = round(os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2**30, 1)
    processor = _cpu_model() or platform.processor() or platform.machine()
    gpu = torch.cuda.get_device_name(0) if torch.cuda.is_available() else None
    info = {
        "processor": processor,
        "cpu_count": os.cpu_count(),
        "memory_gib": memory_gib,
        "platform": platform.platform(),
        "python": platform.python_version(),
        "torch": torch.__version__,
        "torch_threads": torch.get_num_threads(),
        "gpu": gpu,
    }
    info["summary"] = (
        f"{processor}, {info['cpu_count']} cores, {memory_gib} GiB, torch {torch.__version__}"
        + (f", GPU {gpu}" if gpu else ", no GPU")
    )
    return info


def _cpu_model() -> str | None:
    try:
        with open("/proc/cpuinfo") as cpuinfo:
            for line in cpuinfo:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        return None
    return None
