"""The compile cache: its key follows everything a compiled library depends on; recipes skip tracing."""

from __future__ import annotations

import shutil

import pytest
import torch
from torch.fx.experimental.proxy_tensor import make_fx

from rewardlab.common import compiled
from rewardlab.common.compiled import (
    cache_folder,
    cache_key,
    load_or_compile,
    load_or_trace,
    source_fingerprint,
)

# The cache's tests compile with Inductor: a library is what they are about.
pytestmark = pytest.mark.inductor


def _graph(constant: float, shape: tuple[int, ...] = (4,)) -> tuple[torch.fx.GraphModule, list[torch.Tensor]]:
    captured = torch.full(shape, constant)  # a tensor the trace captures as a constant
    inputs = [torch.zeros(shape)]
    return make_fx(lambda x: x * 2 + captured)(*inputs), inputs


def test_the_key_follows_constants_shapes_and_options() -> None:
    graph, inputs = _graph(1.0)
    key = cache_key(graph, inputs, {})
    assert cache_key(*_graph(1.0), {}) == key  # the same graph again: the same library
    assert cache_key(*_graph(2.0), {}) != key  # a captured tensor's value
    assert cache_key(*_graph(1.0, (5,)), {}) != key  # an input's shape
    assert cache_key(graph, inputs, {"cpp.threads": 1}) != key  # an Inductor option
    transposed = [torch.zeros(4, 3).t()]
    plain = make_fx(lambda x: x + 1)(torch.zeros(3, 4))
    assert cache_key(plain, transposed, {}) != cache_key(plain, [torch.zeros(3, 4)], {})  # strides


def test_the_cache_folder_follows_the_variable(monkeypatch, tmp_path) -> None:
    monkeypatch.setenv("REWARDLAB_CACHE", str(tmp_path))
    assert cache_folder() == tmp_path / "compiled"
    monkeypatch.delenv("REWARDLAB_CACHE")
    assert cache_folder().parts[-3:] == (".cache", "rewardlab", "compiled")


def test_a_library_others_can_write_is_refused(monkeypatch, tmp_path) -> None:
    monkeypatch.setenv("REWARDLAB_CACHE", str(tmp_path))
    graph, inputs = _graph(1.0)
    planted = cache_folder() / f"planted-{cache_key(graph, inputs, {})}.pt2"
    planted.parent.mkdir(parents=True)
    planted.write_bytes(b"not a library")
    planted.chmod(0o666)
    with pytest.raises(PermissionError, match="writable by others"):
        load_or_compile(graph, inputs, "planted")


def test_a_known_recipe_loads_its_library_without_tracing(monkeypatch, tmp_path) -> None:
    monkeypatch.setenv("REWARDLAB_CACHE", str(tmp_path))
    traced = []

    def trace(constant: float) -> torch.fx.GraphModule:
        traced.append(constant)
        return _graph(constant)[0]

    inputs = [torch.zeros(4)]
    first = load_or_trace(lambda: trace(1.0), inputs, "recipe", "times two plus 1")
    assert traced == [1.0]
    monkeypatch.setattr(compiled, "_LOADED", {})  # as a new process: nothing loaded yet
    again = load_or_trace(lambda: trace(1.0), inputs, "recipe", "times two plus 1")
    assert traced == [1.0]  # not traced: the recipe named its library
    other = load_or_trace(lambda: trace(2.0), inputs, "recipe", "times two plus 2")
    assert traced == [1.0, 2.0]  # a new recipe is traced (and compiled)
    x = torch.arange(4.0)
    assert torch.equal(first(x)[0], x * 2 + 1) and torch.equal(again(x)[0], x * 2 + 1)
    assert torch.equal(other(x)[0], x * 2 + 2)
    # the same recipe with inputs of another shape is another graph
    load_or_trace(lambda: make_fx(lambda x: x * 2 + 1)(torch.zeros(5)), [torch.zeros(5)], "recipe",
                  "times two plus 1")  # fmt: skip
    assert len(list((cache_folder() / "recipes").iterdir())) == 3


def test_a_recipe_record_others_can_write_is_refused(monkeypatch, tmp_path) -> None:
    monkeypatch.setenv("REWARDLAB_CACHE", str(tmp_path))
    inputs = [torch.zeros(4)]
    load_or_trace(lambda: _graph(1.0)[0], inputs, "recipe", "times two plus 1")
    (record,) = (cache_folder() / "recipes").iterdir()
    record.chmod(0o666)
    monkeypatch.setattr(compiled, "_LOADED", {})  # as a new process
    with pytest.raises(PermissionError, match="writable by others"):
        load_or_trace(lambda: _graph(1.0)[0], inputs, "recipe", "times two plus 1")


