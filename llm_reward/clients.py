"""Chat clients for any OpenAI-compatible chat-completions endpoint.

One client serves OpenAI itself and the local servers that speak the same API (vLLM,
Ollama, llama.cpp's ``llama-server``, LM Studio): the reward-code search asks it for
reward programs, and the LLM policy reuses it. Needs the ``llm`` extra
(``pip install 'rewardlab[llm]'``, the ``openai`` package).

Example::

    from rewardlab.llm_reward.clients import make_client

    client = make_client("ollama:qwen2.5-coder:7b")      # PROVIDER:MODEL
    client.check()                                        # clear error if unreachable
    completion = client.complete([{"role": "user", "content": "Write a reward."}])
    print(completion.text, completion.usage.total_tokens, completion.cost_usd)

Where the endpoint and the key come from (first found wins):

- base URL: ``base_url=`` (the CLI's ``--base-url``), ``REWARDLAB_BASE_URL``,
  ``OPENAI_BASE_URL`` (providers ``openai`` and ``compatible`` only), the provider's
  default (:data:`PROVIDERS`);
- API key: ``api_key=`` (``--api-key``; prefer the environment, a flag ends up in shell
  history), ``REWARDLAB_API_KEY``, ``OPENAI_API_KEY``. Only ``openai`` requires one; local
  servers get a placeholder.

Each try of a chat request has a deadline (``timeout_s``) for the whole answer, not only
for each read: a server that sends its answer a byte at a time cannot hold a search.
Transient failures (timeouts, lost connections, HTTP 429 and 5xx) are retried with
exponential backoff (``Retry-After`` is honoured, capped); what cannot succeed (nothing
listening, a refused key, a model the endpoint does not serve) raises
:class:`EndpointError` with what to do. Tokens come from the response's ``usage`` (or are
estimated at four characters a token when a server sends none) and cost from a
:class:`PriceTable`. The key is kept in the client only: :func:`redact` removes it from
any text before it is written anywhere.

A reply is data and is typed where it arrives: its content must be a string (a list, a
dict, a number or null is an invalid reply, :class:`LLMCallFailed`, never an answer), its
token counts finite non-negative integers (else estimated) and its finish reason one of
:data:`FINISH_REASONS` (else unknown, ``None``). A replayed journal is typed the same way.
"""

from __future__ import annotations

import abc
import json
import os
import random
import re
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

__all__ = [
    "PROVIDERS",
    "ChatClient",
    "Completion",
    "EndpointError",
    "LLMCallFailed",
    "LLMError",
    "OpenAICompatibleClient",
    "PriceTable",
    "Provider",
    "Usage",
    "make_client",
    "parse_llm_spec",
    "redact",
]

Message = Mapping[str, str]

CHARS_PER_TOKEN = 4
#: the most bytes one answer of the endpoint may have: a server that sent an endless body
#: filled the caller's memory at about 1 GB/s until the deadline
MAX_ANSWER_BYTES = 64 * 2**20
REDACTED = "[redacted]"
#: why a chat completion may stop, as the API documents it; any other reason is unknown (None)
FINISH_REASONS = frozenset({"stop", "length", "content_filter", "tool_calls", "function_call"})
#: the most tokens one call may report; a larger count is not believed and is estimated instead
MAX_REPORTED_TOKENS = 2**40


@dataclass(frozen=True)
class Provider:
    """An OpenAI-compatible server kind.

    :param base_url: its default base URL (``None``: the user must give one).
    :param key_required: refuse to start without an API key.
    :param local: runs on the user's machine, so its calls cost nothing.
    :param serves_any_model: answers whatever model name is asked (llama.cpp serves its one
        loaded model), so the model is not checked against ``/models``.
    :param start: the command that starts a local server, for the message when none listens
        (``None``: a hosted endpoint, nothing for the user to start).
    """

    base_url: str | None
    key_required: bool = False
    local: bool = True
    serves_any_model: bool = False
    start: str | None = None


PROVIDERS: dict[str, Provider] = {
    "openai": Provider("https://api.openai.com/v1", key_required=True, local=False),
    "vllm": Provider("http://localhost:8000/v1", start="vllm serve MODEL"),
    "ollama": Provider("http://localhost:11434/v1", start="ollama serve"),
    "llamacpp": Provider("http://localhost:8080/v1", serves_any_model=True, start="llama-server -m FILE"),
    "lmstudio": Provider("http://localhost:1234/v1", start="lms server start"),
    # Any other OpenAI-compatible endpoint, e.g. a hosted one: --base-url is required.
    "compatible": Provider(None, local=False),
}

