"""Redaction by value: every secret the kit knows is replaced by ``***`` before anything is written.

Commands never get the kit's environment (``kit.sandbox.backends.sandbox_env`` is an allow-list), so keys do
not pass by name; this module covers the other way a key leaks -- by value, when a provider echoes it
in an error, a profile carries it in ``extra`` / ``extra_headers``, or a traceback quotes it. The
known values are: the variables named by the profile's ``api_key_env``, every variable of the kit's
environment whose name looks secret (``looks_secret``), and the values in a tier's
``extra`` (nested dicts such as ``extra_headers`` included) whose key looks secret (``api_key``,
``Authorization``, ``x-api-key``, ``*token*`` ...). :class:`kit.records.recorder.RunRecorder` applies it to
every line of calls / events / transcript, to diff.patch and to run.json; the gateway to its errors.
"""

from __future__ import annotations

import fnmatch
import json
import os
import re
import urllib.parse
from collections.abc import Iterable
from typing import Any

MASK = "***"
#: Values shorter than this are not treated as secrets (masking "1" or "true" would garble records).
MIN_SECRET_CHARS = 8
_SECRET_KEYS = (
    "*key*",
    "*token*",
    "*secret*",
    "*password*",
    "*passwd*",
    "*credential*",
    "authorization",
    "cookie",
)


#: Environment variables matching any of these (case-insensitive glob on the name) are secrets: never
#: added to a command's environment (which is built from an allow-list anyway), masked in records.
SECRET_ENV_PATTERNS = [
    "*API_KEY*",
    "*APIKEY*",
    "*_KEY",
    "*TOKEN*",
    "*SECRET*",
    "*PASSWORD*",
    "*PASSWD*",
    "*CREDENTIAL*",
    "AWS_*",
    "AZURE_*",
    "GOOGLE_APPLICATION_CREDENTIALS",
    "ANTHROPIC_*",
    "OPENAI_*",
    "GEMINI_*",
    "DEEPSEEK_*",
    "LITELLM_*",
    "HF_*",
    "HUGGING_FACE_*",
    "GH_*",
    "GITHUB_*",
]


def is_secret_env(name: str) -> bool:
    upper = name.upper()
    return any(fnmatch.fnmatchcase(upper, pattern) for pattern in SECRET_ENV_PATTERNS)


def looks_secret(name: str) -> bool:
    """A config key, header or variable name whose value is a secret (``api_key``, ``x-api-key``,
    ``Authorization``, ``MY_SERVICE_TOKEN`` ...). Narrower than ``is_secret_env``, which also scrubs
    whole prefixes such as ``AWS_*`` (whose values -- a region -- are not secrets to mask in text)."""
    low = name.lower()
    return any(fnmatch.fnmatchcase(low, p) for p in _SECRET_KEYS)


def _secret_values(value: Any, secret: bool) -> Iterable[str]:
    """Strings inside ``value``: all of them when ``secret``, else those under secret-looking keys."""
    if isinstance(value, dict):
        for key, item in value.items():
            yield from _secret_values(item, secret or looks_secret(str(key)))
    elif isinstance(value, list | tuple):
        for item in value:
            yield from _secret_values(item, secret)
    elif isinstance(value, str) and secret:
        yield value
        scheme, _, token = value.partition(" ")
        if token and scheme.lower() in ("bearer", "basic", "token"):
            yield token


