"""Sandbox jobs written to escape, by someone who read the sandbox's source.

Each job first switches the Python-level guard off, as a program that reached it can
(its ``_deny`` becomes a no-op: nothing the audit hooks see is refused any more), so
that only the kernel stands between the job and the machine. Each then tries one kind
of harm and reports what happened; the tests check the harm itself (a marker file, a
datagram, a secret in any output, a process left behind), never only the report.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable
from typing import Any


def _guard_off(guard: Any) -> None:
    guard._deny = lambda what, frame: None


def _attempt(action: Callable[[], Any]) -> str:
    try:
        return f"done: {action()!r}"[:300]
    except BaseException as error:  # noqa: B036 - report whatever stopped it
        return f"{type(error).__name__}: {error}"[:300]


def run_commands(payload: dict, guard: Any) -> dict:
    """Start programs and processes in every way Python offers."""
    _guard_off(guard)
    marker = payload["marker"]

    def fork_then_exec() -> int:
        pid = os.fork()
        if pid == 0:
            os.setsid()
            os.execv("/bin/sh", ["/bin/sh", "-c", f"sleep 30; touch {marker}"])
        return pid

    return {
        "os.system": _attempt(lambda: os.system(f"touch {marker}")),
        "subprocess": _attempt(lambda: subprocess.run(["/usr/bin/touch", marker], check=True)),
        "posixsubprocess": _attempt(lambda: subprocess.Popen(["/bin/sh", "-c", f"touch {marker}"],
                                                             start_new_session=True)),
        "fork_exec": _attempt(fork_then_exec),
        "setsid": _attempt(os.setsid),
    }


def touch_files(payload: dict, guard: Any) -> dict:
    """Write and read outside the run directory, from Python and from torch's C++."""
    import torch

    _guard_off(guard)
    outside = payload["outside"]

    def read(path: str) -> str:
        with open(path) as file:
            return file.read()

    def write(path: str) -> None:
        with open(path, "w") as file:
            file.write("pwned")

    return {
        "write": _attempt(lambda: write(os.path.join(outside, "marker"))),
        "torch.save": _attempt(lambda: torch.save(torch.zeros(1), os.path.join(outside, "marker.pt"))),
        "symlink_out": _attempt(lambda: os.symlink(outside, "link")),
        "read_secret": _attempt(lambda: read(os.path.join(outside, "secret.txt"))),
        "read_torch": _attempt(lambda: torch.from_file(os.path.join(outside, "secret.txt"), size=8,
                                                       dtype=torch.uint8).tolist()),
        "read_passwd": _attempt(lambda: read("/etc/passwd")),
        "list_root_home": _attempt(lambda: os.listdir(os.path.expanduser("~root"))),
        "read_python": _attempt(lambda: len(read(os.__file__))),  # allowed: Python's own files
    }


def change_metadata(payload: dict, guard: Any) -> dict:
    """Change the mode (set-user-ID too), owner, times and extended attributes of the
    caller's files outside the run directory and of one inside it: Landlock does not cover
    these; the seccomp filter must."""
    _guard_off(guard)
    victim, inside = payload["victim"], "inside.txt"
    with open(inside, "w") as file:
        file.write("mine")
    report: dict[str, str] = {}
    for where, path in (("outside", victim), ("inside", inside)):
        report[f"chmod_setuid_{where}"] = _attempt(lambda path=path: os.chmod(path, 0o4777))
        report[f"chown_{where}"] = _attempt(lambda path=path: os.chown(path, os.getuid(), os.getgid()))
        report[f"utime_{where}"] = _attempt(lambda path=path: os.utime(path, (0, 0)))
        report[f"setxattr_{where}"] = _attempt(lambda path=path: os.setxattr(path, "user.rewardlab", b"x"))
    with open(inside) as file:
        report["fchmod_inside"] = _attempt(lambda: os.fchmod(file.fileno(), 0o4777))
    return report


