"""The workflow's journal: every completed agent call, keyed by a hash chained on everything before
it, so an interrupted workflow resumes by replaying the unchanged prefix only (and restores the
clone's working tree to what each replayed writing call left)."""

from __future__ import annotations

import hashlib
import json
import os
import tempfile
import threading
from pathlib import Path
from typing import Any

from pydantic import BaseModel

from kit.errors import KitError
from kit.records.schema import read_jsonl
from kit.sandbox.backends import default_sandbox, get_sandbox
from kit.tasks.git import git_env
from kit.tasks.workspace import diff as workspace_diff


def chain_digest(*parts: Any) -> str:
    text = json.dumps(parts, sort_keys=True, default=str)
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:32]


def journal_key(
    parent: str, system: str, prompt: str, schema: type[BaseModel] | None, model: str, role: str
) -> str:
    """A stable hash of (chain head, prompt, schema, model, role); the system prompt counts as part of
    the prompt, the chain head carries every earlier call and its result."""
    payload = {
        "parent": parent,
        "system": system,
        "prompt": prompt,
        "schema": schema.model_json_schema() if schema is not None else None,
        "model": model,
        "role": role,
    }
    return hashlib.sha256(json.dumps(payload, sort_keys=True).encode("utf-8")).hexdigest()[:32]


class Journal:
    """Append-only JSONL of completed agent calls, keyed by their chained hash."""

    def __init__(self, path: Path) -> None:
        self.path = Path(path)
        self._lock = threading.Lock()
        self._entries: dict[str, dict[str, Any]] = {
            row["key"]: row for row in read_jsonl(self.path) if "key" in row
        }

    def __len__(self) -> int:
        return len(self._entries)

    def get(self, key: str) -> dict[str, Any] | None:
        with self._lock:
            return self._entries.get(key)

    def append(self, entry: dict[str, Any]) -> None:
        line = json.dumps(entry, default=str)
        with self._lock:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            with open(self.path, "a", encoding="utf-8") as fh:
                fh.write(line + "\n")
                fh.flush()
                os.fsync(fh.fileno())
            self._entries[entry["key"]] = entry


def restore(workspace: Any, recorded: str) -> None:
    """Make the clone's working tree match ``recorded`` (a diff against the base commit): reverse the
    current diff, then apply the recorded one. Only the working tree changes (no index, no commits)."""
    current = workspace_diff(workspace)
    if current == recorded:
        return
    if current:
        _git_apply(workspace, current, reverse=True)
    if recorded:
        _git_apply(workspace, recorded, reverse=False)


def _git_apply(workspace: Any, patch: str, *, reverse: bool) -> None:
    """``git apply`` of ``patch`` on the clone, in the run's sandbox as the agent's commands run (the
    clone's ``.git`` is the agent's: whatever its config names runs there, never in the kit)."""
    root = workspace.root
    with tempfile.TemporaryDirectory(prefix="orchbench-patch-") as tmp:
        folder = Path(tmp)
        folder.chmod(0o755)
        (folder / "change.diff").write_text(patch, encoding="utf-8")
        (folder / "change.diff").chmod(0o644)
        argv = ["git", "-c", "core.hooksPath=/dev/null", "-c", "core.fsmonitor=false", "apply", "--binary"]
        argv += ["--whitespace=nowarn", *(["-R"] if reverse else []), str(folder / "change.diff")]
        box = get_sandbox(workspace.sandbox or default_sandbox())
        res = box.run(argv, root, writable=True, timeout_s=120, env=git_env(), ro_binds=[folder])
    if res.exit_code != 0:
        raise KitError(
            f"workflow journal: could not {'reverse' if reverse else 'apply'} a recorded diff in {root}: "
            f"{res.output.strip()[:500]}",
            "delete the run's journal file under <results>/<experiment>/journals/ to redo the run from scratch",
        )
