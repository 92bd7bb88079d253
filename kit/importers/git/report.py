"""What ``kit tasks import-git`` prints at the end: the hidden tests by severity (with how each fails
at the base), the candidates left out and why, the own tests left out and why -- or, for a refused
candidate, what did not validate. Every item from the repository is one line, its control characters
escaped (:func:`kit.untrusted.terminal.visible`)."""

from __future__ import annotations

from kit.importers.git.result import ImportResult
from kit.importers.size import describe
from kit.importers.spec_audit import report
from kit.records.schema import SEVERITIES
from kit.untrusted.terminal import visible

KIND_TEXT = {
    "hang": "runs past the time limit at the base",
    "memory": "runs out of memory at the base",
    "crash": "crashes at the base",
    "missing": "a name it needs is missing at the base",
    "wrong": "a wrong result at the base",
}
SHOWN = 25


def _block(title: str, items: dict[str, str]) -> list[str]:
    if not items:
        return []
    lines = [f"  {title} ({len(items)}):"]
    lines += [f"    {visible(k)}: {visible(v)}" for k, v in list(items.items())[:SHOWN]]
    if len(items) > SHOWN:
        lines.append(f"    ... and {len(items) - SHOWN} more")
    return lines


def import_summary(r: ImportResult) -> str:
    counts = {s: sum(v == s for v in r.hidden.values()) for s in SEVERITIES}
    by_sev = ", ".join(f"{n} {s}" for s, n in counts.items() if n)
    head = (
        f"{r.task_id}: {r.commits} commit(s), {r.solution_files} solution file(s), "
        f"{len(r.hidden)} hidden test(s) ({by_sev or 'none'}), {len(r.deselected)} own test(s) left out, "
        f"{r.seconds:.0f} s"
    )
    if r.ok:
        lines = [f"✓ {head}", f"  written to {visible(r.task_dir)}"]
    else:
        lines = [f"✗ {head}", "  refused: the task does not validate (nothing was written):"]
        lines += [f"    - {visible(p)}" for p in r.problems]
    hidden = {k: f"{s} ({KIND_TEXT.get(r.kinds.get(k, ''), '?')})" for k, s in r.hidden.items()}
    lines += _block("hidden tests", hidden)
    lines += _block("new or changed tests left out", r.dropped)
    lines += _block("own tests left out", r.deselected)
    lines += _block("own test modules not collected (--ignore)", r.ignored)
    lines += [f"  note: {visible(n)}" for n in r.notes]
    if r.size is not None:
        s = r.size
        lines.append(
            f"  size: {describe(s)}, base {s.base_code_lines} code lines, prompt ~{s.prompt_tokens} tokens, "
            f"long: {'yes' if s.long else 'no'} (kit.importers.size)"
        )
    if r.ok:
        if r.gaps:
            lines.append("  specification audit (kit tasks audit): test  line  kind  what")
            lines += [f"    {visible(row)}" for row in report(r.gaps, SHOWN)]
        else:
            lines.append(
                "  specification audit (kit tasks audit): no gaps -- nothing the hidden tests rely on is missing from the prompt"
            )
    return "\n".join(lines)
