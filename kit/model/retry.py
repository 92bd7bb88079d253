"""The kit's one retry policy for model calls, and how a failed call is described.

litellm is called with ``max_retries=0``, so the provider SDKs never retry behind the kit's back: the
gateway's loop is the only one, and every attempt is a row in ``calls.jsonl`` (see
``docs/records.md``). A failure is *transient* (worth another attempt) when it is a rate limit, an
overload (529 counts like 429), a 5xx, a timeout, a dropped connection or an empty reply; the wait
before the next attempt is the provider's ``retry-after-ms`` / ``Retry-After``, else an exponential
backoff capped by :class:`~kit.config.RetryPolicy`. When the kit gives up, :func:`model_error` turns
the last failure into the :class:`~kit.errors.ModelError` the run ends with (see
``docs/strategies.md``, "Outcomes and stop reasons").

litellm's exception classes come through :mod:`kit.model.litellm_private` (only it and the gateway
use litellm directly).
"""

from __future__ import annotations

import re

from kit.config import ModelSpec, RetryPolicy
from kit.errors import MissingKeyError, ModelError
from kit.model.litellm_private import (
    APIConnectionError,
    AuthenticationError,
    BadGatewayError,
    BadRequestError,
    InternalServerError,
    RateLimitError,
    ServiceUnavailableError,
    Timeout,
    retry_after_seconds,
)


class EmptyReply(Exception):
    """A 200 reply with nothing in it (no choices, or no text and no tool call)."""


TRANSIENT = (
    RateLimitError,
    InternalServerError,
    ServiceUnavailableError,
    APIConnectionError,
    Timeout,
    BadGatewayError,
)
TRANSIENT_STATUS = frozenset({408, 409, 425, 429, 529})  # plus every 5xx


def is_transient(exc: BaseException) -> bool:
    """Worth another attempt: rate limits, overload (529), 5xx, timeouts, resets, empty replies."""
    if isinstance(exc, (*TRANSIENT, EmptyReply)):
        return True
    if isinstance(exc, AuthenticationError | BadRequestError | ModelError):
        return False
    status = status_of(exc)
    return isinstance(status, int) and (status in TRANSIENT_STATUS or status >= 500)


def retry_delay(exc: BaseException, attempt: int, policy: RetryPolicy) -> float:
    """Seconds to wait before the next attempt: the provider's ``retry-after-ms`` or
    ``Retry-After`` (seconds or an HTTP date, parsed by litellm), else exponential backoff; never
    more than ``policy.max_backoff_s``."""
    headers = getattr(exc, "litellm_response_headers", None)
    if headers is None:
        headers = getattr(getattr(exc, "response", None), "headers", None)
    wait: float | None = None
    if headers is not None:
        try:
            wait = float(headers.get("retry-after-ms") or "") / 1000
        except ValueError:
            wait = None
        if wait is None and headers.get("retry-after"):
            seconds = retry_after_seconds(headers)
            wait = float(seconds) if seconds is not None and seconds >= 0 else None
    if wait is None or wait < 0:
        wait = policy.backoff_s * 2 ** (attempt - 1)
    return min(wait, policy.max_backoff_s)


def status_of(exc: BaseException) -> int | None:
    """The provider's HTTP status: litellm files an Anthropic 529 under InternalServerError with
    ``status_code`` 500 and keeps the real one in ``provider_status_code`` (and on the provider
    exception it raised from)."""
    for err in (exc, exc.__cause__, exc.__context__):
        status = getattr(err, "provider_status_code", None)
        if isinstance(status, int):
            return status
    status = getattr(exc, "status_code", None)
    cause = getattr(exc.__cause__ or exc.__context__, "status_code", None)
    if isinstance(cause, int) and cause != status and isinstance(status, int) and status >= 500:
        return cause
    return status if isinstance(status, int) else None


def describe(exc: BaseException, limit: int = 300) -> str:
    """``Type [status]: message`` on one line, as ``calls.jsonl``'s ``error`` field records it."""
    status = status_of(exc)
    code = f" [{status}]" if status is not None else ""
    return f"{type(exc).__name__}{code}: {short(exc, limit)}"


_LITELLM_NOISE = re.compile(
    r"^litellm\.\w+:\s*|\s*Handle with `litellm\.\w+`\.?|\s*LiteLLM Retried: \d+ times.*$|"
    r"\s*Received Model Group=.*$"
)


def short(exc: BaseException | str, limit: int = 300) -> str:
    """``exc``'s message on one line, litellm's boilerplate left out, at most ``limit`` characters: a
    longer one loses its middle, not its end (where a provider puts what went wrong)."""
    text = _LITELLM_NOISE.sub("", " ".join(str(exc).split())).strip()
    if len(text) <= limit:
        return text
    head = (limit - 5) * 2 // 3
    return f"{text[:head]} ... {text[len(text) - (limit - 5 - head) :]}"


#: what a connection error says when the host has no address here, and when nothing listens there
_UNRESOLVED = re.compile(
    r"name or service not known|temporary failure in name resolution|nodename nor servname|getaddrinfo "
    r"failed|no address associated with hostname|name resolution|could not resolve host",
    re.IGNORECASE,
)
_REFUSED = re.compile(r"connection refused|errno 111|errno 61\b|connect call failed", re.IGNORECASE)


def unreachable_hint(exc: BaseException, spec: ModelSpec) -> str | None:
    """Advice for a host that cannot be resolved or refuses the connection (None for other errors):
    waiting does not help there, the address or the network does."""
    chain, seen = [], set()
    err: BaseException | None = exc
    while err is not None and id(err) not in seen:
        seen.add(id(err))
        chain.append(f"{type(err).__name__}: {err}")
        err = err.__cause__ or err.__context__
    text = " ".join(chain)
    where = spec.api_base or f"{spec.model.split('/', 1)[0]}'s API"
    if _UNRESOLVED.search(text):
        return (
            f"the host of {where} cannot be resolved from this machine (no DNS or no network here): "
            "check --api-base / the tier's api_base, or the network; a keyless run needs a server on this "
            "machine (tests.support.fake_server) or --profile oracle -- waiting will not help"
        )
    if _REFUSED.search(text):
        return (
            f"nothing accepts connections at {where}: start the server (e.g. the fake server) or fix "
            "--api-base / the tier's api_base -- waiting will not help"
        )
    return None


def model_error(exc: BaseException, spec: ModelSpec, attempts: int, transient: bool) -> ModelError:
    """The error a call ends with once the kit stops retrying ``exc`` (with a hint saying what to do)."""
    if isinstance(exc, ModelError):
        return exc
    if isinstance(exc, AuthenticationError):
        return MissingKeyError(
            f"{spec.model}: the provider rejected the API key ({short(exc, 160)})",
            f"check {spec.api_key_env or 'the provider key'} or pick --profile local",
        )
    unreachable = unreachable_hint(exc, spec)
    if unreachable:
        said = f"gave up after {attempts} attempts: {describe(exc, 240)}" if transient else describe(exc, 300)
        return ModelError(f"{spec.model}: {said}", unreachable)
    if transient:
        return ModelError(
            f"{spec.model}: gave up after {attempts} attempts: {describe(exc, 240)}",
            "the provider is failing or rate-limiting; rerun later -- finished runs are kept and skipped",
        )
    return ModelError(
        f"{spec.model}: {type(exc).__name__}: {short(exc, 300)}",
        "check the model string and options in the profile",
    )
