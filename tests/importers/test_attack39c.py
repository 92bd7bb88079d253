"""Attack round 39c on import-git, build-suite, validate, audit and list, by a helper who had not read
the recent changes: each test reproduces a case that got through, marked ``xfail(strict=True)`` so
that the fix flips it (and the marker must then go). Here the cases of a hand-made task folder and of
a suite manifest of the attacker's; a repository's own cases are in test_attack39c_repo.py. Nothing
here reaches outside ``tmp_path``."""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from kit.app.cli import main
from kit.app.tasks_cli import _run_import
from kit.errors import KitError, TaskError
from kit.importers import suite_build
from kit.tasks.task import load_suite
from tests.importers.test_hostile_repo import BASE, FIX  # (the calc repository, as there)
from tests.support.gitrepos import make_repo


def _hand_made_task(root: Path, extra_yaml: str = "") -> Path:
    task = root / "t"
    (task / "repo").mkdir(parents=True)
    (task / "acceptance").mkdir()
    (task / "solution").mkdir()
    (task / "task.yaml").write_text(f"id: t\ntitle: t\nprompt: p\n{extra_yaml}")
    (task / "repo" / "calc.py").write_text("def double(x):\n    return 0\n")
    (task / "acceptance" / "test_x.py").write_text(
        "from calc import double\n\ndef test_x():\n    assert double(2) == 4\n"
    )
    (task / "solution" / "calc.py").write_text("def double(x):\n    return x + x\n")
    return task


# --------------------------------------------------------------------------- (a) a task folder's setup


def test_a_task_folders_setup_command_runs_nothing_on_the_host(tmp_path, capsys):
    """`kit tasks validate` treats a task folder as hostile input, but its task.yaml's `setup:`
    commands run on the host (sandbox `none`, as the kit's own user -- root here) while the task's
    cached base is built: the command writes a file outside the task folder, and, being the kit's
    own user outside any pid namespace, could read the kit's environment (API key) from
    /proc/$PPID/environ. Seen: the marker is written and validate still prints a pass."""
    marker = tmp_path / "outside" / "PWNED"
    marker.parent.mkdir()
    task = _hand_made_task(tmp_path, f"setup: ['touch {marker}']\n")
    main(["tasks", "validate", str(task)])
    capsys.readouterr()
    assert not marker.exists(), "task.yaml's setup ran a command on the host (outside any sandbox)"


# --------------------------------------------------------------------------- (a, b) a manifest's options


def _suite(
    tmp_path: Path,
    name: str,
    options: list[str],
    test_module: str | None = None,
    commit: str | None = None,
    task_id: str | None = None,
) -> tuple:
    """A suite manifest of the attacker's (written as JSON, which YAML reads: escapes kept) with one
    task on a small calc repository, its `options:` and (optionally) its commit given here."""
    repos, out = tmp_path / "repos", tmp_path / "built"
    fix = dict(FIX, **({"tests/test_double.py": test_module} if test_module else {}))
    shas = make_repo(repos / "calc", [("start", BASE), ("Fix double", fix)])
    manifest = tmp_path / f"{name}.yaml"
    item = {
        "id": task_id or f"{name}-calc",
        "project": "calc",
        "commit": commit or shas[1],
        "options": options,
    }
    projects = {"calc": {"url": "https://github.com/attacker/calc", "licence": "MIT"}}
    manifest.write_text(json.dumps({"name": name, "projects": projects, "imports": [item]}))
    return load_suite(str(manifest), check_tasks=False), repos, out


def test_a_suite_manifest_cannot_turn_the_sandbox_off(tmp_path, capsys):
    """A suite manifest's `options:` are appended to import-git's command line unchecked, so a
    manifest can pass `--sandbox none`: the repository's test modules then run on the host during the
    probes (here one writes a file outside the repository and --out at collection time; it could as
    well read the kit's API key from /proc/$PPID/environ, as the attack did)."""
    marker = tmp_path / "outside" / "PWNED"
    marker.parent.mkdir()
    module = f"open({str(marker)!r}, 'w').write('x')\n" + FIX["tests/test_double.py"]
    suite, repos, out = _suite(tmp_path, "evil-sandbox", ["--sandbox", "none"], module)
    with pytest.raises(TaskError, match="a manifest may give only --tests, --timeout, --probe-budget"):
        suite_build.build_suite(suite, repos, _run_import, out=out)  # refused before anything is built
    capsys.readouterr()
    assert not marker.exists(), "the repository's test module ran on the host (no sandbox)"