# Providers for which OPENAI_BASE_URL applies (the local ones have their own ports).
_OPENAI_URL_PROVIDERS = ("openai", "compatible")

# USD per million tokens (input, output): OpenAI list prices of 2025. Prices change; pass
# your own table (the CLI's --prices FILE) rather than trusting these.
DEFAULT_PRICES: dict[str, tuple[float, float]] = {
    "gpt-4o": (2.50, 10.00),
    "gpt-4o-mini": (0.15, 0.60),
    "gpt-4.1": (2.00, 8.00),
    "gpt-4.1-mini": (0.40, 1.60),
    "gpt-4.1-nano": (0.10, 0.40),
}


class LLMError(RuntimeError):
    """A chat request failed.

    :param message: what went wrong and what to do, with any secret removed.
    """


class EndpointError(LLMError):
    """The endpoint cannot serve this search at all: nothing listens, it refused the key, or
    it does not serve the model. Retrying will not help; the search stops."""


class LLMCallFailed(LLMError):
    """One request failed for good (retries used up, or the endpoint rejected the request);
    the search counts it as a failed candidate and goes on.

    :param message: what went wrong, with any secret removed.
    :param tries: how many times it was sent.
    """

    def __init__(self, message: str, tries: int = 1):
        super().__init__(message)
        self.tries = tries


@dataclass(frozen=True)
class Usage:
    """Tokens of one call (or a sum of calls).

    :param prompt_tokens: input tokens.
    :param completion_tokens: output tokens.
    :param estimated: the server reported no usage, so these are estimates (4 characters
        a token).
    """

    prompt_tokens: int = 0
    completion_tokens: int = 0
    estimated: bool = False

    @property
    def total_tokens(self) -> int:
        """Input plus output tokens."""
        return self.prompt_tokens + self.completion_tokens

    def __add__(self, other: Usage) -> Usage:
        return Usage(
            self.prompt_tokens + other.prompt_tokens,
            self.completion_tokens + other.completion_tokens,
            self.estimated or other.estimated,
        )


@dataclass
class PriceTable:
    """USD per million tokens, per model: ``{"gpt-4o": (2.5, 10.0)}``.

    A model not in the table has an unknown cost (``None``), unless ``free`` is set.

    :param prices: model -> (input price, output price) per million tokens.
    :param free: every call costs 0 (local servers).
    """

    prices: dict[str, tuple[float, float]] = field(default_factory=lambda: dict(DEFAULT_PRICES))
    free: bool = False

    @classmethod
    def from_mapping(cls, data: Mapping[str, Any], free: bool = False) -> PriceTable:
        """Read ``{"model": [input, output]}`` or ``{"model": {"input": x, "output": y}}``.

        :param data: the table, e.g. parsed from the CLI's ``--prices`` JSON file.
        :param free: every call costs 0.
        :raises ValueError: an entry is not two non-negative numbers.
        """
        prices = {}
        for model, entry in data.items():
            pair = (entry.get("input"), entry.get("output")) if isinstance(entry, Mapping) else entry
            if (
                not isinstance(pair, list | tuple)
                or len(pair) != 2
                or not all(isinstance(p, int | float) and not isinstance(p, bool) and p >= 0 for p in pair)
            ):
                raise ValueError(
                    f"price of {model!r} must be [input, output] USD per million tokens, got {entry!r}"
                )
            prices[str(model)] = (float(pair[0]), float(pair[1]))
        return cls(prices, free)

    def cost(self, model: str, usage: Usage) -> float | None:
        """The cost of ``usage`` tokens of ``model`` in USD, ``None`` when its price is unknown.

        :param model: the model name (an exact entry, else the longest entry it starts
            with, so dated snapshots such as ``gpt-4o-2024-08-06`` find ``gpt-4o``).
        :param usage: the tokens.
        """
        if self.free:
            return 0.0
        price = self.prices.get(model)
        if price is None:
            prefixes = [name for name in self.prices if model.startswith(name)]
            if not prefixes:
                return None
            price = self.prices[max(prefixes, key=len)]
        return (usage.prompt_tokens * price[0] + usage.completion_tokens * price[1]) / 1e6


