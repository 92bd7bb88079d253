"""pdca's status file lives in the clone: the executor's shell can swap it, or its folder, for a link.
The loop restores its own text without ever reading or writing through the link."""

from __future__ import annotations

from kit.strategies.pdca.status import StatusFile


def test_a_status_file_or_folder_swapped_for_a_link_is_not_written_through(tmp_path):
    clone, kit_file, kit_dir = tmp_path / "repo", tmp_path / "kit-state.txt", tmp_path / "kit-dir"
    (clone / ".pdca" / "status").mkdir(parents=True)
    kit_dir.mkdir()
    kit_file.write_text("KIT STATE\n")
    status = StatusFile(clone / ".pdca" / "status" / "t-1.md")
    assert status.append("# one\n") is False
    path = clone / ".pdca" / "status" / "t-1.md"
    path.unlink()
    path.symlink_to(kit_file)  # the executor swaps the file for a link
    assert status.append("# two\n") is True
    assert kit_file.read_text() == "KIT STATE\n"
    assert not path.is_symlink() and path.read_text() == "# one\n# two\n"
    (clone / ".pdca" / "status").rename(clone / ".pdca" / "old")
    (clone / ".pdca" / "status").symlink_to(kit_dir)  # ... or the folder
    assert status.append("# three\n") is True  # restored, the run goes on
    assert list(kit_dir.iterdir()) == [] and kit_file.read_text() == "KIT STATE\n"
    assert (clone / ".pdca" / "status" / "t-1.md").read_text() == "# one\n# two\n# three\n"


def test_a_status_file_swapped_for_a_folder_is_replaced_without_following_links(tmp_path):
    """The executor's shell made a folder of the status file (a link inside pointing out of the
    clone): the loop removes it, never following the link, and writes its text again."""
    clone, kit_dir = tmp_path / "repo", tmp_path / "kit-dir"
    (clone / ".pdca" / "status").mkdir(parents=True)
    kit_dir.mkdir()
    (kit_dir / "keep.txt").write_text("KIT STATE\n")
    status = StatusFile(clone / ".pdca" / "status" / "t-1.md")
    assert status.append("# one\n") is False
    path = clone / ".pdca" / "status" / "t-1.md"
    path.unlink()
    (path / "x").mkdir(parents=True)
    (path / "x" / "link").symlink_to(kit_dir)
    assert status.append("# two\n") is True  # restored, the run goes on
    assert path.read_text() == "# one\n# two\n"
    assert (kit_dir / "keep.txt").read_text() == "KIT STATE\n"