def test_a_suite_manifest_cannot_read_a_host_file_into_the_prompt(tmp_path, capsys):
    """A manifest's `prompt:` is confined to datasets/suites/, but its `options:` can say
    `--prompt-file /any/host/file`: the file's text becomes the task's prompt (sent to every model
    a run calls). Seen: a host secret's text in the built task.yaml."""
    secret = tmp_path / "outside" / "SECRET"
    secret.parent.mkdir()
    secret.write_text("sk-canary-secret-123\n")
    suite, repos, out = _suite(tmp_path, "evil-prompt", ["--prompt-file", str(secret)])
    with pytest.raises(TaskError, match="a manifest may give only --tests, --timeout, --probe-budget"):
        suite_build.build_suite(suite, repos, _run_import, out=out)  # refused before anything is built
    capsys.readouterr()
    written = "".join(p.read_text() for p in out.rglob("task.yaml"))
    assert "sk-canary-secret-123" not in written, "a host file's text became the task's prompt"


def test_a_suite_manifest_cannot_replace_a_host_folder(tmp_path, capsys):
    """A manifest's `options:` can say `--out HOSTDIR --id NAME --force`: argparse takes the last
    value, so import-git writes outside the built folder and, with --force, removes the host folder
    HOSTDIR/NAME whole (shutil.rmtree) to put the task in its place. Seen: the folder's files gone."""
    victim = tmp_path / "outside" / "precious"
    victim.mkdir(parents=True)
    (victim / "data.txt").write_text("keep me\n")
    suite, repos, out = _suite(
        tmp_path, "evil-out", ["--out", str(victim.parent), "--id", "precious", "--force"]
    )
    with pytest.raises(TaskError, match="a manifest may give only --tests, --timeout, --probe-budget"):
        suite_build.build_suite(suite, repos, _run_import, out=out)  # refused before anything is built
    capsys.readouterr()
    assert (victim / "data.txt").is_file(), "a host folder named by the manifest was removed"


def test_a_manifest_id_that_looks_like_an_option_is_one_failed_task(tmp_path, capsys):
    """A manifest id may start with '-' (the id rule allows letters, digits, '.', '_', '-'): build-suite
    passes `--id -h` to import-git's parser, which exits (SystemExit 2, its usage on stderr) out of
    build-suite -- the rest of the suite is not built and no summary is printed, instead of one task
    marked failed."""
    with pytest.raises(KitError, match="start it with a letter or digit"):  # refused when loaded
        _suite(tmp_path, "evil-id", [], task_id="-h")


# --------------------------------------------------------------------------- (e) a manifest's text reaches the terminal raw


def test_build_suite_prints_a_manifests_escape_sequences_escaped(tmp_path, capsys):
    """build-suite's per-task lines print the manifest's commit and options raw (the summary table
    escapes them): a commit "ESC]0;...BEL ESC[2K" sets the window title and erases the line, through
    the failure line and through --dry-run's command lines."""
    evil = "\x1b]0;PWNED\x07\x1b[2K"
    suite, repos, out = _suite(tmp_path, "evil-text", [], commit=evil)
    suite_build.build_suite(suite, repos, _run_import, out=out)
    built = capsys.readouterr()
    main(["tasks", "build-suite", str(tmp_path / "evil-text.yaml"), "--repos", str(repos), "--dry-run"])
    dry = capsys.readouterr()
    for where, text in (("build", built.out + built.err), ("--dry-run", dry.out + dry.err)):
        assert "\x1b" not in text and "\x07" not in text, f"{where} printed raw control characters: {text!r}"


# --------------------------------------------------------------------------- (f) raw tracebacks


