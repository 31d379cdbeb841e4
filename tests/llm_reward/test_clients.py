"""LLM clients against a scripted OpenAI-compatible server on 127.0.0.1: answers, usage and
cost, retries with backoff (429, 5xx, timeouts), clear errors (unreachable, refused key,
model not served), endpoint and key resolution, and redaction of the key.

``ScriptedLLM`` is also used by ``test_search.py``."""

from __future__ import annotations

import socket
from collections.abc import Iterable
from typing import Any

import pytest

pytest.importorskip("openai")

from llm_servers import KEY, ScriptedLLM, client_for  # noqa: E402

from rewardlab.llm_reward.clients import (  # noqa: E402
    EndpointError,
    LLMCallFailed,
    PriceTable,
    Usage,
    make_client,
    parse_llm_spec,
    redact,
)


@pytest.fixture
def scripted() -> Iterable[Any]:
    servers: list[ScriptedLLM] = []

    def start(script: Iterable[dict[str, Any]], models: Iterable[str] = ("scripted",)) -> ScriptedLLM:
        servers.append(ScriptedLLM(script, models))
        return servers[-1]

    yield start
    for server in servers:
        server.close()




MESSAGES = [{"role": "user", "content": "write a reward"}]


def test_answer_usage_and_cost(scripted) -> None:
    server = scripted([{"answer": "hello", "usage": (1000, 500)}])
    client = client_for(server, prices=PriceTable({"scripted": (2.0, 8.0)}))
    completion = client.complete(MESSAGES)
    assert completion.text == "hello"
    assert completion.usage == Usage(1000, 500)
    assert completion.cost_usd == pytest.approx((1000 * 2.0 + 500 * 8.0) / 1e6)
    assert completion.retries == 0
    assert server.requests[0]["messages"] == MESSAGES
    assert server.headers[0]["authorization"] == f"Bearer {KEY}"


def test_missing_usage_is_estimated_and_unknown_prices_are_none(scripted) -> None:
    server = scripted([{"answer": "x" * 40, "usage": None}])
    completion = client_for(server, prices=PriceTable({})).complete(MESSAGES)
    assert completion.usage.estimated and completion.usage.completion_tokens == 10
    assert completion.cost_usd is None


def test_retries_429_500_and_timeouts_with_backoff(scripted) -> None:
    waits: list[float] = []
    server = scripted([
        {"status": 429, "retry_after": 0.5},
        {"status": 500},
        {"sleep": 1.5, "answer": "too late"},
        {"status": 503},
        {"answer": "finally"},
    ])
    client = client_for(server, retries=4, timeout_s=0.5, sleep=waits.append)
    completion = client.complete(MESSAGES)
    assert completion.text == "finally"
    assert completion.retries == 4
    assert len(server.requests) == 5
    assert waits[0] >= 0.5  # Retry-After honoured
    assert waits[2] >= waits[1] * 1.8  # exponential backoff (with at most 10% jitter)


def test_an_answer_dripped_a_byte_at_a_time_is_cut_at_the_deadline_and_retried(scripted) -> None:
    # each byte comes well within the read timeout, the whole answer would take minutes
    server = scripted([{"drip": 0.2, "answer": "slow " * 200}, {"answer": "on time"}])
    completion = client_for(server, retries=1, timeout_s=1.0, sleep=lambda s: None).complete(MESSAGES)
    assert completion.text == "on time" and completion.retries == 1


def test_retries_used_up_raise_call_failed(scripted) -> None:
    server = scripted([{"status": 500}] * 3)
    with pytest.raises(LLMCallFailed, match="failed 3 times, the last one HTTP 500") as raised:
        client_for(server, retries=2, sleep=lambda s: None).complete(MESSAGES)
    assert raised.value.tries == 3


def test_unreachable_endpoint_is_a_clear_error() -> None:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    client = make_client("compatible:m", f"http://127.0.0.1:{port}/v1", environ={}, retries=1, backoff_s=0.0)
    with pytest.raises(EndpointError, match="no LLM endpoint reachable at http://127.0.0.1"):
        client.check()


