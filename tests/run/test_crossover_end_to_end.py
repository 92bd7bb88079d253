"""The crossover end to end through the runner: a scripted policy whose chance to solve depends on the
task's size and the strategy -- vibe solves the small tasks, linear the large ones -- run by
``run_experiment`` on 8 tasks of 8 sizes; ``kit report`` then shows linear passing vibe between the
two groups. Pipeline validation with the scripted model, never a benchmark.

What it depends on: the task sizes. Until the runner records each task's measured size (issue 37:
``RunRecord.task_size`` from ``kit.tasks`` size measures), the sizes come from :data:`SIZES` (a
fixture: made-up sizes, the same ones the policy decides by) and are written into each run.json after
the runs; a run.json that already carries a size keeps it, and the policy is then checked against it.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from kit.analysis.report import report
from kit.records.schema import TaskSize
from tests.support.helpers import experiment, write_profile
from tests.support.perfect import Perfect

#: Task -> code lines of its reference change (a fixture; see the module docstring).
SIZES = {
    "micro-slugify": 10, "bugfix-date-range": 15, "csv-export-stream": 25, "table-computed-columns": 40,
    "exercism-bowling": 90, "exercism-two-bucket": 140, "exercism-paasio": 220, "exercism-react": 320,
}  # fmt: skip
SMALL = 60  # vibe solves tasks below it, linear those above


def _solves(strategy: str, size: int) -> bool:
    return size < SMALL if strategy == "vibe" else size > SMALL


class SizePolicy:
    """Solves (the perfect cast of the strategy) when :func:`_solves`, else says done at once."""

    def __init__(self) -> None:
        self.perfect = Perfect(any_task=True)

    def __call__(self, request):
        from kit.model.policies import done

        task = Path(request.context["task_path"]).name
        if _solves(request.context["strategy"], SIZES[task]):
            return self.perfect(request)
        return done(request)


@pytest.mark.slow  # 16 scripted runs with scoring
def test_a_size_dependent_policy_shows_the_crossover_in_the_report(tmp_path):
    from kit.model import scripted
    from kit.run.runner import run_experiment

    profile = write_profile(tmp_path, scripted.register(SizePolicy(), name="by-size"), "native")
    out = run_experiment(
        experiment("crossing", profile, list(SIZES), ["vibe", "linear"]),
        results_dir=tmp_path / "results",
        progress=False,
    )
    for run_json in sorted(out.glob("runs/*/run.json")):
        run = json.loads(run_json.read_text())
        if run.get("task_size") is None:  # the runner does not record sizes yet: the fixture's
            run["task_size"] = TaskSize(code_lines=SIZES[run["task"]]).model_dump()
            run_json.write_text(json.dumps(run))
        assert run["score"]["defects"]["major"] + run["score"]["defects"]["critical"] == 0 or not _solves(
            run["strategy"], SIZES[run["task"]]
        ), run["run_id"]
    text = " ".join(report(out, "text").split())
    section = text.split("Where a strategy starts paying off")[1].split("Per role")[0]
    assert "pooled over 8 tasks, 1 repeats each" in section and "resampled by task, then repeat" in section
    assert "linear: its solved rate passes vibe's at ~" in section
    at = float(section.split("passes vibe's at ~")[1].split()[0].replace(",", ""))
    assert 40 <= at <= 90, at  # between the largest task vibe solves and the smallest linear solves
