"""Without the kernel's isolation the sandbox refuses untrusted code, unless loudly told not to."""

from __future__ import annotations

import pytest

from rewardlab.llm_reward.sandbox import readable, support


def test_a_missing_kernel_feature_is_named_and_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(
        support,
        "kernel_support",
        lambda: {
            "namespaces": None,
            "landlock": "the kernel has no Landlock (Linux 5.13+)",
            "seccomp": None,
        },
    )
    monkeypatch.delenv(support.UNSAFE_OPT_OUT, raising=False)
    with pytest.raises(
        support.IsolationUnavailable, match="landlock: the kernel has no Landlock"
    ) as error:
        support.require_support()
    assert support.UNSAFE_OPT_OUT in str(error.value)
    monkeypatch.setenv(support.UNSAFE_OPT_OUT, "1")
    support.require_support()  # the opt-out, named as such


def test_this_machine_reports_its_features() -> None:
    features = support.kernel_support()
    assert set(features) == {"namespaces", "landlock", "seccomp"}
    assert all(why is None or isinstance(why, str) for why in features.values())
    roots = readable.readable_roots()
    assert "/proc" in roots and not any(
        root in ("/", "/etc", "/home", "/root", "/tmp") for root in roots
    )


def test_an_unbounded_cpu_share_is_said_once(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    from rewardlab.llm_reward.sandbox import runner

    monkeypatch.setattr(runner, "cpu_limit", lambda: None)
    runner._say_once_what_is_unbounded.cache_clear()
    try:
        with caplog.at_level("WARNING", logger=runner.__name__):
            runner._say_once_what_is_unbounded()
            runner._say_once_what_is_unbounded()
        said = [
            record.getMessage()
            for record in caplog.records
            if "CPU share is not bounded" in record.getMessage()
        ]
        assert len(said) == 1, caplog.records
    finally:
        runner._say_once_what_is_unbounded.cache_clear()
