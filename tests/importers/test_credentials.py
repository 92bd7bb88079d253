"""Credentials never leave: the userinfo and the credential-like query parameters of a URL are cut from
everything the kit records -- task.yaml's ``source.repo_url`` (from the origin remote or
``--repo-url``), the import command line in ``source.command`` -- whatever the scheme's case, and a
task's id is never derived from a URL. Before: ``HTTPS://user:tok@...`` (an upper-case scheme) and
``?token=...`` (a query) were written into task.yaml, and the query into the task id."""

from __future__ import annotations

import argparse

import pytest
import yaml

from kit.app.cli import build_parser
from kit.importers.git.gitread import Repo
from kit.importers.git.result import Options
from kit.importers.git.spec import default_id
from kit.tasks.task import TaskSource
from tests.support.gitrepos import TINY_COMMITS, git, make_repo

TOKEN = "ghp_S3cretT0kenValue"
CASES = {
    f"HTTPS://ann:{TOKEN}@github.com/ann/tiny.git": "HTTPS://github.com/ann/tiny.git",
    f"https://{TOKEN}@github.com/ann/tiny": "https://github.com/ann/tiny",
    f"https://x-access-token:{TOKEN}@github.com/ann/tiny.git": "https://github.com/ann/tiny.git",
    f"Git+SSH://git:{TOKEN}@example.org/tiny.git": "Git+SSH://example.org/tiny.git",
    f"ssh://{TOKEN}@example.org:2222/tiny.git": "ssh://example.org:2222/tiny.git",
    f"{TOKEN}@example.org:ann/tiny.git": "example.org:ann/tiny.git",
    f"https://example.org/tiny.git?token={TOKEN}&ref=main": "https://example.org/tiny.git?ref=main",
    f"https://example.org/tiny.git?Access_Token={TOKEN}": "https://example.org/tiny.git",
    f"https://example.org/tiny.git?private_token={TOKEN}#{TOKEN}": "https://example.org/tiny.git",
    f"https://s3.example.org/t.git?X-Amz-Signature={TOKEN}&X-Amz-Credential={TOKEN}": "https://s3.example.org/t.git",
    f"https://blob.example.org/t.git?sv=2024&sig={TOKEN}&api_key={TOKEN}&password={TOKEN}": (
        "https://blob.example.org/t.git"
    ),
    f"HTTP://user%40corp:{TOKEN}%3A@example.org/tiny": "HTTP://example.org/tiny",
    "https://github.com/ann/tiny": "https://github.com/ann/tiny",
}


def test_public_url_cuts_userinfo_and_credential_parameters_of_every_form():
    from kit.secrets import public_text, public_url

    for url, public in CASES.items():
        assert public_url(url) == public, url
    line = (
        f"python -m kit tasks import-git ../tiny --repo-url=HTTPS://ann:{TOKEN}@h/t.git?token={TOKEN} --id t"
    )
    assert TOKEN not in public_text(line) and "--repo-url=HTTPS://h/t.git --id t" in public_text(line)
    src = TaskSource(base="a", head="b", repo_url=f"https://a:{TOKEN}@h/t", command=f"x --repo-url {url}")
    assert TOKEN not in src.model_dump_json()  # a hand-written task.yaml's are cut on loading too


def test_the_origin_remote_is_recorded_without_credentials_and_never_names_the_task(tmp_path):
    shas = make_repo(tmp_path / "tiny", TINY_COMMITS)
    repo = Repo(tmp_path / "tiny")
    for url, public in CASES.items():
        git(tmp_path / "tiny", "config", "remote.origin.url", url)
        assert repo.remote_url() == public, url
        task_id = default_id(repo, Options(repo=repo.path, commit=shas[1]), shas[0], shas[1])
        assert task_id == f"tiny-{shas[1][:10]}", url  # the folder's name, not the URL's
    git(tmp_path / "tiny", "config", "remote.origin.url", "FILE:///srv/tiny.git")
    assert repo.remote_url() is None  # a local path, in any case, is no public URL


@pytest.mark.slow
def test_an_import_records_no_credential(tmp_path, monkeypatch):
    from kit.app.tasks_cli import cmd_import_git

    monkeypatch.setenv("ORCHBENCH_RESULTS_DIR", str(tmp_path / "results"))
    shas = make_repo(tmp_path / "tiny", TINY_COMMITS)
    git(
        tmp_path / "tiny",
        "config",
        "remote.origin.url",
        f"HTTPS://ann:{TOKEN}@github.com/ann/tiny.git?token={TOKEN}",
    )
    argv = ["tasks", "import-git", str(tmp_path / "tiny"), "--commit", shas[1], "--out", str(tmp_path / "t")]
    monkeypatch.setattr("sys.argv", ["kit", *argv])
    args = build_parser().parse_args([*argv, "--timeout", "60"])  # the real parser: every option it has
    assert cmd_import_git(args) == 0
    (task,) = (tmp_path / "t").iterdir()
    assert task.name == f"tiny-{shas[1][:10]}"
    spec = yaml.safe_load((task / "task.yaml").read_text())
    assert spec["source"]["repo_url"] == "HTTPS://github.com/ann/tiny.git"
    assert TOKEN not in (task / "task.yaml").read_text()

    url = f"https://ann:{TOKEN}@example.org/tiny.git?access_token={TOKEN}"  # --repo-url, recorded twice
    argv += ["--force", "--repo-url", url]
    monkeypatch.setattr("sys.argv", ["kit", *argv])
    assert cmd_import_git(argparse.Namespace(**{**vars(args), "force": True, "repo_url": url})) == 0
    spec = yaml.safe_load((task / "task.yaml").read_text())
    assert spec["source"]["repo_url"] == "https://example.org/tiny.git"
    assert "--repo-url https://example.org/tiny.git" in spec["source"]["command"]
    assert not any(TOKEN in p.read_text(errors="replace") for p in task.rglob("*") if p.is_file())