def test_a_refused_connection_fails_the_check_at_once_with_the_providers_hint() -> None:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        url = f"http://127.0.0.1:{probe.getsockname()[1]}/v1"
    waits: list[float] = []
    ollama = make_client("ollama:m", url, environ={}, sleep=waits.append)  # 4 retries, 2 s doubling
    with pytest.raises(EndpointError, match=r"\(connection refused\) after 1 try; start the server \(`ollama serve`\)"):
        ollama.check()
    assert waits == []
    hosted = make_client("openai:gpt-4o", url, environ={}, api_key=KEY, sleep=waits.append)
    with pytest.raises(EndpointError) as raised:
        hosted.check()
    assert "serve" not in str(raised.value) and "check the network" in str(raised.value)
    # a request during a search retries a refused connection (a server restarting) first
    with pytest.raises(EndpointError, match="after 3 tries; start the server"):
        make_client("vllm:m", url, environ={}, retries=2, sleep=waits.append).complete(MESSAGES)
    assert len(waits) == 2


def test_refused_key_error_does_not_show_the_key(scripted) -> None:
    server = scripted([{"status": 401}])
    with pytest.raises(EndpointError, match="refused the API key") as raised:
        client_for(server).complete(MESSAGES)
    message = str(raised.value)
    assert KEY not in message and KEY[-4:] not in message and "[redacted]" in message


def test_model_not_served_lists_the_models(scripted) -> None:
    server = scripted([], models=["llama3", "qwen2.5-coder"])
    with pytest.raises(EndpointError, match="model 'scripted' is not served .* llama3, qwen2.5-coder"):
        client_for(server).check()
    client_for(scripted([], models=["scripted"])).check()


def test_endpoint_and_key_resolution() -> None:
    assert parse_llm_spec("ollama:qwen2.5-coder:7b") == ("ollama", "qwen2.5-coder:7b")
    with pytest.raises(ValueError, match="PROVIDER:MODEL"):
        parse_llm_spec("gpt-4o")
    with pytest.raises(ValueError, match="unknown LLM provider 'acme'"):
        parse_llm_spec("acme:model")
    with pytest.raises(ValueError, match="missing API key .* OPENAI_API_KEY or REWARDLAB_API_KEY"):
        make_client("openai:gpt-4o", environ={})
    with pytest.raises(ValueError, match="--base-url"):
        make_client("compatible:m", environ={})
    environ = {"OPENAI_API_KEY": "k1", "OPENAI_BASE_URL": "http://openai-proxy/v1",
               "REWARDLAB_BASE_URL": "http://rewardlab-url/v1/"}
    client = make_client("openai:gpt-4o", environ=environ)
    assert client.base_url == "http://rewardlab-url/v1" and client.secrets == ("k1",)
    client = make_client("ollama:llama3", environ={"OPENAI_BASE_URL": "http://openai-proxy/v1"})
    assert client.base_url == "http://localhost:11434/v1" and client.secrets == ()
    assert client.prices.cost("llama3", Usage(10, 10)) == 0.0  # local: free
    client = make_client("vllm:m", "http://flag/v1", "k-flag", environ={"REWARDLAB_API_KEY": "k-env"})
    assert client.base_url == "http://flag/v1" and client.secrets == ("k-flag",)


def test_price_table() -> None:
    table = PriceTable.from_mapping({"gpt-4o": [2.5, 10.0], "mini": {"input": 0.1, "output": 0.2}})
    assert table.cost("gpt-4o-2024-08-06", Usage(1_000_000, 0)) == pytest.approx(2.5)
    assert table.cost("mini", Usage(0, 1_000_000)) == pytest.approx(0.2)
    assert table.cost("unknown", Usage(1, 1)) is None
    with pytest.raises(ValueError, match="price of 'bad'"):
        PriceTable.from_mapping({"bad": [1.0]})


def test_redact_removes_keys_and_masked_keys() -> None:
    text = f"key {KEY} and masked {KEY[:5]}**********{KEY[-4:]} and {KEY[:3]}...{KEY[-4:]}"
    cleaned = redact(text, [KEY])
    assert KEY not in cleaned and KEY[-4:] not in cleaned and cleaned.count("[redacted]") == 3
    assert redact("nothing here", [KEY, ""]) == "nothing here"


