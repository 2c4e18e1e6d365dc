"""Video files for media tests: containers rewritten without re-encoding."""

from __future__ import annotations

from pathlib import Path

import av


def remux(src_path: Path, dst_path: Path, **options: str) -> None:
    """Copy the video stream of `src_path` into `dst_path` (container from the suffix; options
    such as movflags="faststart", which puts an MP4's index first so a cut file still opens)."""
    src = av.open(str(src_path))
    with av.open(str(dst_path), "w", options=options) as out:
        stream = out.add_stream_from_template(src.streams.video[0])
        for packet in src.demux(src.streams.video[0]):
            if packet.dts is not None:
                packet.stream = stream
                out.mux(packet)
    src.close()