class Redactor:
    """Replaces each known secret value (and its JSON-escaped form) with ``***``."""

    def __init__(self, values: Iterable[str] = ()) -> None:
        found: set[str] = set()
        for value in values:
            if isinstance(value, str) and len(value.strip()) >= MIN_SECRET_CHARS:
                found.add(value.strip())
                found.add(json.dumps(value.strip())[1:-1])
        self.values = sorted(found, key=len, reverse=True)  # longest first: no partial leftovers

    @classmethod
    def for_profile(cls, profile: Any = None, environ: dict[str, str] | None = None) -> Redactor:
        """Every secret the kit knows for ``profile`` (a kit.config.Profile) and its environment."""
        env = dict(os.environ if environ is None else environ)
        values = [v for k, v in env.items() if looks_secret(k)]
        for spec in getattr(profile, "tiers", {}).values():
            if spec.api_key_env and spec.api_key_env in env:
                values.append(env[spec.api_key_env])
            values.extend(_secret_values(spec.extra, False))
        return cls(values)

    def __bool__(self) -> bool:
        return bool(self.values)

    def __call__(self, text: str) -> str:
        for value in self.values:
            if value in text:
                text = text.replace(value, MASK)
        return text

    def obj(self, data: Any) -> Any:
        """``data`` (dicts, lists, strings ...) with every string redacted."""
        if isinstance(data, str):
            return self(data)
        if isinstance(data, dict):
            return {self(str(k)) if isinstance(k, str) else k: self.obj(v) for k, v in data.items()}
        if isinstance(data, list | tuple):
            return [self.obj(v) for v in data]
        return data

    def error(self, exc: BaseException) -> BaseException:
        """``exc`` with its message redacted (in place; returned for ``raise``)."""
        exc.args = tuple(self(a) if isinstance(a, str) else a for a in exc.args)
        return exc


# --------------------------------------------------------------------------- URLs

#: Query parameters whose value is a credential (case-insensitive; ``*`` globs): cut from any URL the
#: kit records, besides any name :func:`looks_secret` matches.
URL_SECRET_PARAMS = (
    "access_token", "token", "*_token", "key", "*key", "password", "passwd", "pass", "pwd", "secret",
    "sig", "signature", "auth", "*auth*", "credential*", "code", "session*", "sid", "x-amz-*",
    "x-goog-*", "jwt", "bearer", "oauth*", "private_token", "se", "sp", "sv", "st", "skoid", "sktid",
)  # fmt: skip
_SCHEME = re.compile(r"^([A-Za-z][A-Za-z0-9+.-]*)://([^/?#]*)(.*)$", re.S)
_SCP = re.compile(r"^([^/@:]+)@([^/:]+):(.*)$", re.S)  # user@host:path, git's scp-like form


def _secret_param(name: str) -> bool:
    low = urllib.parse.unquote(name).strip().lower()
    return looks_secret(low) or any(fnmatch.fnmatchcase(low, p) for p in URL_SECRET_PARAMS)


def _clean_query(rest: str) -> str:
    """``rest`` (a URL's path, query and fragment) with credential-like query parameters cut; a
    fragment is dropped whole (a repository URL needs none; a token may ride there too)."""
    path, _, query = rest.split("#", 1)[0].partition("?")
    if not query:
        return path
    kept = [p for p in query.split("&") if p and not _secret_param(p.split("=", 1)[0])]
    return path + ("?" + "&".join(kept) if kept else "")


def public_url(url: str | None) -> str | None:
    """``url`` as the kit may record it: its userinfo (``user:token@``) and credential-like query
    parameters (``token``, ``access_token``, ``key``, ``password``, ``sig`` ... :data:`URL_SECRET_PARAMS`)
    cut, whatever the scheme's case (``HTTPS://``, ``Git+SSH://``, ``ssh://user@host``), the scp-like
    ``user@host:path`` too; None for None or empty. Used for task.yaml's ``source.repo_url``, the
    recorded import command line (:func:`public_text`) and reports."""
    text = (url or "").strip()
    if not text:
        return None
    m = _SCHEME.match(text)
    if m:
        scheme, authority, rest = m.groups()
        host = authority.rsplit("@", 1)[-1]
        return f"{scheme}://{host}{_clean_query(rest)}"
    m = _SCP.match(text)
    if m and not text.startswith(("/", ".", "~")):
        return f"{m.group(2)}:{_clean_query(m.group(3))}"
    return text


_URL_IN_TEXT = re.compile(r"[A-Za-z][A-Za-z0-9+.-]*://[^\s'\"]+|[^\s'\"/@:=]+@[^\s'\"/:]+:[^\s'\"]*")


def public_text(text: str) -> str:
    """``text`` (a command line, a message) with every URL in it cut as :func:`public_url` cuts one."""
    return _URL_IN_TEXT.sub(lambda m: public_url(m.group(0)) or "", text)
