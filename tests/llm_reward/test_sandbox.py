"""A corpus of hostile and broken reward programs against the checks and the sandbox.

Two layers, each tested on its own:

- ``STATIC``: programs the static checks reject before anything runs; ``evaluate``
  returns a ``"check"`` failure naming the line and the reason.
- ``RUNTIME``: programs run with ``static_checks=False``, so the sandbox alone must
  stop them (many would also fail the static checks: ``static`` says which). Each must
  come back as a failure of the expected kind with a clear reason within its time limit.

Around the whole runtime corpus the test checks that the calling process is unharmed,
that no file outside the run directories changed and that a loopback listener saw no
connection. Runtime cases run three at a time, one sandboxed process each, on a tiny
training budget.
"""

from __future__ import annotations

import os
import signal
import socket
import textwrap
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import torch

from rewardlab import llm_reward
from rewardlab.llm_reward.programs.checks import check_source
from rewardlab.llm_reward.sandbox.runner import landlock_abi

ENV_ID = "CartPole-v1"
SECRET_NAME = "REWARDLAB_HOSTILE_SECRET"
SECRET_VALUE = "s3cr3t-7f1c"
TINY = {"steps": 256, "num_envs": 4, "num_checkpoints": 1, "eval_episodes": 2,
        "ppo_kwargs": {"n_steps": 32, "n_epochs": 1}}
TIMEOUT_S = 30.0
SHORT_TIMEOUT_S = 6.0
LANDLOCK = landlock_abi() > 0


def program(body: str, arguments: str = "x") -> str:
    """A ``compute_reward(arguments)`` whose body is ``body``."""
    return f"import torch\n\n\ndef compute_reward({arguments}):\n{textwrap.indent(body.strip(), '    ')}\n"


# ------------------------------------------------------------------ static layer
STATIC = {
    "import_os": ("import os\n" + program("return x, {}"), "imports `os`"),
    "import_subprocess_inside": (program("import subprocess\nreturn x, {}"), "imports `subprocess`"),
    "from_ctypes": ("from ctypes import CDLL\n" + program("return x, {}"), "imports `ctypes`"),
    "importlib": ("import importlib\n" + program("return x, {}"), "imports `importlib`"),
    "dunder_import": (program("__import__('os').system('id')\nreturn x, {}"), "`__import__`"),
    "builtins_module": ("import builtins\n" + program("return x, {}"), "imports `builtins`"),
    "torch_os_system": (program("torch.os.system('id')\nreturn x, {}"), "`.os`"),
    "numpy_ctypeslib": ("import numpy as np\n" + program("np.ctypeslib.ctypes\nreturn x, {}"), "`.ctypeslib`"),
    "class_bases_chain": (program("().__class__.__bases__[0].__subclasses__()\nreturn x, {}"), "`.__class__`"),
    "torch_utils": (program("torch.utils.cpp_extension.load('m', [])\nreturn x, {}"), "`.utils`"),
    "torch_hub": (program("torch.hub.load('a/b', 'm')\nreturn x, {}"), "`.hub`"),
    "torch_load": (program("torch.load('weights.pt')\nreturn x, {}"), "`.load`"),
    "eval": (program("return eval('x'), {}"), "`eval` runs code from strings"),
    "exec": (program("exec('y = 1')\nreturn x, {}"), "`exec` runs code from strings"),
    "compile": (program("compile('1', 'f', 'eval')\nreturn x, {}"), "`compile`"),
    "open_file": (program("open('/tmp/pwned', 'w').write('x')\nreturn x, {}"), "`open`"),
    "globals": (program("globals()['torch'] = None\nreturn x, {}"), "`globals`"),
    "vars": (program("vars(torch)\nreturn x, {}"), "`vars`"),
    "getattr_computed_name": (program("name = 'sy' + 's'\nreturn getattr(torch, name), {}"),
                              "needs a literal attribute name"),
    "getattr_dunder": (program("getattr(torch, '__dict__')\nreturn x, {}"), "private or dunder"),
    "setattr": (program("setattr(torch, 'sum', None)\nreturn x, {}"), "`setattr`"),
    "monkeypatch_assignment": (program("torch.sum = lambda *a: 0\nreturn x, {}"),
                               "assigning or deleting the attribute `.sum`"),
    "global_torch_setting": (program("torch.set_default_dtype(torch.float64)\nreturn x, {}"),
                             "changes global torch/numpy settings"),
    "breakpoint": (program("breakpoint()\nreturn x, {}"), "`breakpoint`"),
    "input": (program("input()\nreturn x, {}"), "`input`"),
    "class_definition": ("class Evil:\n    pass\n\n\n" + program("return x, {}"), "may not define classes"),
    "top_level_loop": ("while True:\n    pass\n\n\n" + program("return x, {}"), "top-level code may only"),
    "decorator": ("@functools.lru_cache\n" + program("return x, {}").replace("import torch\n\n\n", ""),
                  "decorators are not supported"),
    "star_import": ("from math import *\n" + program("return x, {}"), "import *"),
    "varargs": (program("return x, {}", "*args, **kwargs"), "*args or **kwargs"),
    "undeclared_argument": (program("return velocity, {}", "velocity"), "argument `velocity`"),
    "frame_walk": (program("import math\nreturn math.f_globals, {}"), "`.f_globals`"),
    "syntax_error": (program("return x +, {}"), "syntax error"),
}


