"""A first run that downloads: through a hub mirror (`HF_ENDPOINT`), the cache folder named once and
one progress bar per model file on the user's terminal; a later run with the hub gone loads the
cached copy without waiting on the hub client."""

from __future__ import annotations

import fcntl
import json
import os
import pty
import re
import struct
import subprocess
import termios

import pytest

from cascade.eval.photos import bus_image_path

from .conftest import CASCADE, run_cascade, user_env
from .servers import black_hole, mirror
from .test_first_run import RETRY_NOISE

pytestmark = pytest.mark.slow

ARGS = [
    "run",
    "thumbnail_only",
    "--set",
    "models.vlm.id=tiny-org/tiny-vlm",
    "--input",
    f"images={bus_image_path()}",
    "--input",
    "question=What is this?",
    "--input",
    "max_new_tokens=2",
    "--json",
]


def run_on_terminal(args: list[str], env: dict[str, str]) -> tuple[int, str, str]:
    """Run with stderr on a pseudo-terminal (120 columns), as a user at a shell sees it."""
    master, slave = pty.openpty()
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 40, 120, 0, 0))
    proc = subprocess.Popen([CASCADE, *args], env=env, stdout=subprocess.PIPE, stderr=slave)
    os.close(slave)
    chunks = []
    while True:
        try:
            chunk = os.read(master, 1 << 16)
        except OSError:  # EIO: the child closed its end
            break
        if not chunk:
            break
        chunks.append(chunk)
    os.close(master)
    stdout = proc.stdout.read().decode()
    return proc.wait(timeout=600), stdout, b"".join(chunks).decode(errors="replace")


def test_download_shows_cache_once_and_a_bar_per_file_then_runs_offline(mirror_root, tmp_path):
    files = sorted(p.name for p in (mirror_root / "tiny-org" / "tiny-vlm").iterdir())
    with mirror(mirror_root) as endpoint:
        code, stdout, terminal = run_on_terminal(ARGS, user_env(endpoint, tmp_path))
    assert code == 0, terminal
    assert json.loads(stdout)["outputs"]["answer"]["produced_by"] == "vlm"
    cache = str(tmp_path / "hub")
    assert terminal.count(cache) == 1, terminal
    assert re.search(
        r"downloading 1 model\(s\), [\d.]+ [KMG]?B, into " + re.escape(cache), terminal
    )
    segments = re.split(r"[\r\n]+", terminal)
    for name in files:  # each file's own bar reaches 100 %
        assert any(name in s and "100%" in s for s in segments), (name, terminal)

    # The hub is gone; the cached copy loads offline instead of retrying for a minute. --debug
    # shows the debug log, where the hub client's retries would be.
    with black_hole() as endpoint:
        ran = run_cascade(["--debug", *ARGS], user_env(endpoint, tmp_path))
    assert ran.returncode == 0, ran.stderr
    assert json.loads(ran.stdout)["outputs"]["answer"]["produced_by"] == "vlm"
    assert "downloading" not in ran.stderr
    assert "loading cached models offline" in ran.stderr
    for noise in RETRY_NOISE:
        assert noise not in ran.stderr, ran.stderr
