"""A repository's text reaches the terminal escaped: a commit subject and a test's failure message
holding an OSC window title, an erased line and an OSC 52 clipboard write come out of ``kit tasks
import-git``, ``kit tasks list`` and ``kit tasks validate`` as visible escapes (``\\x1b]0;...``), never
raw. Before: each was printed as it was."""

from __future__ import annotations

import shutil

import pytest

from kit.app.cli import main
from tests.support.gitrepos import make_repo
from tests.test_terminal import CLIP, ERASE, TITLE, raw_controls

NOISE = f"{TITLE}{ERASE}{CLIP}\u202e"
SHOWN = "\\x1b]0;pwned\\x07\\x1b[2K\\x1b]52;c;"
NOISY_TEST = f"\n\ndef test_noisy():\n    assert False, {NOISE!r}\n"

COMMITS = [
    (
        "Start tiny",
        {
            "src/tiny/__init__.py": "def area(w, h):\n    return w + h\n",
            "tests/test_tiny.py": "def test_imports():\n    import tiny  # noqa: F401\n",
        },
    ),
    (
        f"area multiplies {NOISE}",
        {
            "src/tiny/__init__.py": "def area(w, h):\n    return w * h\n",
            "tests/test_tiny.py": (
                "from tiny import area\n\n\ndef test_imports():\n    import tiny  # noqa: F401\n\n\n"
                "def test_area():\n    assert area(2, 3) == 6\n" + NOISY_TEST
            ),
        },
    ),
]


def _run(capsys, *argv: str) -> tuple[int, str]:
    code = main(list(argv))
    out = capsys.readouterr()
    return code, out.out + out.err


@pytest.mark.slow
def test_a_commit_subject_and_a_test_message_come_out_escaped(tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("ORCHBENCH_RESULTS_DIR", str(tmp_path / "results"))
    shas = make_repo(tmp_path / "tiny", COMMITS)
    out = tmp_path / "tasks"
    code, text = _run(
        capsys, "tasks", "import-git", str(tmp_path / "tiny"), "--commit", shas[1], "--out", str(out),
        "--id", "tiny-fix", "--timeout", "60",
    )  # fmt: skip
    assert code == 0, text
    assert raw_controls(text) == [], text
    assert text.count(SHOWN) >= 2, text  # the subject (progress) and test_noisy's message (left out)

    code, text = _run(capsys, "tasks", "list", str(out))
    assert raw_controls(text) == [] and SHOWN in text, text  # the title is the commit's subject

    task = out / "tiny-fix"
    (task / "acceptance" / "tests" / "test_noise.py").write_text(NOISY_TEST, encoding="utf-8")
    code, text = _run(capsys, "tasks", "validate", str(task))
    assert code == 1 and raw_controls(text) == [] and SHOWN in text, text
    shutil.rmtree(out)
