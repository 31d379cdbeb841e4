"""What machine a benchmark ran on, written next to every result."""

from __future__ import annotations

import datetime
import os
import platform
import subprocess
import sys
from pathlib import Path

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
    # what was measured: the commit checked out (with "-dirty" when tracked files had changes)
    # and when, so a reader can tell a result from the code it measured
    info["commit"] = measured_commit()
    # and which benchmark made it, whose MEASURES say what code its figures measure
    # (benchmarks.freshness compares that code's last change with the commit)
    info["script"] = running_script()
    info["date"] = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    info["summary"] = (
        f"{processor}, {info['cpu_count']} cores, {memory_gib} GiB, torch {torch.__version__}"
        + (f", GPU {gpu}" if gpu else ", no GPU")
    )
    return info


def short_name(machine: dict) -> str:
    """A recorded machine in a few words, as a table cell: ``AMD EPYC, 2 cores`` (and its GPU).

    :param machine: what :func:`describe_machine` recorded (older results lack some keys).
    """
    processor = (machine.get("processor") or "an unrecorded processor").replace("(R)", "")
    name = f"{processor.removesuffix(' Processor')}, {machine.get('cpu_count', '?')} cores"
    return name + (f", {machine['gpu']}" if machine.get("gpu") else "")


def measured_commit() -> str | None:
    """The repository's commit (``abc1234``, ``abc1234-dirty`` with uncommitted changes to
    tracked files), or ``None`` outside a git checkout."""
    root = Path(__file__).resolve().parent.parent
    try:
        commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=root, capture_output=True,
                                text=True, timeout=10, check=True).stdout.strip()
        changed = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"], cwd=root,
                                 capture_output=True, text=True, timeout=10, check=True).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return None
    return f"{commit}-dirty" if changed else commit


def running_script() -> str | None:
    """The benchmark script being run, as a path in the repository (``benchmarks/ppo_speed.py``
    for ``python -m benchmarks.ppo_speed``), or ``None`` when the caller is not one."""

    main = sys.modules.get("__main__")
    spec = getattr(main, "__spec__", None)
    if spec is not None and spec.name.startswith("benchmarks."):
        return spec.name.replace(".", "/") + ".py"
    file = getattr(main, "__file__", None)
    root = Path(__file__).resolve().parent
    if file and Path(file).resolve().parent == root:
        return f"benchmarks/{Path(file).name}"
    return None


def _cpu_model() -> str | None:
    try:
        with open("/proc/cpuinfo") as cpuinfo:
            for line in cpuinfo:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        return None
    return None


def recorded_args(args: object) -> dict:
    """A script's arguments as written to a result: paths inside the repository made relative,
    others cut to their last part (no machine's paths in a result).

    :param args: the ``argparse.Namespace`` of the benchmark.
    """
    import os
    from pathlib import Path

    root = Path(__file__).resolve().parent.parent
    recorded = {}
    for key, value in vars(args).items():
        if isinstance(value, os.PathLike):
            value = os.fspath(value)
        if isinstance(value, str) and os.path.isabs(value):
            path = Path(os.path.abspath(value))
            if path.is_relative_to(root):
                value = str(path.relative_to(root))
            elif path.resolve().is_relative_to(root):
                value = str(path.resolve().relative_to(root))
            else:  # a path of this machine only (an interpreter, a cache): its name
                value = path.name
        recorded[key] = value
    return recorded