@pytest.mark.parametrize("case", sorted(STATIC))
def test_static_layer_rejects(case: str) -> None:
    source, expected = STATIC[case]
    findings = check_source(source, llm_reward.describe(ENV_ID).variables)
    assert any(expected in str(finding) for finding in findings), findings
    assert all(str(finding).startswith("line ") for finding in findings if finding.line)
    unchecked = llm_reward.RewardProgram(source, "compute_reward", ("x",))
    result = llm_reward.evaluate(unchecked, ENV_ID, steps=64)
    assert not result.ok and result.failure.kind == "check"
    assert any(expected in finding for finding in result.failure.findings)
    assert result.wall_s < 1.0, "rejected without starting a process"


# ----------------------------------------------------------------- runtime layer
@dataclass(frozen=True)
class Case:
    """A program for the sandbox alone, and how it must fail."""

    source: str
    kind: str
    reason: str
    static: bool  # the static layer would reject it too
    timeout_s: float = TIMEOUT_S
    memory_mb: int = 2048
    options: tuple[tuple[str, Any], ...] = ()
    arguments: tuple[str, ...] = ("x",)
    needs_landlock: bool = False  # torch's C++ file I/O bypasses audit hooks; the kernel stops it


def _builtins(call: str) -> str:
    return f"torch.sys.modules['builtins'].{call}"


