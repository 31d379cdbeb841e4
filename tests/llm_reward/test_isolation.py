"""The kernel holds the line: jobs that switched the Python guard off, against the isolation.

Every job in ``hostile_jobs`` disables the audit-hook guard first, as the red team showed
a program can, then tries one escape. The harm is checked directly: marker files, a
datagram or connection on the caller's listeners, the caller's secret in anything that
came back, processes left behind, the caller and the fork server still alive.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import hostile_jobs
import pytest

from rewardlab.llm_reward.sandbox import Limits, run_sandboxed
from rewardlab.llm_reward.sandbox.cgroups import task_limit
from rewardlab.llm_reward.sandbox.files import read_private_tail, write_private
from rewardlab.llm_reward.sandbox.forkserver import fork_server
from rewardlab.llm_reward.sandbox.protocol import WORKER_PROCESSES, strict_json
from rewardlab.llm_reward.sandbox.quota import directory_bytes
from rewardlab.llm_reward.sandbox.support import kernel_support

SECRET = "sk-caller-secret-5b7e9d"
PRELOAD = ("rewardlab.llm_reward.sandbox.worker", "hostile_jobs")

pytestmark = pytest.mark.skipif(
    any(kernel_support().values()),
    reason=f"the kernel lacks isolation features: {kernel_support()}",
)


def run(job: str, payload: dict[str, Any], run_dir: Path, **limits: Any) -> Any:
    run_dir.mkdir(parents=True, exist_ok=True)
    return run_sandboxed(
        getattr(hostile_jobs, job), payload, run_dir, Limits(**{"timeout_s": 30, **limits}), PRELOAD
    )


def everything_returned(result: Any, run_dir: Path) -> str:
    """Every byte that came back: the result, the error, the log and the run directory."""
    parts = [repr(result.result), str(result.error), result.log_tail]
    for path in run_dir.rglob("*"):
        if path.is_file() and not path.is_symlink():
            parts.append(path.read_bytes().decode(errors="replace"))
    return "\n".join(parts)


@pytest.fixture
def outside(tmp_path: Path) -> Path:
    folder = tmp_path / "outside"
    folder.mkdir()
    (folder / "secret.txt").write_text(SECRET)
    return folder


def test_no_program_or_process_can_start(tmp_path: Path, outside: Path) -> None:
    marker = outside / "started"
    result = run("run_commands", {"marker": str(marker)}, tmp_path / "run")
    assert result.result is not None, result.error
    report = result.result
    assert report["os.system"] != "done: 0", report  # system() could not run a shell
    for key in ("subprocess", "posixsubprocess", "fork_exec", "setsid"):
        assert report[key].startswith(("PermissionError", "OSError", "BlockingIOError")), report
    time.sleep(1.0)
    assert not marker.exists()
    left = subprocess.run(
        ["pgrep", "-f", str(marker)], capture_output=True, text=True
    ).stdout.split()
    assert not left, f"processes left behind: {left}"


def test_files_outside_the_run_directory_can_be_neither_written_nor_read(
    tmp_path: Path, outside: Path
) -> None:
    result = run("touch_files", {"outside": str(outside)}, tmp_path / "run")
    report = result.result
    assert report is not None, result.error
    assert sorted(path.name for path in outside.iterdir()) == ["secret.txt"]
    for key in (
        "write",
        "torch.save",
        "read_secret",
        "read_torch",
        "read_passwd",
        "list_root_home",
    ):
        assert not report[key].startswith("done"), (key, report[key])
    assert report["read_python"].startswith("done"), report["read_python"]
    assert SECRET not in everything_returned(result, tmp_path / "run")


def test_no_file_mode_owner_time_or_attribute_can_be_changed(tmp_path: Path, outside: Path) -> None:
    victim = outside / "victim.sh"
    victim.write_text("#!/bin/sh\n")
    victim.chmod(0o755)
    before = victim.stat()
    result = run("change_metadata", {"victim": str(victim)}, tmp_path / "run")
    report = result.result
    assert report is not None, result.error
    for key, value in report.items():
        assert value.startswith("PermissionError"), (key, value)
    after = victim.stat()
    assert (after.st_mode, after.st_uid, after.st_mtime_ns) == (
        before.st_mode,
        before.st_uid,
        before.st_mtime_ns,
    )
    assert not (tmp_path / "run" / "inside.txt").stat().st_mode & 0o7000


def test_the_callers_script_folder_is_not_readable(tmp_path: Path) -> None:
    # `python folder/script.py` puts the script's folder on sys.path, which workers may read
    # only the imported modules of: a secret beside the script stays out of reach
    folder = tmp_path / "project"
    folder.mkdir()
    (folder / ".env").write_text(SECRET)
    (folder / "caller.py").write_text(
        "import json, sys\n"
        "from pathlib import Path\n"
        "from rewardlab.llm_reward.sandbox import Limits, run_sandboxed\n"
        "run_dir = Path(sys.argv[1])\n"
        "run_dir.mkdir()\n"
        "import hostile_jobs\n"
        "run = run_sandboxed(hostile_jobs.read_the_users_folder, {'folder': sys.argv[2], "
        "'module': 'caller', 'env_id': 'CartPole-v1'}, run_dir, Limits(timeout_s=60), "
        "('rewardlab.llm_reward.sandbox.worker', 'hostile_jobs'))\n"
        "print(json.dumps(run.result))\n"
    )
    support = Path(__file__).resolve().parents[1] / "support"
    environment = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(support), os.environ.get("PYTHONPATH", "")]),
    }
    done = subprocess.run(
        [sys.executable, str(folder / "caller.py"), str(tmp_path / "run"), str(folder)],
        capture_output=True,
        text=True,
        env=environment,
        cwd=tmp_path,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout.strip().splitlines()[-1])
    assert report["secret"].startswith("PermissionError") and report["listing"].startswith(
        "PermissionError"
    )
    assert SECRET not in done.stdout


def test_no_other_process_and_no_secret_is_visible(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("REWARDLAB_API_KEY", SECRET)
    result = run("look_around", {}, tmp_path / "run")
    report = result.result
    assert report is not None, result.error
    assert report["pids"] == "done: ['1', '2']", report["pids"]  # its init and itself
    returned = everything_returned(result, tmp_path / "run")
    for encoding in (SECRET, SECRET[::-1], SECRET.encode().hex(), SECRET.upper()):
        assert encoding not in returned
    assert str(os.getpid()) not in report["parent"]


def test_no_network_of_any_kind(tmp_path: Path) -> None:
    udp = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    udp.bind(("127.0.0.1", 0))
    udp.settimeout(1.0)
    tcp = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    tcp.bind(("127.0.0.1", 0))
    tcp.listen(1)
    tcp.settimeout(1.0)
    abstract = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    abstract.bind("\0rewardlab-test-abstract")
    abstract.listen(1)
    abstract.settimeout(1.0)
    server = fork_server(PRELOAD)
    payload = {
        "udp_port": udp.getsockname()[1],
        "tcp_port": tcp.getsockname()[1],
        "fork_server": server.socket_path,
        "abstract": "rewardlab-test-abstract",
    }
    try:
        result = run("use_the_network", payload, tmp_path / "run")
        report = result.result
        assert report is not None, result.error
        assert all(not value.startswith("done") for value in report.values()), report
        for listener in (udp, tcp, abstract):
            with pytest.raises(TimeoutError):
                (listener.recv if listener is udp else listener.accept)(
                    *((16,) if listener is udp else ())
                )
    finally:
        for listener in (udp, tcp, abstract):
            listener.close()
    assert server.alive()


def test_signals_reach_nothing_outside(tmp_path: Path) -> None:
    server = fork_server(PRELOAD)
    result = run(
        "signal_others",
        {"caller_pid": os.getpid(), "server_pid": server.process.pid},
        tmp_path / "run",
    )
    assert result.result is not None, result.error
    assert all(
        not value.startswith("done") or "parent" == key for key, value in result.result.items()
    ), result.result
    assert server.alive()


@pytest.mark.parametrize("depth", [0, 100_000], ids=["infinity", "nested"])
def test_forged_frames_are_that_candidates_failure_only(tmp_path: Path, depth: int) -> None:
    result = run("forge_a_frame", {"depth": depth}, tmp_path / "run")
    assert result.result is None
    assert result.error and result.error_kind == "crash"
    assert fork_server(PRELOAD).alive()
    # the parser itself: limits instead of RecursionError, no NaN or Infinity
    for text in (
        "[" * 100_000 + "]" * 100_000,
        '{"a": NaN}',
        '{"a": Infinity}',
        "[" * 40 + "]" * 40,
    ):
        with pytest.raises(ValueError):
            strict_json(text)
    assert strict_json('{"a": [1, 2.5, "x"]}') == {"a": [1, 2.5, "x"]}


def test_a_frame_of_many_values_is_refused_before_it_is_built() -> None:
    import json
    import tracemalloc

    frame = b"[" + b"[]," * (4 * 2**20 // 3) + b"[]]"  # a 4 MB frame of empty lists
    tracemalloc.start()
    try:
        with pytest.raises(ValueError, match="more than"):
            strict_json(frame)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 50 * 2**20, (
        f"{peak / 2**20:.0f} MB to refuse a 4 MB frame"
    )  # json.loads: about 200 MB
    # commas and brackets inside strings are no values: a request's payload is one string
    request = json.dumps({"payload": json.dumps([[0.5] * 30] * 20_000), "x": ["a,[{"] * 10})
    assert strict_json(request)["x"] == ["a,[{"] * 10


def test_the_disk_quota_stops_a_filling_program(tmp_path: Path) -> None:
    run_dir = tmp_path / "run"
    result = run("fill_the_disk", {}, run_dir, max_disk_mb=40, max_file_mb=16)
    assert result.result is None
    assert result.error_kind == "limit" and "quota of 40 MB" in result.error, result.error
    # the watchdog polls: the overshoot is what the program writes between two looks
    assert directory_bytes(str(run_dir)) < 512 * 2**20


def test_memory_outside_the_address_space_limit_is_refused(tmp_path: Path) -> None:
    # a memfd's pages and SysV shared memory are not counted by RLIMIT_AS (1024 MB here)
    result = run("hold_memory", {"mb": 1100}, tmp_path / "run", memory_mb=1024)
    assert result.result is not None, result.error
    assert result.result["memfd"] == 0 and result.result["sysv_shm"] == 0, result.result
    assert result.result["msgget"] == "refused"


def test_a_program_cannot_start_thousands_of_threads(tmp_path: Path) -> None:
    # red-team finding: 3,000 threads of 64 KB stacks, bounded by the address space only
    result = run("start_threads", {"threads": 3000}, tmp_path / "run", max_threads=64)
    assert result.result is not None, result.error
    report = result.result
    assert report["nproc"] == [64 + WORKER_PROCESSES] * 2, (
        report
    )  # binds where the caller is not root
    if task_limit() is None:
        pytest.skip(
            "the caller is root and may make no pids cgroup here: RLIMIT_NPROC does not bind root, "
            f"and nothing caps the threads (started {report['started']})"
        )
    assert report["peak"] <= 64 and report["started"] < 64, report
    assert report["error"] and "thread" in report["error"], report


def test_the_disk_quota_stops_a_program_that_allocates_without_writing(tmp_path: Path) -> None:
    run_dir = tmp_path / "run"
    result = run("allocate_past_the_quota", {"files": 16, "mb": 256}, run_dir, max_disk_mb=40)
    assert result.result is None, result.result  # 4 GB in milliseconds, had fallocate been allowed
    assert result.error_kind == "limit" and "quota of 40 MB" in result.error, result.error
    assert directory_bytes(str(run_dir)) < 512 * 2**20


def test_a_result_sent_past_the_quota_is_no_result(tmp_path: Path) -> None:
    from rewardlab.llm_reward.sandbox.quota import QUOTA_EXIT
    from rewardlab.llm_reward.sandbox.runner import _outcome

    # written between two looks of the watchdog: its last look, once the job ended, sees it
    result = run("fill_then_answer", {"mb": 120}, tmp_path / "run", max_disk_mb=40)
    assert result.result is None and result.error_kind == "limit", (result.result, result.error)
    # the result was sent and the job had ended when the watchdog looked
    sent = _outcome(
        {"result": {"answered": True}}, False, 1.0, QUOTA_EXIT, tmp_path, Limits(max_disk_mb=40)
    )
    assert sent.result is None and sent.error_kind == "limit" and "quota of 40 MB" in sent.error


@pytest.mark.parametrize("how", ["deep", "closed"])
def test_the_disk_quota_sees_what_a_path_cannot_reach(tmp_path: Path, how: str) -> None:
    run_dir = tmp_path / "run"
    result = run("hide_from_the_quota", {"how": how, "files": 6, "mb": 64}, run_dir, max_disk_mb=40)
    assert result.result is None, result.result
    assert result.error_kind == "limit" and "quota of 40 MB" in result.error, result.error


def test_the_disk_quota_counts_entries(tmp_path: Path) -> None:
    from rewardlab.llm_reward.sandbox.quota import MAX_ENTRIES

    for index in range(MAX_ENTRIES):
        (tmp_path / str(index)).touch()
    assert directory_bytes(str(tmp_path)) < 512 * 2**20
    (tmp_path / "one_more").touch()  # each look of the watchdog would take longer
    assert directory_bytes(str(tmp_path)) == float("inf")


def test_the_caller_follows_no_link_the_program_planted(tmp_path: Path, outside: Path) -> None:
    victim = outside / "victim.txt"
    victim.write_text("untouched")
    run_dir = tmp_path / "run"
    result = run(
        "plant_links", {"victim": str(victim), "secret": str(outside / "secret.txt")}, run_dir
    )
    assert result.result is None
    assert SECRET not in result.log_tail
    write_private(run_dir, "result.json", "{}")
    assert victim.read_text() == "untouched"
    assert (run_dir / "result.json").read_text() == "{}" and not (
        run_dir / "result.json"
    ).is_symlink()
    assert read_private_tail(run_dir / "worker.log") == ""


def test_the_caller_writes_and_ships_nothing_through_links_in_the_run_directory(
    tmp_path: Path, outside: Path
) -> None:
    from rewardlab.llm_reward.search.board import _seed_folders
    from rewardlab.llm_reward.search.executors import _plain_file_inside

    run_dir = tmp_path / "run"
    (run_dir / "tensorboard" / "PPO_1").mkdir(parents=True)
    (run_dir / "tensorboard" / "PPO_2").symlink_to(
        outside, target_is_directory=True
    )  # as a worker could
    assert _seed_folders(run_dir / "tensorboard") == [run_dir / "tensorboard" / "PPO_1"]
    linked = tmp_path / "linked_run"
    linked.mkdir()
    (linked / "tensorboard").symlink_to(run_dir / "tensorboard", target_is_directory=True)
    assert _seed_folders(linked / "tensorboard") == []
    # what a Ray node sends back: the run's own files, never a linked secret
    (run_dir / "result.json").write_text("{}")
    (run_dir / "secret").symlink_to(outside / "secret.txt")
    (run_dir / "folder").symlink_to(outside, target_is_directory=True)
    shipped = [path for path in sorted(run_dir.rglob("*")) if _plain_file_inside(path, run_dir)]
    assert shipped == [run_dir / "result.json"]
    assert not _plain_file_inside(run_dir / "folder" / "secret.txt", run_dir)


def test_fitness_is_measured_by_the_caller_from_the_shipped_policy() -> None:
    import torch

    from rewardlab import envs
    from rewardlab.agents import PPO
    from rewardlab.envs import describe
    from rewardlab.llm_reward.training.run import _parse_job_result
    from rewardlab.llm_reward.training.snapshots import measure_snapshot, policy_snapshot

    kwargs = {"n_steps": 8}
    model = PPO(envs.make("CartPole-v1", num_envs=2, seed=0), seed=0, **kwargs)
    snapshot = policy_snapshot(model)
    point = {"step": 16, "train_return": 1e9, "components": {"program/x": 1.0}, "reward": 1.0}
    forged = {
        "seeds": [{"seed": 0, "progress": [point], "policies": [snapshot], "wall_s": 1.0}],
        "failure": None,
        "peak_rss_mb": 1.0,
        "peak_vm_mb": 1.0,
        "cpu_s": 1.0,
    }
    description = describe("CartPole-v1")

    def measure(policy, seed):
        return measure_snapshot(policy, description, kwargs, 4, "cpu", seed + 10_000)

    runs, failure, _ = _parse_job_result(forged, measure, [0])
    honest = measure_snapshot(snapshot, description, kwargs, 4, "cpu", 10_000)
    assert failure is None and runs[0].checkpoints[0].fitness == honest[0] < 500
    # a worker reports no fitness: a point that claims one is refused, not read
    claimed = {
        "seeds": [
            {**forged["seeds"][0], "progress": [{**point, "fitness": 1e9, "success_rate": 1.0}]}
        ]
    }
    with pytest.raises(ValueError, match="progress point holds"):
        _parse_job_result({**forged, **claimed}, measure, [0])
    # the worker cannot pick the evaluation's start states by reporting another seed
    with pytest.raises(ValueError, match="reported seed 66 for the run of seed 0"):
        _parse_job_result({**forged, "seeds": [{**forged["seeds"][0], "seed": 66}]}, measure, [0])
    with pytest.raises(ValueError, match="more training runs"):
        _parse_job_result({**forged, "seeds": forged["seeds"] * 2}, measure, [0])
    # a tampered snapshot is that candidate's failure, never a score
    bad = {**snapshot, "policy.log_std": {"dtype": "float32", "shape": [9], "data": ""}}
    for policies in ([bad], [], [{"x": 1}]):
        with pytest.raises(ValueError):
            _parse_job_result(
                {**forged, "seeds": [{**forged["seeds"][0], "policies": policies}]}, measure, [0]
            )
    nan = dict(snapshot)
    name = next(iter(nan))
    values = torch.full(model.policy.state_dict()[name.removeprefix("policy.")].shape, float("nan"))
    nan[name] = {
        **nan[name],
        "data": __import__("base64").b64encode(values.numpy().tobytes()).decode(),
    }
    with pytest.raises(ValueError, match="NaN"):
        measure_snapshot(nan, description, kwargs, 4, "cpu", 0)


# A program that got out of Python's checks (red-team finding: it wrote a result envelope
# carrying a hand-set CartPole controller to the worker's result socket, and the caller
# measured that controller, fitness 500). It runs in the job's companion, which holds no
# socket but the one to the job: the job reads it as a malformed answer.
_FORGER = """
def compute_reward(x):
    os, json, base64 = torch.os, torch.sys.modules["json"], torch.sys.modules["base64"]

    def array(values, dtype="float32"):
        data = base64.b64encode(np.asarray(values, dtype=dtype).tobytes()).decode()
        return {"dtype": dtype, "shape": list(np.shape(values)), "data": data}

    h, zeros = 64, np.zeros
    actor_in, actor_hidden, actor_out = zeros((h, 4)), zeros((h, h)), zeros((2, h))
    actor_in[0] = [2.0, 10.0, 20.0, 10.0]
    actor_hidden[0, 0] = 5.0
    actor_out[0, 0], actor_out[1, 0] = -5.0, 5.0
    weights = {"policy.actor.0.0.weight": actor_in, "policy.actor.0.0.bias": zeros(h),
               "policy.actor.0.2.weight": actor_hidden, "policy.actor.0.2.bias": zeros(h),
               "policy.actor.0.4.weight": actor_out, "policy.actor.0.4.bias": zeros(2),
               "policy.critic.0.0.weight": zeros((h, 4)), "policy.critic.0.0.bias": zeros(h),
               "policy.critic.0.2.weight": zeros((h, h)), "policy.critic.0.2.bias": zeros(h),
               "policy.critic.0.4.weight": zeros((1, h)), "policy.critic.0.4.bias": zeros(1)}
    policy = {name: array(value) for name, value in weights.items()}
    policy |= {"obs_rms.mean": array(zeros(4), "float64"),
               "obs_rms.var": array(np.ones(4), "float64"),
               "obs_rms.count": array(1e-4, "float64")}
    point = {"step": 2048, "train_return": 500.0, "components": {"reward": 1.0}, "reward": 1.0}
    result = {"compile_note": "", "per_state": False, "per_state_reason": "", "per_state_mode": "",
              "seeds": [{"seed": 0, "progress": [point], "policies": [policy], "wall_s": 1.0}],
              "failure": None, "peak_rss_mb": 1.0, "peak_vm_mb": 1.0, "cpu_s": 1.0}
    data = json.dumps({"result": result}).encode()
    sockets = []
    for fd in range(256):
        try:
            if os.fstat(fd).st_mode & 0o170000 == 0o140000:
                sockets.append(fd)
                os.write(fd, len(data).to_bytes(4, "big") + data)
        except Exception:
            pass
    if len(sockets) != 1:
        raise ValueError(f"the program saw {len(sockets)} sockets")
    os._exit(0)
