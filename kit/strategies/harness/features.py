"""harness's feature list: its schema, the initializer's list validated, and the keeper that lets
only the ``passes`` flags change afterwards (a guard on the file tools, a revert after every session).
See docs/strategies.md, ``## harness``.

The list lives in the clone, so the agent owns the path: it is read and written without following
links (:mod:`kit.agent.safefs`, relative to a descriptor of the clone), and a file over
:data:`MAX_LIST_BYTES` is never parsed in the kit's process (it counts as an invalid list)."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    StrictBool,
    StrictInt,
    StrictStr,
    TypeAdapter,
    ValidationError,
)

from kit.agent import safefs
from kit.model.actions import load_json
from kit.paths import STRATEGY_FILES
from kit.strategies.context import RunContext

FEATURE_LIST = STRATEGY_FILES["harness"]["feature_list"]  # "feature_list.json"
#: A feature list (or a write to it) larger than this is not parsed: it is refused / reverted.
MAX_LIST_BYTES = 1024 * 1024


def read_list(root: Path) -> str:
    """The text of the clone's feature list, read without following links; FileNotFoundError when
    there is none, :class:`safefs.NotRegular` when it is not a regular file or over :data:`MAX_LIST_BYTES`."""
    return safefs.read_text(root, Path(FEATURE_LIST), MAX_LIST_BYTES)


def write_list(root: Path, text: str) -> str:
    """Write the clone's feature list (see :func:`write_missing`)."""
    return write_missing(root, FEATURE_LIST, text)


def write_missing(root: Path, name: str, text: str) -> str:
    """Write a file the kit fills in (the feature list, init.sh, the progress file) without following
    links: a link, special file or folder the agent left in its place is removed first, never written
    through. '' when written, else why not (the agent's doing: the caller notes it and goes on)."""
    try:
        safefs.write_text(root, Path(name), text)
    except OSError:
        try:
            safefs.remove(root, Path(name))
            safefs.write_text(root, Path(name), text)
        except OSError as e:
            return f"{name} could not be written ({e})"
    return ""


class Feature(BaseModel):
    """One entry of feature_list.json."""

    model_config = ConfigDict(extra="forbid")
    id: StrictStr | StrictInt = Field(description="Stable id, e.g. 'F1'.")
    category: StrictStr = Field(description="e.g. functional, edge-case, docs.")
    description: StrictStr = Field(description="What the feature does, in one sentence.")
    steps: list[StrictStr] = Field(description="How to check it, step by step.")
    passes: StrictBool = Field(description="False until a coder has implemented and verified it.")


FEATURES = TypeAdapter(list[Feature])


def parse_features(text: str) -> tuple[list[dict[str, Any]] | None, str]:
    """(the list as plain dicts, '') when ``text`` is a valid feature list, else (None, why)."""
    if len(text) > MAX_LIST_BYTES:
        return None, f"{FEATURE_LIST} is larger than {MAX_LIST_BYTES} bytes"
    try:
        data = load_json(text)
    except ValueError as e:  # malformed, or nested too deep to parse
        return None, f"{FEATURE_LIST} is not valid JSON: {e}"
    if not isinstance(data, list) or not data:
        return None, f"{FEATURE_LIST} must be a non-empty JSON list of feature objects"
    try:
        features = FEATURES.validate_python(data)
    except ValidationError as e:
        return None, f"{FEATURE_LIST} does not match the feature schema: {_short_error(e)}"
    ids = [f.id for f in features]
    duplicates = sorted({str(i) for i in ids if ids.count(i) > 1})
    if duplicates:
        return None, f"{FEATURE_LIST}: duplicate ids {', '.join(duplicates)}"
    return data, ""


def load_initial_list(root: Path) -> tuple[list[dict[str, Any]] | None, str]:
    try:
        text = read_list(root)
    except FileNotFoundError:
        return None, f"{FEATURE_LIST} does not exist"
    except OSError as e:
        return None, f"{FEATURE_LIST} was not read: {e}"
    features, error = parse_features(text)
    if features is not None and any(f["passes"] for f in features):
        return None, f'{FEATURE_LIST}: every feature must start with "passes": false'
    return features, error


def illegal_changes(accepted: list[dict[str, Any]], new: Any) -> list[str]:
    """Every difference between ``new`` and ``accepted`` other than a boolean ``passes`` flag."""
    if not isinstance(new, list):
        return ["the file is not a JSON list"]
    problems = []
    if len(new) != len(accepted):
        problems.append(f"{len(accepted)} features expected, found {len(new)}")
    for i, (old, cur) in enumerate(zip(accepted, new, strict=False), 1):
        if not isinstance(cur, dict):
            problems.append(f"entry {i} is not an object")
            continue
        for key in sorted(set(old) | set(cur), key=str):
            if key == "passes":
                if not isinstance(cur.get(key), bool):
                    problems.append(f"feature {old['id']}: passes must be true or false")
            elif old.get(key, _MISSING) != cur.get(key, _MISSING):
                problems.append(f"feature {old['id']}: {key} changed")
    return problems


