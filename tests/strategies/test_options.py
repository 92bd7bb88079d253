"""Every option a strategy reads is declared in ``kit.strategies.options`` (the check before a run and
docs/experiments.md come from there): a new option added to a strategy without its declaration fails
here instead of being refused as a typo."""

from __future__ import annotations

import dataclasses
import re

import pytest

from kit.paths import KIT_DIR
from kit.strategies.options import check_options, option_models
from kit.strategies.pdca.settings import PdcaSettings

READ = re.compile(r"""\.option\(\s*["']([A-Za-z_]+)["']""")


@pytest.mark.parametrize("strategy", ["vibe", "linear", "workflow", "harness"])
def test_every_option_the_strategy_reads_is_declared(strategy):
    folder = KIT_DIR / "strategies" / strategy
    files = sorted(folder.rglob("*.py")) if folder.is_dir() else [folder.with_suffix(".py")]
    read = {m for f in files for m in READ.findall(f.read_text(encoding="utf-8"))}
    assert read, strategy
    assert read <= set(option_models()[strategy].model_fields), read - set(
        option_models()[strategy].model_fields
    )


def test_pdca_options_are_pdca_settings_fields():
    assert set(option_models()["pdca"].model_fields) == {f.name for f in dataclasses.fields(PdcaSettings)}


def test_declared_defaults_pass_and_removed_pdca_options_say_so():
    for strategy, model in option_models().items():
        check_options(strategy, model().model_dump(exclude_none=True))
    with pytest.raises(Exception, match="max_revisions`: removed"):
        check_options("pdca", {"max_revisions": 1})
