"""The Ray executor on a cluster of a head and worker nodes, started with ``ray start`` as a
user would on real machines (here all on this machine, each node its own raylet).

- a worker node killed mid-search loses nothing and repeats no finished evaluation: what
  ran there runs again on another node;
- a node that cannot run the sandbox is refused, with the reason, and gets no evaluation;
- a ``.env`` beside the Ray driver's script (whose folder Ray puts on every worker's
  ``sys.path``) stays unreadable to a program.

Skipped where Ray is not installed: CI installs the ``dev`` extra, which does not bring
Ray (a 240 MB wheel, and a cluster takes tens of seconds to start); run it after
``pip install 'rewardlab[ray]'``.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import tempfile
import textwrap
import time
from collections.abc import Iterator
from concurrent.futures import Future
from pathlib import Path
from typing import Any

import pytest

from rewardlab.llm_reward.sandbox.isolation import kernel_support
from rewardlab.llm_reward.sandbox.runner import remove_tree

ray = pytest.importorskip("ray", reason="Ray is not installed (pip install 'rewardlab[ray]'; CI's dev extra has none)")

pytestmark = pytest.mark.skipif(
    any(kernel_support().values()), reason=f"the kernel lacks isolation features: {kernel_support()}"
)

RAY = str(Path(sys.executable).with_name("ray"))
SECRET = "sk-driver-secret-4e1f0c"
# A node whose Python finds a libseccomp binding that does not load: it cannot run the sandbox.
BROKEN_SECCOMP = 'raise ImportError("libseccomp.so.2: cannot open shared object file")\n'


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def _children(pid: int) -> list[int]:
    found = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/stat") as stat:
                    parent = int(stat.read().rsplit(")", 1)[1].split()[1])
            except (OSError, ValueError, IndexError):
                continue
            if parent == pid:
                found.append(int(entry))
    return found


def _command(pid: int) -> str:
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as cmdline:
            return cmdline.read().replace(b"\0", b" ").decode(errors="replace")
    except OSError:
        return ""


class Cluster:
    """A head (no CPUs) and worker nodes, each one ``ray start --block`` process."""

    def __init__(self, workers: dict[str, dict[str, str]]):
        self.temp = tempfile.mkdtemp(prefix="rl-ray-", dir="/tmp")  # short: Ray's socket paths must fit
        self.port = _free_port()
        self.address = f"127.0.0.1:{self.port}"
        self.env = {**os.environ, "RAY_USAGE_STATS_ENABLED": "0", "RAY_AUTH_MODE": "disabled"}
        self.nodes: dict[str, subprocess.Popen[bytes]] = {}
        self.killed: set[str] = set()
        self._start("head", ["--head", f"--port={self.port}", "--num-cpus=0", "--include-dashboard=false",
                             f"--temp-dir={self.temp}"], {})
        deadline = time.monotonic() + 120
        while True:
            try:
                socket.create_connection(("127.0.0.1", self.port), timeout=1).close()
                break
            except OSError:
                if time.monotonic() > deadline or self.nodes["head"].poll() is not None:
                    raise RuntimeError(f"the Ray head did not start: {self.log('head')}") from None
                time.sleep(0.5)
        for name, env in workers.items():
            # one machine: each node's sockets in a folder of its own
            self._start(name, [f"--address={self.address}", "--num-cpus=1", f"--resources={json.dumps({name: 1})}",
                               f"--temp-dir={self.temp}/{name}"], env)

    def _start(self, name: str, arguments: list[str], env: dict[str, str]) -> None:
        log = open(os.path.join(self.temp, f"{name}.log"), "wb")  # noqa: SIM115 - kept open for the node's life
        self.nodes[name] = subprocess.Popen([RAY, "start", "--block", "--disable-usage-stats", *arguments],
                                            env={**self.env, **env}, stdout=log, stderr=log, start_new_session=True)

    def log(self, name: str) -> str:
        return Path(self.temp, f"{name}.log").read_text(errors="replace")[-2000:]

    def node_id(self, name: str) -> str:
        return next(node["NodeID"] for node in ray.nodes() if node["Alive"] and name in node["Resources"])

    def wait_for(self, names: list[str]) -> None:
        deadline = time.monotonic() + 120
        while {name for name in names if any(node["Alive"] and name in node["Resources"] for node in ray.nodes())} \
                != set(names):
            if time.monotonic() > deadline or any(self.nodes[name].poll() is not None for name in names):
                raise RuntimeError("the Ray nodes did not join: " + "; ".join(self.log(name) for name in names))
            time.sleep(0.5)

    def kill_raylet(self, name: str) -> None:
        """SIGKILL the node's raylet, as a machine that went down would leave it."""
        self.killed.add(name)  # Ray may list it alive for a while yet
        raylets = [pid for pid in _children(self.nodes[name].pid) if "raylet/raylet" in _command(pid)]
        assert raylets, f"no raylet under {name}'s ray start"
        for pid in raylets:
            os.kill(pid, signal.SIGKILL)

    def stop(self) -> None:
        for node in reversed(self.nodes.values()):
            if node.poll() is None:
                node.send_signal(signal.SIGTERM)  # ray start --block stops what it started
        for node in self.nodes.values():
            try:
                node.wait(timeout=30)
            except subprocess.TimeoutExpired:
                pass
            try:
                os.killpg(node.pid, signal.SIGKILL)  # what is left in the node's session
            except ProcessLookupError:
                pass
        remove_tree(self.temp)