"""


def test_a_program_that_escaped_python_holds_no_channel_to_the_caller(tmp_path: Path) -> None:
    from rewardlab import llm_reward

    program = llm_reward.RewardProgram(
        source=_FORGER, function_name="compute_reward", parameters=("x",)
    )
    result = llm_reward.evaluate(
        program,
        "CartPole-v1",
        steps=512,
        seeds=(0,),
        num_envs=4,
        timeout_s=120,
        static_checks=False,
        ppo_kwargs={"n_steps": 128},
        num_checkpoints=1,
    )
    assert not result.ok and result.fitness is None, result
    assert result.failure is not None and "malformed" in result.failure.reason, result.failure


# The companion with its guard switched off (through the frame that holds it, as the red
# team did), trying what the kernel must refuse: acting on the job (PID 2 of the worker's
# namespace), its limits, scheduling and signals; opening its memory; writing anywhere.
_GUARD_OFF = """
    builtins = torch.sys.modules["builtins"]
    frame = builtins.getattr(builtins, "__imp" + "ort__")("inspect").currentframe()
    while frame is not None:
        names = builtins.getattr(frame, "f_lo" + "cals")
        if names.get("guard") is not None:
            builtins.setattr(builtins.getattr(names["guard"], "_st" + "ate"), "busy", True)
        frame = builtins.getattr(frame, "f_ba" + "ck")
