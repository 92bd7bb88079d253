"""docs/tasks.md is generated from the task model and the importer's rules (``kit.app.task_reference``)
and current."""

from __future__ import annotations

from kit.app import task_reference
from kit.app.cli import main
from kit.tasks.task import TaskFile, TaskLimits, TaskSource
from kit.tasks.transitions import Transition


def test_the_committed_task_reference_is_current():
    text = task_reference.TASKS_REFERENCE.read_text(encoding="utf-8")
    assert text == task_reference.render(), "run: python -m kit docs"
    assert main(["docs", "--check"]) == 0


def test_every_field_every_transition_and_the_rules_are_documented():
    text = task_reference.render()
    for model in (TaskFile, TaskLimits, TaskSource):
        for name in model.model_fields:
            rows = [ln for ln in text.splitlines() if ln.startswith(f"| `{name}` |")]
            assert rows, (model.__name__, name)
            cells = [c.strip() for c in rows[0].strip("|").split(" | ")]
            assert len(cells) == 5 and all(cells), rows[0]  # field, type, default, meaning, example
    for t in Transition:
        assert f"| `{t.value}` |" in text
    for needle in (
        "DELETED.txt",
        "baseline_pass",
        "acceptance_layout: repo",
        "**refuses** the import",
        "-> critical",
        "**Interface**",
        "import-git REPO (--commit SHA | --range BASE..HEAD)",
    ):
        assert needle in text, needle


def test_a_stale_page_is_reported(tmp_path, monkeypatch, capsys):
    stale = tmp_path / "tasks.md"
    stale.write_text("old\n")
    monkeypatch.setattr(task_reference, "TASKS_REFERENCE", stale)
    assert not task_reference.is_current(stale)
    assert main(["docs", "--check"]) == 1
    assert "tasks.md is stale" in capsys.readouterr().err