@dataclass(frozen=True)
class Completion:
    """One answer.

    :param text: the answer's text.
    :param usage: its tokens.
    :param cost_usd: its cost, ``None`` when the model's price is unknown.
    :param model: the model that answered (as the server names it).
    :param wall_s: seconds from the first try to the answer, retries included.
    :param retries: how many tries failed before this one.
    :param finish_reason: why the model stopped (``"stop"``, ``"length"``, ...).
    """

    text: str
    usage: Usage
    cost_usd: float | None
    model: str
    wall_s: float
    retries: int = 0
    finish_reason: str | None = None

    def to_dict(self) -> dict[str, Any]:
        """The completion as JSON data."""
        return asdict(self)


class ChatClient(abc.ABC):
    """What the search needs of an LLM: :meth:`complete` a conversation, :meth:`check` it works.

    Subclass it for a non-OpenAI API; :class:`OpenAICompatibleClient` is the one shipped.

    :param model: the model name.
    :param secrets: strings that must never be written anywhere (the API key).
    """

    def __init__(self, model: str, secrets: Sequence[str] = ()):
        self.model = model
        self.secrets = tuple(secret for secret in secrets if secret)

    def describe(self) -> str:
        """Provider, model and endpoint, for reports (never the key)."""
        return self.model

    @abc.abstractmethod
    def check(self) -> None:
        """Raise :class:`EndpointError` if the endpoint cannot serve requests for this model."""

    @abc.abstractmethod
    def complete(self, messages: Sequence[Message]) -> Completion:
        """Send ``messages`` (``{"role", "content"}`` dicts) and return the answer.

        :param messages: the conversation.
        :raises EndpointError: the endpoint cannot serve this client at all.
        :raises LLMCallFailed: this request failed for good.
        """


def parse_llm_spec(spec: str) -> tuple[str, str]:
    """Split ``"PROVIDER:MODEL"`` at the first colon (model names may contain colons).

    :param spec: e.g. ``"openai:gpt-4o"`` or ``"ollama:qwen2.5-coder:7b"``.
    :raises ValueError: no colon, an unknown provider or an empty model.
    """
    provider, colon, model = spec.partition(":")
    if not colon or not model:
        raise ValueError(
            f"--llm {spec!r} must be PROVIDER:MODEL, e.g. openai:gpt-4o or ollama:qwen2.5-coder:7b; "
            f"providers: {', '.join(PROVIDERS)}"
        )
    if provider not in PROVIDERS:
        raise ValueError(f"unknown LLM provider {provider!r} in --llm {spec!r}; choose from {', '.join(PROVIDERS)}")
    return provider, model


def _resolve_base_url(provider: str, base_url: str | None, environ: Mapping[str, str]) -> str:
    url = base_url or environ.get("REWARDLAB_BASE_URL")
    if not url and provider in _OPENAI_URL_PROVIDERS:
        url = environ.get("OPENAI_BASE_URL")
    url = url or PROVIDERS[provider].base_url
    if not url:
        raise ValueError(
            f"provider {provider!r} has no default endpoint: pass --base-url URL (e.g. "
            "https://host/v1) or set REWARDLAB_BASE_URL"
        )
    return url.rstrip("/")


def _resolve_api_key(provider: str, api_key: str | None, environ: Mapping[str, str]) -> str | None:
    key = api_key or environ.get("REWARDLAB_API_KEY") or environ.get("OPENAI_API_KEY")
    if not key and PROVIDERS[provider].key_required:
        raise ValueError(
            f"missing API key for provider {provider!r}: set OPENAI_API_KEY or REWARDLAB_API_KEY "
            "(or pass --api-key)"
        )
    return key or None