RUNTIME = {
    "infinite_loop": Case(program("while True:\n    pass"), "timeout", "wall-clock limit of 6 s",
                          False, SHORT_TIMEOUT_S),
    "infinite_loop_at_top_level": Case("while True:\n    pass\n\n\n" + program("return x, {}"),
                                       "timeout", "timed out", True, SHORT_TIMEOUT_S),
    "ignores_sigterm_and_spins": Case(
        program("signal = torch.sys.modules['signal']\nsignal.signal(signal.SIGTERM, signal.SIG_IGN)\n"
                "while True:\n    pass"),
        "timeout", "killed", True, SHORT_TIMEOUT_S),
    "cpu_time_limit": Case(program("while True:\n    pass"), "limit", "CPU-time limit of 2 s", False,
                           options=(("cpu_s", 2.0),)),
    "deep_recursion": Case("def down(n):\n    return down(n + 1)\n\n\n" + program("return down(0), {}"),
                           "program", "RecursionError", False),
    "memory_bomb_tensor": Case(program("return torch.ones(2**40), {}"), "limit", "ran out of memory", False),
    "memory_bomb_list": Case(program("hoard = [0.0] * 2**34\nreturn x, {}"), "limit", "MemoryError", False),
    "memory_bomb_gradual": Case(
        "HOARD = []\n\n\n" + program("HOARD.append(torch.ones(2**27))\nreturn x, {}"),
        "limit", "ran out of memory", False, memory_mb=1536),
    "dunder_import_os": Case(program("__import__('os').system('touch {outside}/pwned')\nreturn x, {}"),
                             "program", "imports `os`", True),
    "import_importlib": Case(program("import importlib\nreturn x, {}"), "program", "imports `importlib`", True),
    "builtins_open_write": Case(program(_builtins("open('{outside}/pwned', 'w').write('x')") + "\nreturn x, {}"),
                                "sandbox", "open the file", True),
    "torch_os_system": Case(program("torch.os.system('touch {outside}/pwned')\nreturn x, {}"),
                            "sandbox", "run a shell command", True),
    "numpy_ctypes": Case("import numpy as np\n" + program("np.ctypeslib.ctypes.CDLL(None).getpid()\nreturn x, {}"),
                         "sandbox", "ctypes", True),
    "subclasses_to_os_system": Case(
        program("for cls in ().__class__.__bases__[0].__subclasses__():\n"
                "    if cls.__name__ == '_wrap_close':\n"
                "        cls.__init__.__globals__['system']('touch {outside}/pwned')\n"
                "return x, {}"),
        "sandbox", "the reward program tried to", True),
    "subprocess_run": Case(program("torch.sys.modules['subprocess'].run(['touch', '{outside}/pwned'])\nreturn x, {}"),
                           "sandbox", "start a process", True),
    "socket_connect": Case(
        program("torch.sys.modules['socket'].create_connection(('127.0.0.1', {port}), timeout=1)\nreturn x, {}"),
        "sandbox", "use the network", True),
    "numpy_save_outside": Case("import numpy as np\n" + program("np.save('{outside}/pwned.npy', x.numpy())\nreturn x, {}"),
                               "sandbox", "open the file", True),
    # torch's C++ opens the file for writing: the program's process may open files for
    # reading only, and the kernel kills it at the call (which torch could not have caught)
    "mapped_file_outside": Case(
        program("torch.from_file('{outside}/pwned.bin', shared=True, size=8)\nreturn x, {}"),
        "sandbox", "system call the sandbox refuses", True, needs_landlock=True),
    "torch_save_outside": Case(program("torch.save(x, '{outside}/pwned.pt')\nreturn x, {}"),
                               "sandbox", "system call the sandbox refuses", True, needs_landlock=True),
    "remove_run_dir_file": Case(program("torch.os.remove('worker.log')\nreturn x, {}"),
                                "sandbox", "change files", True),
    "read_secret_env": Case(program(f"raise ValueError(str(torch.os.environ.get('{SECRET_NAME}')))"),
                            "program", "ValueError: None", True),
    "read_file": Case(program(_builtins("open('/etc/hostname').read()") + "\nreturn x, {}"),
                      "sandbox", "open the file", True),
    "set_env": Case(program("torch.os.environ['PATH'] = '/evil'\nreturn x, {}"),
                    "sandbox", "change environment variables", True),
    "fork": Case(program("torch.os.fork()\nreturn x, {}"), "sandbox", "fork the process", True),
    "posix_spawn": Case(program("torch.os.posix_spawn('/bin/true', ['true'], {})\nreturn x, {}"),
                        "sandbox", "start a process", True),
    "thread": Case(program("torch.sys.modules['threading'].Thread(target=print).start()\nreturn x, {}"),
                   "sandbox", "start a thread", True),
    "kill_parent": Case(program("torch.os.kill(torch.os.getppid(), 9)\nreturn x, {}"),
                        "sandbox", "send a signal", True),
    "raise_rlimits": Case(program("r = torch.sys.modules['resource']\nr.setrlimit(r.RLIMIT_AS, (-1, -1))\nreturn x, {}"),
                          "sandbox", "resource limits", True),
    "chdir": Case(program("torch.os.chdir('/')\nreturn x, {}"), "sandbox", "change the working directory", True),
    "frame_globals": Case(program("torch.sys._getframe(1).f_globals.clear()\nreturn x, {}"),
                          "sandbox", "inspect interpreter frames", True),
    "real_eval": Case(program("return " + _builtins("eval('x * 2')") + ", {}"), "sandbox", "compile", True),
    "gc_walk": Case(program("torch.sys.modules['gc'].get_objects()\nreturn x, {}"),
                    "sandbox", "garbage collector", True),
    "caught_violation": Case(program("try:\n    torch.os.system('id')\nexcept Exception:\n    pass\nreturn x, {}"),
                             "sandbox", "run a shell command", True),
    "monkeypatch_torch_sum": Case(program("torch.sum = lambda *a, **k: 0\nreturn x, {}"),
                                  "sandbox", "replaced, added or deleted torch.sum", True),
    "monkeypatch_tensor_method": Case(program("torch.Tensor.mean = torch.Tensor.sum\nreturn x, {}"),
                                      "sandbox", "torch.Tensor.mean", True),
    "wrong_shape": Case(program("return x.reshape(-1, 1), {}"), "program", "shape (128, 1)", False),
    "wrong_dtype": Case(program("return (x > 0).long(), {}"), "program", "dtype torch.int64", False),
    "nan": Case(program("return x * float('nan'), {}"), "program", "128 NaN and 0 inf of 128", False),
    "inf_component": Case(program("return x, {'boom': torch.full_like(x, float('inf'))}"),
                          "program", "component 'boom': 0 NaN and 128 inf", False),
    "exception_first_call": Case(program("raise RuntimeError('first call')"), "program",
                                 "(call 1, after 0 env steps) raised RuntimeError: first call", False),
    "exception_after_1000_steps": Case(
        "CALLS = [0]\n\n\n" + program("CALLS[0] += 1\nif CALLS[0] * len(x) > 1000:\n"
                                      "    raise RuntimeError('late failure')\nreturn x, {}"),
        # PPO asks for the reward once per rollout (32 steps of 4 envs: 128 transitions), and
        # the first call also ran the program on each half of the batch (the check that no
        # env's reward depends on the others): CALLS is 8 at the 6th call, after 640 steps
        "program", "(call 6, after 640 env steps) raised RuntimeError: late failure", False,
        options=(("steps", 2048), ("num_checkpoints", 4))),
}


