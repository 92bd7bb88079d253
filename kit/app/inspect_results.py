"""What Inspect's viewer shows of a kit log as a whole (used by :mod:`kit.app.export_inspect`): the
results (each score's mean, ``solved`` first; a standard error only over the repeats of one task) and
the viewer's configuration (nothing trusted; the sample list led by ``solved``).

inspect_ai is imported inside the functions (it takes seconds)."""

from __future__ import annotations

import math
import statistics
from typing import Any

from kit.records.schema import SEVERITIES


def _mean_stderr(values: list[float], one_task: bool = True) -> dict[str, Any]:
    """The mean, and -- only over the repeats of one task -- the standard error (sample sd / sqrt n; 0
    for one value, as Inspect's ``stderr``; NaN for none). Runs of different tasks are not repeats of
    one measurement: over several tasks there is no error bar (the kit's report gives none either)."""
    from inspect_ai.log import EvalMetric

    n = len(values)
    mean = statistics.fmean(values) if n else math.nan
    out = {"mean": EvalMetric(name="mean", value=mean)}
    if one_task:
        err = statistics.stdev(values) / math.sqrt(n) if n > 1 else (0.0 if n else math.nan)
        out["stderr"] = EvalMetric(name="stderr", value=err)
    return out


def eval_results(samples: list[Any]) -> Any:
    """Each score's mean over the scored samples (``scored_samples`` / ``unscored_samples`` say how
    many), solved first; a standard error only when every sample is the same task; defects per
    severity as one score each."""
    from inspect_ai.log import EvalResults, EvalScore

    scored = [s for s in samples if s.scores]
    columns: dict[tuple[str, str], list[float]] = {}
    for s in scored:
        met = s.scores["requirements_met"].value
        if not math.isnan(met):
            columns.setdefault(("requirements_met", "requirements_met"), []).append(met)
        columns.setdefault(("solved", "solved"), []).append(1.0 if s.scores["solved"].value == "C" else 0.0)
        for sev in SEVERITIES:
            columns.setdefault((f"defects_{sev}", "defects"), []).append(
                float(s.scores["defects"].value[sev])
            )
    names = [("solved", "solved"), ("requirements_met", "requirements_met")]
    names += [(f"defects_{sev}", "defects") for sev in SEVERITIES]
    one_task = len({str(s.id) for s in samples}) <= 1
    scores = [
        EvalScore(
            name=name,
            scorer=scorer,
            scored_samples=len(columns.get((name, scorer), [])),
            unscored_samples=len(samples) - len(columns.get((name, scorer), [])),
            metrics=_mean_stderr(columns.get((name, scorer), []), one_task),
            metadata=None
            if one_task
            else {"note": "mean over runs of different tasks: not a verdict (python -m kit report gives it)"},
        )
        for name, scorer in names
    ]
    return EvalResults(
        total_samples=len(samples),
        completed_samples=sum(1 for s in samples if s.error is None),
        scores=scores,
    )


def viewer_config() -> Any:
    """How Inspect's viewer shows the kit's logs: nothing in them is trusted (``trust_content=False``:
    the model's and tools' text, scores, explanations and metadata show as plain text -- no markdown,
    image, link or HTML of an agent's is rendered); the sample list leads with ``solved`` (a red or
    green pill that follows the score) instead of the completion mark, which is green for every run that
    ended without a kit error, solved or not."""
    from inspect_ai.viewer import ScoreColorScale, TaskSamplesColumn, TaskSamplesView, ViewerConfig

    columns = [
        TaskSamplesColumn(id="sampleStatus", visible=False),
        TaskSamplesColumn(id="sampleId"),
        TaskSamplesColumn(id="epoch"),
        TaskSamplesColumn.score("solved"),
        TaskSamplesColumn.score("requirements_met"),
        TaskSamplesColumn(id="answer"),
        TaskSamplesColumn(id="limit"),
        TaskSamplesColumn(id="error"),
        TaskSamplesColumn(id="tokens"),
        TaskSamplesColumn(id="duration"),
        TaskSamplesColumn(id="input"),
    ]
    view = TaskSamplesView(
        name="orchbench",
        columns=columns,
        score_labels={"requirements_met": "requirements met"},
        score_color_scales={"requirements_met": ScoreColorScale(palette="good-high", min=0.0, max=1.0)},
        color_scales_enabled=True,
    )
    return ViewerConfig(trust_content=False, task_samples_view=view)