"""
_PROBE = (
    """
def compute_reward(x):
"""
    + _GUARD_OFF
    + """
    os, resource, signal = torch.os, torch.sys.modules["resource"], torch.sys.modules["signal"]
    tries = {
        "prlimit": lambda: resource.prlimit(2, resource.RLIMIT_FSIZE, (0, 0)),
        "affinity": lambda: os.sched_setaffinity(2, {0}),
        "priority": lambda: os.setpriority(os.PRIO_PROCESS, 2, 19),
        "group_priority": lambda: os.setpriority(os.PRIO_PGRP, 0, 19),
        "stop": lambda: os.kill(2, signal.SIGSTOP),
        "group_signal": lambda: os.kill(0, signal.SIGCONT),
        "pidfd": lambda: os.pidfd_open(2),
        "memory": lambda: builtins.open("/proc/2/mem", "rb"),
        "write": lambda: builtins.open("planted.txt", "w"),
    }
    try:
        tries[ATTEMPT]()
        outcome = "done"
    except Exception as error:
        outcome = str(builtins.getattr(error, "errno", None))
    raise ValueError("outcome=" + outcome)
"""
)


def evaluate_hostile(source: str, run_dir: Path | None = None, **settings: Any) -> Any:
    """``evaluate`` on a program that skips the static checks (its guard switched off)."""
    from rewardlab import llm_reward

    program = llm_reward.RewardProgram(
        source=source, function_name="compute_reward", parameters=("x",)
    )
    return llm_reward.evaluate(
        program,
        "CartPole-v1",
        **{
            "steps": 128,
            "seeds": (0,),
            "num_envs": 4,
            "timeout_s": 120,
            "static_checks": False,
            "ppo_kwargs": {"n_steps": 32},
            "num_checkpoints": 1,
            "run_dir": run_dir,
            **settings,
        },
    )


@pytest.mark.parametrize(
    "attempt",
    [
        "prlimit",
        "affinity",
        "priority",
        "group_priority",
        "stop",
        "group_signal",
        "pidfd",
        "memory",
        "write",
    ],
)
def test_the_companion_cannot_act_on_the_job(tmp_path: Path, attempt: str) -> None:
    import errno

    result = evaluate_hostile(_PROBE.replace("ATTEMPT", repr(attempt)), tmp_path / "run")
    failure = result.failure
    assert failure is not None and not result.ok
    # refused by the kernel: the call kills the program's process (and the candidate fails
    # with kind sandbox, whatever the program catches), or the file is not there to open
    if failure.kind == "sandbox":
        assert "system call the sandbox refuses" in failure.reason, failure
    else:
        assert failure.reason.endswith(
            ("outcome=" + str(errno.EACCES), "outcome=" + str(errno.EPERM))
        ), failure
        assert attempt == "memory", failure
    assert not (tmp_path / "run" / "planted.txt").exists()


@pytest.mark.parametrize(
    "job",
    [
        "misreport_per_state",
        "report_extra_checkpoints",
        "report_its_own_fitness",
        "nest_folders_deeply",
        "report_a_huge_step",
        "report_a_huge_reward",
        "report_a_huge_integer",
    ],
)
def test_an_evaluation_taken_over_by_its_program_does_not_break_the_caller(
    job: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import tempfile

    from rewardlab import llm_reward
    from rewardlab.llm_reward.search import board
    from rewardlab.llm_reward.search.reflection import reward_signals
    from rewardlab.llm_reward.training import run as evaluation

    monkeypatch.setattr(evaluation, "EVALUATION_JOB", getattr(hostile_jobs, job))
    monkeypatch.setattr(
        tempfile, "tempdir", str(tmp_path)
    )  # where evaluate makes its run directory
    program = llm_reward.RewardProgram.from_source(
        "def compute_reward(next_theta):\n    return -next_theta.abs()\n"
    )
    # evaluate raised TypeError (an unhashable per-state mode) and RecursionError (removing
    # the deep folders); it played 50 checkpoints' evaluation episodes outside the worker's
    # limits; the search's TensorBoard logging raised on a step of 1e300, its reward statistics
    # (OverflowError) on rewards of 1.7e308, and evaluate itself (OverflowError) on 10**400
    huge = job.startswith("report_a_huge")
    result = llm_reward.evaluate(
        program,
        "CartPole-v1",
        steps=128,
        num_envs=4,
        timeout_s=60,
        num_checkpoints=2,
        ppo_kwargs={"n_steps": 16},
        run_dir=tmp_path / "kept" if huge else None,
    )
    if job == "report_extra_checkpoints":
        assert not result.ok and "more than the 2 checkpoints" in result.failure.reason, (
            result.failure
        )
    elif (
        job == "report_its_own_fitness"
    ):  # the worker reports no fitness: one it sends is refused, never read
        assert not result.ok and "progress point holds" in result.failure.reason, result.failure
        assert not result.seeds
    elif huge:
        assert not result.ok and (
            "larger than" in result.failure.reason or "step" in result.failure.reason
        ), result.failure
    else:
        assert result.ok, result.failure
    board.log_candidate(result)  # what the search does next (for a trained candidate)
    reward_signals(result.curve)
    assert not list(tmp_path.glob("rewardlab-eval-*"))  # the temporary run directory is gone


CALLER_KILLED_MID_RUN = """
import sys, tempfile
from rewardlab import llm_reward
from rewardlab.llm_reward.training import run as evaluation

