"""The docs site builds with `mkdocs build --strict`: a broken link or anchor, a page missing
from the nav, or a public object on the API page without a docstring fails the build, and here."""

from __future__ import annotations

import re
import subprocess
import sys

import griffe
import pytest

from cascade.registry import stage_types

from ._load import ROOT, load

docstrings = load("docs/hooks/docstrings.py")


@pytest.fixture(scope="module")
def site(tmp_path_factory):
    out = tmp_path_factory.mktemp("site")
    # cwd is the temporary folder, never the repository root (its kernels/ folder would shadow
    # the `kernels` package transformers imports through the hooks' imports).
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "mkdocs",
            "build",
            "--strict",
            "-q",
            "-f",
            str(ROOT / "mkdocs.yml"),
            "-d",
            str(out / "site"),
        ],
        cwd=out,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-8000:]
    return out / "site"


@pytest.mark.slow
def test_strict_build_has_every_page(site):
    for page in (
        "getting_started",
        "concepts",
        "evidence",
        "yaml_reference",
        "api",
        "serving",
        "ray",
        "vlm",
        "benchmarks",
        "architecture",
        "contributing",
    ):
        assert (site / page / "index.html").is_file(), page
    assert (site / "index.html").is_file()


@pytest.mark.slow
def test_yaml_reference_lists_every_registered_stage(site):
    html = (site / "yaml_reference" / "index.html").read_text()
    # the built-in stages: test modules (e.g. tests/core/conftest.py) register their own too
    builtin = {
        name: cls
        for name, cls in stage_types().items()
        if cls.__module__.startswith(("cascade.stages", "cascade.routers"))
    }
    assert {"understand", "vlm_answer", "resolution_router"} <= set(builtin)
    missing = [
        f"{name}.{param}" if param else name
        for name, cls in builtin.items()
        for param in ("", *cls.Params.model_fields)
        if f"<code>{param or name}</code>" not in html
    ]
    assert not missing, missing


@pytest.mark.slow
def test_api_page_renders_docstrings(site):
    html = (site / "api" / "index.html").read_text()
    for name in ("VideoQA", "Pipeline", "StageParams", "SamplingParams", "ServeConfig", "Bill"):
        assert name in html, name
    assert "keeps the media fixed for follow-up" in html  # cascade.api's module docstring


@pytest.mark.slow
def test_every_asset_is_local(site):
    """No fonts, scripts or styles from a CDN (`theme.font: false`; no external widgets)."""
    for page in site.rglob("*.html"):
        html = page.read_text()
        remote = re.findall(r'<(?:link|script|img)[^>]+(?:href|src)="(https?://[^"]+)"', html)
        assert not remote, (page, remote)


def test_docstring_hook_names_an_undocumented_public_method(tmp_path):
    pkg = tmp_path / "sample"
    pkg.mkdir()
    (pkg / "__init__.py").write_text(
        '"""A sample."""\n\n'
        "class Thing:\n"
        '    """Documented."""\n\n'
        "    def shown(self) -> None:\n"
        '        """Documented."""\n\n'
        "    def bare(self) -> None:\n"
        "        pass\n\n"
        "    def _private(self) -> None:\n"
        "        pass\n\n"
        "def loose() -> None:\n"
        "    pass\n"
    )
    module = griffe.GriffeLoader(search_paths=[str(tmp_path)]).load("sample")
    assert docstrings.undocumented(module) == ["sample.Thing.bare", "sample.loose"]
    found = docstrings.objects_on_page("# API\n\n::: sample.Thing\n", tmp_path)
    assert [o.path for o in found] == ["sample.Thing"]