def test_a_dripping_model_list_cannot_hold_the_check() -> None:
    import time

    # the check's GET /models had only the per-read timeout: a byte every 0.2 s held it
    server = ScriptedLLM([], models=("scripted",) * 50, models_drip=0.2)
    try:
        client = client_for(server, retries=1, timeout_s=1.0)
        started = time.monotonic()
        client.check()  # past the deadline twice: the first request will tell
        assert time.monotonic() - started < 5.0
    finally:
        server.close()


def test_an_answer_past_the_size_bound_fails_without_being_read_whole(scripted, monkeypatch) -> None:
    import resource
    import time

    from rewardlab.llm_reward import clients

    monkeypatch.setattr(clients, "MAX_ANSWER_BYTES", 2**20)
    # 512 MB read whole raised the process's peak memory by more than a gigabyte
    server = scripted([{"flood": 2**29}])
    client = client_for(server, retries=2, timeout_s=30.0, sleep=lambda s: None)
    started, peak = time.monotonic(), resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    with pytest.raises(LLMCallFailed, match="more than 1 MB") as raised:
        client.complete(MESSAGES)
    assert raised.value.tries == 1 and len(server.requests) == 1  # not retried
    assert time.monotonic() - started < 10.0
    assert resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - peak < 100 * 1024  # KB


def test_a_compressed_answer_is_refused(scripted) -> None:
    # a compressed answer's size is known only once inflated (a few MB of gzip: gigabytes)
    server = scripted([{"answer": "hello", "gzip": True}])
    with pytest.raises(LLMCallFailed, match="compressed"):
        client_for(server, retries=0).complete(MESSAGES)
    assert server.headers[0]["accept-encoding"] == "identity"


def _completion(content: Any, **fields: Any) -> dict[str, Any]:
    body: dict[str, Any] = {"id": "x", "object": "chat.completion", "created": 0, "model": "scripted",
                            "choices": [{"index": 0, "finish_reason": "stop",
                                         "message": {"role": "assistant", "content": content}}],
                            "usage": {"prompt_tokens": 3, "completion_tokens": 2, "total_tokens": 5}}
    body.update(fields)
    return body


@pytest.mark.parametrize("content", [["def compute_reward(obs): ..."], {"code": "x"}, 3.5, None, True])
def test_content_that_is_not_a_string_is_an_invalid_reply(scripted, content: Any) -> None:
    server = scripted([{"raw": _completion(content)}])
    with pytest.raises(LLMCallFailed, match="invalid reply.*content is .*not a string"):
        client_for(server, retries=0).complete(MESSAGES)


def test_usage_and_finish_reason_of_unknown_shapes_are_estimated_and_unknown(scripted) -> None:
    body = _completion("hello", usage={"prompt_tokens": -5, "completion_tokens": float("inf")})
    body["choices"][0]["finish_reason"] = ["stop"]
    server = scripted([{"raw": body}, {"raw": _completion("hi", usage={"prompt_tokens": 1e300})}])
    client = client_for(server, retries=0)
    completion = client.complete(MESSAGES)
    assert completion.text == "hello" and completion.finish_reason is None
    assert completion.usage.estimated and completion.usage.completion_tokens == 2
    assert client.complete(MESSAGES).usage.estimated


def _random_json(rng: Any, depth: int = 0) -> Any:
    kinds = ["null", "bool", "int", "float", "str"] + (["list", "dict"] if depth < 3 else [])
    kind = rng.choice(kinds)
    if kind == "null":
        return None
    if kind == "bool":
        return rng.random() < 0.5
    if kind == "int":
        return rng.choice([0, -1, 7, 2**63, -(2**70), rng.randint(-10**6, 10**6)])
    if kind == "float":
        return rng.choice([0.5, -3.25, 1e308, float("nan"), float("inf"), -float("inf")])
    if kind == "str":
        return rng.choice(["", "stop", "length", "\x1b]0;pwned\x07", "x" * 300, "def f(): ..."])
    if kind == "list":
        return [_random_json(rng, depth + 1) for _ in range(rng.randint(0, 3))]
    keys = ["choices", "message", "content", "usage", "model", "finish_reason", "prompt_tokens",
            "completion_tokens", "index", "role", "zz"]
    return {rng.choice(keys): _random_json(rng, depth + 1) for _ in range(rng.randint(0, 4))}


