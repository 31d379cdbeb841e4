"""The compile cache's key: everything a compiled library depends on changes it."""

from __future__ import annotations

import pytest
import torch
from torch.fx.experimental.proxy_tensor import make_fx

from rewardlab.common.compiled import cache_folder, cache_key, load_or_compile


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
