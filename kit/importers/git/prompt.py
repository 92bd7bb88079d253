"""The prompt of an imported task, when no ``--prompt-file`` gives one: the commit message (a range:
its commits' subjects) and an **Interface** section naming the public functions, classes and methods
that the change adds or changes and that the hidden tests call -- with their signatures as the
change writes them, and where they live -- and the constants and class attributes (class-level or
``self.x``) it adds or changes that the hidden tests read, a constant with its value when that is a
short expression. Never a test's body, its inputs or its expected values.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass
from pathlib import PurePosixPath

from kit.importers.git.gitread import Commit
from kit.importers.git.testfiles import parse

#: Commit-message trailers left out of a prompt (who, not what).
TRAILERS = ("signed-off-by:", "co-authored-by:", "reviewed-by:", "acked-by:", "cc:", "change-id:")
MAX_SUBJECTS = 60


@dataclass(frozen=True)
class Name:
    """A public definition of the change: ``qualname`` (``Class.method`` for a method)."""

    qualname: str
    signature: str
    path: str
    new: bool

    def line(self) -> str:
        kind = "new" if self.new else "changed"
        return f"- `{self.signature}` in `{module_name(self.path)}` ({kind})"


def module_name(path: str) -> str:
    """``more_itertools/more.py`` -> ``more_itertools.more`` (a ``src/`` prefix and ``__init__`` cut)."""
    parts = list(PurePosixPath(path).with_suffix("").parts)
    if parts and parts[0] == "src":
        parts = parts[1:]
    if parts and parts[-1] == "__init__":
        parts = parts[:-1]
    return ".".join(parts) or path


def _signature(node: ast.AST, qualname: str) -> str:
    if isinstance(node, ast.Assign | ast.AnnAssign) and node.value is not None:
        value = ast.unparse(node.value)
        return f"{qualname} = {value}" if len(value) <= 60 else f"{qualname} (constant)"
    if isinstance(node, ast.Attribute):
        return f"{qualname} (attribute)"
    if isinstance(node, ast.ClassDef):
        bases = ", ".join(ast.unparse(b) for b in node.bases)
        return f"class {qualname}({bases})" if bases else f"class {qualname}"
    prefix = "async " if isinstance(node, ast.AsyncFunctionDef) else ""
    return f"{prefix}{qualname}({ast.unparse(node.args)})"  # type: ignore[attr-defined]


def definitions(tree: ast.Module | None) -> dict[str, tuple[ast.AST, str]]:
    """qualname -> (node, its ast dump) of the module's top-level functions, classes and constants
    (assigned names), the classes' methods and attributes (class-level, or ``self.x = ...`` in a
    method)."""
    out: dict[str, tuple[ast.AST, str]] = {}

    def add(qual: str, node: ast.AST, dumped: ast.AST) -> None:
        out.setdefault(qual, (node, ast.dump(dumped, include_attributes=False)))

    for node in tree.body if tree is not None else []:
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            add(node.name, node, node)
        for name in _assigned(node):
            add(name, node, node)
        if isinstance(node, ast.ClassDef):
            for sub in node.body:
                if isinstance(sub, ast.FunctionDef | ast.AsyncFunctionDef):
                    add(f"{node.name}.{sub.name}", sub, sub)
                    for target in _self_attributes(sub):
                        add(f"{node.name}.{target.attr}", target, sub)
                for name in _assigned(sub):
                    add(f"{node.name}.{name}", sub, sub)
    return out


def _assigned(node: ast.stmt) -> list[str]:
    """The names a plain assignment statement binds (``X = ...``, ``X: int = ...``)."""
    targets = (
        node.targets
        if isinstance(node, ast.Assign)
        else [node.target]
        if isinstance(node, ast.AnnAssign)
        else []
    )
    return [t.id for t in targets if isinstance(t, ast.Name)]


def _self_attributes(method: ast.FunctionDef | ast.AsyncFunctionDef) -> list[ast.Attribute]:
    """The ``self.x`` a method assigns."""
    return [
        t
        for n in ast.walk(method)
        if isinstance(n, ast.Assign | ast.AnnAssign)
        for t in (n.targets if isinstance(n, ast.Assign) else [n.target])
        if isinstance(t, ast.Attribute) and isinstance(t.value, ast.Name) and t.value.id == "self"
    ]


def changed_names(sources: dict[str, tuple[str | None, str]]) -> list[Name]:
    """The public definitions added or changed, from {path: (base source or None, head source)}."""
    out: list[Name] = []
    for path, (base_src, head_src) in sorted(sources.items()):
        old = definitions(parse(base_src, path) if base_src is not None else None)
        new = definitions(parse(head_src, path))
        for qual, (node, dump) in new.items():
            parts = qual.split(".")
            attribute = isinstance(node, ast.Attribute | ast.Assign | ast.AnnAssign)
            if any(p.startswith("_") for p in (parts[-1:] if attribute else parts)):
                continue  # private (an attribute: its own name; a class may be private)
            if qual not in old or old[qual][1] != dump:
                out.append(Name(qual, _signature(node, qual), path, qual not in old))
    return out


def used_names(tests: list[ast.AST]) -> set[str]:
    """Every identifier and attribute name the test functions mention."""
    names: set[str] = set()
    for test in tests:
        for node in ast.walk(test):
            if isinstance(node, ast.Name):
                names.add(node.id)
            elif isinstance(node, ast.Attribute):
                names.add(node.attr)
    return names


def interface(names: list[Name], tests: list[ast.AST]) -> list[Name]:
    """The changed names the hidden tests call (a method by its own name; a class's changed method
    counts when the tests name the class)."""
    used = used_names(tests)
    return [n for n in names if n.qualname.split(".")[-1] in used]


#: a single commit's message is cut after this many characters (about 4,000 tokens); so is a range's list
MAX_MESSAGE_CHARS = 16_000
#: a range's subject is cut after this many characters (a subject is one line of a commit message)
MAX_SUBJECT_CHARS = 300


def commit_text(commits: list[Commit]) -> str:
    """A single commit's message (trailers cut), or a range's non-merge subjects as a list: at most
    :data:`MAX_SUBJECTS`, each cut at :data:`MAX_SUBJECT_CHARS`, the list at :data:`MAX_MESSAGE_CHARS`
    as one message is -- every cut said in the text (a message is hostile input: it is sent with
    every model call)."""
    if len(commits) == 1:
        lines = [ln for ln in commits[0].message.strip().splitlines() if not ln.lower().startswith(TRAILERS)]
        text = "\n".join(lines).strip()
        if len(text) > MAX_MESSAGE_CHARS:
            cut = len(text) - MAX_MESSAGE_CHARS
            text = text[:MAX_MESSAGE_CHARS] + f"\n\n[... the commit message's last {cut:,} characters cut]"
        return text
    subjects = [c.subject for c in commits if len(c.parents) < 2 and c.subject]
    head = "Make the changes these commits describe:\n\n"
    lines: list[str] = []
    size = len(head)
    for subject in subjects[:MAX_SUBJECTS]:
        line = f"- {_short(subject)}"
        if size + len(line) + 1 > MAX_MESSAGE_CHARS:
            break
        lines.append(line)
        size += len(line) + 1
    if len(subjects) > len(lines):
        lines.append(f"- ... and {len(subjects) - len(lines)} more")
    return head + "\n".join(lines)


def _short(subject: str) -> str:
    """A subject's first line, cut at :data:`MAX_SUBJECT_CHARS` with the cut said."""
    line = subject.strip().splitlines()[0] if subject.strip() else ""
    if len(line) <= MAX_SUBJECT_CHARS:
        return line
    return line[:MAX_SUBJECT_CHARS] + f" [... {len(line) - MAX_SUBJECT_CHARS:,} characters cut]"


def build_prompt(commits: list[Commit], names: list[Name]) -> str:
    text = commit_text(commits)
    if names:
        text += (
            "\n\n## Interface\n\nThe tests that check this work call or read these names, which the change adds "
            "or changes:\n\n" + "\n".join(n.line() for n in names)
        )
    return text + "\n"
