"""What a sandboxed training needs loaded before its worker is confined: modules, and PPO's compiled graphs.

A confined worker cannot import everything (some imports call ``ctypes``, which the guard
refuses) nor read the compile cache, so the fork server, trusted and before it forks any
worker, imports :func:`preload_for`'s modules and calls :func:`warm_compiled` (the
``warm`` of :func:`~rewardlab.llm_reward.sandbox.runner.run_sandboxed`); every worker
inherits what they loaded.
"""

from __future__ import annotations

import gc
import importlib.util
import json
import os
import sys
import time
import warnings
from collections.abc import Callable, Mapping
from typing import Any

import torch

from rewardlab import envs
from rewardlab.agents.ppo import PPO
from rewardlab.common import compiled
from rewardlab.envs.description_files import use_description

__all__ = ["PRELOAD", "compile_in_worker", "compiled_warm_up", "preload_for", "training_env", "warm_compiled"]

# Imported by the worker before its guard is installed: PPO's optimiser imports
# torch._dynamo on first use, which replaces torch.manual_seed (the guard's snapshot must
# come after); TensorBoard's import chain calls ctypes, which the guard refuses, and so
# does MuJoCo's (it loads its plugins with ctypes and probes GLFW in a subprocess), when
# the mujoco extra is installed.
_MUJOCO = ("mujoco",) if importlib.util.find_spec("mujoco") is not None else ()
PRELOAD = ("torch._dynamo", "torch.utils.tensorboard", *_MUJOCO)


def preload_for(env_id: str) -> tuple[str, ...]:
    """:data:`PRELOAD` and what the env needs: a ``"module:Env-v0"`` id's module (a user's
    own file, imported by the fork server, whose folder the worker then cannot read: only the
    module itself), ``minigrid`` for MiniGrid ids.

    :raises ValueError: the env's module cannot be imported.
    """
    from rewardlab.envs.gymnasium_env import ID_PACKAGES, env_module, import_env_module

    import_env_module(env_id)
    module = env_module(env_id)
    extra = [package for prefix, (packages, _) in ID_PACKAGES.items() if env_id.startswith(prefix)
             for package in packages]
    if module is not None:
        extra.append(module)
    return (*PRELOAD, *extra)


# ------------------------------------------- PPO's compiled graphs in the sandbox
# A sandboxed worker cannot read the compile cache, and PPO's compiled graphs do not
# depend on the reward program: the fork server (trusted, before any worker exists) loads
# them for the budget at hand, compiling them into the cache the first time, and every
# worker it forks inherits them (rewardlab.common.compiled.loaded_only).
#: what warm_compiled made of each argument in this process (the fork server; the workers
#: inherit it): "" when the graphs are loaded, else why not
_WARMED: dict[str, str] = {}


def compiled_warm_up(payload: Mapping[str, Any], threads: int) -> tuple[Callable[[str], None], str]:
    """The fork server's warm-up (``run_sandboxed``'s ``warm``) that loads PPO's compiled
    graphs for an evaluation payload with ``ppo_kwargs["compile"]``.

    :param payload: the evaluation job's payload (env, envs, device, PPO settings).
    :param threads: the worker's torch threads (part of a compiled CPU kernel).
    """
    spec = {
        "env_id": payload["env_id"], "description": payload.get("description"),
        "num_envs": payload["num_envs"], "device": payload["device"],
        "ppo_kwargs": payload["ppo_kwargs"], "threads": threads,
        "cache": os.fspath(compiled.cache_folder().parent),
    }  # fmt: skip
    return warm_compiled, json.dumps(spec, sort_keys=True)


