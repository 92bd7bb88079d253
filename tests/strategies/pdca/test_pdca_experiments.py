"""The shipped experiments let pdca finish its own happy path: with a perfect scripted cast, under
default.yaml's and default-equal-tier.yaml's limits, tiers and pdca options, every task ends ``done``
(otherwise the experiment measures the budget, not the strategy)."""

from __future__ import annotations

import re
import shutil

import pytest
import yaml

from kit.config import TIERS, load_experiment
from kit.model import scripted
from kit.paths import EXPERIMENTS_DIR, PRICES_DIR
from kit.records.schema import CALLS, load_run, read_jsonl
from kit.run.runner import run_experiment
from tests.support.pdca import Cast


@pytest.mark.slow
@pytest.mark.parametrize("name", ["default", "default-equal-tier"])
def test_a_perfect_pdca_reaches_done_within_the_shipped_experiments_limits(tmp_path, name):
    exp = load_experiment(EXPERIMENTS_DIR / f"{name}.yaml")
    (tmp_path / "profiles").mkdir()
    (tmp_path / "prices").mkdir()
    shutil.copy(PRICES_DIR / "scripted.yaml", tmp_path / "prices" / "scripted.yaml")
    model = scripted.register(Cast(task_tests=True))  # proves each task with its own test command
    tiers = {t: {"model": model, "price": f"scripted-{t}"} for t in TIERS}
    profile = tmp_path / "profiles" / "p.yaml"
    profile.write_text(yaml.safe_dump({"name": "p", "price_sheet": "scripted", "tiers": tiers}))
    only_pdca = exp.model_copy(
        update={
            "strategies": ["pdca"],
            "profile": str(profile),
            "tiers": {"pdca": exp.tiers["pdca"]},
            "strategy_options": {"pdca": exp.strategy_options["pdca"]},
        }
    )
    runs = run_experiment(only_pdca, results_dir=tmp_path / "results", progress=False) / "runs"
    for task in exp.tasks:
        run_dir = runs / f"{task}__pdca__p__r1"
        record = load_run(run_dir)
        c = record.counters
        assert (record.outcome, c.get("stop_reason")) == ("done", "pass"), (task, record.error)
        assert len(read_jsonl(run_dir / CALLS)) <= exp.limits.max_model_calls
        # the experiment file's comment gives the true counts of one clean cycle (issue 41)
        comment = (EXPERIMENTS_DIR / f"{name}.yaml").read_text(encoding="utf-8")
        said = re.search(
            r"a flawless cycle is (\d+) role calls \((\d+) orchestrator turns.*?\) and (\d+) model",
            comment,
            re.S,
        )
        assert said, "the pdca comment must give the counts of a flawless cycle"
        roles = c["role_calls"]
        assert (int(said[1]), int(said[2]), int(said[3])) == (
            sum(roles.values()),
            roles["orchestrator"],
            len(read_jsonl(run_dir / CALLS)),
        ), (task, roles)
        assert record.score.defects_total == 0


def test_the_default_role_cap_leaves_room_for_the_whole_escalation_path():
    """Issue 41: since CHECK's scout the source's whole escalation path needs 86 role sessions; the
    default cap (80) ended such a run as `capped` before the expert could decide."""
    from kit.strategies.pdca.settings import PdcaSettings

    assert PdcaSettings().max_role_calls >= 86
