"""A watched folder as the watcher tests start one: ``share/公共/<name>.md`` ("第一版。" each)
and, beside the share, the rules file that tags them."""

from __future__ import annotations

from pathlib import Path


def public_share(tmp_path: Path, names: tuple[str, ...], rules: str | None) -> tuple[Path, Path]:
    """The share's root and its rules file (``rules.yaml``, written when ``rules`` is given)."""
    root = tmp_path / "share"
    (root / "公共").mkdir(parents=True)
    for name in names:
        (root / f"公共/{name}.md").write_text(f"# {name}\n\n第一版。", encoding="utf-8")
    path = tmp_path / "rules.yaml"
    if rules is not None:
        path.write_text(rules, encoding="utf-8")
    return root, path