def keep_passes(accepted: list[dict[str, Any]], new: Any) -> list[dict[str, Any]]:
    """``accepted`` with the boolean ``passes`` flags that ``new`` gives its ids (first one wins)."""
    flags: dict[str, bool] = {}
    for cur in new if isinstance(new, list) else []:
        if isinstance(cur, dict) and "id" in cur and isinstance(cur.get("passes"), bool):
            flags.setdefault(_key(cur["id"]), cur["passes"])
    return [{**f, "passes": flags.get(_key(f["id"]), f["passes"])} for f in accepted]


_MISSING = object()


def _key(value: Any) -> str:
    return json.dumps(value, sort_keys=True)


@dataclass
class FeatureListKeeper:
    """Holds the accepted feature list; guards the file tools and settles the file after a session."""

    root: Path
    accepted: list[dict[str, Any]]
    ctx: RunContext
    guard_refusals: int = 0
    reverts: int = 0
    regressions: int = 0

    @property
    def passing(self) -> int:
        return sum(bool(f["passes"]) for f in self.accepted)

    @property
    def all_pass(self) -> bool:
        return all(f["passes"] for f in self.accepted)

    def guard(self, name: str, args: dict) -> str | None:
        """Toolbox guard: a refusal message for a write that changes more than ``passes`` flags."""
        path = self.root / FEATURE_LIST
        if (self.root / str(args.get("path", ""))).resolve() != path.resolve():
            return None
        if name == "delete_file":
            problems = ["the file may not be deleted"]
        else:
            if name == "write_file":
                text = args["content"]
            else:  # edit_file: the text the edit would produce
                try:
                    current = read_list(self.root)
                except OSError:
                    current = ""
                if current.count(args["old"]) != 1:
                    return None  # the edit fails by itself, with the tool's own message
                text = current.replace(args["old"], args["new"], 1)
            if len(text) > MAX_LIST_BYTES:
                problems = [f"the new content is larger than {MAX_LIST_BYTES} bytes"]
            else:
                try:
                    new = json.loads(text)
                except (json.JSONDecodeError, RecursionError) as e:
                    new, problems = None, [f"the new content is not valid JSON ({e})"]
                else:
                    problems = illegal_changes(self.accepted, new)
        if not problems:
            return None
        self.guard_refusals += 1
        return (
            f'refused: in {FEATURE_LIST} only the "passes" flags may change ({"; ".join(problems[:5])}). '
            "Keep every feature, its order and all other fields exactly as they are."
        )

    def settle(self, session: int) -> dict[str, Any]:
        """After a session: revert any non-``passes`` change, then accept the list; what changed."""
        try:
            new: Any = json.loads(read_list(self.root))
            problems = illegal_changes(self.accepted, new)
        except FileNotFoundError:
            new, problems = None, ["the file was deleted"]
        except (json.JSONDecodeError, RecursionError) as e:
            new, problems = None, [f"not valid JSON ({e})"]
        except OSError as e:  # a link, a special file, or too large: never parsed
            new, problems = None, [f"not read ({e})"]
        merged = keep_passes(self.accepted, new)
        reverted = bool(problems)
        if reverted:
            unwritten = write_list(self.root, json.dumps(merged, indent=2, ensure_ascii=False) + "\n")
            self.reverts += 1
            self.ctx.recorder.event(
                "gate",
                "coder",
                "feature_list",
                f"session {session}: reverted non-passes changes: {'; '.join(problems)}"[:300]
                + (f"; {unwritten}"[:300] if unwritten else ""),
                ok=False,
            )
        flipped = [
            f["id"] for f, m in zip(self.accepted, merged, strict=True) if not f["passes"] and m["passes"]
        ]
        regressed = [
            f["id"] for f, m in zip(self.accepted, merged, strict=True) if f["passes"] and not m["passes"]
        ]
        self.regressions += len(regressed)
        if regressed:
            self.ctx.recorder.event(
                "note", "coder", "regression", f"session {session}: set back to failing: {regressed}"
            )
        self.accepted = merged
        return {"flipped": flipped, "regressed": regressed, "reverted": reverted}


def _short_error(err: ValidationError) -> str:
    parts = [f"{'.'.join(str(p) for p in e['loc']) or '(top)'}: {e['msg']}" for e in err.errors()[:3]]
    return "; ".join(parts)
