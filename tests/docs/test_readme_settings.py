"""Every setting the server reads is documented in the README's configuration table."""

from __future__ import annotations

from pathlib import Path

from control_plane.settings import Settings

README = Path(__file__).resolve().parents[2] / "README.md"


def test_every_setting_is_in_the_readme() -> None:
    text = README.read_text(encoding="utf-8")
    names = [f"MEMPLANE_{name.upper()}" for name in Settings.model_fields]
    assert len(names) > 30
    assert [name for name in names if f"`{name}`" not in text] == []
