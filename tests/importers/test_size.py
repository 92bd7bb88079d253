"""A task's size, measured by the kit the same way for every task (kit/importers/size.py): code lines
leave out docstrings, comments and blank lines; ``long`` is derived; a task.yaml saying ``long: true``
for a task that is not is refused. (That every run record carries its task's size and project:
tests/run/test_vibe_runner.py.)"""

from __future__ import annotations

import shutil

import pytest
import yaml

from kit.app.cli import main
from kit.importers.size import code_lines, measure
from kit.paths import TASKS_DIR
from kit.tasks.task import load_task
from tests.tasks.taskmaker import make_task

DOCUMENTED = '''
"""A module docstring
over two lines."""

# a comment


def f(a,
      b):
    """A docstring."""
    # why
    return a + b  # sum
'''


def test_docstrings_comments_and_blank_lines_are_not_code():
    assert code_lines(DOCUMENTED) == ["def f(a,", "      b):", "    return a + b  # sum"]
    assert code_lines("x = '''a\nb'''\n") == ["x = '''a", "b'''"]  # a string in code is code
    assert code_lines("def f(:\n  # broken\n  pass\n") == ["def f(:", "  pass"]  # does not tokenize


def _function(name: str, lines: int) -> str:
    body = "".join(f"    v{i} = x + {i}\n" for i in range(lines - 2))
    return f'def {name}(x):\n    """{name}: long words.\n\n    More words.\n    """\n{body}    return x\n'


def _task(tmp_path, name, code: int, tests: int, **fields):
    hidden = "import pytest\n" + "".join(
        f"\n\n@pytest.mark.severity('major')\ndef test_{i}():\n    assert True\n" for i in range(tests)
    )
    return make_task(
        tmp_path / name,
        {"a.py": "", "b.py": "# b\n"},
        {"test_x.py": hidden},
        {"a.py": _function("fa", code // 2), "b.py": _function("fb", code - code // 2)},
        **fields,
    )


def test_long_is_derived_from_code_lines_files_and_hidden_tests(tmp_path):
    size = measure(_task(tmp_path, "big", 150, 8))
    assert (size.code_lines, size.files, size.hidden_tests, size.long) == (150, 2, 8, True)
    assert size.base_code_lines == 0 and size.prompt_tokens == 1  # "p": 1 character
    assert not measure(_task(tmp_path, "few-tests", 150, 7)).long
    small = measure(_task(tmp_path, "small", 148, 8))
    assert (small.code_lines, small.long) == (148, False)  # its docstrings (4 lines a file) do not count


def test_a_false_long_true_is_refused_with_a_clear_error(tmp_path, capsys):
    folder = tmp_path / "micro-slugify"
    shutil.copytree(TASKS_DIR / "micro-slugify", folder)
    spec = yaml.safe_load((folder / "task.yaml").read_text())
    (folder / "task.yaml").write_text(yaml.safe_dump({**spec, "long": True}))
    assert main(["tasks", "list", str(folder)]) == 0
    out = capsys.readouterr().out
    assert "size: 4 code lines, 1 files, 7 hidden tests, base 10 code lines" in out
    assert "✗ task 'micro-slugify' says long: true, but by the kit's measure it is not" in out
    assert main(["tasks", "validate", str(folder)]) == 1
    assert "says long: true, but by the kit's measure it is not: 4 code lines" in capsys.readouterr().out
    assert load_task(folder).long  # loading still works: the task can be listed and corrected


def test_an_expert_estimate_says_who_made_it(tmp_path):
    from pydantic import ValidationError

    from kit.tasks.task import TaskFile

    assert (
        TaskFile(id="t", title="t", prompt="p", expert_minutes=45, expert="A. Reviewer").expert_minutes == 45
    )
    with pytest.raises(ValidationError, match="`expert_minutes` needs `expert`"):
        TaskFile(id="t", title="t", prompt="p", expert_minutes=45)
