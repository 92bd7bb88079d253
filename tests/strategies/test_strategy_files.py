"""Each strategy's working files, as a perfect model's run leaves them in the clone, are the ones it
declares (kit.paths.STRATEGY_FILES): the run's diff.patch keeps them (the record of what happened), its
score neither tests nor counts them. Pipeline validation on micro-slugify, never a benchmark."""

from __future__ import annotations

import re

import pytest

from kit.model import scripted
from kit.paths import STRATEGY_FILES, is_owned, owned_paths
from kit.records.schema import load_run
from kit.run.runner import run_experiment
from kit.strategies import STRATEGIES
from tests.support.helpers import experiment, write_profile
from tests.support.perfect import Perfect


@pytest.mark.slow
def test_a_perfect_run_of_each_strategy_leaves_only_its_declared_files_unscored(tmp_path):
    model = scripted.register(Perfect())
    exp = experiment(
        "own-files",
        write_profile(tmp_path, model, "native"),
        ["micro-slugify"],
        list(STRATEGIES),
        concurrency=2,
    )
    out = run_experiment(exp, results_dir=tmp_path / "results", progress=False)
    seen = {}
    for run_dir in sorted((out / "runs").iterdir()):
        record = load_run(run_dir)
        assert record is not None and record.score is not None and record.outcome == "done", record
        paths = re.findall(r"^diff --git a/(\S+) b/", (run_dir / "diff.patch").read_text(), re.M)
        own = sorted(p for p in paths if is_owned(p, owned_paths()))
        assert own == sorted(STRATEGY_FILES[record.strategy].values()) or record.strategy == "pdca", own
        assert record.score.files_touched == len(paths) - len(own), (record.strategy, paths)
        assert record.score.requirements_failed == 0 < record.score.requirements_total
        seen[record.strategy] = own
    assert seen["pdca"] == []  # its status folder is in no snapshot at all
    assert set(seen) == set(STRATEGIES)