def make_client(
    spec: str,
    base_url: str | None = None,
    api_key: str | None = None,
    *,
    environ: Mapping[str, str] | None = None,
    prices: PriceTable | None = None,
    **options: Any,
) -> ChatClient:
    """A client for ``"PROVIDER:MODEL"``, with the endpoint and key resolved as the module says.

    ``"replay:PATH"`` serves the answers of an earlier run instead (:class:`ReplayClient`).

    :param spec: ``"PROVIDER:MODEL"`` (:data:`PROVIDERS`), or ``"replay:PATH"``.
    :param base_url: the endpoint, overriding the environment and the provider's default.
    :param api_key: the key, overriding the environment.
    :param environ: where to read ``REWARDLAB_*`` / ``OPENAI_*`` (default ``os.environ``).
    :param prices: the price table (default: :data:`DEFAULT_PRICES`; local providers are free).
    :param options: more keyword arguments of :class:`OpenAICompatibleClient`.
    :raises ValueError: a bad spec, no endpoint for ``compatible``, or a missing key.
    """
    environ = os.environ if environ is None else environ
    if spec.startswith(REPLAY + ":"):
        return ReplayClient(spec[len(REPLAY) + 1:])
    provider, model = parse_llm_spec(spec)
    url = _resolve_base_url(provider, base_url, environ)
    key = _resolve_api_key(provider, api_key, environ)
    if prices is None:
        prices = PriceTable(free=PROVIDERS[provider].local)
    return OpenAICompatibleClient(model, url, key, provider=provider, prices=prices, **options)


REPLAY = "replay"


class ReplayClient(ChatClient):
    """Answers an earlier run already paid for, served again in order (``--llm replay:PATH``).

    ``PATH`` is a search's run directory (its ``journal.jsonl``: the LLM's answers in the
    order of their candidates), a journal file, or any JSON Lines file whose lines hold an
    answer as ``"text"`` or ``"answer"``. Each :meth:`complete` returns the next answer,
    whatever the prompt; when none is left it fails as an LLM call would. Re-run a search
    with a new budget, seeds or executor without asking the LLM again.

    :param path: the run directory or file.
    :raises ValueError: the path holds no answers.
    """

    def __init__(self, path: str | os.PathLike[str]):
        self.path = Path(path)
        super().__init__(f"replay of {self.path.name}")
        self.answers = _replayed_answers(self.path)
        if not self.answers:
            raise ValueError(f"--llm replay:{path}: no answers found (a run directory with journal.jsonl, "
                             "or a .jsonl file with a \"text\" or \"answer\" per line)")
        self._next = 0
        self._lock = threading.Lock()

    def describe(self) -> str:
        return f"replay of {len(self.answers)} answers from {self.path}"

    def check(self) -> None:
        """Always ready: the answers are on disk."""

    def complete(self, messages: Sequence[Message]) -> Completion:
        with self._lock:
            index = self._next
            self._next += 1
        if index >= len(self.answers):
            raise LLMCallFailed(f"replay: all {len(self.answers)} answers of {self.path} are used up", tries=1)
        text, usage, finish_reason = self.answers[index]
        if text is None:
            raise LLMCallFailed(f"replay: answer {index + 1} of {self.path} is not a string",
                                tries=1)
        return Completion(text=text, usage=usage, cost_usd=0.0, model=self.model, wall_s=0.0,
                          finish_reason=finish_reason)


def _replayed_answers(path: Path) -> list[tuple[str | None, Usage, str | None]]:
    """The answers a journal or JSON Lines file holds, in order, each typed as a live reply is
    (an answer that is not a string is kept as ``None``: its call fails when replayed)."""
    file = path / "journal.jsonl" if path.is_dir() else path
    try:
        lines = file.read_text(encoding="utf-8").splitlines()
    except OSError as error:
        raise ValueError(f"--llm replay:{path}: cannot read {file} ({error})") from error
    except UnicodeDecodeError:
        raise ValueError(f"--llm replay:{path}: cannot read {file} (it is not a UTF-8 text file)") from None
    records = []
    for number, line in enumerate(lines):
        try:
            record = json.loads(line)
        except (ValueError, RecursionError):  # a torn last line; JSON nested past the parser's limit
            continue
        if not isinstance(record, dict):
            continue
        if record.get("type") == "answer" and record.get("proposer") == "llm":
            records.append((str(record.get("key", "")), number, record))
        elif "type" not in record and isinstance(record.get("text", record.get("answer")), str):
            records.append(("", number, record))
    records.sort(key=lambda item: (item[0], item[1]))  # a journal's candidates in key order
    answers = []
    for _, _, record in records:
        text = record.get("text", record.get("answer"))
        # why the model stopped is replayed too: a cut-off answer gets the same note in the next prompt
        answers.append((text if isinstance(text, str) else None,
                        typed_usage(record.get("usage")) or Usage(),
                        typed_finish_reason(record.get("finish_reason"))))
    return answers