def look_around(payload: dict, guard: Any) -> dict:
    """Look for other processes, their environment and the caller's secret."""
    _guard_off(guard)
    found: dict[str, str] = {"pids": _attempt(lambda: sorted(p for p in os.listdir("/proc") if p.isdigit()))}
    for pid in [p for p in os.listdir("/proc") if p.isdigit()]:
        for name in ("environ", "cmdline"):
            try:
                with open(f"/proc/{pid}/{name}", "rb") as file:
                    found[f"{pid}/{name}"] = file.read().decode(errors="replace")[:2000]
            except OSError as error:
                found[f"{pid}/{name}"] = str(error)
    found["own_environ"] = repr(dict(os.environ))
    found["parent"] = str(os.getppid())
    found["hostname"] = _attempt(socket.gethostname)
    return found


def use_the_network(payload: dict, guard: Any) -> dict:
    """UDP and TCP to a listener of the caller, and the fork server's own socket."""
    _guard_off(guard)

    def udp() -> int:
        sender = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        return sender.sendto(b"escaped", ("127.0.0.1", payload["udp_port"]))

    def tcp() -> None:
        socket.create_connection(("127.0.0.1", payload["tcp_port"]), timeout=2).sendall(b"escaped")

    def fork_server() -> None:
        client = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        client.connect(payload["fork_server"])

    def abstract() -> None:
        client = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        client.connect("\0" + payload["abstract"])

    return {"udp": _attempt(udp), "tcp": _attempt(tcp), "fork_server": _attempt(fork_server),
            "abstract_unix": _attempt(abstract)}


def signal_others(payload: dict, guard: Any) -> dict:
    """Signal the caller, the fork server and every process it can name."""
    _guard_off(guard)
    return {
        "caller": _attempt(lambda: os.kill(payload["caller_pid"], signal.SIGKILL)),
        "server": _attempt(lambda: os.kill(payload["server_pid"], signal.SIGKILL)),
        "parent": _attempt(lambda: os.kill(os.getppid(), signal.SIGKILL)),
    }


def _channel_fd() -> int:
    for name in os.listdir("/proc/self/fd"):
        try:
            target = os.readlink(f"/proc/self/fd/{name}")
        except OSError:
            continue
        if target.startswith("socket:"):
            return int(name)
    raise RuntimeError("no socket found")


def forge_a_frame(payload: dict, guard: Any) -> dict:
    """Write a frame of its own on the result channel: nested past any parser's limit."""
    import struct

    _guard_off(guard)
    depth = payload["depth"]
    data = ("[" * depth + "]" * depth).encode() if depth else b'{"result": {"fitness": Infinity}}'
    os.write(_channel_fd(), struct.pack(">I", len(data)) + data)
    os.write(_channel_fd(), struct.pack(">I", 12) + b'{"exit": 0}\n')
    return {"forged": True}


def fill_the_disk(payload: dict, guard: Any) -> dict:
    """Write until something stops it."""
    _guard_off(guard)
    block = b"\0" * 2**20
    written = 0
    for index in range(10_000):
        with open(f"fill_{index}", "wb") as file:
            for _ in range(8):
                file.write(block)
                written += 1
    return {"written_mb": written}


def plant_links(payload: dict, guard: Any) -> dict:
    """Links in the run directory where the caller writes and reads its files."""
    _guard_off(guard)
    for name in ("result.json", "worker.log.tail", "program.py"):
        try:
            os.unlink(name)
        except OSError:
            pass
        os.symlink(payload["victim"], name)
    os.unlink("worker.log")
    os.symlink(payload["secret"], "worker.log")
    sys.stdout.flush()
    raise RuntimeError("fail, so that the caller reads the log")


def read_the_users_folder(payload: dict, guard: Any) -> dict:
    """Read the secret next to the user's env module, list its folder, and use the env itself."""
    _guard_off(guard)
    from rewardlab import envs

    folder = payload["folder"]

    def secret() -> str:
        with open(os.path.join(folder, ".env")) as file:
            return file.read()

    def module_file() -> int:
        with open(os.path.join(folder, payload["module"] + ".py")) as file:
            return len(file.read())

    def step_the_env() -> list[float]:
        env = envs.make(payload["env_id"], num_envs=2, seed=0)
        env.reset()
        return env.step([1, 1])[0][:, 0].tolist()

    return {"secret": _attempt(secret), "listing": _attempt(lambda: os.listdir(folder)),
            "module": _attempt(module_file), "env": _attempt(step_the_env)}