def warm_compiled(argument: str) -> None:
    """Load (or compile and cache) PPO's graphs for ``argument``, a :func:`compiled_warm_up` spec,
    and the env's compiled step where it has one.

    Runs in the fork server: builds the env and a ``PPO(compile=True)`` with the spec's
    settings, warms it up and takes one env step, so the graphs stay loaded for the workers
    it forks.
    """
    try:
        spec = json.loads(argument)
        os.environ[compiled.CACHE_VARIABLE] = spec["cache"]
        torch.set_num_threads(spec["threads"])
        if spec.get("description"):
            use_description(spec["description"])
        threads = _threads()
        env: Any = training_env(spec["env_id"], spec["num_envs"], spec["device"], 0, compile=True)
        model: Any = None
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", FutureWarning)  # torch.export's, not the user's
                # the env as the workers train in it (the program's reward comes per rollout,
                # reward_fn, so PPO compiles its rollout with the env's step)
                model = PPO(env, device=spec["device"], **spec["ppo_kwargs"])
                model.warm_up()
                if getattr(env, "compile", False):  # the env's step compiles (or loads) at its first step
                    obs, _ = env.reset(seed=0)
                    env.step(torch.as_tensor(model.predict(obs, deterministic=True)[0], device=env.device))
        finally:
            env.close()
            # MuJoCo's batch keeps a C thread pool until it is freed; a first compile leaves
            # tqdm's monitor thread behind, and may leave Inductor's compile workers' threads
            env = model = None
            gc.collect()
            _stop_tqdm_monitor()
            _stop_compile_workers()
            # the workers' environment stays the server's minimal one (they find the graphs in memory)
            os.environ.pop(compiled.CACHE_VARIABLE, None)
        left = _threads_left(threads)
        if left:  # a fork would copy a lock some thread holds: workers could hang
            names = ", ".join(sorted(set(left.values())))
            raise RuntimeError(f"the warm-up left {len(left)} thread(s) running in the fork server, which "
                               f"forks its workers ({names})")
    except Exception as error:
        _WARMED[argument] = f"{type(error).__name__}: {error}"[:500]
        raise
    _WARMED[argument] = ""


def _stop_tqdm_monitor() -> None:
    tqdm = sys.modules.get("tqdm")
    monitor = getattr(getattr(tqdm, "tqdm", None), "monitor", None)
    if monitor is not None:
        monitor.exit()
        tqdm.tqdm.monitor = None


def _stop_compile_workers() -> None:
    """Shut Inductor's pool of compile workers (and the threads that wait on it), if it started."""
    async_compile = sys.modules.get("torch._inductor.async_compile")
    shutdown = getattr(async_compile, "shutdown_compile_workers", None)
    if shutdown is not None:
        shutdown()


def _threads_left(before: Mapping[str, str], wait_s: float = 2.0) -> dict[str, str]:
    """The threads not in ``before``, once those that are ending have ended (a pool shut down
    a moment ago may still be joining its threads), waiting at most ``wait_s``."""
    deadline = time.monotonic() + wait_s
    while True:
        left = {tid: name for tid, name in _threads().items() if tid not in before}
        if not left or time.monotonic() > deadline:
            return left
        time.sleep(0.02)


def _threads() -> dict[str, str]:
    """This process's threads (Python's and C libraries' alike) by id, with their names; empty
    where /proc is missing."""
    threads = {}
    try:
        for tid in os.listdir("/proc/self/task"):
            with open(f"/proc/self/task/{tid}/comm") as comm:
                threads[tid] = comm.read().strip()
    except OSError:
        pass  # a thread that ended while being listed, or no /proc
    return threads


def training_env(env_id: str, num_envs: int, device: str, seed: int, compile: bool = False) -> envs.BatchedEnv:
    """The batched env a program trains in; with ``compile``, its step compiled where the env
    compiles (rewardlab's torch envs; MuJoCo's physics and Gymnasium's envs do not)."""
    if compile:
        try:
            return envs.make(env_id, num_envs=num_envs, device=device, seed=seed, compile=True)
        except ValueError:  # this env's step does not compile
            pass
    return envs.make(env_id, num_envs=num_envs, device=device, seed=seed)


def compile_in_worker(payload: Mapping[str, Any]) -> tuple[dict[str, Any], str]:
    """The PPO settings a worker trains with, and a note when ``compile`` had to be dropped.

    Confines the compile cache to what the fork server loaded; when it loaded nothing for
    this payload (its warm-up failed, say for want of a C++ compiler), the worker trains
    eagerly, which gives the same training up to float rounding.
    """
    ppo_kwargs = dict(payload["ppo_kwargs"])
    if not ppo_kwargs.get("compile"):
        return ppo_kwargs, ""
    compiled.loaded_only()
    problem = _WARMED.get(payload.get("compile_warm") or "", "the fork server did not load them")
    if not problem:
        return ppo_kwargs, ""
    ppo_kwargs["compile"] = False
    return ppo_kwargs, f"trained eagerly: PPO's compiled graphs were not available ({problem})"