def redact(text: str, secrets: Sequence[str]) -> str:
    """``text`` without any of ``secrets``, nor their masked forms (``sk-ab****wxyz``).

    :param text: any text about to be written or shown.
    :param secrets: the strings to remove (empty ones are ignored).
    """
    for secret in secrets:
        if not secret:
            continue
        text = text.replace(secret, REDACTED)
        if len(secret) >= 8:
            # Error messages of some servers echo a key as its first and last characters.
            masked = re.escape(secret[:3]) + r"[\w*.\-]{0,200}?" + re.escape(secret[-4:])
            text = re.sub(masked, REDACTED, text)
    return text


class OpenAICompatibleClient(ChatClient):
    """Chat completions through the ``openai`` package against any compatible endpoint.

    :param model: the model name the endpoint serves.
    :param base_url: the endpoint, e.g. ``http://localhost:11434/v1``.
    :param api_key: the key (``None``: a placeholder, for local servers that need none).
    :param provider: the provider's name (:data:`PROVIDERS`), for messages and checks.
    :param temperature: sampling temperature.
    :param max_tokens: the most tokens per answer (``None``: the server's default).
    :param timeout_s: seconds one try may take, the whole answer read, before it is retried.
    :param retries: how many times a transient failure is retried.
    :param backoff_s: the first wait before a retry; it doubles with each retry.
    :param max_backoff_s: the longest wait, also the cap on ``Retry-After``.
    :param prices: what tokens cost.
    :param sleep: the function that waits (tests pass a fake).
    """

    def __init__(
        self,
        model: str,
        base_url: str,
        api_key: str | None = None,
        *,
        provider: str = "compatible",
        temperature: float = 1.0,
        max_tokens: int | None = None,
        timeout_s: float = 120.0,
        retries: int = 4,
        backoff_s: float = 2.0,
        max_backoff_s: float = 60.0,
        prices: PriceTable | None = None,
        sleep: Callable[[float], None] = time.sleep,
    ):
        try:
            import openai
        except ImportError as error:
            raise ValueError(
                "LLM clients need the openai package: pip install 'rewardlab[llm]'"
            ) from error
        if provider not in PROVIDERS:
            raise ValueError(f"unknown provider {provider!r}; choose from {', '.join(PROVIDERS)}")
        for name, value in (("timeout_s", timeout_s), ("max_backoff_s", max_backoff_s)):
            if not value > 0:
                raise ValueError(f"{name} must be positive, got {name}={value!r}")
        if retries < 0 or backoff_s < 0:
            raise ValueError(f"retries and backoff_s must be >= 0, got {retries!r}, {backoff_s!r}")
        super().__init__(model, secrets=(api_key,) if api_key else ())
        self.provider = provider
        self.base_url = base_url
        self.temperature = temperature
        self.max_tokens = max_tokens
        self.retries = retries
        self.backoff_s = backoff_s
        self.max_backoff_s = max_backoff_s
        self.prices = prices or PriceTable()
        self._sleep = sleep
        self._openai = openai
        self.timeout_s = timeout_s
        # uncompressed answers only, of at most MAX_ANSWER_BYTES (see _bound_answer)
        self._new_client = lambda: openai.OpenAI(
            api_key=api_key or "not-needed", base_url=base_url, timeout=timeout_s, max_retries=0,
            default_headers={"Accept-Encoding": "identity"},
            http_client=openai.DefaultHttpxClient(event_hooks={"response": [_bound_answer]}),
        )  # a client for each try (_within_deadline), closed when it ends

    def describe(self) -> str:
        """``provider:model at base_url``."""
        return f"{self.provider}:{self.model} at {self.base_url}"

    def check(self) -> None:
        """Ask the endpoint which models it serves; raise :class:`EndpointError` if it cannot serve ours.

        A refused connection fails at once (nothing listens: waiting will not start it);
        endpoints without a ``/models`` route pass (the first request will tell).
        """
        try:
            served = self._with_retries(self._served_models, retry_refused=False)
        except LLMCallFailed:
            return  # no /models route, or it keeps failing: the first request will tell
        if not PROVIDERS[self.provider].serves_any_model and served and self.model not in served:
            raise EndpointError(self._model_message(served))

    def complete(self, messages: Sequence[Message]) -> Completion:
        """Send ``messages`` and return the answer; see :meth:`ChatClient.complete`.

        :param messages: the conversation.
        """
        start = time.monotonic()
        tries = [0]

        def request() -> Any:
            tries[0] += 1
            options: dict[str, Any] = {"temperature": self.temperature}
            if self.max_tokens is not None:
                options["max_tokens"] = self.max_tokens
            # the raw body, typed here (typed_reply): the SDK's objects take any JSON shape
            return self._within_deadline(
                lambda client: client.chat.completions.with_raw_response.create(
                    model=self.model, messages=[dict(message) for message in messages], **options
                ).content
            )

        body = self._with_retries(request)
        try:
            reply = typed_reply(body)
        except ValueError as error:
            raise LLMCallFailed(self._secret_free(
                f"{self.describe()} sent an invalid reply ({error}); the answer is not used"
            ), tries=tries[0]) from None
        usage = reply.usage or _estimated_usage(messages, reply.text)
        return Completion(
            text=reply.text,
            usage=usage,
            cost_usd=self.prices.cost(self.model, usage),
            model=reply.model or self.model,
            wall_s=time.monotonic() - start,
            retries=tries[0] - 1,
            finish_reason=reply.finish_reason,
        )

    def _within_deadline(self, call: Callable[[Any], Any]) -> Any:
        """``call(client)`` on a client of its own, given at most ``timeout_s`` in all.

        The client's own timeout bounds each read only, so a server that drips its answer
        would hold the call for as long as it likes; past the deadline the client is closed
        (the blocked read ends with its connection) and the try counts as timed out.
        """
        client, outcome = self._new_client(), {}

        def run() -> None:
            try:
                outcome["value"] = call(client)
            except BaseException as error:  # noqa: B036 - handed to the caller below
                outcome["error"] = error

        thread = threading.Thread(target=run, name="rewardlab-llm-request", daemon=True)
        thread.start()
        thread.join(self.timeout_s)
        client.close()  # past the deadline, this ends the blocked read with its connection
        if thread.is_alive():
            raise _PastDeadline(f"the answer was not complete within {self.timeout_s:g} s")
        if "error" in outcome:
            refused = _cause(outcome["error"], _AnswerRefused)
            if refused is not None:  # not retried: the server would send the same again
                raise LLMCallFailed(self._secret_free(f"{self.describe()}: {refused}"))
            raise outcome["error"]
        return outcome["value"]

    def _served_models(self) -> list[str]:
        """The models the endpoint lists, within the deadline (a dripped list held the check):
        the names that are strings; a list of another shape is a failed call."""

        def listed(client: Any) -> list[str]:
            try:
                names = [getattr(model, "id", None) for model in client.models.list()]
            except (TypeError, ValueError, AttributeError, KeyError) as error:
                raise LLMCallFailed(f"{self.describe()} sent a malformed model list "
                                    f"({type(error).__name__})") from None
            return [name for name in names if isinstance(name, str)]

        return self._within_deadline(listed)

    def _with_retries(self, call: Callable[[], Any], retry_refused: bool = True) -> Any:
        """Run ``call``, retrying transient failures; map the rest to :class:`LLMError`.

        :param call: the request.
        :param retry_refused: retry a refused connection too (a server restarting during a
            search); ``False`` raises :class:`EndpointError` at the first one.
        """
        openai = self._openai
        for attempt in range(self.retries + 1):
            try:
                return call()
            except openai.AuthenticationError as error:
                raise EndpointError(self._secret_free(
                    f"{self.describe()} refused the API key (HTTP 401: {_message(error)}); set "
                    "OPENAI_API_KEY or REWARDLAB_API_KEY (or --api-key) to a key it accepts"
                )) from None
            except openai.PermissionDeniedError as error:
                raise EndpointError(self._secret_free(
                    f"{self.describe()} denied access (HTTP 403: {_message(error)}); check the key's "
                    "permissions for this model"
                )) from None
            except openai.NotFoundError as error:
                raise self._not_found(error) from None
            except (openai.APITimeoutError, openai.APIConnectionError, openai.RateLimitError,
                    openai.InternalServerError, _PastDeadline) as error:
                status = getattr(error, "status_code", None)
                if status is None and isinstance(error, openai.APIStatusError):
                    status = error.status_code
                unreachable = isinstance(error, openai.APIConnectionError) and not isinstance(
                    error, openai.APITimeoutError
                )
                if unreachable and not retry_refused and _refused(error):
                    raise self._unreachable("connection refused", attempt + 1) from None
                if attempt == self.retries:
                    if unreachable:
                        reason = "connection refused" if _refused(error) else _message(error)
                        raise self._unreachable(reason, attempt + 1) from None
                    what = "timed out" if isinstance(error, openai.APITimeoutError | _PastDeadline) else (
                        f"HTTP {status}" if status else "connection failed"
                    )
                    raise LLMCallFailed(self._secret_free(
                        f"{self.describe()}: the request failed {attempt + 1} times, the last one "
                        f"{what}: {_message(error)}"
                    ), tries=attempt + 1) from None
                self._sleep(self._wait_s(attempt, error))
            except openai.APIStatusError as error:
                raise LLMCallFailed(self._secret_free(
                    f"{self.describe()} rejected the request (HTTP {error.status_code}: "
                    f"{_message(error)})"
                ), tries=attempt + 1) from None
        raise AssertionError("unreachable: the loop returns or raises")

    def _unreachable(self, reason: str, tries: int) -> EndpointError:
        start = PROVIDERS[self.provider].start
        what_to_do = (
            f"start the server (`{start}`) or pass --base-url / set REWARDLAB_BASE_URL" if start else
            "check the network and the endpoint (--base-url, REWARDLAB_BASE_URL or OPENAI_BASE_URL)"
        )
        return EndpointError(self._secret_free(
            f"no LLM endpoint reachable at {self.base_url} ({reason}) after {tries} "
            f"{'try' if tries == 1 else 'tries'}; {what_to_do}"
        ))

    def _wait_s(self, attempt: int, error: Exception) -> float:
        wait = min(self.backoff_s * 2**attempt, self.max_backoff_s)
        response = getattr(error, "response", None)
        header = response.headers.get("retry-after") if response is not None else None
        if header:
            try:
                wait = max(wait, min(float(header), self.max_backoff_s))
            except ValueError:
                pass
        return wait * (1 + 0.1 * random.random())

    def _not_found(self, error: Exception) -> LLMError:
        try:
            served = self._served_models()
        except (self._openai.APIError, _PastDeadline, LLMCallFailed):
            served = []
        if served and self.model not in served:
            return EndpointError(self._model_message(served))
        return LLMCallFailed(self._secret_free(f"{self.describe()}: HTTP 404 ({_message(error)})"))

    def _model_message(self, served: Sequence[str]) -> str:
        listed = ", ".join(sorted(served)[:20]) + (" ..." if len(served) > 20 else "")
        return self._secret_free(
            f"model {self.model!r} is not served at {self.base_url}; it serves: {listed}. Pass "
            f"--llm {self.provider}:MODEL with one of them"
        )

    def _secret_free(self, text: str) -> str:
        return redact(text, self.secrets)


