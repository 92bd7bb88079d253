"""docs/experiments.md is generated from the models (``kit.app.reference``) and current."""

from __future__ import annotations

from kit.app import reference
from kit.app.cli import main


def test_the_committed_reference_is_current():
    assert reference.REFERENCE.read_text(encoding="utf-8") == reference.render(), "run: python -m kit docs"
    assert main(["docs", "--check"]) == 0


def test_every_field_has_a_type_a_default_a_meaning_and_an_example():
    rows = [ln for ln in reference.render().splitlines() if ln.startswith("| `")]
    assert len(rows) > 60
    for row in rows:
        cells = [c.strip() for c in row.strip("|").split(" | ")]
        assert len(cells) == 5 and all(cells), row  # field, type, default, meaning, example


def test_every_strategy_option_is_in_the_reference():
    from kit.strategies.options import option_models

    text = reference.render()
    for strategy, model in option_models().items():
        section = text.split(f"### {strategy}\n", 1)[1].split("\n### ", 1)[0]
        for name in model.model_fields:
            assert f"| `{name}` |" in section, (strategy, name)
