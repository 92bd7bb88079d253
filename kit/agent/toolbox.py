"""The toolbox: the agent's tools (one function each, registered in :mod:`kit.agent.tools`) bound to one
clone and one role's permissions (read, write, exec).

Every call goes through :meth:`Toolbox.execute`, which

* refuses tools the role may not use (a "denied" event, counted by the recorder);
* refuses paths that leave the clone -- absolute paths, ``..`` escapes, symlinks pointing outside --
  and writes under ``.git`` (also "denied" events);
* records every executed call as a "tool" event with a short summary of its arguments;
* runs commands -- and searches, whose regexes cannot be interrupted in-process -- in the run's
  sandbox (:mod:`kit.sandbox.backends`); a role without ``write`` cannot change the clone there either:
  with ``exec`` its commands write a throwaway layer over it (:mod:`kit.sandbox.throwaway`), without
  it the clone is read-only. The command's time limit is the experiment's; the agent's
  ``timeout_s`` may only lower it;
* gives every call a time limit, reads and writes regular files only, and writes without following
  a symlink swapped in after the check (:mod:`kit.agent.safefs`); bad input (a NUL byte, an over-long or
  over-deep argument) is a tool error for the agent, never a crashed run.

Results are plain text for the model; ``ok=False`` results say what to do instead.
"""

from __future__ import annotations

import contextlib
import math
import os
import time
from collections.abc import Callable, Iterable
from pathlib import Path

from kit.agent import safefs
from kit.agent.tools import TOOLS, BadArgs, Refused, ToolResult, ToolSpec
from kit.errors import KitError
from kit.records.recorder import RunRecorder
from kit.sandbox.backends import default_sandbox, get_sandbox
from kit.sandbox.throwaway import THROWAWAY, Writable

__all__ = ["PERMISSIONS", "TOOL_PERMISSION", "TOOLS", "ToolResult", "ToolSpec", "Toolbox"]

PERMISSIONS = ("read", "write", "exec")
TOOL_PERMISSION = {name: t.permission for name, t in TOOLS.items()}

_SUMMARY_CHARS = 200
#: Longest string argument accepted (a file's whole content); paths and patterns get far less.
_MAX_ARG_CHARS = 5_000_000
_MAX_PATH_CHARS = 4096
_PATH_ARGS = ("path", "pattern", "command")


_JSON_TYPES: dict[str, tuple[type, ...]] = {
    "string": (str,),
    "integer": (int,),
    "number": (int, float),
    "boolean": (bool,),
    "null": (type(None),),
}


def _summary(name: str, args: dict) -> str:
    parts = []
    for key, value in args.items():
        if key in ("content", "old", "new", "code") and isinstance(value, str):
            parts.append(f"{key}=<{len(value)} chars>")
        else:
            parts.append(f"{key}={value!r}")
    text = ", ".join(parts)
    return text if len(text) <= _SUMMARY_CHARS else text[: _SUMMARY_CHARS - 3] + "..."


