"""Every use the kit makes of litellm beyond its documented call API, in one place.

The kit pins litellm (1.110.2, see ``pyproject.toml``). Each function here leans on something litellm
does not promise to keep -- a private module, an underscore name, an import-time environment switch,
the provider map's setup -- and says in its docstring what it relies on and why the kit needs it.
``tests/model/test_litellm_private.py`` holds one test per function, run against the pinned litellm: when
an upgrade changes one of these, that test fails, not a benchmark run.

Importing this module switches litellm offline *before* importing litellm (see :func:`go_offline`),
so :mod:`kit.model.gateway` imports it first.

It also re-exports the litellm exception classes :mod:`kit.model.retry` classifies, because only this
module and the gateway import litellm.
"""

from __future__ import annotations

import contextlib
import os
from typing import Any

#: The environment switches that keep litellm from fetching catalogs over the network.
OFFLINE_ENV: dict[str, str] = {"LITELLM_LOCAL_MODEL_COST_MAP": "True", "LITELLM_OFFLINE_MODE": "true"}


def go_offline() -> None:
    """Set litellm's offline switches in ``os.environ``; must run before litellm is imported.

    Relies on: litellm reading ``LITELLM_LOCAL_MODEL_COST_MAP`` and ``LITELLM_OFFLINE_MODE`` when
    ``import litellm`` builds ``litellm.model_cost`` (``get_model_cost_map``), and not fetching the
    remote cost map (or other catalogs) when either is on. Why: prices and model facts must come from
    the pinned package, the same online and offline, and importing the kit must not touch the network.
    """
    os.environ.update(OFFLINE_ENV)


go_offline()

import litellm  # noqa: E402 - after go_offline(), on purpose
from litellm import (  # noqa: E402 - re-exported for kit.model.retry
    APIConnectionError,
    AuthenticationError,
    BadGatewayError,
    BadRequestError,
    InternalServerError,
    RateLimitError,
    ServiceUnavailableError,
    Timeout,
)
from litellm._internal_context import internal_sub_call  # noqa: E402

__all__ = [
    "APIConnectionError",
    "AuthenticationError",
    "BadGatewayError",
    "BadRequestError",
    "InternalServerError",
    "OFFLINE_ENV",
    "RateLimitError",
    "ServiceUnavailableError",
    "Timeout",
    "go_offline",
    "hidden_response_cost",
    "quiet_logging",
    "register_provider",
    "retry_after_seconds",
]


def register_provider(name: str, handler: litellm.CustomLLM) -> None:
    """Route litellm model strings ``<name>/...`` to ``handler`` (replacing an earlier handler of
    that name, so re-importing the gateway does not stack them).

    Relies on: ``litellm.custom_provider_map`` being read at call time, and the undocumented
    ``litellm.utils.custom_llm_setup()`` adding the map's providers to ``litellm.provider_list`` (litellm
    runs it at the start of each call too; running it here makes the provider known from import on,
    e.g. to litellm's provider lookups before a first call). Why: the scripted model (``scripted/<name>``)
    must be callable through ``litellm.completion`` like any provider, so its calls go down exactly the
    path a real model's do.
    """
    litellm.custom_provider_map = [p for p in litellm.custom_provider_map if p.get("provider") != name] + [
        {"provider": name, "custom_handler": handler}
    ]
    litellm.utils.custom_llm_setup()


def quiet_logging() -> contextlib.AbstractContextManager[None]:
    """A context in which a ``litellm.completion`` call skips litellm's success logging, unless the
    user configured a litellm callback (then it changes nothing).

    Relies on: the private ``litellm._internal_context.internal_sub_call`` marking the call internal,
    and litellm then not submitting its success handler to the logging thread pool; and on the private
    ``litellm._async_success_callback`` list holding the async callbacks litellm was given. Why: that
    background work recomputes the cost and builds a logging payload for every call, which the kit does
    not need -- it records every attempt in ``calls.jsonl`` itself (see ``docs/records.md``).
    """
    if litellm.callbacks or litellm.success_callback or litellm._async_success_callback:
        return contextlib.nullcontext()
    return internal_sub_call()


def retry_after_seconds(headers: Any) -> int | None:
    """The wait a provider asked for in a ``Retry-After`` header (whole seconds, or an HTTP date turned
    into seconds from now); negative or ``None`` when the header is absent or unreadable.

    Relies on: the private ``litellm.utils._get_retry_after_from_exception_header``. Why: it is the
    parser litellm itself uses for retry waits, so the kit honours the header the same way.
    """
    return litellm.utils._get_retry_after_from_exception_header(headers)


def hidden_response_cost(response: Any) -> float | None:
    """The cost litellm computed for ``response`` during the call, or ``None`` when it did not.

    Relies on: the private ``_hidden_params["response_cost"]`` litellm sets on a response. Why: reading
    the figure litellm already computed avoids pricing every reply twice; the gateway falls back to the
    public ``litellm.completion_cost`` when it is missing.
    """
    cost = (getattr(response, "_hidden_params", None) or {}).get("response_cost")
    return None if cost is None else float(cost)