def test_the_corpus_is_large_enough() -> None:
    assert len(STATIC) + len(RUNTIME) >= 60
    assert len(RUNTIME) >= 30


@pytest.fixture(scope="module")
def runtime_results(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """Run every runtime case; record the calling process's state around the corpus."""
    root = tmp_path_factory.mktemp("hostile")
    outside = root / "outside"
    outside.mkdir()
    (outside / "sentinel.txt").write_text("untouched")
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(8)
    listener.setblocking(False)
    port = listener.getsockname()[1]
    os.environ[SECRET_NAME] = SECRET_VALUE
    before = _process_state()

    def run(name: str) -> llm_reward.TrainingRun:
        case = RUNTIME[name]
        source = case.source.replace("{outside}", os.fspath(outside)).replace("{port}", str(port))
        options = {**TINY, **dict(case.options)}
        return llm_reward.evaluate(
            llm_reward.RewardProgram(source, "compute_reward", case.arguments),
            ENV_ID,
            timeout_s=case.timeout_s,
            memory_mb=case.memory_mb,
            run_dir=root / "runs" / name,
            static_checks=False,
            **options,
        )

    names = [name for name, case in RUNTIME.items() if LANDLOCK or not case.needs_landlock]
    try:
        with ThreadPoolExecutor(max_workers=3) as pool:
            results = dict(zip(names, pool.map(run, names), strict=True))
        try:
            connection, _ = listener.accept()
            connection.close()
            connected = True
        except BlockingIOError:
            connected = False
    finally:
        listener.close()
        del os.environ[SECRET_NAME]
    return {"results": results, "root": root, "outside": outside, "connected": connected,
            "before": before, "after": _process_state()}


def _process_state() -> dict[str, Any]:
    return {
        "cwd": os.getcwd(),
        # torch's Inductor names its cache folder in the environment when the caller first
        # loads PPO's compiled graphs (before the workers start), whichever test comes first
        "environment": {
            k: v for k, v in os.environ.items() if k != SECRET_NAME and not k.startswith("TORCHINDUCTOR_")
        },
        "torch.sum": torch.sum,
        "Tensor.mean": torch.Tensor.mean,
        "sigterm": signal.getsignal(signal.SIGTERM),
        "default_dtype": torch.get_default_dtype(),
    }


@pytest.mark.parametrize("case", sorted(RUNTIME))
def test_sandbox_stops(case: str, runtime_results: dict[str, Any]) -> None:
    expected = RUNTIME[case]
    if expected.needs_landlock and not LANDLOCK:
        pytest.skip("this kernel has no Landlock: C-level file writes are not stopped")
    result: llm_reward.TrainingRun = runtime_results["results"][case]
    assert not result.ok
    assert result.failure is not None
    assert result.failure.kind == expected.kind, result.failure
    assert expected.reason in result.failure.reason, result.failure.reason
    limit = expected.timeout_s if expected.kind == "timeout" else TIMEOUT_S
    assert result.wall_s < limit + 10.0
    assert SECRET_VALUE not in result.to_json()
    findings = check_source(RUNTIME[case].source, llm_reward.describe(ENV_ID).variables)
    assert bool(findings) == expected.static, findings


def test_program_tracebacks_show_the_program_lines(runtime_results: dict[str, Any]) -> None:
    results = runtime_results["results"]
    first = results["exception_first_call"].failure
    assert 'File "<reward_program>", line 5, in compute_reward' in first.traceback
    assert "site-packages" not in first.traceback and "llm_reward" not in first.traceback
    violation = results["torch_os_system"].failure
    assert "(line 5)" in violation.reason


def test_failures_keep_what_was_measured_before(runtime_results: dict[str, Any]) -> None:
    late = runtime_results["results"]["exception_after_1000_steps"]
    (seed,) = late.seeds
    assert [point.step for point in seed.checkpoints] == [512]
    assert seed.wall_s is None and "extrinsic" in seed.checkpoints[0].components


def test_caller_unharmed_nothing_written_no_connection(runtime_results: dict[str, Any]) -> None:
    assert runtime_results["before"] == runtime_results["after"]
    outside: Path = runtime_results["outside"]
    assert sorted(p.name for p in outside.iterdir()) == ["sentinel.txt"]
    assert (outside / "sentinel.txt").read_text() == "untouched"
    runs = runtime_results["root"] / "runs"
    assert (runs / "remove_run_dir_file" / "worker.log").exists()
    assert not runtime_results["connected"], "a sandboxed program reached the loopback listener"


def test_a_job_is_handed_in_as_a_function_and_found_again_by_reference(tmp_path) -> None:
    # the sandbox names no job of its own: the caller hands it one, and it reaches the fork
    # server as a reference that imports the very same function
    from rewardlab.llm_reward.sandbox import run_sandboxed
    from rewardlab.llm_reward.sandbox.protocol import reference, resolve
    from rewardlab.llm_reward.training.job import evaluation_job, reward_companion

    for function in (evaluation_job, reward_companion):
        assert resolve(reference(function)) is function
    for bad, message in ((lambda payload, guard: {}, "not a module-level function"),
                         ("rewardlab.llm_reward.training.job:evaluation_job", "is not a function")):
        with pytest.raises(ValueError, match=message):
            run_sandboxed(bad, {}, tmp_path)