def test_a_loaded_recipe_is_served_from_memory_and_only_that_once_confined(monkeypatch, tmp_path) -> None:
    monkeypatch.setenv("REWARDLAB_CACHE", str(tmp_path))
    monkeypatch.setattr(compiled, "_LOADED", {})
    monkeypatch.setattr(compiled, "_LOADED_ONLY", False)
    inputs = [torch.zeros(4)]
    first = load_or_trace(lambda: _graph(1.0)[0], inputs, "recipe", "times two plus 1")
    shutil.rmtree(cache_folder())  # a confined worker cannot read the cache
    compiled.loaded_only()
    assert load_or_trace(lambda: _graph(1.0)[0], inputs, "recipe", "times two plus 1") is first
    with pytest.raises(compiled.NotLoadedError, match="compile=False"):
        load_or_trace(lambda: _graph(2.0)[0], inputs, "recipe", "times two plus 2")
    assert not cache_folder().exists()  # nothing read, traced or written


def test_the_thread_count_is_part_of_the_key(monkeypatch) -> None:
    graph, inputs = _graph(1.0)
    threads = torch.get_num_threads()
    one = cache_key(graph, inputs, {})
    monkeypatch.setattr(torch, "get_num_threads", lambda: threads + 1)
    assert cache_key(graph, inputs, {}) != one  # Inductor writes the count into CPU kernels


def test_the_source_fingerprint_follows_the_code(monkeypatch, tmp_path) -> None:
    package = tmp_path / "fingerprinted"
    package.mkdir()
    (package / "__init__.py").write_text("X = 1\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    before = source_fingerprint("fingerprinted")
    (package / "__init__.py").write_text("X = 2\n")
    source_fingerprint.cache_clear()
    assert source_fingerprint("fingerprinted") != before


def test_the_key_ignores_the_stride_of_a_dimension_of_size_one() -> None:
    # a column sliced from a transposed product, (128, 1) with strides (1, 132), is laid out as
    # a contiguous (128, 1): a library compiled for one serves the other (a search's fork
    # server warms PPO's update on a contiguous example; its workers pass such a column)
    strided = torch.zeros(1, 132).t()[:128]
    assert strided.stride() != (1, 1) and strided.is_contiguous()
    plain = torch.zeros(128, 1)
    assert compiled._context([strided], {}) == compiled._context([plain], {})
    assert compiled._context([torch.zeros(4, 2).t()], {}) != compiled._context([torch.zeros(2, 4)], {})


def test_the_aot_eager_backend_runs_the_traced_graph_and_writes_nothing(monkeypatch, tmp_path) -> None:
    monkeypatch.setenv("REWARDLAB_CACHE", str(tmp_path))
    monkeypatch.setenv("REWARDLAB_COMPILE_BACKEND", "aot_eager")
    weight = torch.ones(4, requires_grad=True)  # the graph holds its own gradients: no autograd
    graph = make_fx(lambda x, w: (x * w, {"sum": (x * w).sum()}))(torch.zeros(4), weight)
    run = load_or_compile(graph, [torch.zeros(4), weight], "traced")
    product, total = run(torch.arange(4.0), weight)
    assert torch.equal(product, torch.arange(4.0)) and float(total) == 6.0
    assert not product.requires_grad
    assert load_or_trace(lambda: graph, [torch.zeros(4), weight], "traced", "x times w") is not run
    assert not cache_folder().exists()
    # the backend is part of what a process remembers: Inductor's library is another callable
    monkeypatch.setenv("REWARDLAB_COMPILE_BACKEND", "inductor")
    assert load_or_compile(graph, [torch.zeros(4), weight], "traced") is not run


def test_an_unknown_backend_is_named_with_the_choices(monkeypatch) -> None:
    monkeypatch.setenv("REWARDLAB_COMPILE_BACKEND", "eager")
    graph, inputs = _graph(1.0)
    with pytest.raises(ValueError, match=r"REWARDLAB_COMPILE_BACKEND='eager' is not a backend.*'aot_eager'"):
        load_or_compile(graph, inputs, "named")
