"""Ahead-of-time compiled graphs, kept in an on-disk cache: compile once per machine, load after.

:func:`load_or_compile` takes a graph of aten operators (``make_fx``'s output) and the
inputs it was traced with, and returns a callable from AOTInductor's kernel library for
it: loaded from the cache when one was compiled before for the same graph (its code and
tensor constants), input shapes and dtypes, device, torch version and CPU capability;
compiled and written into the cache otherwise (tens of seconds, once). PPO's compiled
update (``rewardlab.agents.fused``) and the batched envs' compiled step
(``rewardlab.envs.core``, ``compile=True``) use it.

Tracing a graph to find its key takes a fraction of a second. :func:`load_or_trace` skips it when the caller can name a *recipe*:
everything the graph is made from but not its code (the module's structure and settings,
the source of the packages whose code it traces, inputs, options, torch); the first
compile records which library the recipe made, and later processes load that library
without tracing. Within a process (and the processes forked from it, such as the
sandbox's workers, which cannot read the cache: :func:`loaded_only`) a loaded library
stays loaded.

Backend: ``$REWARDLAB_COMPILE_BACKEND``, ``inductor`` (the default: the libraries above) or
``aot_eager``, as ``torch.compile`` names it: the traced graph itself runs, operator by
operator, with no compiler and no cache. It computes what the library computes (the same
graph) in a fraction of a second's set-up and at eager speed: for tests and debugging,
and for a machine with no C++ compiler.

Cache folder: ``$REWARDLAB_CACHE/compiled`` (default ``~/.cache/rewardlab/compiled``).
Each library is written beside its final name and renamed into place, so concurrent runs
never read half a file; deleting the folder is always safe. A library owned by another
user, or writable by others, is refused: loading one runs its code. On torch before 2.6 (no
packaged libraries) graphs are compiled in memory by Inductor each run instead.
"""

from __future__ import annotations

import functools
import hashlib
import importlib
import os
import re
import tempfile
import warnings
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import torch

CACHE_VARIABLE = "REWARDLAB_CACHE"
BACKEND_VARIABLE = "REWARDLAB_COMPILE_BACKEND"
BACKENDS = ("inductor", "aot_eager")


def backend() -> str:
    """Who runs a compiled graph: ``$REWARDLAB_COMPILE_BACKEND``, ``inductor`` by default."""
    value = os.environ.get(BACKEND_VARIABLE) or "inductor"
    if value not in BACKENDS:
        raise ValueError(
            f"{BACKEND_VARIABLE}={value!r} is not a backend: set it to 'inductor' (compiled "
            "libraries, the default) or 'aot_eager' (the traced graph run as it is, uncompiled)"
        )
    return value


def cache_folder() -> Path:
    """Where compiled libraries are kept: ``$REWARDLAB_CACHE/compiled`` or ``~/.cache/rewardlab/compiled``."""
    root = os.environ.get(CACHE_VARIABLE) or os.path.join(os.path.expanduser("~"), ".cache", "rewardlab")
    return Path(root) / "compiled"


def cache_key(graph: torch.fx.GraphModule, inputs: list[torch.Tensor], options: Mapping[str, Any]) -> str:
    """The hash that names ``graph``'s library: everything the compiled code depends on."""
    key = hashlib.sha256()
    for part in (graph.code, *_context(inputs, options)):
        key.update(part.encode())
    # Tensors the trace captured as constants are not in the code: hash their values.
    for node in graph.graph.nodes:
        if node.op == "get_attr":
            value = getattr(graph, node.target)
            if isinstance(value, torch.Tensor):
                key.update(node.target.encode())
                key.update(value.detach().cpu().contiguous().view(torch.uint8).numpy().tobytes())
    return key.hexdigest()[:32]


def _context(inputs: list[torch.Tensor], options: Mapping[str, Any]) -> tuple[str, ...]:
    """What a library depends on besides its graph: inputs, options, device, torch, CPU and
    the thread count (Inductor writes a CPU kernel's OpenMP thread count into its code)."""
    return (
        repr([(tuple(t.shape), str(t.dtype), _layout(t)) for t in inputs]),
        repr(sorted(options.items())),
        inputs[0].device.type if inputs else "cpu",
        torch.__version__,
        torch.backends.cpu.get_cpu_capability(),
        f"threads={torch.get_num_threads()}",
    )


def _layout(tensor: torch.Tensor) -> tuple[int, ...]:
    """A tensor's strides as its memory is laid out: a dimension of size 1 is never stepped
    along, so its stride (which a view or a transpose leaves at any value, such as a column
    of values sliced from a transposed product) is left out as 0."""
    return tuple(stride if size > 1 else 0 for size, stride in zip(tensor.shape, tensor.stride(), strict=True))


