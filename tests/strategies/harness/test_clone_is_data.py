"""harness's bookkeeping on a clone the agent rigged: the files the kit keeps there are never read or
written through a link, never parsed when oversized, and its git runs in the sandbox -- a rigged
``.git`` neither runs anything on the kit's side nor ends the run."""

from __future__ import annotations

import json
import sys

import pytest

from kit.model import scripted
from kit.model.actions import FINISH, render
from kit.sandbox.backends import get_sandbox
from kit.strategies.harness import features as features_mod
from kit.strategies.harness.features import FEATURE_LIST, FeatureListKeeper, load_initial_list
from kit.strategies.harness.gitops import settle_commits
from tests.strategies.harness.test_harness import events, features, git, make_ctx

MAX_LIST_BYTES = getattr(features_mod, "MAX_LIST_BYTES", 1024 * 1024)


def head(ctx) -> str:
    return git(ctx.workspace.root, "rev-parse", "HEAD").strip()


pytestmark = pytest.mark.skipif(sys.platform != "linux", reason="bubblewrap needs Linux")


@pytest.fixture
def ctx(tmp_path):
    model = scripted.register(lambda request: render("native", FINISH, {"summary": "done"}, ""))
    return make_ctx(tmp_path, model)


def test_a_feature_list_swapped_for_a_link_is_neither_read_nor_written_through(ctx, tmp_path):
    root = ctx.workspace.root
    accepted = features(2)
    kit_file = tmp_path / "kit-owned.json"
    kit_file.write_text('{"kit": "state"}\n')
    (root / FEATURE_LIST).symlink_to(kit_file)
    keeper = FeatureListKeeper(root, accepted, ctx)
    settled = keeper.settle(1)
    assert settled["reverted"]
    assert kit_file.read_text() == '{"kit": "state"}\n'  # not overwritten through the link
    assert not (root / FEATURE_LIST).is_symlink()
    assert json.loads((root / FEATURE_LIST).read_text()) == accepted


def test_an_oversized_feature_list_is_never_parsed_in_the_kit(ctx, monkeypatch):
    root = ctx.workspace.root
    big = json.dumps(features(1) + [{"pad": "x" * 100}] * (MAX_LIST_BYTES // 100))
    assert len(big) > MAX_LIST_BYTES
    parsed: list[int] = []
    real_loads = json.loads
    monkeypatch.setattr(
        features_mod.json, "loads", lambda text, **kw: parsed.append(len(text)) or real_loads(text, **kw)
    )
    (root / FEATURE_LIST).write_text(big)
    features_list, error = load_initial_list(root)
    assert features_list is None and str(MAX_LIST_BYTES) in error
    keeper = FeatureListKeeper(root, features(1), ctx)
    assert keeper.settle(1)["reverted"]
    refusal = keeper.guard("write_file", {"path": FEATURE_LIST, "content": big})
    assert refusal and "larger than" in refusal
    assert all(size <= MAX_LIST_BYTES for size in parsed), parsed


def test_a_rigged_git_folder_neither_runs_on_the_kits_side_nor_ends_the_run(ctx, tmp_path):
    root = ctx.workspace.root
    before = head(ctx)
    marker = tmp_path / "RAN-ON-THE-HOST"
    rig = (
        f"git config core.fsmonitor 'touch {marker}'; git config filter.x.clean 'touch {marker}; cat'; "
        "echo '* filter=x' > .gitattributes; mkdir -p nested && cd nested && git init -q && "
        f"git config filter.x.clean 'touch {marker}; cat' && echo '* filter=x' > .gitattributes && "
        "echo n > n.txt && git add -A && git -c user.name=a -c user.email=a@b commit -qm n && cd .. && "
        "echo work > work.txt; echo done"
    )
    assert "done" in get_sandbox("bwrap").run(rig, root, writable=True, timeout_s=30).output
    agent_commits, kit_commits = settle_commits(ctx, root, before, "coder", 1)
    assert (agent_commits, kit_commits) == (0, 1), [e["detail"] for e in events(ctx)]
    assert not marker.exists()
    assert head(ctx) != before  # the kit's commit landed in the clone, made inside the sandbox
    (root / ".git" / "HEAD").write_text("garbage\n")  # a broken .git: bookkeeping notes it, no error
    assert settle_commits(ctx, root, before, "coder", 2) == (0, 0)
    assert any(e["name"] == "git" and not e["ok"] for e in events(ctx))


def test_a_feature_list_nested_too_deep_is_an_invalid_list_not_a_crash(ctx):
    """JSON nested 100 000 deep (json.loads answers RecursionError) is an invalid list: the
    initializer is told so, the run goes on."""
    (ctx.workspace.root / FEATURE_LIST).write_text("[" * 100_000 + "]" * 100_000)
    features_list, error = load_initial_list(ctx.workspace.root)
    assert features_list is None and "not valid JSON" in error and "nested deeper" in error


def test_kit_files_replaced_by_folders_are_replaced_again_without_following_links(ctx, tmp_path):
    """The feature list, init.sh and the progress file replaced by folders (a link inside pointing
    out of the clone): the kit removes each folder -- never following the link -- and writes its file."""
    from kit.strategies.harness import INIT_SH, PROGRESS, _fill_in

    root = ctx.workspace.root
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "keep.txt").write_text("kit state\n")
    for name in (FEATURE_LIST, INIT_SH, PROGRESS):
        (root / name / "x").mkdir(parents=True)
        (root / name / "x" / "link").symlink_to(outside)
    accepted = features(2)
    settled = FeatureListKeeper(root, accepted, ctx).settle(1)
    assert settled["reverted"] and json.loads((root / FEATURE_LIST).read_text()) == accepted
    init: dict = {"kit_wrote": []}
    _fill_in(ctx, init)
    assert init["kit_wrote"] == [INIT_SH, PROGRESS]
    assert (root / INIT_SH).is_file() and (root / PROGRESS).read_text() == "# Progress\n"
    assert (outside / "keep.txt").read_text() == "kit state\n"
