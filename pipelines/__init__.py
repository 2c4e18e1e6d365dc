"""YAML pipelines shipped with vlm-cascade; `cascade run NAME` finds them here by file stem."""

from pathlib import Path

FOLDER = Path(__file__).parent


def shipped() -> dict[str, Path]:
    """Name -> path of every shipped pipeline."""
    return {p.stem: p for p in sorted(FOLDER.glob("*.yaml"))}