def load_or_compile(
    graph: torch.fx.GraphModule,
    inputs: list[torch.Tensor],
    name: str,
    options: Mapping[str, Any] | None = None,
) -> Callable[..., Any]:
    """The compiled library of ``graph`` from the cache, compiled into it first if missing.

    :param graph: a graph of aten operators traced with ``inputs``.
    :param inputs: example inputs; every call must pass tensors of their shapes, dtypes
        and device.
    :param name: the start of the library's file name (what it computes).
    :param options: Inductor options (part of the cache key).
    :return: a callable taking the inputs positionally and returning the graph's outputs.
    :raises NotLoadedError: after :func:`loaded_only`, for a graph this process has not loaded.

    A library loaded once stays loaded for the process (and the processes forked from it).
    """
    options = dict(options or {})
    key = cache_key(graph, inputs, options)

    def load() -> Callable[..., Any]:
        if backend() == "aot_eager":
            return _as_traced(graph)
        if not _packaged():
            return torch._inductor.compile(graph, inputs, options=options)
        return _load(_library(graph, inputs, name, options, key), _device_of(inputs))

    return _remembered(f"{_file_stem(name)}-{key}", name, load)


def load_or_trace(
    trace: Callable[[], torch.fx.GraphModule],
    inputs: list[torch.Tensor],
    name: str,
    recipe: str,
    options: Mapping[str, Any] | None = None,
) -> Callable[..., Any]:
    """:func:`load_or_compile` of ``trace()``, without tracing when ``recipe`` was compiled before.

    :param trace: makes the graph (``make_fx``), called only when the recipe is new.
    :param inputs: example inputs, as for :func:`load_or_compile`.
    :param name: the start of the library's file name.
    :param recipe: a text that determines the graph: two graphs with the same recipe (and
        inputs, options and torch) must be the same graph. Include the source of the code
        that is traced (:func:`source_fingerprint`).
    :param options: Inductor options.
    :raises NotLoadedError: after :func:`loaded_only`, for a recipe this process has not loaded.

    A library loaded once stays loaded for the process (and the processes forked from it):
    a second model of the same recipe takes it from memory.
    """
    options = dict(options or {})
    digest = hashlib.sha256()
    for part in (recipe, *_context(inputs, options), str(_device_of(inputs))):
        digest.update(part.encode())
    stem = f"{_file_stem(name)}-{digest.hexdigest()[:32]}"

    def load() -> Callable[..., Any]:
        if backend() == "aot_eager":
            return _as_traced(trace())
        if not _packaged():
            return torch._inductor.compile(trace(), inputs, options=options)
        return _load(_recorded_library(trace, inputs, name, stem, options), _device_of(inputs))

    return _remembered(f"recipe-{stem}", name, load)


def _remembered(stem: str, name: str, load: Callable[[], Callable[..., Any]]) -> Callable[..., Any]:
    """The library this process loaded for ``stem`` before, or ``load()``'s, remembered."""
    stem = f"{backend()}-{stem}"
    memo = (os.fspath(cache_folder()), stem)
    loaded = _LOADED.get(memo)
    if loaded is None and _LOADED_ONLY:  # a confined worker: whichever folder it came from
        loaded = next((run for (_, known), run in _LOADED.items() if known == stem), None)
    if loaded is not None:
        return loaded
    if _LOADED_ONLY:
        raise NotLoadedError(
            f"the compiled graph {name!r} was not loaded before this process was confined, and "
            "the compile cache cannot be read from here; build it eagerly (compile=False), or "
            "load it first in the process that forks this one"
        )
    run = _LOADED[memo] = load()
    return run


#: the libraries :func:`load_or_compile` and :func:`load_or_trace` loaded in this process,
#: by cache folder and key or recipe (a forked process inherits them)
_LOADED: dict[tuple[str, str], Callable[..., Any]] = {}
_LOADED_ONLY = False


class NotLoadedError(RuntimeError):
    """A graph this process has not loaded was asked for after :func:`loaded_only`."""


def loaded_only() -> None:
    """From now on :func:`load_or_compile` and :func:`load_or_trace` serve only the libraries
    this process (or the one it was forked from) loaded already, and never read the cache or
    compile: for sandboxed workers, which cannot read the cache; a graph not loaded raises
    :class:`NotLoadedError`."""
    global _LOADED_ONLY
    _LOADED_ONLY = True


