"""pytest's configuration files read as pytest 9 reads them (``_pytest/config/findpaths.py``, mirrored
loader for loader): ini files with ``iniconfig`` (pytest's own reader: no ``[DEFAULT]`` inheritance, a
UTF-8 byte-order mark read past, no interpolation, no inline comments), ``pytest.toml`` by its
``[pytest]`` table only, ``pyproject.toml`` by ``[tool.pytest]`` or ``[tool.pytest.ini_options]``, a
file of another name by its suffix (``-c``). RT44-8/9: the kit read them with ``configparser`` and
its own rules, and named its canaries in a form pytest does not collect.

:func:`config_file` is the file pytest takes its configuration from when started in a folder,
:func:`options` the options in one."""

from __future__ import annotations

import tomllib
from collections.abc import Callable
from pathlib import Path

import iniconfig

#: A configuration file larger than this is not parsed in the kit's process: it is taken as pytest's
#: configuration (pytest itself reads it, in the sandbox) and its options as none.
MAX_CONFIG_BYTES = 1024 * 1024
Options = dict[str, object]


class Unreadable(Exception):
    """pytest stops on this file (a usage error): it is the configuration, and its session fails."""


def _ini(path: Path) -> iniconfig.IniConfig:
    try:
        return iniconfig.IniConfig(str(path), data=path.read_text(encoding="utf-8"))
    except (iniconfig.ParseError, UnicodeDecodeError) as exc:
        raise Unreadable(str(exc)) from exc


def _toml(path: Path) -> dict[str, object]:
    try:
        return tomllib.loads(path.read_text(encoding="utf-8"))
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
        raise Unreadable(str(exc)) from exc


def _section(name: str) -> Callable[[Path], Options | None]:
    def load(path: Path) -> Options | None:
        ini = _ini(path)
        if name in ini.sections:
            return dict(ini.sections[name])
        if name == "tool:pytest" and "pytest" in ini.sections:
            raise Unreadable("[pytest] in setup.cfg is no longer supported")  # (pytest fails)
        return None

    return load


def _pytest_ini(path: Path) -> Options | None:
    return _section("pytest")(path) or {}  # (always the configuration, even without [pytest])


def _pytest_table(doc: dict[str, object]) -> Options | None:
    if "pytest" in doc:
        if not isinstance(doc["pytest"], dict):
            raise Unreadable("[pytest] is not a table")
        return dict(doc["pytest"])
    if any(not isinstance(v, dict) for v in doc.values()):
        raise Unreadable("pytest configuration must be under a [pytest] table")
    return None


def _tool_pytest(doc: dict[str, object]) -> Options | None:
    tool = doc.get("tool", {})
    tool = tool.get("pytest", {}) if isinstance(tool, dict) else None
    if not isinstance(tool, dict):
        raise Unreadable("[tool] or [tool.pytest] is not a table")
    native = {k: v for k, v in tool.items() if k != "ini_options"}
    ini = tool.get("ini_options")
    if native and ini:
        raise Unreadable("both [tool.pytest] and [tool.pytest.ini_options]")
    if native:
        return native
    if ini is not None:
        if not isinstance(ini, dict):
            raise Unreadable("[tool.pytest.ini_options] is not a table")
        return {k: v if isinstance(v, list) else str(v) for k, v in ini.items()}
    return None


def _pytest_toml(path: Path) -> Options | None:
    found = _pytest_table(_toml(path))
    return found if found is not None else {}


def _custom_toml(path: Path) -> Options | None:
    doc = _toml(path)
    tool = _tool_pytest(doc)
    if tool is None:
        return _pytest_table(doc)
    if "pytest" in doc:
        raise Unreadable("both [pytest] and [tool.pytest]")
    return tool


#: pytest 9's ``CONFIG_LOADERS_BY_NAME``, in its order of precedence, and ``..._BY_SUFFIX``
BY_NAME: dict[str, Callable[[Path], Options | None]] = {
    "pytest.toml": _pytest_toml,
    ".pytest.toml": _pytest_toml,
    "pytest.ini": _pytest_ini,
    ".pytest.ini": _pytest_ini,
    "pyproject.toml": lambda p: _tool_pytest(_toml(p)),
    "tox.ini": _section("pytest"),
    "setup.cfg": _section("tool:pytest"),
}
BY_SUFFIX: dict[str, Callable[[Path], Options | None]] = {
    ".ini": _section("pytest"),
    ".cfg": _section("tool:pytest"),
    ".toml": _custom_toml,
}


def _readable(path: Path) -> bool:
    return not path.is_symlink() and path.is_file()


def load(path: Path) -> Options | None:
    """The options in ``path`` (None: not a pytest configuration); :class:`Unreadable` where pytest
    stops on it."""
    loader = BY_NAME.get(path.name) or BY_SUFFIX.get(path.suffix)
    return loader(path) if loader is not None else None


def options(path: Path | None) -> Options:
    """The pytest options in configuration file ``path``: empty when it has none, cannot be read (pytest
    stops on it) or is over :data:`MAX_CONFIG_BYTES`."""
    if path is None or not _readable(path) or path.stat().st_size > MAX_CONFIG_BYTES:
        return {}
    try:
        return load(path) or {}
    except (Unreadable, OSError):
        return {}


def config_file(root: Path) -> Path | None:
    """The file pytest takes its configuration from when started in ``root`` (``locate_config``); a
    file pytest stops on is it too (the session then fails as pytest would)."""
    fallback = None
    for name in BY_NAME:
        path = root / name
        if not _readable(path):
            continue
        if path.stat().st_size > MAX_CONFIG_BYTES:
            return path
        fallback = fallback or (path if name == "pyproject.toml" else None)
        try:
            if load(path) is not None:
                return path
        except Unreadable:
            return path
    return fallback
