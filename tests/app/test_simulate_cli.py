"""``python -m kit simulate``: a planted-effect experiment a user can make, labelled synthetic everywhere."""

import json
import math

import pytest

from kit.analysis import load
from kit.analysis import simulate as sim
from kit.analysis.report import SIMULATED_LABEL, labels, report
from kit.app.cli import main
from kit.app.simulate_cli import planted_curves

SMALL = ["--projects", "3", "--tasks-per-project", "2", "--repeats", "1"]


def test_planted_crossover_is_where_the_curves_meet():
    curves = planted_curves(250.0)
    assert sim.planted_crossover(curves["vibe"], curves["pdca"]) == pytest.approx(250.0, rel=1e-6)
    same = planted_curves(None)
    assert math.isnan(sim.planted_crossover(same["vibe"], same["pdca"]))


def test_simulate_writes_a_folder_every_view_labels_synthetic(tmp_path, capsys):
    out = tmp_path / "mine"
    assert main(["simulate", str(out), "--planted-crossover", "250", *SMALL]) == 0
    printed = capsys.readouterr().out
    assert "SIMULATED" in printed and "not a benchmark" in printed and "crossover at 250 lines" in printed
    runs = sorted((out / "runs").iterdir())
    assert len(runs) == 3 * 2 * 2  # projects x tasks x strategies x 1 repeat
    run = json.loads((runs[0] / "run.json").read_text())
    assert run["profile"] == "simulated" and run["experiment"] == "simulated-mine"
    assert not any(p.name.startswith(".simulate-") for p in tmp_path.iterdir())  # no scratch left
    records = load(out)
    assert SIMULATED_LABEL in labels(records)
    for fmt in ("text", "markdown"):
        assert "not a benchmark" in report(out, fmt, width=None)


def test_simulate_refuses_a_non_empty_folder_and_a_size_outside_the_range(tmp_path, capsys):
    (tmp_path / "full").mkdir()
    (tmp_path / "full" / "keep.txt").write_text("mine")
    assert main(["simulate", str(tmp_path / "full"), *SMALL]) == 2
    assert "not empty" in capsys.readouterr().err
    assert (tmp_path / "full" / "keep.txt").read_text() == "mine"
    assert main(["simulate", str(tmp_path / "new"), "--planted-crossover", "5000", *SMALL]) == 2
    assert "outside the task sizes drawn" in capsys.readouterr().err
    assert not (tmp_path / "new").exists()
    with pytest.raises(SystemExit):  # one or the other
        main(["simulate", str(tmp_path / "x"), "--no-difference", "--planted-crossover", "100"])


def test_no_difference_plants_the_same_curve(tmp_path, capsys):
    out = tmp_path / "simulated-null"
    assert main(["simulate", str(out), "--no-difference", *SMALL]) == 0
    assert "no difference" in capsys.readouterr().out
    run = json.loads(next((out / "runs").iterdir()).joinpath("run.json").read_text())
    assert run["experiment"] == "simulated-null"


def test_the_inspect_export_of_a_simulated_experiment_says_so(tmp_path, capsys):
    pytest.importorskip("inspect_ai")
    from inspect_ai.log import read_eval_log

    from kit.app.export_inspect import export_inspect

    out = tmp_path / "simulated-x"
    assert main(["simulate", str(out), *SMALL]) == 0
    logs = export_inspect(out).logs
    assert len(logs) == 2  # vibe and pdca
    for path in logs:
        note = read_eval_log(str(path), header_only=True).eval.metadata["note"]
        assert note.startswith("simulated records") and "never a benchmark" in note