def read_the_prefix(payload: dict, guard: Any) -> dict:
    """Read files of the Python installation outside its libraries (a ``pip.conf`` with an
    index token, a virtual environment's settings and scripts), and, as a program may, the
    standard library and site-packages."""
    import torch

    _guard_off(guard)

    def read(path: str) -> int:
        with open(path, "rb") as file:
            return len(file.read())

    report = {path: _attempt(lambda path=path: read(path)) for path in payload["paths"]}
    report["listing"] = _attempt(lambda: os.listdir(sys.prefix))
    report["stdlib"] = _attempt(lambda: read(os.__file__))
    report["site-packages"] = _attempt(lambda: read(torch.__file__))
    return report


def hold_memory(payload: dict, guard: Any) -> dict:
    """Hold more memory than the address-space limit allows, where RLIMIT_AS does not count
    it: pages of a memfd written through write(), SysV shared memory touched and detached."""
    import ctypes

    _guard_off(guard)
    size_mb = payload["mb"]
    chunk = b"\1" * 2**20
    held = {"memfd": 0, "sysv_shm": 0}
    files = []
    try:
        while held["memfd"] < size_mb:
            fd = os.memfd_create("held")
            files.append(fd)
            for _ in range(min(200, size_mb - held["memfd"])):  # each file under RLIMIT_FSIZE
                os.write(fd, chunk)
                held["memfd"] += 1
    except OSError as error:
        held["memfd_error"] = str(error)
    libc = ctypes.CDLL(None, use_errno=True)
    libc.shmat.restype = ctypes.c_void_p
    libc.shmat.argtypes = [ctypes.c_int, ctypes.c_void_p, ctypes.c_int]
    libc.shmdt.argtypes = [ctypes.c_void_p]
    while held["sysv_shm"] < size_mb:  # segments that fit in the address space once at a time
        part = min(200, size_mb - held["sysv_shm"]) * 2**20
        segment = libc.shmget(0, ctypes.c_size_t(part), 0o1600)  # IPC_PRIVATE, IPC_CREAT
        address = libc.shmat(segment, None, 0) if segment >= 0 else None
        if address in (None, ctypes.c_void_p(-1).value):
            held["shm_error"] = os.strerror(ctypes.get_errno())
            break
        ctypes.memset(address, 1, part)
        libc.shmdt(ctypes.c_void_p(address))  # the segment stays, out of the address space
        held["sysv_shm"] += part // 2**20
    queue = libc.msgget(0, 0o1600)
    held["msgget"] = "refused" if queue < 0 else "created"
    return held


def allocate_past_the_quota(payload: dict, guard: Any) -> dict:
    """Allocate disk blocks without writing them (fallocate): gigabytes in milliseconds."""
    _guard_off(guard)
    for index in range(payload["files"]):
        fd = os.open(f"allocated_{index}", os.O_CREAT | os.O_WRONLY, 0o600)
        try:
            os.posix_fallocate(fd, 0, payload["mb"] * 2**20)
        finally:
            os.close(fd)
    return {"allocated_mb": payload["files"] * payload["mb"]}


def hide_from_the_quota(payload: dict, guard: Any) -> dict:
    """Write below a chain of folders whose path is longer than the kernel's limit, or
    inside a folder made without permissions: a scan by path reaches neither."""
    _guard_off(guard)
    guard._state.busy = True  # the audit hook returns at once in this thread
    if payload["how"] == "deep":
        for _ in range(20):
            os.mkdir("d" * 250)
            os.chdir("d" * 250)
    else:
        os.mkdir("closed", 0o300)  # a mode given at creation is no chmod: no one else may list it
        os.chdir("closed")
    block = b"\1" * 2**20
    for index in range(payload["files"]):
        with open(f"hidden_{index}", "wb") as file:
            for _ in range(payload["mb"]):
                file.write(block)
    time.sleep(1.0)  # give the watchdog many looks
    return {"written_mb": payload["files"] * payload["mb"]}