import hostile_jobs
evaluation.EVALUATION_JOB = hostile_jobs.outlive_the_caller
tempfile.tempdir = sys.argv[1]
program = llm_reward.RewardProgram.from_source(
    "def compute_reward(next_theta):\\n    return -next_theta.abs()\\n")
llm_reward.evaluate(program, "CartPole-v1", steps=128, num_envs=4, timeout_s=60)
"""


def test_a_caller_killed_mid_run_leaves_no_temporary_folder(tmp_path: Path) -> None:
    # /tmp held rewardlab-eval-* folders (an empty tmp/ and worker.log) after test runs that
    # killed a caller: its `finally` never ran, and the fork server killed the worker only
    caller = subprocess.Popen(
        [sys.executable, "-c", CALLER_KILLED_MID_RUN, str(tmp_path)],
        env={**os.environ, "PYTHONPATH": os.pathsep.join(p for p in sys.path if p)},
    )
    try:
        deadline = time.monotonic() + 120
        while not list(tmp_path.glob("rewardlab-eval-*/worker.log")):
            assert caller.poll() is None and time.monotonic() < deadline, "the worker never started"
            time.sleep(0.05)
    finally:
        caller.kill()
        caller.wait()
    deadline = time.monotonic() + 15
    while list(tmp_path.glob("rewardlab-*")) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not list(tmp_path.glob("rewardlab-*"))  # the run directory and the fork server's folder


def test_a_ray_node_ships_a_run_whose_worker_nested_folders_deeply(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import tempfile
    from dataclasses import asdict

    from rewardlab.llm_reward.search.executors import EvalTask, evaluate_remotely
    from rewardlab.llm_reward.training import run as evaluation

    monkeypatch.setattr(evaluation, "EVALUATION_JOB", hostile_jobs.nest_folders_deeply)
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    task = EvalTask(
        key="k",
        source="def compute_reward(next_theta):\n    return -next_theta.abs()\n",
        env_id="CartPole-v1",
        steps=64,
        seeds=(0,),
        run_dir=str(tmp_path / "unused"),
        num_envs=4,
        timeout_s=60,
    )
    shipped = evaluate_remotely(
        asdict(task)
    )  # the Ray task, run here: rglob and its cleanup recursed
    assert shipped["result"]["ok"] and "result.json" in shipped["files"]
    assert not list(tmp_path.glob("rewardlab-ray-*"))


def test_prescreen_text_from_the_worker_loses_its_control_characters(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import re

    from rewardlab import llm_reward
    from rewardlab.llm_reward.search import prescreen
    from rewardlab.llm_reward.search.prompts import candidate_line
    from rewardlab.llm_reward.search.records import Candidate

    monkeypatch.setattr(prescreen, "SCORE_JOB", hostile_jobs.escape_in_prescreen)
    program = llm_reward.RewardProgram.from_source(
        "def compute_reward(next_theta):\n    return -next_theta.abs()\n"
    )
    stored = [
        {
            "states": [[0.0] * 4],
            "actions": [0],
            "rewards": [1.0],
            "terminated": [False],
            "return": 1.0,
        }
    ]
    score = prescreen.prescreen(program, "CartPole-v1", stored, tmp_path / "prescreen", 0.2)
    candidate = Candidate(0, 0)
    candidate.failure = score.failure
    # the next prompt, and the summary text2reward's terminal feedback shows
    for text in (
        score.finding,
        score.failure.kind,
        score.failure.reason,
        score.failure.traceback,
        candidate_line(candidate),
    ):
        assert not re.search("[\x00-\x08\x0b-\x1f\x7f-\x9f\u202a-\u202e]", text), repr(text)
    assert "pwned" in score.failure.reason  # the text itself stays, as feedback


def test_prescreen_returns_no_float_holds_are_that_programs_failure(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from rewardlab import llm_reward
    from rewardlab.llm_reward.search import prescreen

    monkeypatch.setattr(prescreen, "SCORE_JOB", hostile_jobs.huge_integers_in_prescreen)
    program = llm_reward.RewardProgram.from_source(
        "def compute_reward(next_theta):\n    return -next_theta.abs()\n"
    )
    stored = [
        {
            "states": [[0.0] * 4],
            "actions": [0],
            "rewards": [1.0],
            "terminated": [False],
            "return": 1.0,
        }
    ] * 2
    score = prescreen.prescreen(
        program, "CartPole-v1", stored, tmp_path / "prescreen", 0.2
    )  # raised OverflowError
    assert not score.passed and "malformed returns" in score.finding, score


def test_remove_tree_removes_what_rmtree_cannot(tmp_path: Path) -> None:
    from rewardlab.llm_reward.sandbox.files import remove_tree

    folder = tmp_path / "run"
    folder.mkdir()
    (tmp_path / "kept.txt").write_text("kept")
    (folder / "link").symlink_to(tmp_path, target_is_directory=True)  # removed, not followed
    deep = os.open(folder, os.O_RDONLY | os.O_DIRECTORY)
    for _ in range(20):  # a path longer than PATH_MAX
        os.mkdir("d" * 250, dir_fd=deep)
        below = os.open("d" * 250, os.O_RDONLY | os.O_DIRECTORY, dir_fd=deep)
        os.close(deep)
        deep = below
    os.close(os.open("file", os.O_CREAT | os.O_WRONLY, 0o600, dir_fd=deep))
    os.close(deep)
    remove_tree(folder)
    assert sorted(path.name for path in tmp_path.iterdir()) == ["kept.txt"]
    remove_tree(folder)  # nothing there: nothing to do


SLEEPER = """import torch