class Toolbox:
    """The tools one role may use on one clone. See the module docstring for the rules."""

    def __init__(
        self,
        root: Path,
        permissions: Iterable[str],
        *,
        recorder: RunRecorder | None = None,
        role: str = "",
        timeout_s: float = 120.0,
        max_read_bytes: int = 200_000,
        max_output_chars: int = 10_000,
        guard: Callable[[str, dict], str | None] | None = None,
        sandbox: str | None = None,
        env: dict[str, str] | None = None,
    ) -> None:
        self.root = Path(root).resolve()
        self.env = dict(env or {})  # on top of the sandbox's: the task's packages (kit.tasks.packages)
        self.permissions = frozenset(permissions)
        unknown = self.permissions - set(PERMISSIONS)
        if unknown:
            raise ValueError(f"unknown permissions {sorted(unknown)}; valid: {', '.join(PERMISSIONS)}")
        self.recorder = recorder
        self.role = role
        self.timeout_s = timeout_s
        self.max_read_bytes = max_read_bytes
        self.max_output_chars = max_output_chars
        self.guard = guard
        self.sandbox = get_sandbox(sandbox or default_sandbox())
        #: what a command may do to the clone: a role with write changes it; one with exec but no
        #: write runs its commands over a throwaway layer (a test suite may write its caches and
        #: files there, and nothing reaches the clone); any other gets it read-only
        self.writable: Writable = (
            True if "write" in self.permissions else THROWAWAY if "exec" in self.permissions else False
        )

    # -- description -------------------------------------------------------------------------
    def specs(self) -> list[ToolSpec]:
        return [
            ToolSpec(name, f"{t.description} Needs the '{t.permission}' permission.", t.parameters)
            for name, t in TOOLS.items()
        ]

    def allowed(self) -> list[str]:
        return [name for name, t in TOOLS.items() if t.permission in self.permissions]

    # -- dispatch ----------------------------------------------------------------------------
    def execute(self, name: str, args: dict) -> ToolResult:
        started = time.monotonic()
        args = dict(args or {}) if isinstance(args, dict) else args
        if name not in TOOLS:
            result = ToolResult(False, f"unknown tool {name!r}; valid tools: {', '.join(TOOLS)}")
            self._event("tool", name, str(args)[:_SUMMARY_CHARS], result.ok, started)
            return result
        needed = TOOLS[name].permission
        if needed not in self.permissions:
            has = ", ".join(p for p in PERMISSIONS if p in self.permissions) or "none"
            msg = (
                f"permission denied: role {self.role!r} may not call {name} (needs {needed!r}; "
                f"this role has: {has})"
            )
            self._event("denied", name, msg, False, started)
            return ToolResult(False, msg, denied=True)
        if not isinstance(args, dict):
            result = ToolResult(False, f"{name}: arguments must be an object; {self._expected(name)}")
            self._event("tool", name, str(args)[:_SUMMARY_CHARS], False, started)
            return result
        detail = _summary(name, args)
        try:
            clean = self._check_args(name, args)
            if self.guard is not None and needed == "write":
                refusal = self.guard(name, clean)
                if refusal:
                    raise Refused(refusal)
            result = TOOLS[name].run(self, **clean)
        except Refused as e:
            self._event("denied", name, f"{detail} -> {e}"[:_SUMMARY_CHARS], False, started)
            return ToolResult(False, str(e), denied=True)
        except BadArgs as e:
            result = ToolResult(False, str(e))
        except safefs.TimeUp as e:
            result = ToolResult(False, f"{name} {e}; narrow the path or pattern")
        except OSError as e:
            result = ToolResult(False, f"{name} failed: {e.strerror or e}")
        except (ValueError, RecursionError, MemoryError, UnicodeError) as e:
            result = ToolResult(False, f"{name} failed on this input ({type(e).__name__}: {str(e)[:200]})")
        except KitError:
            raise  # the kit's own failure (a sandbox that cannot start ...): the run ends ``error``
        except Exception as e:  # noqa: BLE001 - the arguments are the agent's: never a crashed run
            self._event(
                "note", name, f"unexpected {type(e).__name__} on agent input: {e}"[:300], False, started
            )
            result = ToolResult(
                False, f"{name} failed on this input ({type(e).__name__}); check the arguments"
            )
        self._event("tool", name, detail, result.ok, started)
        return self._capped(result)

    def _capped(self, result: ToolResult) -> ToolResult:
        """No tool's output goes to the model (and the transcript) longer than twice what a file read
        may return (``max_read_bytes``; numbered lines add to it): a listing of 90,000 long paths was
        340 MB a call."""
        cap = 2 * max(self.max_read_bytes, self.max_output_chars)
        if len(result.output) <= cap:
            return result
        cut = len(result.output) - cap
        result.output = result.output[:cap] + f"\n[... {cut} more characters not shown; narrow the call ...]"
        return result

    def _event(self, kind: str, name: str, detail: str, ok: bool, started: float) -> None:
        if self.recorder is not None:
            self.recorder.event(
                kind,  # type: ignore[arg-type]
                self.role,
                name,
                detail,
                ok=ok,
                duration_s=time.monotonic() - started,
            )

    @staticmethod
    def _expected(name: str) -> str:
        schema = TOOLS[name].parameters
        req = schema["required"]
        opt = [k for k in schema["properties"] if k not in req]
        text = f"expected args: {', '.join(req) or '(none)'}"
        return text + (f" (optional: {', '.join(opt)})" if opt else "")

    def _check_args(self, name: str, args: dict) -> dict:
        schema = TOOLS[name].parameters
        props = schema["properties"]
        missing = [k for k in schema["required"] if k not in args or args[k] is None]
        extra = [k for k in args if k not in props]
        if missing or extra:
            what = []
            if missing:
                what.append(f"missing {', '.join(missing)}")
            if extra:
                what.append(f"unknown {', '.join(extra)}")
            raise BadArgs(f"{name}: bad arguments ({'; '.join(what)}); {self._expected(name)}")
        clean = {}
        for key, value in args.items():
            if isinstance(value, str):
                cap = _MAX_PATH_CHARS if key in _PATH_ARGS and key != "command" else _MAX_ARG_CHARS
                if "\0" in value:
                    raise BadArgs(f"{name}: argument {key!r} contains a NUL byte; remove it")
                if len(value) > cap:
                    raise BadArgs(f"{name}: argument {key!r} is {len(value)} chars long; the limit is {cap}")
            types = props[key]["type"]
            types = [types] if isinstance(types, str) else types
            if value is None and "null" not in types:
                continue  # an optional argument given as null: use the default
            if "integer" in types and isinstance(value, str) and value.strip().lstrip("-").isdigit():
                value = int(value)
            elif "number" in types and isinstance(value, str):
                with contextlib.suppress(ValueError):
                    value = float(value)
            elif "boolean" in types and isinstance(value, str) and value.lower() in ("true", "false"):
                value = value.lower() == "true"
            ok = any(
                isinstance(value, _JSON_TYPES[t]) and not (t != "boolean" and isinstance(value, bool))
                for t in types
            )
            if not ok:
                raise BadArgs(
                    f"{name}: argument {key!r} must be {' or '.join(types)}, got {type(value).__name__}; "
                    f"{self._expected(name)}"
                )
            clean[key] = value
        return clean

    # -- containment -------------------------------------------------------------------------
    def resolve(self, path: str, *, write: bool = False) -> Path:
        """``path`` inside the clone, symlinks resolved; Refused if it leaves the clone or (writes) is .git."""
        if not isinstance(path, str) or path.strip() == "":
            raise BadArgs("path must be a non-empty relative path")
        if os.path.isabs(path) or path.startswith("~"):
            raise Refused(f"refused: {path!r} is an absolute path; use a path relative to the repository")
        target = (self.root / path).resolve()
        if not target.is_relative_to(self.root):
            raise Refused(f"refused: {path!r} resolves outside the repository")
        rel = target.relative_to(self.root)
        if write:
            if rel.parts and rel.parts[0] == ".git":
                raise Refused(f"refused: {path!r} is inside .git; the kit manages the git history")
            if rel == Path("."):
                raise Refused("refused: cannot write to the repository root itself")
        return target

    def rel(self, p: Path) -> str:
        return p.relative_to(self.root).as_posix()

    def inside(self, target: Path) -> Path:
        """``target`` (already resolved, inside the clone) relative to the clone's root."""
        return target.relative_to(self.root)

    def deadline(self) -> safefs.Deadline:
        return safefs.Deadline(self.timeout_s)

    def step_timeout(self, requested: float | None) -> float:
        """The experiment's limit; the agent's own ``timeout_s`` may lower it, never raise it."""
        try:
            seconds = float(requested) if requested is not None else math.nan
        except (OverflowError, TypeError, ValueError):  # an int too large for a float: no lower limit
            return self.timeout_s
        if not math.isfinite(seconds) or seconds <= 0:
            return self.timeout_s
        return min(seconds, self.timeout_s)
