"""Without the kernel's isolation the sandbox refuses untrusted code, unless loudly told not to."""

from __future__ import annotations

import pytest

from rewardlab.llm_reward.sandbox import isolation


def test_a_missing_kernel_feature_is_named_and_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(isolation, "kernel_support", lambda: {
        "namespaces": None, "landlock": "the kernel has no Landlock (Linux 5.13+)", "seccomp": None})
    monkeypatch.delenv(isolation.UNSAFE_OPT_OUT, raising=False)
    with pytest.raises(isolation.IsolationUnavailable, match="landlock: the kernel has no Landlock") as error:
        isolation._require_support()
    assert isolation.UNSAFE_OPT_OUT in str(error.value)
    monkeypatch.setenv(isolation.UNSAFE_OPT_OUT, "1")
    isolation._require_support()  # the opt-out, named as such


def test_this_machine_reports_its_features() -> None:
    support = isolation.kernel_support()
    assert set(support) == {"namespaces", "landlock", "seccomp"}
    assert all(why is None or isinstance(why, str) for why in support.values())
    roots = isolation.readable_roots()
    assert "/proc" in roots and not any(root in ("/", "/etc", "/home", "/root", "/tmp") for root in roots)


def test_an_unbounded_cpu_share_is_said_once(monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture) -> None:
    from rewardlab.llm_reward.sandbox import runner

    monkeypatch.setattr(runner, "cpu_limit", lambda: None)
    runner._say_once_what_is_unbounded.cache_clear()
    try:
        with caplog.at_level("WARNING", logger=runner.__name__):
            runner._say_once_what_is_unbounded()
            runner._say_once_what_is_unbounded()
        said = [record.getMessage() for record in caplog.records if "CPU share is not bounded" in record.getMessage()]
        assert len(said) == 1, caplog.records
    finally:
        runner._say_once_what_is_unbounded.cache_clear()