def compute_reward(x):
    # passes the static checks: torch.serialization.tarfile keeps the real open()
    opener = torch.serialization.tarfile.bltn_open
    try:
        with opener(MARKER, "w") as file:
            file.write("the program ran outside the sandbox")
    except Exception:
        pass
    return torch.ones_like(x), {"alive": torch.ones_like(x)}
"""


def test_a_sleeper_program_through_rewardlab_train_does_no_harm(
    tmp_path: Path, outside: Path
) -> None:
    from rewardlab.app.cli import main
    from rewardlab.llm_reward.programs.loading import reward_file_text

    marker = outside / "marker"
    program = tmp_path / "best_reward.py"
    program.write_text(
        reward_file_text(SLEEPER.replace("MARKER", repr(str(marker))), "CartPole-v1", ["sleeper"])
    )
    common = [
        "train",
        "--env",
        "CartPole-v1",
        "--reward-program",
        str(program),
        "--steps",
        "128",
        "--num-envs",
        "4",
        "--no-progress",
    ]
    code = main([*common, "--logdir", str(tmp_path / "sandboxed")])
    assert not marker.exists(), "the program wrote outside its sandbox"
    assert code == 2  # the sandbox stopped it, and the command says so
    # the same program, trusted, runs here: the check above could fail
    assert main([*common, "--trust-program", "--logdir", str(tmp_path / "trusted")]) == 0
    assert marker.exists()


# ------------------------------------------------------------- default deny for the program
_INOTIFY = (
    """