@dataclass(frozen=True)
class Reply:
    """A chat completion's body, typed.

    :param text: the answer (a string, possibly empty).
    :param usage: the tokens it reports, ``None`` when it reports none that can be believed.
    :param model: the model it names, ``None`` when it names none that is a short string.
    :param finish_reason: one of :data:`FINISH_REASONS`, ``None`` when unknown.
    """

    text: str
    usage: Usage | None
    model: str | None
    finish_reason: str | None


def typed_reply(body: bytes | str) -> Reply:
    """Read a chat completion's JSON body, trusting none of its shapes.

    :param body: the HTTP body as the endpoint sent it.
    :raises ValueError: it is not JSON, or holds no answer as a string, with what it holds.
    """
    try:
        data = json.loads(body)
    except (ValueError, RecursionError):
        raise ValueError("the body is not JSON") from None
    if not isinstance(data, dict):
        raise ValueError(f"the body is a JSON {_json_kind(data)}, not an object")
    choices = data.get("choices")
    if not isinstance(choices, list) or not choices:
        raise ValueError("it has no choices")
    choice = choices[0]
    message = choice.get("message") if isinstance(choice, dict) else None
    if not isinstance(message, dict):
        raise ValueError("choices[0] has no message object")
    content = message.get("content")
    if not isinstance(content, str):
        raise ValueError(f"choices[0].message.content is {_json_kind(content)}, not a string")
    model = data.get("model")
    named = isinstance(model, str) and 0 < len(model) <= 200 and model.isprintable()
    return Reply(
        text=content,
        usage=typed_usage(data.get("usage")),
        model=model if named else None,
        finish_reason=typed_finish_reason(choice.get("finish_reason")),
    )


