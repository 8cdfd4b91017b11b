"""Whether another source of a knowledge base may still hold a document (docs/indexer.md,
"Several sources in one knowledge base"): decided only from what this machine can see. A
folder this machine does not see at all may be another machine's mount, never taken for
empty: its documents stay its own."""

from __future__ import annotations

from pathlib import Path

from indexer.unlisted import still_held


def test_a_folder_seen_here_without_the_key_gives_the_document_up(tmp_path: Path) -> None:
    other = tmp_path / "hr"
    (other / "policies").mkdir(parents=True)
    (other / "policies" / "leave.md").write_text("x")
    assert still_held(str(other), "policies/leave.md")
    assert not still_held(str(other), "policies/moved-away.md")  # (its files moved on)


def test_a_folder_not_seen_here_still_holds_every_key(tmp_path: Path) -> None:
    # Another pod's mount (or a folder moved away): this machine cannot tell, so it refuses.
    assert still_held(str(tmp_path / "mounted-on-another-pod"), "policies/leave.md")
    (tmp_path / "a-file").write_text("x")
    assert still_held(str(tmp_path / "a-file"), "policies/leave.md")


def test_a_bucket_or_a_given_name_still_holds_every_key() -> None:
    assert still_held("s3://bucket/prefix", "a.md")
    assert still_held("hr-share", "a.md")
