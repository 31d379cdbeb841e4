"""Scripted OpenAI-compatible chat servers on 127.0.0.1, shared by the LLM tests.

:class:`ScriptedLLM` replies to the reward search and the clients from a script, in
order; :class:`ScriptedChatServer` answers the LLM policy's prompts by a rule.
"""

from __future__ import annotations

import gzip
import json
import threading
import time
from collections.abc import Callable, Iterable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from rewardlab.llm_reward.clients import make_client

# a policy-server answer: the chat messages in, the reply text out
Answer = Callable[[list[dict[str, str]]], str]

KEY = "sk-test-0123456789abcdefSECRET"


class ScriptedLLM:
    """An OpenAI-compatible chat-completions server that replies from a script, in order.

    Each script entry is a dict: ``{"answer": text}`` (optionally ``"usage": (prompt,
    completion)``, ``None`` for a reply without usage, ``"finish_reason"`` (``"stop"`` unless
    given; ``"length"``: cut off by the token limit), ``"sleep": s`` before replying and
    ``"drip": s``, a byte every ``s`` seconds once the headers are sent),
    ``{"status": 429 | 500 | 401, ...}`` (an error; 429 may carry ``"retry_after"``), or
    ``{"hang": True}`` (never replies until :meth:`close`), ``{"flood": n}`` (a 200 whose
    body is ``n`` zero bytes, sent as fast as the client reads); ``"gzip": True`` sends an
    answer compressed (``Content-Encoding: gzip``); ``{"raw": value}`` sends ``value`` as the
    whole 200 body, JSON-encoded (``{"raw_bytes": b"..."}``: those bytes), whatever its shape
    (the reply-schema fuzz test). Chat requests are recorded in
    :attr:`requests` (the JSON bodies) and :attr:`headers`.

    :param script: the replies.
    :param models: what ``GET /models`` lists.
    :param models_drip: send ``GET /models``'s answer a byte every ``models_drip`` seconds.
    :param models_body: ``GET /models``'s whole body instead, whatever its shape.
    """

    def __init__(self, script: Iterable[dict[str, Any]], models: Iterable[str] = ("scripted",),
                 models_drip: float = 0.0, models_body: Any = None):
        self.script = list(script)
        self.models = list(models)
        self.models_body = models_body
        self.models_drip = models_drip
        self.requests: list[dict[str, Any]] = []
        self.headers: list[dict[str, str]] = []
        self.lock = threading.Lock()
        self.hanging = threading.Event()
        self.release = threading.Event()
        server = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: Any) -> None:
                pass

            def _send(self, status: int, body: Any, headers: dict[str, str] | None = None,
                      drip: float = 0.0, gzipped: bool = False) -> None:
                data = body if isinstance(body, bytes) else json.dumps(body).encode()
                data = gzip.compress(data) if gzipped else data
                try:
                    self.send_response(status)
                    self.send_header("Content-Type", "application/json")
                    if gzipped:
                        self.send_header("Content-Encoding", "gzip")
                    self.send_header("Content-Length", str(len(data)))
                    for name, value in (headers or {}).items():
                        self.send_header(name, value)
                    self.end_headers()
                    if drip:
                        for index in range(len(data)):
                            self.wfile.write(data[index:index + 1])
                            self.wfile.flush()
                            time.sleep(drip)
                    else:
                        self.wfile.write(data)
                except OSError:
                    pass  # the client gave up (a timeout test)

            def _flood(self, size: int) -> None:
                chunk = bytes(1 << 16)
                try:
                    self.send_response(200)
                    self.send_header("Content-Type", "application/json")
                    self.send_header("Content-Length", str(size))
                    self.end_headers()
                    for start in range(0, size, len(chunk)):
                        self.wfile.write(chunk[:size - start])
                except OSError:
                    pass  # the client gave up

            def do_GET(self) -> None:
                if self.path.rstrip("/").endswith("/models") and server.models_body is not None:
                    self._send(200, server.models_body)
                elif self.path.rstrip("/").endswith("/models"):
                    self._send(200, {"object": "list", "data": [
                        {"id": name, "object": "model", "created": 0, "owned_by": "test"} for name in server.models
                    ]}, drip=server.models_drip)
                else:
                    self._send(404, {"error": {"message": "not found"}})

            def do_POST(self) -> None:
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                with server.lock:
                    server.requests.append(body)
                    server.headers.append({name.lower(): value for name, value in self.headers.items()})
                    reply = server.script.pop(0) if server.script else {"status": 500, "message": "script exhausted"}
                if reply.get("hang"):
                    server.hanging.set()
                    server.release.wait(120)
                    return
                time.sleep(reply.get("sleep", 0.0))
                if "flood" in reply:
                    self._flood(int(reply["flood"]))
                    return
                status = reply.get("status", 200)
                if "raw" in reply or "raw_bytes" in reply:
                    self._send(200, reply["raw_bytes"] if "raw_bytes" in reply else reply["raw"])
                elif status == 401:
                    auth = self.headers.get("Authorization", "")[len("Bearer "):]
                    masked = auth[:5] + "*" * 10 + auth[-4:]
                    self._send(401, {"error": {"message": f"Incorrect API key provided: {masked}",
                                               "type": "invalid_request_error", "code": "invalid_api_key"}})
                elif status != 200:
                    headers = {"Retry-After": str(reply["retry_after"])} if "retry_after" in reply else {}
                    self._send(status, {"error": {"message": reply.get("message", f"scripted {status}"),
                                                  "type": "server_error"}}, headers)
                else:
                    usage = reply.get("usage", (100, 50))
                    response: dict[str, Any] = {
                        "id": "chatcmpl-scripted", "object": "chat.completion", "created": 0,
                        "model": body.get("model", "scripted"),
                        "choices": [{"index": 0, "finish_reason": reply.get("finish_reason", "stop"),
                                     "message": {"role": "assistant", "content": reply["answer"]}}],
                    }
                    if usage is not None:
                        response["usage"] = {"prompt_tokens": usage[0], "completion_tokens": usage[1],
                                             "total_tokens": usage[0] + usage[1]}
                    self._send(200, response, drip=reply.get("drip", 0.0), gzipped=bool(reply.get("gzip")))

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.thread = threading.Thread(target=self.server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
        self.thread.start()

    @property
    def url(self) -> str:
        """The base URL, ``http://127.0.0.1:PORT/v1``."""
        return f"http://127.0.0.1:{self.server.server_address[1]}/v1"

    def prompts(self) -> list[list[dict[str, str]]]:
        """The messages of every chat request so far."""
        with self.lock:
            return [request["messages"] for request in self.requests]

    def close(self) -> None:
        """Release hanging requests and stop the server."""
        self.release.set()
        self.server.shutdown()
        self.server.server_close()


def client_for(server: ScriptedLLM, **options: Any):
    options = {"retries": 3, "backoff_s": 0.01, "timeout_s": 5.0, **options}
    return make_client("compatible:scripted", server.url, environ={"REWARDLAB_API_KEY": KEY}, **options)


class ScriptedChatServer:
    """An OpenAI-compatible chat server on 127.0.0.1 whose answers a function gives.

    ``answer(messages) -> text``; ``delay_s(messages) -> seconds`` to wait before answering.
    Records every request's messages and the most requests in flight at once.

    :param answer: the scripted answer.
    :param delay_s: how long to wait before answering.
    :param model: the one model it serves.
    """

    def __init__(self, answer: Answer, delay_s: Callable[[list], float] | None = None,
                 model: str = "test-model") -> None:  # fmt: skip
        self.answer, self.delay_s, self.model = answer, delay_s, model
        self.requests: list[list[dict[str, str]]] = []
        self.in_flight = 0
        self.max_in_flight = 0
        self._lock = threading.Lock()
        server = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: Any) -> None:
                pass

            def do_GET(self) -> None:  # noqa: N802
                self._send({"object": "list", "data": [
                    {"id": server.model, "object": "model", "created": 0, "owned_by": "test"}
                ]})  # fmt: skip

            def do_POST(self) -> None:  # noqa: N802
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                messages = body["messages"]
                with server._lock:
                    server.requests.append(messages)
                    server.in_flight += 1
                    server.max_in_flight = max(server.max_in_flight, server.in_flight)
                try:
                    if server.delay_s is not None:
                        time.sleep(server.delay_s(messages))
                    text = server.answer(messages)
                finally:
                    with server._lock:
                        server.in_flight -= 1
                prompt = sum(len(m["content"]) for m in messages) // 4
                self._send({
                    "id": "chatcmpl-test", "object": "chat.completion", "created": 0,
                    "model": body["model"],
                    "choices": [{"index": 0, "finish_reason": "stop",
                                 "message": {"role": "assistant", "content": text}}],
                    "usage": {"prompt_tokens": prompt, "completion_tokens": 3,
                              "total_tokens": prompt + 3},
                })  # fmt: skip

            def _send(self, data: dict) -> None:
                payload = json.dumps(data).encode()
                try:
                    self.send_response(200)
                    self.send_header("Content-Type", "application/json")
                    self.send_header("Content-Length", str(len(payload)))
                    self.end_headers()
                    self.wfile.write(payload)
                except (BrokenPipeError, ConnectionResetError):
                    pass  # the client gave up (a timeout test)

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        self._server.block_on_close = False
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    @property
    def url(self) -> str:
        """The base URL, ``http://127.0.0.1:PORT/v1``."""
        return f"http://127.0.0.1:{self._server.server_address[1]}/v1"

    def client(self, **options: Any) -> Any:
        """An ``OpenAICompatibleClient`` for this server (no retries unless given)."""
        options = {"retries": 0, "timeout_s": 10.0, **options}
        return make_client(f"vllm:{self.model}", base_url=self.url, environ={}, **options)

    def __enter__(self) -> ScriptedChatServer:
        self._thread.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        self._server.shutdown()
        self._server.server_close()


def user_text(messages: list[dict[str, str]]) -> str:
    return messages[-1]["content"]


def current_observation(messages: list[dict[str, str]]) -> str:
    return user_text(messages).split("Current observation:")[1]