@pytest.fixture(scope="module")
def cluster() -> Iterator[Cluster]:
    broken = tempfile.mkdtemp(prefix="rl-broken-")
    Path(broken, "pyseccomp.py").write_text(BROKEN_SECCOMP)
    pythonpath = os.pathsep.join(filter(None, [broken, os.environ.get("PYTHONPATH")]))
    started = Cluster({"node_a": {}, "node_b": {}, "node_c": {"PYTHONPATH": pythonpath}})
    try:
        ray.init(address=started.address, logging_level="ERROR")
        started.wait_for(["node_a", "node_b", "node_c"])
        yield started
    finally:
        ray.shutdown()
        started.stop()
        remove_tree(broken)


def _task(tmp_path: Path, name: str, steps: int = 1024) -> Any:
    from rewardlab import llm_reward
    from rewardlab.llm_reward.search.executors import EvalTask

    source = llm_reward.reference_programs("CartPole-v1")["sparse"].source
    return EvalTask(name, source, "CartPole-v1", steps, (0,), str(tmp_path / name), num_envs=4,
                    ppo_kwargs={"n_steps": 32, "n_epochs": 1}, num_checkpoints=1, eval_episodes=1, timeout_s=300.0)


def test_a_node_lost_mid_search_loses_nothing_and_repeats_nothing_finished(cluster: Cluster, tmp_path: Path) -> None:
    from rewardlab.llm_reward.search.executors import RayExecutor

    executor = RayExecutor(2, address=cluster.address)
    node_a, node_b, node_c = (cluster.node_id(name) for name in ("node_a", "node_b", "node_c"))
    # the node without a usable libseccomp is refused, with the reason, and never used
    assert set(executor.accepted) == {node_a, node_b}, (executor.accepted, executor.refused)
    assert "seccomp" in executor.refused[node_c] and "libseccomp.so.2" in executor.refused[node_c]
    assert "nodes refused" in executor.describe() and "libseccomp" in executor.describe()

    # the first evaluation is long: the other two come back while it runs, on whichever node
    tasks = [_task(tmp_path, "candidate0", steps=65536), *(_task(tmp_path, f"candidate{i}") for i in (1, 2))]
    futures: list[Future[Any]] = [executor.submit(task) for task in tasks]
    deadline = time.monotonic() + 240
    # mid-search: the short ones came back, and one node runs the long one
    while not all(future.done() for future in futures[1:]):
        assert time.monotonic() < deadline, "the short evaluations did not come back"
        assert not futures[0].done(), "the long evaluation finished before its node could be lost"
        time.sleep(0.2)
    finished = {task.run_dir for task in tasks[1:]}
    running = [name for name, node in (("node_a", node_a), ("node_b", node_b)) if executor.accepted.get(node)]
    assert len(running) == 1 and not futures[0].done(), (running, executor.accepted)
    lost = cluster.node_id(running[0])
    cluster.kill_raylet(running[0])
    results = [future.result(timeout=300) for future in futures]
    executor.shutdown()

    assert all(result.ok and result.fitness is not None for result in results), [r.failure for r in results]
    assert all(list(Path(task.run_dir).rglob("events.out.tfevents.*")) for task in tasks)  # the files came back
    # what had come back was never sent again; the one that node_a was running was sent once more
    assert all(executor.submissions[run_dir] == 1 for run_dir in finished)
    assert sum(executor.submissions.values()) == len(tasks) + 1, executor.submissions
    assert lost not in executor.accepted and "lost" in executor.refused[lost]


