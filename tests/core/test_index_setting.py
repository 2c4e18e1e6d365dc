"""The pipeline-level `index:` setting: validated like the models block, addressed by overrides,
handed to every stage; where each video's index goes; the one safe writer."""

from pathlib import Path

import pytest

from cascade import Pipeline, SpecError
from cascade.index import IndexSpec, VideoIndex, write_atomic

PIPELINE = """\
name: indexed
{index}
inputs: {{x: int}}
stages:
  plus_one: {{type: test_add, inputs: {{value: $x}}}}
outputs: {{y: plus_one.value}}
"""


def load(index: str = "", **kw) -> Pipeline:
    return Pipeline.from_yaml(PIPELINE.format(index=index), label="p.yaml", **kw)


def test_off_by_default_on_with_true_or_a_folder_and_every_stage_shares_it(tmp_path):
    assert not load().stages["plus_one"].video_index.enabled
    assert not load("index: false").stages["plus_one"].video_index.enabled
    on = load("index: true")
    assert on.spec.index == IndexSpec() and on.stages["plus_one"].video_index.enabled
    folder = load(f"index: {{folder: {tmp_path}}}")
    assert folder.stages["plus_one"].video_index.spec.folder == str(tmp_path)
    assert (
        load("index: true").run(x=1)["y"] == 2
    )  # an index changes nothing for stages without video


@pytest.mark.parametrize(
    "index, parts",
    [
        (
            "index: {fodler: /x}",
            [":2: index.fodler", "unknown field 'fodler'", "did you mean 'folder'?"],
        ),
        ("index: yes please", [":2: index", "valid dictionary"]),
    ],
)
def test_a_bad_index_block_is_named_by_yaml_path(index, parts):
    with pytest.raises(SpecError) as info:
        load(index)
    for part in parts:
        assert part in str(info.value), str(info.value)


def test_overrides_turn_it_on_or_point_it_elsewhere_and_the_name_is_reserved(tmp_path):
    assert load(overrides={"index": True}).spec.index == IndexSpec()
    assert load("index: true", overrides={"index": False}).spec.index is None
    moved = load(overrides={"index.folder": str(tmp_path)})
    assert moved.spec.index == IndexSpec(folder=str(tmp_path))
    with pytest.raises(SpecError, match="'index' is reserved"):
        Pipeline.from_yaml(PIPELINE.format(index="").replace("plus_one", "index"))


def test_each_video_gets_its_own_folder(tmp_path):
    beside = VideoIndex(IndexSpec())
    assert (
        beside.folder_for(tmp_path / "a" / "clip.mp4") == tmp_path / "a" / "clip.mp4.cascade-index"
    )
    root = VideoIndex(IndexSpec(folder=str(tmp_path / "idx")))
    one, other = (
        root.folder_for(tmp_path / "a" / "clip.mp4"),
        root.folder_for(tmp_path / "b" / "clip.mp4"),
    )
    assert one.parent == other.parent == tmp_path / "idx" and one != other
    assert one.name.startswith("clip.mp4-")
    off = VideoIndex(None)
    assert (
        off.folder_for(tmp_path / "clip.mp4") is None and off.frames(tmp_path / "c.mp4", {}) is None
    )
    assert VideoIndex.of(True).enabled and not VideoIndex.of(None).enabled


def test_the_writer_never_leaves_half_a_file(tmp_path):
    target = tmp_path / "sub" / "data.bin"
    write_atomic(target, lambda fh: fh.write(b"complete"))
    assert target.read_bytes() == b"complete"

    def crash(fh):
        fh.write(b"half")
        raise OSError("disk full")

    with pytest.raises(OSError, match="disk full"):
        write_atomic(target, crash)
    assert target.read_bytes() == b"complete"  # the old file stands
    assert sorted(p.name for p in Path(target.parent).iterdir()) == ["data.bin"]  # no temp left
