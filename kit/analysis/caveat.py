"""What records that are not a benchmark must say wherever they are drawn: a figure travels alone,
without the report's labels, so its title names simulated, oracle, scripted and embedded-model records."""

from __future__ import annotations

from urllib.parse import urlparse

import pandas as pd

#: the oracle profile's model (kit/model/oracle.py): it plays each task's reference solution
ORACLE_MODEL = "scripted/oracle-all"


def caveat(frame: pd.DataFrame) -> str:
    """What a figure must say in its title when the records it draws are not a benchmark, from a frame
    of runs (``models``, ``profile``) or of calls (``model``): a figure travels alone, without the
    report's labels. '' for a real provider's runs."""
    kinds, models = set(), set()
    if "profile" in frame:
        kinds |= set(frame["profile"].dropna().astype(str))
    for column in ("models", "model"):
        if column in frame:
            models |= {m for ms in frame[column].dropna() for m in str(ms).split(",") if m}
    kinds |= {m.split("/")[0] for m in models if "/" in m}
    if "simulated" in kinds:
        return "SIMULATED records (planted effects), not a benchmark"
    if ORACLE_MODEL in models:
        return "oracle: a pipeline check, not a benchmark (every role played the reference solution)"
    if "scripted" in kinds:
        return "scripted model: pipeline check, not a benchmark"
    if "embedded" in kinds or "local" in kinds:
        return "embedded SmolLM2-135M: a real but tiny model"
    bases = {
        b for bs in frame.get("api_bases", pd.Series(dtype=str)).dropna() for b in str(bs).split(",") if b
    }
    if local := sorted(b for b in bases if on_this_machine(b)):
        return f"served on this machine ({', '.join(local)}): a fake or local server's numbers"
    return ""


def on_this_machine(url: str) -> bool:
    """Is ``url``'s host this machine (a fake or local server answered the models named)?"""
    host = (urlparse(url).hostname or "").lower()
    return host in ("localhost", "::1", "0.0.0.0") or host.startswith("127.")
