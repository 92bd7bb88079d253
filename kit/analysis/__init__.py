"""Records -> pandas tables: per strategy, per role x tier, cache economics, re-pricing and what-ifs,
verdicts, the published reference figures, the text report (:mod:`kit.analysis.report`) and the figures
(:mod:`kit.analysis.figures`).

May import: the top-level modules and ``kit.records`` only -- the analysis reads records, never runs
anything (``tests/test_layers.py``).

This package's ``__init__`` is the public face of four modules: loading in :mod:`kit.analysis.load`,
the price columns in :mod:`kit.analysis.prices`, the tables and their
statistics in :mod:`kit.analysis.tables`, re-pricing in :mod:`kit.analysis.repricing`, the what-ifs in :mod:`kit.analysis.whatif`. Every public name of
those is re-exported here (``__all__``), so callers use ``analysis.<name>``.

Everything here reads only the run folders written by :mod:`kit.records.recorder` (``run.json``,
``calls.jsonl``, ``events.jsonl``), through its models. A run folder without ``run.json`` is an
incomplete run: it is listed in :attr:`Records.incomplete` and left out of every table.

Column conventions (one place, so notebooks and tests agree):

* ``runs``  -- one row per ``run.json``: identity (run_key = ``<experiment folder>/<run folder>``, unique
  under a results root; run_id, experiment, task, strategy, profile, repeat),
  outcome, times (wall_s, model_s, tool_s), ``calls``; the score flattened (requirements_total,
  tests_added, files_touched, ... , ``defects_critical`` / ``_major`` / ``_minor`` / ``defects_total``,
  ``claimed_done_but_failed``, ``tampered``, ``unscored`` -- both recorded as every requirement failed;
  ``requirements_gamed`` (failed: their must-fail twin passed), ``requirements_unguarded`` (no twin,
  no sealed check), ``requirements_sealed`` (a check decided outside the session);
  ``suspicious`` (introspection of the hidden tests seen; not re-scored);
  ``scored`` (:func:`is_scored`) says whether the run counts in the score means: tampered and
  unscored runs do, errored and interrupted runs do not); loop counters as ``counter_<name>``; the usage totals under the
  token names of the call records (input_uncached, cache_read, cache_write, output, reasoning, cost_usd);
  ``project`` (the task's project, '' = its own cluster) and the task's size as ``size_code_lines``,
  ``size_files``, ``size_hidden_tests``, ``size_base_code_lines``, ``size_prompt_tokens`` (NaN when not
  measured or the record predates sizes) and ``size_long`` (None when unknown).
* ``calls`` -- one row per call attempt (every :class:`~kit.records.schema.CallRecord` field but raw_usage),
  plus the run's identity columns, ``price_key`` (the tier's ``price`` or ``model`` in the run's
  profile), the four prices of that key in the run's price sheet (``price_input`` ... USD per 1M tokens,
  NaN when the sheet lacks the key) and ``t_s`` (seconds since the run started).
* ``events`` -- one row per event, plus identity columns and ``t_s``.
"""

from kit.analysis.load import (
    OUTCOME_ORDER,
    RUN_IDENTITY,
    SIZE_MEASURES,
    UNSCORED_OUTCOMES,
    Records,
    comparable_scores,
    is_scored,
    load,
    repo_path,
)
from kit.analysis.prices import BUCKETS, PRICE_COLUMNS, TOKENS
from kit.analysis.repricing import WhatIf, cost_before_after, reassign, reprice, whatif_price_sheet
from kit.analysis.tables import (
    bucket_costs,
    cache_economics,
    ci95_halfwidth,
    error_runs,
    measured_label,
    outcome_table,
    role_tier_table,
    runs_note,
    strategy_table,
    t_critical_95,
    tier_cost_shares,
)
from kit.analysis.whatif import whatif, whatif_cache_ttl, whatif_model, whatif_reassign
from kit.errors import ConfigError as ConfigError  # still importable from here, as before the split
from kit.errors import KitError as KitError

__all__ = [
    "BUCKETS",
    "OUTCOME_ORDER",
    "PRICE_COLUMNS",
    "RUN_IDENTITY",
    "Records",
    "SIZE_MEASURES",
    "TOKENS",
    "UNSCORED_OUTCOMES",
    "WhatIf",
    "bucket_costs",
    "cache_economics",
    "ci95_halfwidth",
    "comparable_scores",
    "cost_before_after",
    "error_runs",
    "is_scored",
    "load",
    "measured_label",
    "outcome_table",
    "reassign",
    "repo_path",
    "reprice",
    "role_tier_table",
    "runs_note",
    "strategy_table",
    "t_critical_95",
    "tier_cost_shares",
    "whatif",
    "whatif_cache_ttl",
    "whatif_model",
    "whatif_price_sheet",
    "whatif_reassign",
]