def _recorded_library(
    trace: Callable[[], torch.fx.GraphModule],
    inputs: list[torch.Tensor],
    name: str,
    stem: str,
    options: Mapping[str, Any],
) -> Path:
    """The library a recipe's record names, or ``trace()``'s compiled and recorded."""
    # the record of a recipe holds the file name of the library it made
    record = cache_folder() / "recipes" / stem
    if record.exists():
        _check_owned(record)
        library = record.read_text().strip()
        path = cache_folder() / library
        if re.fullmatch(rf"{re.escape(_file_stem(name))}-[0-9a-f]{{32}}\.pt2", library) and path.exists():
            _check_owned(path)
            return path
    path = _library(trace(), inputs, name, options)
    record.parent.mkdir(parents=True, exist_ok=True)
    handle, partial = tempfile.mkstemp(dir=record.parent, prefix="partial-")
    with os.fdopen(handle, "w") as file:
        file.write(path.name)
    os.chmod(partial, 0o644)
    os.replace(partial, record)
    return path


def _as_traced(graph: torch.fx.GraphModule) -> Callable[..., Any]:
    """``graph`` called as a library is: its flat outputs as a list, outside autograd (the
    graph holds its own gradients)."""

    def run(*tensors: torch.Tensor) -> list[torch.Tensor]:
        with torch.no_grad():
            return list(torch.utils._pytree.tree_leaves(graph(*tensors)))

    return run


def _packaged() -> bool:
    # torch before 2.6 has no packaged AOTInductor libraries: graphs are then compiled in
    # memory by Inductor each run, uncached (asked at call time: importing torch._inductor
    # is slow, and importing this module must not pay for it)
    import torch._inductor

    return hasattr(torch._inductor, "aoti_compile_and_package")


def _file_stem(name: str) -> str:
    return re.sub(r"[^A-Za-z0-9._-]+", "_", name)


def _device_of(inputs: list[torch.Tensor]) -> torch.device:
    return inputs[0].device if inputs else torch.device("cpu")


def _library(
    graph: torch.fx.GraphModule,
    inputs: list[torch.Tensor],
    name: str,
    options: Mapping[str, Any],
    key: str | None = None,
) -> Path:
    """The path of ``graph``'s library in the cache, compiled into it first if missing
    (``key``: its :func:`cache_key`, when known)."""
    folder = cache_folder()
    path = folder / f"{_file_stem(name)}-{key or cache_key(graph, inputs, options)}.pt2"
    if path.exists():
        _check_owned(path)
        return path
    folder.mkdir(parents=True, exist_ok=True)
    exported = torch.export.export(graph, tuple(inputs), strict=False)
    handle, partial = tempfile.mkstemp(dir=folder, prefix="partial-", suffix=".pt2")
    os.close(handle)
    os.chmod(partial, 0o644)
    try:
        with warnings.catch_warnings():
            # torch's own compile deep-copies its graphs through a deprecated check
            # (typing_extensions' LeafSpec); the user can do nothing about it
            warnings.filterwarnings("ignore", message=r".*LeafSpec.*is deprecated", category=FutureWarning)
            torch._inductor.aoti_compile_and_package(exported, package_path=partial, inductor_configs=options)
        os.replace(partial, path)
    finally:
        if os.path.exists(partial):
            os.unlink(partial)
    return path


@functools.cache
def source_fingerprint(*packages: str) -> str:
    """A hash of the Python source of ``packages`` (imported module names), for recipes."""
    digest = hashlib.sha256()
    for package in packages:
        module = importlib.import_module(package)
        folders = getattr(module, "__path__", None) or [os.path.dirname(module.__file__ or "")]
        for folder in folders:
            for path in sorted(Path(folder).rglob("*.py")):
                digest.update(str(path.relative_to(folder)).encode())
                digest.update(path.read_bytes())
    return digest.hexdigest()


def _check_owned(path: Path) -> None:
    """Refuse a library (or a recipe's record) that someone else could have written:
    loading a library runs its code."""
    info = path.stat()
    if (hasattr(os, "getuid") and info.st_uid != os.getuid()) or info.st_mode & 0o022:
        raise PermissionError(
            f"{path} is not owned by this user or is writable by others, and loading a compiled "
            f"library runs its code; delete it (it is compiled again), or set {CACHE_VARIABLE} to "
            "a folder only you can write"
        )


def _load(path: Path, device: torch.device) -> Callable[..., Any]:
    """The library's callable, from the package loader itself: ``aoti_load_package`` would
    first probe the CPU's vector instruction set by compiling test programs (1.5 s), to
    warn about a mismatch that the cache key already rules out."""
    loader_type = getattr(getattr(torch._C, "_aoti", None), "AOTIModelPackageLoader", None)
    if loader_type is None:  # a torch without the loader in its C++ bindings
        return torch._inductor.aoti_load_package(str(path))
    index = -1 if device.type == "cpu" else (device.index or 0)
    loader = loader_type(str(path), "model", False, 1, index)

    def run(*tensors: torch.Tensor) -> list[torch.Tensor]:
        return loader.boxed_run(list(tensors))

    return run