@pytest.mark.parametrize("command", ["audit", "list"])
def test_a_deeply_nested_hidden_test_is_one_clear_error_in_audit_and_list(tmp_path, capsys, command):
    """A hand-made task folder whose acceptance module holds one long expression (60,000 terms,
    a 120 KB file, under every size cap): kit.pyast.parse promises "a SyntaxError ... as is one
    nested too deep to parse", but Python 3.11 raises RecursionError during ast construction, and
    `kit tasks audit` / `kit tasks list` end in a raw traceback (read_requirements)."""
    task = _hand_made_task(tmp_path)
    deep = "def helper():\n    return " + "+".join(["1"] * 60_000) + "\n"
    (task / "acceptance" / "test_x.py").write_text(deep + "\n\ndef test_x():\n    assert helper()\n")
    main(["tasks", command, str(task if command == "audit" else tmp_path)])
    capsys.readouterr()


def test_a_prompt_file_that_is_not_utf8_is_one_clear_error(tmp_path, capsys):
    """`--prompt-file` (a user's own, or a manifest's `prompt:` / options) that is not UTF-8 ends
    import-git in a raw UnicodeDecodeError traceback (read_prompt reads it unchecked)."""
    repo = tmp_path / "calc"
    make_repo(repo, [("start", BASE), ("Fix double", FIX)])
    prompt = tmp_path / "prompt.md"
    prompt.write_bytes(b"caf\xe9\n")
    code = main(
        [
            "tasks",
            "import-git",
            str(repo),
            "--commit",
            "HEAD",
            "--prompt-file",
            str(prompt),
            "--out",
            str(tmp_path / "o"),
        ]
    )
    assert code != 0


def test_sharing_identical_files_copes_with_names_near_the_limit(tmp_path):
    """A repository may hold a file whose name is 250 bytes (confine allows 255). build-suite's last
    step hard-links identical files through a temporary `<name>.orchbench-link`, 265 bytes: OSError
    ENAMETOOLONG ends build-suite after the build (no summary; `error: File name too long`)."""
    for task in ("a", "b"):
        folder = tmp_path / task / "repo"
        folder.mkdir(parents=True)
        (folder / ("n" * 250)).write_text("same\n")
    suite_build.share_identical_files(tmp_path)


# --------------------------------------------------------------------------- (d, f) a task folder's own time limits


def test_an_infinite_time_limit_in_task_yaml_is_one_clear_error(tmp_path, capsys):
    """task.yaml's `limits:` take any positive float, YAML's `.inf` included; `kit tasks validate`
    then ends in a raw traceback from the sandbox (`ValueError: timeout_s must be a positive finite
    number of seconds, got inf`) instead of refusing the task.yaml with one error."""
    task = _hand_made_task(tmp_path, "limits: {scoring_timeout_s: .inf}\n")
    main(["tasks", "validate", str(task)])
    capsys.readouterr()


def test_a_task_folder_cannot_give_itself_an_unbounded_time_limit(tmp_path):
    """A hand-made task folder sets its own scoring time limit with no upper bound: with
    `scoring_timeout_s: 1000000000` and a hidden test that sleeps at the start, `kit tasks validate`
    ran until killed (60 s here; it would wait ~8 years): validate has no --timeout of its own. The
    task must be refused, or its limit capped, when it is loaded."""
    from kit.tasks.task import load_task

    task = _hand_made_task(tmp_path, "limits: {scoring_timeout_s: 1000000000}\n")
    with contextlib.suppress(KitError):  # refused when loaded: fine
        limits = load_task(task).limits
        assert limits.scoring_timeout_s <= 24 * 3600, (
            f"scoring_timeout_s {limits.scoring_timeout_s:g} s accepted"
        )


# --------------------------------------------------------------------------- (e) kit tasks list


def test_tasks_list_prints_a_task_folders_project_and_expert_escaped(tmp_path, capsys):
    """`kit tasks list` escapes a task.yaml's title and excluded tests, but prints its `project:` and
    `expert:` raw: an OSC 52 sequence in `project` writes the terminal's clipboard, `ESC[2J` in
    `expert` clears the screen."""
    extra = 'project: "\\e]52;c;aGk=\\a"\nexpert_minutes: 3\nexpert: "\\e[2J"\n'
    _hand_made_task(tmp_path, extra)
    main(["tasks", "list", str(tmp_path)])
    out = capsys.readouterr()
    assert "\x1b" not in out.out + out.err, out.out


