"""The crossover end to end through the runner: a scripted policy whose chance to solve depends on the
task's size and the strategy -- vibe solves the small tasks, linear the large ones -- run by
``run_experiment`` on 8 tasks of 8 sizes; ``kit report`` then shows linear passing vibe between the
two groups. Pipeline validation with the scripted model, never a benchmark.

The sizes are the kit's own measure (:func:`kit.importers.size.measure`: code lines of the reference
change), which the policy decides by and the runner records in every run.json (``task_size``).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from kit.analysis.report import report
from kit.importers.size import measure
from kit.tasks.task import load_task
from tests.support.helpers import experiment, write_profile
from tests.support.perfect import Perfect

TASKS = [
    "micro-slugify", "bugfix-date-range", "csv-export-stream", "exercism-two-bucket",
    "exercism-react", "exercism-paasio", "exercism-bowling", "table-computed-columns",
]  # fmt: skip
SMALL = 43  # vibe solves tasks below it (4 to 40 code lines today), linear those above (46 to 108)


def _size(task_path: str | Path) -> int:
    return measure(load_task(Path(task_path))).code_lines


def _solves(strategy: str, size: int) -> bool:
    return size < SMALL if strategy == "vibe" else size > SMALL


class SizePolicy:
    """Solves (the perfect cast of the strategy) when :func:`_solves`, else says done at once."""

    def __init__(self) -> None:
        self.perfect = Perfect(any_task=True)

    def __call__(self, request):
        from kit.model.policies import done

        if _solves(request.context["strategy"], _size(request.context["task_path"])):
            return self.perfect(request)
        return done(request)


@pytest.mark.slow  # 16 scripted runs with scoring
def test_a_size_dependent_policy_shows_the_crossover_in_the_report(tmp_path):
    from kit.model import scripted
    from kit.run.runner import run_experiment

    profile = write_profile(tmp_path, scripted.register(SizePolicy(), name="by-size"), "native")
    out = run_experiment(
        experiment("crossing", profile, TASKS, ["vibe", "linear"]),
        results_dir=tmp_path / "results",
        progress=False,
    )
    sizes = {}
    for run_json in sorted(out.glob("runs/*/run.json")):
        run = json.loads(run_json.read_text())
        size = run["task_size"]["code_lines"]  # recorded by the runner
        sizes[run["task"]] = size
        assert run["score"]["defects"]["major"] + run["score"]["defects"]["critical"] == 0 or not _solves(
            run["strategy"], size
        ), run["run_id"]
    assert len(sizes) == len(TASKS) and any(v < SMALL for v in sizes.values()) and max(sizes.values()) > SMALL
    text = " ".join(report(out, "text").split())
    section = text.split("Where a strategy starts paying off")[1].split("Per role")[0]
    assert "pooled over 8 tasks, 1 repeat each" in section and "resampled by task, then repeat" in section
    assert "linear: its solved rate passes vibe's at ~" in section
    at = float(section.split("passes vibe's at ~")[1].split()[0].replace(",", ""))
    below = sorted(v for v in sizes.values() if v < SMALL)[-2]  # the second-largest vibe solves
    above = sorted(v for v in sizes.values() if v > SMALL)[1]  # the second-smallest linear solves
    assert below <= at <= above, (at, sizes)
