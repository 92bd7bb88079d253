"""Small git repositories the importer's tests build themselves (no third-party code): each is a
list of commits, a commit a message and the files it writes (``None`` deletes one)."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

ENV = {
    "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
    "HOME": "/nonexistent",
    "GIT_CONFIG_GLOBAL": os.devnull,
    "GIT_CONFIG_NOSYSTEM": "1",
    "GIT_AUTHOR_NAME": "Ann Author",
    "GIT_AUTHOR_EMAIL": "ann@example.org",
    "GIT_COMMITTER_NAME": "Ann Author",
    "GIT_COMMITTER_EMAIL": "ann@example.org",
}

Commit = tuple[str, dict[str, str | None]]


def git(repo: Path, *args: str, date: str = "2024-03-01T12:00:00+00:00") -> str:
    env = {**ENV, "GIT_AUTHOR_DATE": date, "GIT_COMMITTER_DATE": date}
    return subprocess.run(
        ["git", *args], cwd=repo, env=env, check=True, capture_output=True, text=True
    ).stdout.strip()


def make_repo(path: Path, commits: list[Commit]) -> list[str]:
    """A repository at ``path`` with ``commits`` applied in order; their SHAs."""
    path.mkdir(parents=True)
    git(path, "init", "-q", "-b", "main")
    shas = []
    for day, (message, files) in enumerate(commits, start=1):
        for rel, text in files.items():
            target = path / rel
            if text is None:
                target.unlink()
                continue
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_text(text, encoding="utf-8")
        git(path, "add", "-A")
        git(path, "commit", "-q", "-m", message, date=f"2024-03-{day:02d}T12:00:00+00:00")
        shas.append(git(path, "rev-parse", "HEAD"))
    return shas


# --------------------------------------------------------------------------- the calc project

CALC_BASE: dict[str, str | None] = {
    "LICENSE": "MIT License\n\nCopyright (c) 2024 Ann Author\n",
    "README.md": "# calc\n\nSmall arithmetic.\n",
    "calc/__init__.py": "from calc.ops import add, mul\n",
    "calc/ops.py": "def add(a, b):\n    return a + b\n\n\ndef mul(a, b):\n    return a * b + 1\n",
    "tests/__init__.py": "",
    "tests/conftest.py": (
        "import json\nimport pathlib\n\nimport pytest\n\n\n@pytest.fixture\ndef cases():\n"
        "    return json.loads((pathlib.Path(__file__).parent / 'data' / 'cases.json').read_text())\n"
    ),
    "tests/data/cases.json": "[[2, 3, 6], [4, 5, 20]]\n",
    "tests/test_ops.py": (
        "import pytest\n\nfrom calc import add, mul\n\n\ndef test_add():\n    assert add(2, 3) == 5\n\n\n"
        "def test_mul_small():\n    assert mul(2, 3) == 7  # the old, wrong behaviour\n\n\n"
        '@pytest.mark.skip(reason="not on this platform")\ndef test_platform_only():\n    assert False\n'
    ),
}
#: The fix: mul no longer adds one (the changed line is a marker the leak test looks for).
MUL_FIXED = "def add(a, b):\n    return a + b\n\n\ndef mul(a, b):\n    return a * b  # fixed-by-the-reference-change\n"
CALC_FIX: dict[str, str | None] = {
    "calc/ops.py": MUL_FIXED,
    "tests/test_ops.py": (
        "import pytest\n\nfrom calc import add, mul\n\n\ndef test_add():\n    assert add(2, 3) == 5\n\n\n"
        "def test_mul_small(cases):\n    for a, b, product in cases:\n        assert mul(a, b) == product\n\n\n"
        '@pytest.mark.skip(reason="not on this platform")\ndef test_platform_only():\n    assert False\n\n\n'
        '@pytest.mark.skipif(True, reason="needs a GPU")\ndef test_mul_on_gpu():\n    assert mul(1, 1) == 1\n'
    ),
}
CALC_DIV: dict[str, str | None] = {
    "calc/__init__.py": "from calc.ops import add, div, mul\n",
    "calc/ops.py": MUL_FIXED
    + (
        "\n\ndef div(a, b):\n    if b == 0:\n        raise ValueError('division by zero')\n    return a / b\n"
    ),
    "tests/test_div.py": (
        "import unittest\n\nfrom calc import add, div\n\n\nclass DivTest(unittest.TestCase):\n"
        "    def test_div(self):\n        self.assertEqual(div(6, 3), 2)\n\n"
        "    def test_div_by_zero(self):\n        with self.assertRaises(ValueError):\n            div(1, 0)\n\n"
        "    def test_add_still_works(self):\n        self.assertEqual(add(1, 1), 2)\n"
    ),
}
CALC_DOCS: dict[str, str | None] = {"README.md": "# calc\n\nSmall arithmetic: add, mul, div.\n"}
CALC_TEST_ONLY: dict[str, str | None] = {
    "tests/test_more.py": "from calc import add\n\n\ndef test_add_zero():\n    assert add(0, 0) == 0\n"
}
CALC_COMMITS: list[Commit] = [
    ("Start calc", CALC_BASE),
    ("Fix mul: it added one to the product", CALC_FIX),
    ("Add div, which refuses a zero divisor", CALC_DIV),
    ("Describe the functions in the README", CALC_DOCS),
    ("Test add with zeros", CALC_TEST_ONLY),
]


# --------------------------------------------------------------------------- runaway tests at the base

LOOPS_BASE: dict[str, str | None] = {
    "loops/__init__.py": (
        "def collatz_steps(n):\n    steps = 0\n    while n != 1:  # never ends for 0\n"
        "        n = n // 2 if n % 2 == 0 else 3 * n + 1\n        steps += 1\n    return steps\n\n\n"
        "def pad(text, width):\n    return (text * 2**width)[:width]  # 2**width copies: memory runs out\n"
    ),
    "tests/test_loops.py": (
        "from loops import collatz_steps\n\n\ndef test_collatz_six():\n    assert collatz_steps(6) == 8\n"
    ),
}
LOOPS_FIX: dict[str, str | None] = {
    "loops/__init__.py": (
        "def collatz_steps(n):\n    if n < 1:\n        raise ValueError(n)\n    steps = 0\n    while n != 1:\n"
        "        n = n // 2 if n % 2 == 0 else 3 * n + 1\n        steps += 1\n    return steps\n\n\n"
        "def pad(text, width):\n    return (text * (width // len(text) + 1))[:width]\n"
    ),
    "tests/test_loops.py": (
        "import pytest\n\nfrom loops import collatz_steps, pad\n\n\ndef test_collatz_six():\n"
        "    assert collatz_steps(6) == 8\n\n\ndef test_collatz_zero_is_refused():\n"
        "    with pytest.raises(ValueError):\n        collatz_steps(0)\n\n\n"
        "def test_pad_to_a_wide_width():\n    assert pad('ab', 60) == 'ab' * 30\n\n\n"
        "def test_collatz_one():\n    assert collatz_steps(1) == 0\n"
    ),
}
LOOPS_COMMITS: list[Commit] = [("Start loops", LOOPS_BASE), ("Stop the runaway loops", LOOPS_FIX)]


# --------------------------------------------------------------------------- introspection at the base

FRAMES_BASE: dict[str, str | None] = {
    "frames/__init__.py": (
        "import sys\n\n\ndef caller():\n    return sys._getframe(1).f_code.co_name\n\n\n"
        "def greet(name):\n    return 'hello ' + name + ' from ' + caller()\n\n\n"
        "def shout(text):\n    return text.upper() + '?'\n"
    ),
    "tests/test_frames.py": (
        "from frames import greet\n\n\ndef test_greet():\n    assert greet('ann').startswith('hello ann')\n"
    ),
}
FRAMES_FIX: dict[str, str | None] = {
    "frames/__init__.py": FRAMES_BASE["frames/__init__.py"].replace("'?'", "'!'"),  # type: ignore[union-attr]
    "tests/test_frames.py": (
        "from frames import greet, shout\n\n\ndef test_greet():\n    assert greet('ann').startswith('hello ann')\n"
        "\n\ndef test_shout():\n    assert shout('hi') == 'HI!'\n"
    ),
}
FRAMES_COMMITS: list[Commit] = [
    ("Start frames", FRAMES_BASE),
    ("shout ends with an exclamation mark", FRAMES_FIX),
]


# --------------------------------------------------------------------------- the smallest fix (a src/ layout)

TINY_COMMITS: list[Commit] = [
    (
        "Start tiny",
        {
            "src/tiny/__init__.py": "def area(w, h):\n    return w + h\n",
            "tests/test_tiny.py": "def test_imports():\n    import tiny  # noqa: F401\n",
        },
    ),
    (
        "area multiplies",
        {
            "src/tiny/__init__.py": "def area(w, h):\n    return w * h  # fixed-by-the-reference-change\n",
            "tests/test_tiny.py": (
                "from tiny import area\n\n\ndef test_imports():\n    import tiny  # noqa: F401\n\n\n"
                "def test_area():\n    assert area(2, 3) == 6\n"
            ),
        },
    ),
]