# ----------------------------------------- an evaluation job that lies
# The program runs in the job's companion, which holds no channel to the caller; the
# caller checks what the job sends all the same, as if the job itself had been taken over.
def _evaluated(payload: dict, guard: Any, **extras: Any) -> dict:
    """The real evaluation job's result, then the guard off."""
    from rewardlab.llm_reward.training.job import evaluation_job

    result = evaluation_job(payload, guard, **extras)
    _guard_off(guard)
    guard._state.busy = True  # the audit hook returns at once in this thread
    return result


def misreport_per_state(payload: dict, guard: Any, **extras: Any) -> dict:
    """A per-state mode the caller cannot look up (a list is not hashable)."""
    return {**_evaluated(payload, guard, **extras), "per_state": True, "per_state_mode": ["loop"]}


def report_extra_checkpoints(payload: dict, guard: Any, **extras: Any) -> dict:
    """Many more checkpoints than asked for: the caller plays evaluation episodes for each."""
    result = _evaluated(payload, guard, **extras)
    for run in result["seeds"]:
        run["progress"] = run["progress"][-1:] * 50
        run["policies"] = run["policies"][-1:] * 50
    return result


def report_its_own_fitness(payload: dict, guard: Any, **extras: Any) -> dict:
    """A fitness beside each checkpoint's progress: only the caller measures one."""
    result = _evaluated(payload, guard, **extras)
    for run in result["seeds"]:
        for point in run["progress"]:
            point["fitness"] = 1e9
    return result


def nest_folders_deeply(payload: dict, guard: Any, **extras: Any) -> dict:
    """A chain of folders deeper than Python's recursion limit, left in the run directory."""
    result = _evaluated(payload, guard, **extras)
    for _ in range(1500):
        os.mkdir("d")
        os.chdir("d")
    return result


def escape_in_prescreen(payload: dict, guard: Any, **extras: Any) -> dict:
    """A prescreen failure whose text drives the user's terminal (clear it, set its title)."""
    _guard_off(guard)
    return {"failure": {"kind": "program\x1b[2J", "reason": "bad\x1b]0;pwned\x07\x1b[2Jline\rover",
                        "traceback": "\x1b[31mred\u202etxt"}}


def report_a_huge_step(payload: dict, guard: Any, **extras: Any) -> dict:
    """A checkpoint at step 1e300: a finite number, past any 64-bit integer."""
    result = _evaluated(payload, guard, **extras)
    for run in result["seeds"]:
        run["progress"][-1]["step"] = 1e300
    return result


def report_a_huge_reward(payload: dict, guard: Any, **extras: Any) -> dict:
    """Finite per-step rewards and components near float64's largest, alternating in sign."""
    result = _evaluated(payload, guard, **extras)
    for run in result["seeds"]:
        for index, point in enumerate(run["progress"]):
            point["reward"] = point["components"]["extrinsic"] = 1.7e308 * (-1) ** index
    return result


def report_a_huge_integer(payload: dict, guard: Any, **extras: Any) -> dict:
    """A reward of 10**400: JSON's integers have no bound, and no float holds it."""
    result = _evaluated(payload, guard, **extras)
    for run in result["seeds"]:
        run["progress"][-1]["reward"] = 10**400
    return result


def huge_integers_in_prescreen(payload: dict, guard: Any, **extras: Any) -> dict:
    """Prescreen returns no float can hold."""
    _guard_off(guard)
    return {"returns": [10**400] * len(payload["trajectories"]), "failure": None}


def fill_then_answer(payload: dict, guard: Any) -> dict:
    """Write past the quota as fast as one can, then send the result at once."""
    _guard_off(guard)
    with open("fill", "wb") as file:
        file.write(b"\1" * payload["mb"] * 2**20)
    return {"answered": True}