def typed_usage(data: object) -> Usage | None:
    """The token counts of a reply's ``usage``, ``None`` unless ``prompt_tokens`` (and
    ``completion_tokens`` where given) are integers in ``[0, MAX_REPORTED_TOKENS]``.

    :param data: the ``usage`` value as sent.
    """
    if not isinstance(data, dict):
        return None
    prompt, completion = data.get("prompt_tokens"), data.get("completion_tokens", 0)
    if not all(_token_count(value) for value in (prompt, completion)):
        return None
    return Usage(prompt, completion, data.get("estimated") is True)


def typed_finish_reason(value: object) -> str | None:
    """``value`` if it is one of :data:`FINISH_REASONS`, else ``None`` (unknown).

    :param value: the ``finish_reason`` as sent.
    """
    return value if isinstance(value, str) and value in FINISH_REASONS else None


def _token_count(value: object) -> bool:
    counted = isinstance(value, int) and not isinstance(value, bool)
    return counted and 0 <= value <= MAX_REPORTED_TOKENS


def _json_kind(value: object) -> str:
    """What a JSON value is, in words, for a message that must not echo it."""
    if value is None:
        return "null"
    kinds = {bool: "a boolean", str: "a string", list: "a list", dict: "an object"}
    number = isinstance(value, int | float)
    return kinds.get(type(value), "a number" if number else type(value).__name__)


