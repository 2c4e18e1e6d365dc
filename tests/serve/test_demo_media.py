"""The web demo's example media: made at first use into the examples folder, kept after that, and
showing what the example questions ask about (the sign on the frames it is said to be on)."""

from __future__ import annotations

import numpy as np

from cascade.serve.demo import demo_examples
from cascade.serve.demo_media import SIGN_FRAMES, demo_media


def _frames(path) -> list[np.ndarray]:
    import av

    with av.open(str(path)) as container:
        return [f.to_ndarray(format="rgb24") for f in container.decode(video=0)]


def test_media_made_once_and_the_sign_shown_where_said(tmp_path):
    from PIL import Image

    media = demo_media(tmp_path / "examples")
    assert media.video.is_file() and media.receipt.is_file() and media.photo.is_file()
    assert sorted(p.name for p in (tmp_path / "examples").iterdir()) == [
        "receipt.png",
        "sign_video.mp4",
    ]  # no temporary file left behind

    frames = _frames(media.video)
    assert len(frames) == 80 and frames[0].shape == (480, 640, 3)
    sign = slice(60, 129), slice(100, 540)  # the 440x69 plate, centred, an eighth down
    white = [i for i, f in enumerate(frames) if (f[sign] > 200).all(-1).mean() > 0.6]
    assert white == list(SIGN_FRAMES), white

    with Image.open(media.receipt) as im:
        receipt = np.asarray(im.convert("L"))
    assert receipt.min() < 50 and np.median(receipt) > 250  # dark text on a white page

    stamp = media.video.stat().st_mtime_ns, media.receipt.stat().st_mtime_ns
    again = demo_media(tmp_path / "examples")
    assert again == media
    assert (again.video.stat().st_mtime_ns, again.receipt.stat().st_mtime_ns) == stamp


def test_examples_name_the_media_for_the_models_served(tmp_path):
    rows = demo_examples(["cascade/video_qa", "cascade/doc_qa"], tmp_path)
    media = demo_media(tmp_path)
    assert [(files, model) for files, _, model in rows] == [
        ([str(media.video)], "cascade/video_qa"),
        ([str(media.video)], "cascade/video_qa"),
        ([str(media.receipt)], "cascade/doc_qa"),
    ]
