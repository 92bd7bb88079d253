"""Who writes the pdca status file (option ``status_writer``).

In the source the cheap executor updates the status file on every event, so every update costs a
model call. With ``model`` (the default) each update is one call on the executor's tier (cheap unless
the profile or experiment reassigns it), labelled with its own role ``status-writer`` so reports do not
count it as executor work, and recorded in calls.jsonl and the transcript like any call.
The kit composes the exact text and keeps it: an update the model got wrong is replaced by the kit's
text and counted as a repair (the file never depends on a small model copying tables well). With
``kit`` the kit writes it for free. A model update that runs into the run budget hands the rest of
the file to the kit (noted), so a STOP can still be written down.
"""

from __future__ import annotations

from kit.errors import BudgetExceeded
from kit.model.actions import strip_fence
from kit.strategies.context import RunContext
from kit.strategies.pdca.status import StatusFile

ROLE = "status-writer"  # its own label in calls.jsonl, events and transcripts
TIER_OF = "executor"  # it runs on the executor's tier (the source's cheap executor writes the file)
WRITERS = ("model", "kit")


def _plain(text: str) -> str:
    return " ".join(strip_fence(text).split())


class StatusWriter:
    def __init__(self, ctx: RunContext, status: StatusFile, writer: str) -> None:
        if writer not in WRITERS:
            raise ValueError(f"pdca option status_writer must be 'model' or 'kit', not {writer!r}")
        self.ctx, self.status = ctx, status
        self.counts = {"writer": writer, "model_calls": 0, "repairs": 0, "kit_fallback": 0}

    def append(self, chunk: str, event: str) -> None:
        if self.counts["writer"] == "model" and not self.counts["kit_fallback"]:
            self._model_update(chunk, event)
        if self.status.append(chunk):
            self.ctx.recorder.event(
                "note", "orchestrator", "status-file", "changed outside the loop; restored", ok=False
            )

    def _model_update(self, chunk: str, event: str) -> None:
        if self.ctx.budget is not None:
            try:
                self.ctx.budget.start_call()  # checks the run budget and counts this model call
            except BudgetExceeded as e:
                self.counts["kit_fallback"] = 1
                self._note(f"{e}: the kit writes the rest")
                return
        self.counts["model_calls"] += 1
        conversation = f"{ROLE}-{self.counts['model_calls']}"
        update = self.ctx.prompts.get("status_update", event=event, file=self.status.path.name, chunk=chunk)
        messages = [
            {"role": "system", "content": self.ctx.prompts.get("status_writer").strip()},
            {"role": "user", "content": update[:-1] if update.endswith("\n") else update},
        ]
        for message in messages:
            self.ctx.recorder.transcript(conversation, ROLE, message)
        try:
            reply = self.ctx.gateway.call(
                role=ROLE, tier=self.ctx.tier(TIER_OF, "cheap"), messages=messages, conversation=conversation
            )
        finally:
            if self.ctx.budget is not None:
                self.ctx.budget.end_call()
        self.ctx.recorder.transcript(
            conversation, ROLE, {"role": "assistant", "content": reply.content or ""}
        )
        if _plain(reply.content or "") != _plain(chunk):
            self.counts["repairs"] += 1
            self._note(f"update differed; kit text kept ({event})")

    def _note(self, detail: str) -> None:
        self.ctx.recorder.event("note", ROLE, "status-writer", detail[:300], ok=False)