def test_a_suite_manifest_cannot_put_the_kits_environment_into_a_prompt(tmp_path):
    """The same `options:` with `--prompt-file /proc/self/environ` (a regular file to is_file()):
    the built task's prompt is the kit's own environment, provider key included -- written to
    task.yaml and sent with every model call of every run. Run in a child process whose environment
    is only what this test gives it (a canary key), so nothing real is written."""
    suite, repos, out = _suite(tmp_path, "evil-environ", ["--prompt-file", "/proc/self/environ"])
    env = {
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        "HOME": str(tmp_path),
        "ANTHROPIC_API_KEY": "sk-canary-environ-123",
        "ORCHBENCH_BUILT_DIR": str(out),
        "ORCHBENCH_RESULTS_DIR": str(tmp_path / "results"),
        "LITELLM_LOCAL_MODEL_COST_MAP": "True",
    }
    manifest = str(tmp_path / "evil-environ.yaml")
    cmd = [sys.executable, "-m", "kit", "tasks", "build-suite", manifest, "--repos", str(repos)]
    subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=600, cwd=Path(__file__).parents[2])
    written = "".join(p.read_text() for p in out.rglob("task.yaml"))
    assert "sk-canary-environ-123" not in written, "the kit's environment (its API key) became the prompt"


# --------------------------------------------------------------------------- (d) a task folder's task.yaml read whole


def test_a_huge_task_yaml_is_refused_by_its_size(tmp_path):
    """A task folder's task.yaml is read whole before it is parsed: a sparse 512 MB task.yaml (no
    disk, a few KB in a tarball) took `kit tasks list` and `kit tasks validate` to 1.09 GB (peak RSS,
    /usr/bin/time) before they refused it; the size is the folder's to choose. Measured here as the
    peak RSS of a child process loading the task (a small task: 31 MB)."""
    task = _hand_made_task(tmp_path)
    with open(task / "task.yaml", "r+b") as f:
        f.truncate(512 * 1024 * 1024)
    script = (
        "import resource, sys\nfrom kit.errors import KitError\nfrom kit.tasks.task import load_task\n"
        "try:\n    load_task(sys.argv[1])\nexcept (KitError, MemoryError):\n    pass\n"
        "print([int(l.split()[1]) for l in open('/proc/self/status') if l.startswith('VmHWM:')][0] // 1024)\n"  # (VmHWM: ru_maxrss of a vfork+exec child inherits the parent's peak)
    )
    proc = subprocess.run(
        [sys.executable, "-c", script, str(task)], capture_output=True, text=True, timeout=120
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    peak_mb = int(proc.stdout.split()[-1])
    assert peak_mb < 300, f"loading the task took {peak_mb} MB"


def test_a_huge_acceptance_module_is_refused_by_its_size_before_it_is_read(tmp_path):
    """kit.pyast refuses to parse a source over 2 MB, but `kit tasks audit` and `list` read a task
    folder's acceptance module whole first (read_requirements: read_text, then parse): a sparse 512
    MB test_x.py took both to 1.09 GB -- and audit then printed "✓ no gaps", list "0 hidden tests",
    for a module it never read. Measured as the peak RSS of a child process running the audit."""
    task = _hand_made_task(tmp_path)
    with open(task / "acceptance" / "test_x.py", "r+b") as f:
        f.truncate(512 * 1024 * 1024)
    script = (
        "import resource, sys\nfrom kit.app.cli import main\n"
        "try:\n    main(['tasks', 'audit', sys.argv[1]])\nexcept MemoryError:\n    pass\n"
        "print([int(l.split()[1]) for l in open('/proc/self/status') if l.startswith('VmHWM:')][0] // 1024)\n"  # (VmHWM: ru_maxrss of a vfork+exec child inherits the parent's peak)
    )
    proc = subprocess.run(
        [sys.executable, "-c", script, str(task)],
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "ORCHBENCH_RESULTS_DIR": str(tmp_path / "results")},
    )
    peak_mb = int(proc.stdout.split()[-1])
    assert peak_mb < 300, f"auditing the task took {peak_mb} MB"