def _own_threads() -> int:
    with open("/proc/self/status") as status:
        return next(int(line.split()[1]) for line in status if line.startswith("Threads:"))


def start_threads(payload: dict, guard: Any) -> dict:
    """Start many threads with small stacks, so that the address-space limit does not stop
    them, each waiting until the job ends; report how many started and what stopped them."""
    import resource
    import threading

    _guard_off(guard)
    threading.stack_size(64 * 1024)
    stop = threading.Event()
    before, started, error = _own_threads(), 0, None
    try:
        for _ in range(payload["threads"]):
            threading.Thread(target=stop.wait, daemon=True).start()
            started += 1
    except (RuntimeError, OSError) as stopped:
        error = f"{type(stopped).__name__}: {stopped}"
    peak = _own_threads()
    stop.set()
    return {"before": before, "started": started, "peak": peak, "error": error,
            "nproc": list(resource.getrlimit(resource.RLIMIT_NPROC))}


def outlive_the_caller(payload: dict, guard: Any, **extras: Any) -> dict:
    """Run on while the caller is killed (SIGKILL runs none of its ``finally`` blocks)."""
    time.sleep(60)
    return {}


# ------------------------------------------- kernel objects charged to the caller's user
def hold_kernel_objects(payload: dict, guard: Any) -> dict:
    """Take as many inotify instances (``"inotify"``) or queued real-time signals
    (``"signals"``) as the kernel gives, up to ``payload["most"]``: both are counted per user,
    outside the worker's namespace too. Hold them until the caller writes ``release`` into
    the run directory, so that it can try its own meanwhile."""
    import ctypes

    _guard_off(guard)
    libc = ctypes.CDLL(None, use_errno=True)
    held, error = 0, 0
    if payload["what"] == "inotify":
        for _ in range(payload["most"]):
            if libc.inotify_init1(os.O_CLOEXEC) < 0:
                error = ctypes.get_errno()
                break
            held += 1
    else:
        signal.pthread_sigmask(signal.SIG_BLOCK, [signal.SIGRTMIN])
        value = ctypes.c_void_p(0)
        for _ in range(payload["most"]):
            if libc.sigqueue(os.getpid(), int(signal.SIGRTMIN), value) < 0:
                error = ctypes.get_errno()
                break
            held += 1
    print(f"held {held}", flush=True)
    deadline = time.monotonic() + 60
    while not os.path.exists("release") and time.monotonic() < deadline:
        time.sleep(0.02)
    return {"held": held, "error": error}


def report_cpu_cgroup(payload: dict, guard: Any) -> dict:
    """The CPU quota of the cgroup this worker runs in (cgroup v1 or v2), as the worker sees it."""
    _guard_off(guard)
    with open("/proc/self/cgroup") as file:
        lines = file.read().splitlines()
    for line in lines:
        _, controllers, path = line.split(":", 2)
        if "cpu" in controllers.split(","):
            for mount in (controllers, "cpu"):
                folder = os.path.join("/sys/fs/cgroup", mount, path.lstrip("/"))
                if os.path.isdir(folder):
                    with open(os.path.join(folder, "cpu.cfs_quota_us")) as quota, \
                            open(os.path.join(folder, "cpu.cfs_period_us")) as period:
                        return {"path": path, "quota": int(quota.read()), "period": int(period.read())}
    for line in lines:
        if line.startswith("0::"):
            with open(os.path.join("/sys/fs/cgroup", line[3:].lstrip("/"), "cpu.max")) as limit:
                quota, period = limit.read().split()
            return {"path": line[3:], "quota": int(quota), "period": int(period)}
    return {"path": None}


def linger_after_close(payload: dict, channel: Any, guard: Any) -> None:
    """The evaluation's real companion, which then stays on for seconds once the job has
    closed its channel (a program can keep its process from exiting)."""
    from rewardlab.llm_reward.training.job import reward_companion

    reward_companion(payload, channel, guard)
    time.sleep(6)