DRIVER = '''
import json, sys
import ray
import helper  # a module beside the script, imported on the workers too

ray.init(address=sys.argv[1], logging_level="ERROR")


@ray.remote(num_cpus=1, resources={sys.argv[3]: 0.01})  # a node that can run the sandbox
def attack(source):
    from rewardlab import llm_reward

    helper.touch()
    program = llm_reward.RewardProgram(source=source, function_name="compute_reward", parameters=("x",))
    result = llm_reward.evaluate(program, "CartPole-v1", steps=64, seeds=(0,), num_envs=4, timeout_s=120,
                                 static_checks=False, ppo_kwargs={"n_steps": 16}, num_checkpoints=1)
    return result.to_dict()


print(json.dumps(ray.get(attack.remote(sys.argv[2]))))
'''

READER = '''
def compute_reward(x):
    builtins = torch.sys.modules["builtins"]
    frame = builtins.getattr(builtins, "__imp" + "ort__")("inspect").currentframe()
    while frame is not None:
        names = builtins.getattr(frame, "f_lo" + "cals")
        if names.get("guard") is not None:
            builtins.setattr(builtins.getattr(names["guard"], "_st" + "ate"), "busy", True)
        frame = builtins.getattr(frame, "f_ba" + "ck")
    try:
        with builtins.open(SECRET_FILE) as secret:
            text = secret.read()
    except builtins.OSError as error:
        text = "refused: " + builtins.str(error.errno)
    raise ValueError("read=" + text.encode().hex() + " " + text)
'''


def test_the_env_file_beside_the_ray_driver_script_stays_unreadable(cluster: Cluster) -> None:
    import errno

    folder = Path(tempfile.mkdtemp(prefix="rl-driver-"))
    try:
        (folder / ".env").write_text(f"OPENAI_API_KEY={SECRET}\n")
        (folder / "helper.py").write_text("def touch():\n    return True\n")
        (folder / "driver.py").write_text(textwrap.dedent(DRIVER))
        program = READER.replace("SECRET_FILE", repr(str(folder / ".env")))
        # a node that can run the sandbox, whichever the node-loss test left alive (Ray's
        # own list may still show a killed node alive until its heartbeats time out)
        node = next(name for name in ("node_a", "node_b") if name not in cluster.killed)
        done = subprocess.run([sys.executable, str(folder / "driver.py"), cluster.address, program, node], cwd=folder,
                              env=cluster.env, capture_output=True, text=True, timeout=300)
        assert done.returncode == 0, done.stderr[-3000:]
        everything = done.stdout + done.stderr
        assert SECRET not in everything and SECRET.encode().hex() not in everything
        result = json.loads(done.stdout.strip().splitlines()[-1])
        assert f"refused: {errno.EACCES}" in result["failure"]["reason"], result["failure"]
    finally:
        remove_tree(folder)
