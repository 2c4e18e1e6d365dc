"""Suite-wide test setup: offline switches before any model library is imported, GPU skipping."""

import os
import tempfile

# Model hubs are unreachable in CI; without these, hub loads hang ~50 s and ultralytics does DNS
# look-ups at import. Set before anything imports transformers/ultralytics/gradio.
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("HF_DATASETS_OFFLINE", "1")
os.environ.setdefault("YOLO_OFFLINE", "1")
os.environ.setdefault("YOLO_AUTOINSTALL", "False")
os.environ.setdefault("YOLO_CONFIG_DIR", tempfile.mkdtemp(prefix="yolo-config-"))
os.environ.setdefault("GRADIO_ANALYTICS_ENABLED", "False")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
# The path route prices with this machine's calibration when one is cached; tests see none unless
# they write one, so a `cascade doctor --calibrate` run here never changes which path they take.
os.environ["CASCADE_CALIBRATION_DIR"] = tempfile.mkdtemp(prefix="cascade-calibration-")

import torch  # noqa: E402

# Kernel tests run the Triton interpreter on CPU. Triton >= 3.8 reads TRITON_INTERPRET when triton
# itself is first imported (by any test, e.g. through torch or transformers), not when a kernel is
# decorated, so it must be set here, before any test module is imported.
if not torch.cuda.is_available():
    os.environ.setdefault("TRITON_INTERPRET", "1")

import pytest  # noqa: E402


def pytest_collection_modifyitems(config, items):
    if torch.cuda.is_available():
        return
    skip = pytest.mark.skip(reason="needs a CUDA GPU")
    for item in items:
        if "gpu" in item.keywords:
            item.add_marker(skip)