def _estimated_usage(messages: Sequence[Message], text: str) -> Usage:
    """Tokens at :data:`CHARS_PER_TOKEN` characters each, for a reply that reports none."""
    prompt_chars = sum(len(message.get("content", "")) for message in messages)
    return Usage(-(-prompt_chars // CHARS_PER_TOKEN), -(-len(text) // CHARS_PER_TOKEN),
                 estimated=True)


def _cause(error: BaseException, kind: type[BaseException]) -> BaseException | None:
    """The first exception of ``kind`` in ``error``'s chain of causes (the SDK wraps the
    transport's), or None."""
    seen: set[int] = set()
    cause: BaseException | None = error
    while cause is not None and id(cause) not in seen:
        if isinstance(cause, kind):
            return cause
        seen.add(id(cause))
        cause = cause.__cause__ or cause.__context__
    return None


def _refused(error: BaseException) -> bool:
    """Whether a connection error was refused outright: nothing listens at that port."""
    return _cause(error, ConnectionRefusedError) is not None


class _PastDeadline(Exception):
    """A try of a request that did not finish within the client's ``timeout_s``."""


class _AnswerRefused(Exception):
    """An answer too long to read (over :data:`MAX_ANSWER_BYTES`) or compressed."""


def _bound_answer(response: Any) -> None:
    """An HTTP client's response hook: refuse a compressed answer (its size is known only
    once inflated) and stop reading one past :data:`MAX_ANSWER_BYTES`."""
    encoding = response.headers.get("content-encoding", "identity").strip().lower()
    if encoding not in ("", "identity"):
        raise _AnswerRefused(f"the endpoint sent a compressed answer ({encoding}), which was not asked for")
    stream, limit = response.stream, MAX_ANSWER_BYTES

    class Bounded(type(stream)):  # type: ignore[misc] - the client's own stream class, bounded
        def __init__(self) -> None:
            pass

        def __iter__(self) -> Any:
            read = 0
            for chunk in stream:
                read += len(chunk)
                if read > limit:
                    raise _AnswerRefused(f"the answer had more than {limit / 2**20:g} MB")
                yield chunk

        def close(self) -> None:
            stream.close()

    response.stream = Bounded()


def _message(error: Exception) -> str:
    body = getattr(error, "body", None)
    if isinstance(body, Mapping):
        inner = body.get("error", body)
        if isinstance(inner, Mapping) and isinstance(inner.get("message"), str):
            return inner["message"][:500]
        if isinstance(inner, str):
            return inner[:500]
    return str(error)[:500]