def compute_reward(x):
"""
    + _GUARD_OFF
    + """
    ctypes = builtins.getattr(builtins, "__imp" + "ort__")("ctypes")
    libc = ctypes.CDLL(None, use_errno=True)
    instance = libc.inotify_init1(0)
    watch = libc.inotify_add_watch(instance, FOLDER.encode(), 0xFFF)
    raise ValueError("watch=" + str(watch))
"""
)


def test_a_program_cannot_watch_a_folder_it_may_not_read(tmp_path: Path, outside: Path) -> None:
    # inotify is outside Landlock's rules: a watch named the files of folders the program
    # could not read (red-team finding); the call itself now ends the program's process
    outside.chmod(0o700)
    result = evaluate_hostile(_INOTIFY.replace("FOLDER", repr(str(outside))))
    assert result.failure is not None and result.failure.kind == "sandbox", result.failure
    assert "refuses, inotify_init1 (" in result.failure.reason, result.failure
    assert "watch=" not in result.failure.reason + result.failure.traceback


_CAUGHT = (
    """
def compute_reward(x):
"""
    + _GUARD_OFF
    + """
    resource = torch.sys.modules["resource"]
    attempts = {"socket": lambda: torch.sys.modules["socket"].socket(),
                "fork": lambda: torch.os.fork(),
                "write": lambda: builtins.open("planted.txt", "w"),
                "raise_limit": lambda: resource.setrlimit(resource.RLIMIT_SIGPENDING, (1 << 20, 1 << 20))}
    try:
        attempts[ATTEMPT]()
    except builtins.BaseException:
        pass  # refused: carry on as a good candidate
    return x, {"x": x}
"""
)


@pytest.mark.parametrize("attempt", ["socket", "fork", "write", "raise_limit"])
def test_a_refused_call_the_program_catches_fails_the_candidate(attempt: str) -> None:
    result = evaluate_hostile(_CAUGHT.replace("ATTEMPT", repr(attempt)))
    assert not result.ok and result.fitness is None
    assert result.failure is not None and result.failure.kind == "sandbox", result.failure
    assert "system call the sandbox refuses" in result.failure.reason


_SIGNAL_FLOOD = (
    """
def compute_reward(x):
"""
    + _GUARD_OFF
    + """
    os, signal = torch.os, torch.sys.modules["signal"]
    signal.pthread_sigmask(signal.SIG_BLOCK, [signal.SIGRTMIN])
    for _ in builtins.range(200_000):
        os.kill(os.getpid(), signal.SIGRTMIN)  # each one queued while the kernel allows it
    queued = 0  # each queued one is taken back once; kill() drops what the queue cannot hold
    while signal.sigtimedwait([signal.SIGRTMIN], 0) is not None:
        queued += 1
    raise ValueError("queued=" + builtins.str(queued))
