"""Fonts for generated media: matplotlib's bundled DejaVu / STIX / Computer Modern files (present
wherever matplotlib is) and, for Chinese, a CJK font installed on the system (WenQuanYi: Debian's
`fonts-wqy-microhei` and `fonts-wqy-zenhei`, two designs so the two splits render Chinese apart)."""

from __future__ import annotations

import functools
from pathlib import Path

CJK_PACKAGES = {"wqy-microhei.ttc": "fonts-wqy-microhei", "wqy-zenhei.ttc": "fonts-wqy-zenhei"}


class FontMissing(FileNotFoundError):
    """A font the generator needs is not installed (the message says which package has it)."""


def _bundled_dir() -> Path:
    import matplotlib

    return Path(matplotlib.__file__).parent / "mpl-data" / "fonts" / "ttf"


@functools.lru_cache(maxsize=1)
def _system_fonts() -> dict[str, str]:
    from matplotlib import font_manager

    found: dict[str, str] = {}
    for path in font_manager.findSystemFonts(fontext="ttf"):  # .ttf, .otf and .ttc files
        found.setdefault(Path(path).name, path)
    return found


def font_file(name: str) -> str:
    """The path of font file `name` (e.g. 'DejaVuSans-Bold.ttf', 'wqy-zenhei.ttc'): matplotlib's
    bundled fonts first, then the system's. Raises `FontMissing` naming the package to install."""
    bundled = _bundled_dir() / name
    if bundled.is_file():
        return str(bundled)
    if name in _system_fonts():
        return _system_fonts()[name]
    hint = (
        f"install Debian's {CJK_PACKAGES[name]}"
        if name in CJK_PACKAGES
        else "it is neither bundled with matplotlib nor installed on the system"
    )
    raise FontMissing(f"font '{name}' not found: {hint}")


def has_font(name: str) -> bool:
    try:
        font_file(name)
    except FontMissing:
        return False
    return True


def font_path(bold: bool = False) -> str:
    """DejaVu Sans (bold) from matplotlib's bundled fonts."""
    return font_file("DejaVuSans-Bold.ttf" if bold else "DejaVuSans.ttf")


def load_font(name: str, size: int):
    """A PIL font object for file `name` at `size` px."""
    from PIL import ImageFont

    return ImageFont.truetype(font_file(name), size)