def _fuzzed_reply(rng: Any) -> dict[str, Any]:
    """A random reply body: a whole random JSON value, or a completion with one to three of its
    fields (at any depth) replaced by a random JSON value."""
    if rng.random() < 0.2:
        return {"raw": _random_json(rng)} if rng.random() < 0.8 else {"raw_bytes": b"{\"choices\": [{"}
    body = _completion(rng.choice(["ok", "", "\x1b[2J"]))
    for _ in range(rng.randint(1, 3)):
        path = rng.choice([("model",), ("usage",), ("usage", "prompt_tokens"),
                           ("usage", "completion_tokens"), ("choices",), ("choices", 0),
                           ("choices", 0, "finish_reason"), ("choices", 0, "message"),
                           ("choices", 0, "message", "content")])
        target: Any = body
        try:
            for step in path[:-1]:
                target = target[step]
            target[path[-1]] = _random_json(rng)
        except (KeyError, IndexError, TypeError):
            pass  # an earlier replacement removed the path
    return {"raw": body}


def test_fuzzed_reply_shapes_give_a_typed_answer_or_the_clients_own_error(scripted) -> None:
    import math
    import random

    from rewardlab.llm_reward.clients import FINISH_REASONS

    rng = random.Random(47)
    script = [_fuzzed_reply(rng) for _ in range(300)]
    server = scripted(script)
    client = client_for(server, retries=0)
    answered = failed = 0
    for _ in script:
        try:
            completion = client.complete(MESSAGES)
        except LLMCallFailed as error:
            assert "invalid reply" in str(error)
            failed += 1
            continue
        answered += 1
        assert type(completion.text) is str and type(completion.model) is str
        assert completion.finish_reason is None or completion.finish_reason in FINISH_REASONS
        for count in (completion.usage.prompt_tokens, completion.usage.completion_tokens):
            assert type(count) is int and 0 <= count and math.isfinite(count)
        assert completion.cost_usd is None or math.isfinite(completion.cost_usd)
    assert answered > 30 and failed > 30  # both sides of the boundary were exercised


def test_a_replayed_answer_that_is_not_a_string_fails_its_call(tmp_path) -> None:
    import json

    from rewardlab.llm_reward.clients import ReplayClient

    lines = [{"type": "answer", "proposer": "llm", "key": "it00_s00", "text": ["a", "list"],
              "usage": {"prompt_tokens": "many"}, "finish_reason": {"x": 1}},
             {"type": "answer", "proposer": "llm", "key": "it00_s01", "text": "def f(): ...",
              "usage": {"prompt_tokens": -3}, "finish_reason": "length"}]
    (tmp_path / "journal.jsonl").write_text("".join(json.dumps(line) + "\n" for line in lines))
    client = ReplayClient(tmp_path)
    with pytest.raises(LLMCallFailed, match="answer 1 .* not a string"):
        client.complete(MESSAGES)
    completion = client.complete(MESSAGES)
    assert completion.text == "def f(): ..." and completion.finish_reason == "length"
    assert completion.usage == Usage(0, 0)


@pytest.mark.parametrize("models", [[["x"], 3, None, "other"], [{"a": 1}, "other"], []])
def test_a_model_list_of_any_shape_gives_a_clear_check(scripted, models: list[Any]) -> None:
    server = scripted([], models=models)
    client = client_for(server, retries=0)
    if "other" in models:
        with pytest.raises(EndpointError, match="it serves: other"):
            client.check()
    else:
        client.check()  # nothing listed: the first request will tell


@pytest.mark.parametrize("body", [[1, 2], {"data": {"id": "x"}}, {"data": [1, "a", None]}, "text", None])
def test_a_model_list_body_of_any_shape_passes_the_check_or_fails_it_clearly(body: Any) -> None:
    server = ScriptedLLM([{"answer": "hello"}], models_body=body if body is not None else {"data": None})
    try:
        client = client_for(server, retries=0)
        try:
            client.check()
        except EndpointError as error:
            assert "is not served" in str(error)
        assert client.complete(MESSAGES).text == "hello"
    finally:
        server.close()