"""
)


def test_a_program_queues_few_signals(tmp_path: Path) -> None:
    # queued signals are charged to the caller's user outside the namespace as well: a
    # program that filled the queue made every process of that user fail sigqueue
    result = evaluate_hostile(_SIGNAL_FLOOD)
    assert result.failure is not None and "queued=" in result.failure.reason, result.failure
    queued = int(result.failure.reason.rsplit("queued=", 1)[1])
    assert 1 <= queued <= 65, queued  # the queue's 64 and the one pending without its details


def _callers_own(what: str, tries: int) -> int:
    """How many of ``tries`` inotify instances or queued real-time signals this process gets."""
    import ctypes

    libc = ctypes.CDLL(None, use_errno=True)
    got = 0
    if what == "inotify":
        handles = [libc.inotify_init1(os.O_CLOEXEC) for _ in range(tries)]
        got = sum(handle >= 0 for handle in handles)
        for handle in handles:
            if handle >= 0:
                os.close(handle)
        return got
    # blocked in every thread of this process (see the test), and taken back before it is unblocked
    got = sum(
        libc.sigqueue(os.getpid(), int(CALLERS_SIGNAL), ctypes.c_void_p(0)) == 0
        for _ in range(tries)
    )
    while signal.sigtimedwait([CALLERS_SIGNAL], 0) is not None:
        pass
    return got


CALLERS_SIGNAL = signal.SIGRTMIN + 1


@pytest.mark.parametrize("what", ["inotify", "signals"])
def test_a_worker_cannot_take_the_callers_kernel_objects(tmp_path: Path, what: str) -> None:
    # the job's own process, its guard off: the worker's user namespace holds no inotify
    # instance and few queued signals, so the caller's own calls keep working meanwhile
    import threading

    run_dir = tmp_path / "run"
    outcome: dict[str, Any] = {}
    # the signals are sent to the whole process: a thread an earlier test left running
    # (TensorBoard's writers, thread pools) does not block them, so they need a handler there or
    # they end the process
    previous = signal.signal(CALLERS_SIGNAL, lambda *_: None)
    signal.pthread_sigmask(
        signal.SIG_BLOCK, [CALLERS_SIGNAL]
    )  # before the thread starts: it inherits the mask
    worker = threading.Thread(
        target=lambda: outcome.update(
            run=run(
                "hold_kernel_objects",
                {"what": what, "most": 200_000 if what == "signals" else 1000},
                run_dir,
            )
        )
    )
    worker.start()
    try:
        deadline = time.monotonic() + 60
        while (
            "held" not in read_private_tail(run_dir / "worker.log") and time.monotonic() < deadline
        ):
            time.sleep(0.02)
        callers = _callers_own(what, 16)
    finally:
        (run_dir / "release").write_text("")
        worker.join()
        while signal.sigtimedwait([CALLERS_SIGNAL], 0) is not None:
            pass
        signal.pthread_sigmask(signal.SIG_UNBLOCK, [CALLERS_SIGNAL])
        signal.signal(CALLERS_SIGNAL, previous)
    report = outcome["run"].result
    assert report is not None, outcome["run"].error
    assert callers == 16, (callers, report)
    assert report["held"] <= (0 if what == "inotify" else 64), report


def test_a_worker_gets_a_cpu_quota_of_its_threads(tmp_path: Path) -> None:
    from rewardlab.llm_reward.sandbox.cgroups import CGROUP_PREFIX, CPU_PERIOD_US, cpu_limit

    if cpu_limit() is None:
        pytest.skip(
            "no cpu cgroup can be made here (the search logs that a candidate's CPU share is "
            "unbounded)"
        )
    result = run("report_cpu_cgroup", {}, tmp_path / "run", threads=2)
    report = result.result
    assert report is not None, result.error
    assert CGROUP_PREFIX in report["path"], report
    assert report["quota"] == 2 * CPU_PERIOD_US and report["period"] == CPU_PERIOD_US, report


# ------------------------------------------------------------------ readable roots
def test_a_folder_on_the_import_path_is_not_readable(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Ray puts the driver script's folder on each worker's sys.path: a .env beside the
    # script was readable (red-team finding); only what was imported from there is
    from rewardlab.llm_reward.sandbox.readable import readable_roots

    folder = tmp_path / "driver"
    folder.mkdir()
    (folder / ".env").write_text(SECRET)
    (folder / "user_module_x.py").write_text("VALUE = 1\n")
    monkeypatch.syspath_prepend(str(folder))
    __import__("user_module_x")
    try:
        roots = readable_roots()
    finally:
        sys.modules.pop("user_module_x", None)
    secret = str((folder / ".env").resolve())
    assert not [
        root for root in roots if secret == root or secret.startswith(root.rstrip("/") + "/")
    ], roots
    assert str((folder / "user_module_x.py").resolve()) in roots


def test_the_installation_prefix_is_readable_only_in_its_libraries(tmp_path: Path) -> None:
    # a pip.conf in the prefix may hold an index token, a conda env's files its saved
    # variables: the whole prefix was readable, now its standard library and site-packages
    from rewardlab.llm_reward.sandbox.readable import readable_roots

    prefixes = {Path(sys.prefix).resolve(), Path(sys.base_prefix).resolve()}
    for root in map(Path, readable_roots()):
        assert not any(prefix == root or prefix.is_relative_to(root) for prefix in prefixes), root
    outside = [
        Path(sys.prefix) / "pyvenv.cfg",
        Path(sys.prefix) / "bin" / "activate",
        *sorted(Path(sys.base_prefix).glob("include/python3*/Python.h")),
    ]
    outside = [str(path) for path in outside if path.is_file()]
    if not outside:
        pytest.skip("this installation has no file in its prefix outside its libraries")
    result = run("read_the_prefix", {"paths": outside}, tmp_path / "run")
    report = result.result
    assert report is not None, result.error
    for path in [*outside, "listing"]:
        assert report[path].startswith("PermissionError"), (path, report[path])
    assert report["stdlib"].startswith("done") and report["site-packages"].startswith("done"), (
        report
    )


RAY_LIKE_CALLER = """
import json, sys
from pathlib import Path
from rewardlab.llm_reward.sandbox import Limits, run_sandboxed
run_dir = Path(sys.argv[1])
run_dir.mkdir()
import hostile_jobs
run = run_sandboxed(hostile_jobs.read_the_users_folder, {'folder': sys.argv[2], 'module': 'absent',
                    'env_id': 'CartPole-v1'}, run_dir, Limits(timeout_s=60),
                    ('rewardlab.llm_reward.sandbox.worker', 'hostile_jobs'))
