"""The README is a front door (issue 32, item 8): at most ~250 lines, every docs/ page linked and
every link resolving, and every `python -m kit ...` command it shows parses with the kit's own CLI."""

from __future__ import annotations

import re
import shlex

from kit.app.cli import build_parser
from kit.paths import REPO_ROOT

README = REPO_ROOT / "README.md"


def test_the_readme_is_a_front_door():
    lines = README.read_text(encoding="utf-8").splitlines()
    assert len(lines) <= 250, f"README.md is {len(lines)} lines: move detail into docs/"
    text = "\n".join(lines)
    for heading in ("## The two commands", "## Job 1", "## Job 2", "## Job 3"):
        assert heading in text


def test_every_link_resolves_and_every_docs_page_is_linked():
    text = README.read_text(encoding="utf-8")
    links = {m.split("#")[0] for m in re.findall(r"\]\(([^)\s]+)\)", text) if not m.startswith("http")}
    missing = sorted(link for link in links if link and not (REPO_ROOT / link).exists())
    assert missing == []
    pages = {f"docs/{p.name}" for p in (REPO_ROOT / "docs").glob("*.md")}
    assert sorted(pages - links) == []  # no page a newcomer cannot reach from the front door


def _commands(text: str) -> list[list[str]]:
    """Every `python -m kit ...` command of the README, with its continuation lines joined."""
    joined = re.sub(r"\\\n\s*", " ", text)
    found = []
    for m in re.finditer(r"python -m kit ([^`\n#]*)", joined):
        args = shlex.split(m.group(1).strip())
        if args and "..." not in args and not any(a.startswith(("PORT", "URL")) for a in args):
            found.append(args)
    return found


def test_every_kit_command_shown_parses():
    commands = _commands(README.read_text(encoding="utf-8"))
    assert len(commands) >= 10
    parser = build_parser()
    for args in commands:
        try:
            parser.parse_args(args)
        except SystemExit as e:  # argparse's way of saying the command line is wrong
            raise AssertionError(f"README command does not parse: python -m kit {' '.join(args)}") from e


def test_the_readme_says_how_to_run_the_kit_and_names_only_what_exists():
    """issue 41: a new user was never told to activate .venv, and the README named things that had
    changed. Every experiment `python -m kit run NAME` names and every `--profile NAME` exist; the
    fake server is described as what it is now (the oracle, for any task given)."""
    text = README.read_text(encoding="utf-8")
    assert "source .venv/bin/activate" in text and ".venv/bin/python -m kit" in text
    parser = build_parser()
    for args in _commands(text):
        parsed = parser.parse_args(args)
        if args[0] == "run":
            name = parsed.experiment
            assert (REPO_ROOT / (name if name.endswith(".yaml") else f"experiments/{name}.yaml")).is_file(), (
                args
            )
        if getattr(parsed, "profile", None):
            assert (REPO_ROOT / "datasets" / "profiles" / f"{parsed.profile}.yaml").is_file(), args
    assert "pdca's roles play a scripted cast" not in text  # the fake server plays the oracle now
    assert "--profile oracle" in text and "keyless-cache" in text.split("## Job 3")[0].split("## Job 2")[1]
