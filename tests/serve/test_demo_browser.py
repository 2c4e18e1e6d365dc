"""The web demo in a real Chromium: click an example, ask, see the answer, evidence and bill.

Needs Debian's chromium (`apt-get install -y chromium`); skipped with the reason when it is missing.
The screenshot is saved in the test's tmp dir and its path printed (run with -s to see it).
"""

from __future__ import annotations

import os

import pytest

from .conftest import running_server, small_config, warm

CHROMIUM = "/usr/bin/chromium"
ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
]

pytestmark = [
    pytest.mark.browser,
    pytest.mark.skipif(
        not os.path.exists(CHROMIUM),
        reason=f"{CHROMIUM} missing: install Debian's chromium (apt-get install -y chromium)",
    ),
]


@pytest.mark.slow
def test_demo_example_ask_shows_answer_evidence_and_bill(tmp_path, monkeypatch, tiny_vlm):
    pytest.importorskip("gradio")
    from playwright.sync_api import sync_playwright

    from cascade.serve.app import create_app

    monkeypatch.setenv("VLM_CASCADE_CACHE", str(tmp_path / "cache"))  # examples generated fresh
    app = create_app(small_config(tiny_vlm), demo=True)
    warm(app)
    with running_server(app) as url, sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=ARGS)
        try:
            page = browser.new_page(viewport={"width": 1400, "height": 1500})
            page.goto(url + "/", wait_until="domcontentloaded")  # / redirects to /demo/
            page.locator("#ask").wait_for(timeout=60_000)
            page.locator("#examples").get_by_text(
                "What are the opening hours on the sign?"
            ).first.click()
            page.wait_for_function(
                "() => document.querySelector('#question textarea').value.includes('sign')",
                timeout=20_000,
            )
            page.locator("#ask").click()
            # The tiny VLM's answer is random text: wait for the turn to land, then check the
            # answer heading is there and not empty.
            page.locator("#cache").get_by_text("Turn 1").wait_for(timeout=90_000)
            assert page.locator("#answer h3").inner_text().strip()
            gallery = page.locator("#evidence-gallery img")
            gallery.first.wait_for(timeout=30_000)
            assert gallery.count() >= 6
            page.locator("#overview img").first.wait_for(timeout=30_000)
            # Whole pictures: every gallery image is contained in its cell, never cropped.
            fits = page.evaluate("""() => [...document.querySelectorAll(
                '#overview img, #evidence-gallery img')].map(i => getComputedStyle(i).objectFit)""")
            assert fits and set(fits) == {"contain"}, fits
            page.locator("#bill-plot").get_by_role("img").first.wait_for(timeout=30_000)
            table = page.locator("#bill-table").inner_text()
            # A VLM answer: tokens, FLOPs and seconds all have their full-resolution baseline.
            rows = {r.split("\t")[0]: r.split("\t")[1:] for r in table.splitlines() if "\t" in r}
            assert all(
                rows[k][1] not in ("", "—") for k in ("visual tokens", "prefill FLOPs", "seconds")
            ), rows
            assert "(est.)" in rows["seconds"][1] and "estimated, not measured" in table
            assert "Turn 1" in page.locator("#cache").inner_text()
            page.locator("#overview img").first.click()  # click to zoom: the preview opens
            page.locator("#overview .preview").wait_for(timeout=10_000)
            page.keyboard.press("Escape")

            page.locator("#ask").click()  # a follow-up about the same video: the cache hits
            page.locator("#cache").get_by_text("Turn 2").wait_for(timeout=60_000)
            assert "hit" in page.locator("#cache").inner_text()
            shot = tmp_path / "demo_screenshot.png"
            page.screenshot(path=str(shot), full_page=True)
        finally:
            browser.close()
    assert shot.stat().st_size > 10_000
    print(f"\ndemo screenshot: {shot}")


def test_an_upload_picks_the_pipeline_and_errors_show_in_the_answer_panel(
    tmp_path, monkeypatch, tiny_vlm
):
    """Three photos uploaded while the pipeline is still the video one: the upload switches it to
    the images pipeline, the question is answered; switched back by hand, the answer panel says
    in words why that pipeline cannot answer (no error box, no toast)."""
    pytest.importorskip("gradio")
    import numpy as np
    from playwright.sync_api import sync_playwright

    from cascade.serve.app import create_app

    from .conftest import png_bytes

    monkeypatch.setenv("VLM_CASCADE_CACHE", str(tmp_path / "cache"))
    photos = []
    for i in range(3):
        photos.append(tmp_path / f"photo{i}.png")
        photos[-1].write_bytes(
            png_bytes(np.random.default_rng(i).integers(0, 255, (96, 128, 3), dtype=np.uint8))
        )
    app = create_app(small_config(tiny_vlm), demo=True)
    warm(app)
    with running_server(app) as url, sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=ARGS)
        try:
            page = browser.new_page(viewport={"width": 1400, "height": 1500})
            page.goto(url + "/demo/", wait_until="domcontentloaded")
            page.locator("#ask").wait_for(timeout=60_000)
            pipeline = page.locator("#pipeline input")
            assert pipeline.input_value() == "cascade/video_small"  # the default
            page.locator("#media-input input[type=file]").set_input_files([str(f) for f in photos])
            page.locator("#pipeline-note").get_by_text("3 images").wait_for(timeout=60_000)
            assert pipeline.input_value() == "cascade/images_small"
            page.locator("#question textarea").fill("What is in these pictures?")
            page.locator("#ask").click()
            page.locator("#cache").get_by_text("Turn 1").wait_for(timeout=120_000)
            assert page.locator("#answer h3").inner_text().strip()
            assert page.locator("#evidence-gallery img").count() >= 3

            pipeline.click()  # the user overrides the choice: back to the video pipeline
            page.get_by_role("option", name="cascade/video_small").click()
            page.locator("#ask").click()
            panel = page.locator("#answer .demo-error")
            panel.wait_for(timeout=60_000)
            said = panel.inner_text()
            assert said.startswith("Could not answer.")
            assert "video_small pipeline answers about a video, and you uploaded 3 images" in said
            assert "Choose images_small instead" in said
            assert page.locator(".toast-body").count() == 0  # no vanishing toast ...
            assert (
                not page.locator("#answer").get_by_text("Error", exact=True).count()
            )  # ... no box
            page.screenshot(path=str(tmp_path / "demo_error.png"), full_page=True)
        finally:
            browser.close()