print(json.dumps(run.result))
"""


def test_a_secret_beside_a_driver_script_on_the_import_path_is_not_readable(tmp_path: Path) -> None:
    # as in a Ray worker: the folder is on the import path, but it is neither the caller's
    # script's folder nor its working directory
    folder = tmp_path / "driver"
    folder.mkdir()
    (folder / ".env").write_text(SECRET)
    support = Path(__file__).resolve().parents[1] / "support"
    path = os.pathsep.join([str(support), str(folder), os.environ.get("PYTHONPATH", "")])
    done = subprocess.run(
        [sys.executable, "-c", RAY_LIKE_CALLER, str(tmp_path / "run"), str(folder)],
        capture_output=True,
        text=True,
        env={**os.environ, "PYTHONPATH": path},
        cwd=tmp_path,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout.strip().splitlines()[-1])
    assert report["secret"].startswith("PermissionError") and report["listing"].startswith(
        "PermissionError"
    )
    assert SECRET not in done.stdout


# ----------------------------------------------------------- candidates and their results
STRANGER = """
import socket, sys, time
held = []
for _ in range(20):
    connection = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    connection.connect(sys.argv[1])
    held.append(connection)
print("connected", flush=True)
closed = 0
for connection in held:
    connection.settimeout(60)
    try:
        closed += connection.recv(1) == b""
    except OSError:
        pass
print(closed, flush=True)
"""


def test_a_process_left_behind_cannot_stall_the_next_candidate(tmp_path: Path) -> None:
    # a process of the same user held connections to the fork server's socket without a
    # request: each held the server for its 2 s, and the next candidate waited for them all
    server = fork_server(
        ("rewardlab.llm_reward.sandbox.worker", "hostile_jobs", *PRELOAD)
    )  # the one run() uses
    stranger = subprocess.Popen(
        [sys.executable, "-c", STRANGER, server.socket_path], stdout=subprocess.PIPE, text=True
    )
    try:
        assert stranger.stdout.readline().strip() == "connected"
        # its result comes at most 5 s past its time: 20 connections held for 2 s each are 40 s
        result = run("look_around", {}, tmp_path / "run", timeout_s=5)
        assert result.result is not None, result.error
        closed = (
            stranger.stdout.read()
        )  # what readline buffered too; the stranger gives up after 20 s
    finally:
        stranger.kill()
        stranger.wait()
    assert (
        closed.strip() == "20"
    )  # the server hung up on each: it serves the process that started it only
    assert server.alive()


def test_a_slow_request_of_the_caller_holds_no_other(tmp_path: Path) -> None:
    # requests are read side by side, each within its own 2 s: 20 half-sent ones held the
    # server for 40 s when it read them one after another
    server = fork_server(("rewardlab.llm_reward.sandbox.worker", "hostile_jobs", *PRELOAD))
    held = []
    try:
        for _ in range(20):
            connection = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            connection.connect(server.socket_path)
            connection.sendall(b"\0\0")  # half a length: the request never comes
            held.append(connection)
        result = run("look_around", {}, tmp_path / "run", timeout_s=5)
        assert result.result is not None, result.error
        for connection in held:  # each one is closed once its time is up
            connection.settimeout(30)
            assert connection.recv(1) == b""
    finally:
        for connection in held:
            connection.close()
    assert server.alive()


_STALLS = """
CALLS = [0]


def compute_reward(x):
    CALLS[0] += 1
    if CALLS[0] > 6:  # the first call runs three times (the batch, then each half)
        while True:
            pass
    return x, {"x": x}
"""


def test_a_stalled_programs_checkpoints_are_kept(tmp_path: Path) -> None:
    # the job sent its result only at its end: a timeout lost every checkpoint before it
    result = evaluate_hostile(
        _STALLS, steps=640, num_checkpoints=10, timeout_s=8, ppo_kwargs={"n_steps": 16}
    )
    assert result.failure is not None and result.failure.kind == "timeout", result.failure
    kept = result.seeds[0].checkpoints
    assert 1 <= len(kept) < 10 and result.seeds[0].wall_s is None, result.seeds
    assert all(point.step > 0 and point.fitness > 0 for point in kept), (
        kept
    )  # measured by the caller


def test_a_companion_that_stays_on_fails_its_candidate_and_keeps_the_checkpoints(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # closing sent it a signal the job's own confinement refuses: the error escaped the job
    # and the finished training's checkpoints were lost. What it does after the job's last
    # look at its refused calls would go unseen: it fails the candidate, the checkpoints kept
    from rewardlab import llm_reward
    from rewardlab.llm_reward.training import run as evaluation

    monkeypatch.setattr(evaluation, "REWARD_COMPANION", hostile_jobs.linger_after_close)
    source = "def compute_reward(next_theta):\n    return -next_theta.abs()\n"
    run_dir = tmp_path / "run"
    result = llm_reward.evaluate(
        llm_reward.RewardProgram.from_source(source),
        "CartPole-v1",
        steps=128,
        num_envs=4,
        timeout_s=60,
        ppo_kwargs={"n_steps": 16},
        num_checkpoints=2,
        run_dir=run_dir,
    )
    assert not result.ok and result.failure is not None, result
    assert "did not end within" in result.failure.reason, result.failure
    assert len(result.seeds[0].checkpoints) == 2
    # nothing of the worker outlives it: the companion, whose working directory is the run
    # directory, ended with the worker's namespaces
    assert not _processes_in(run_dir)


def _processes_in(folder: Path) -> list[int]:
    """The processes of this machine whose working directory is ``folder``."""
    found = []
    for entry in Path("/proc").iterdir():
        try:
            if entry.name.isdigit() and os.readlink(entry / "cwd") == str(folder.resolve()):
                found.append(int(entry.name))
        except OSError:
            continue
    return found


def test_a_deep_temporary_folder_still_serves_workers(tmp_path, monkeypatch):
    """A socket's path is limited to 107 bytes: a fork server whose folder lies deeper (a long
    TMPDIR) still starts and serves."""
    from rewardlab.llm_reward.sandbox.forkserver import ForkServer

    deep = tmp_path / ("d" * 60) / ("e" * 60)
    deep.mkdir(parents=True)
    monkeypatch.setattr(tempfile, "tempdir", str(deep))
    server = ForkServer(preload=())
    try:
        assert len(server.socket_path) > 107
        connection = server.connect({"ping": True})
        connection.close()
    finally:
        server.close()
