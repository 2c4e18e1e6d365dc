"""The registry: duplicates are errors, unknown names get suggestions, plugins load by entry
point."""

import subprocess
import sys
import textwrap
from dataclasses import dataclass

import pytest

from cascade import RegistryError, Stage, StageParams, stage
from cascade.registry import get_stage_class, stage_types, unregister


def test_duplicate_name_is_an_error():
    with pytest.raises(
        RegistryError, match="'thumbnail' is already registered by cascade.stages.resize"
    ):

        @stage("thumbnail")
        class Another(Stage):
            @dataclass(frozen=True)
            class Outputs:
                x: int

            def run(self, x: int) -> Outputs:
                return self.Outputs(x)


def test_unknown_name_suggests():
    with pytest.raises(
        RegistryError, match=r"unknown stage type 'thumbnial' \(did you mean 'thumbnail'\?\)"
    ):
        get_stage_class("thumbnial")


def test_ports_must_be_typed():
    with pytest.raises(TypeError, match="must be annotated to return a dataclass"):

        @stage("test_untyped")
        class Untyped(Stage):
            def run(self, x: int):
                return x

    unregister("test_untyped")


def test_serving_traits_are_checked_when_the_stage_registers():
    from dataclasses import dataclass

    from cascade.stage import Serving

    @dataclass(frozen=True)
    class Out:
        x: int

    with pytest.raises(
        TypeError,
        match=r"serving.affinity 'image' is not an input of run\(\) "
        r"\(inputs: images\)",
    ):

        @stage("test_bad_affinity")
        class BadAffinity(Stage):
            serving = Serving(heavy=True, affinity="image")

            def run(self, images: list) -> Out: ...

    with pytest.raises(TypeError, match="serving.batch needs a run_batch method"):

        @stage("test_no_run_batch")
        class NoRunBatch(Stage):
            serving = Serving(heavy=True, batch=True)

            def run(self, images: list) -> Out: ...

    assert "test_bad_affinity" not in stage_types() and "test_no_run_batch" not in stage_types()
    assert get_stage_class("vlm_answer").serving.affinity == "images"


def test_params_forbid_unknown_fields():
    cls = get_stage_class("thumbnail")
    with pytest.raises(Exception, match="sise"):
        cls({"sise": 3})
    assert cls({"size": 64}).params.size == 64
    assert issubclass(cls.Params, StageParams)


def test_describe_lists_ports_and_params():
    d = get_stage_class("thumbnail").describe()
    assert d["inputs"] == {"image": {"type": "Image", "required": True}}
    assert d["params"]["size"]["default"] == 448 and d["params"]["size"]["description"]
    assert "edge_density_router" in stage_types()
    assert "serving" not in d  # a light stage runs wherever the pipeline runs
    assert get_stage_class("vlm_answer").describe()["serving"] == {
        "heavy": True,
        "num_cpus": 1.0,
        "num_gpus": 0.0,
        "pool": "model",
        "batch": True,
        "affinity": "images",
    }


@pytest.mark.slow
def test_third_party_stage_registers_through_entry_point(tmp_path):
    pkg = tmp_path / "site"
    (pkg / "my_stages").mkdir(parents=True)
    (pkg / "my_stages" / "__init__.py").write_text(
        textwrap.dedent("""
        from dataclasses import dataclass
        from cascade import Stage, stage

        @stage("shout")
        class Shout(Stage):
            '''Upper-case text.'''
            @dataclass(frozen=True)
            class Outputs:
                text: str

            def run(self, text: str) -> Outputs:
                return self.Outputs(text.upper())
    """)
    )
    dist = pkg / "my_stages-1.0.dist-info"
    dist.mkdir()
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: my-stages\nVersion: 1.0\n")
    (dist / "entry_points.txt").write_text("[cascade.stages]\nshout = my_stages\n")
    code = (
        "import sys; sys.path.insert(0, sys.argv[1]); "
        "from cascade.registry import get_stage_class; "
        "print(get_stage_class('shout')()(text='hi').text)"
    )
    out = subprocess.run(
        [sys.executable, "-c", code, str(pkg)], capture_output=True, text=True, timeout=120
    )
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "HI"


def test_every_registry_loads_its_entry_point_group(tmp_path):
    """Families, backends and reductions register from third-party packages the way stages do:
    here a reduction, found through the `cascade.reductions` group in a fresh process."""
    pkg = tmp_path / "site"
    (pkg / "my_reductions").mkdir(parents=True)
    (pkg / "my_reductions" / "__init__.py").write_text(
        textwrap.dedent("""
        from cascade.vlm.reduction import Reduced, Selection, register_reduction

        @register_reduction("first_k")
        class FirstK(Selection):
            '''Keep the first k tokens.'''
            def select(self, x, k, config, ops):
                import torch
                index = torch.arange(k)
                return Reduced(x[:k], index)
    """)
    )
    dist = pkg / "my_reductions-1.0.dist-info"
    dist.mkdir()
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: my-reductions\nVersion: 1.0\n")
    (dist / "entry_points.txt").write_text("[cascade.reductions]\nfirst_k = my_reductions\n")
    code = (
        "import sys; sys.path.insert(0, sys.argv[1]); from cascade.vlm.reduction import "
        "ReductionConfig, reduction_names; print(ReductionConfig('first_k', 0.5).where, "
        "'first_k' in reduction_names('after_tower'), 'torch' in sys.modules)"
    )
    out = subprocess.run(
        [sys.executable, "-c", code, str(pkg)], capture_output=True, text=True, timeout=120
    )
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == ["after_tower", "True", "False"]  # validating loads no torch


def test_a_registry_names_both_definitions_of_a_name_and_suggests_close_ones():
    from cascade.plugins import Registry

    reg = Registry("widget", (), "cascade.test-widgets")
    reg.register("gear", int)
    reg.register("gear", int)  # the same item again is no clash
    with pytest.raises(
        RegistryError,
        match=r"widget 'gear' is already registered by builtins.int; "
        r"builtins.float cannot take the same name",
    ):
        reg.register("gear", float)
    with pytest.raises(
        RegistryError,
        match=r"unknown widget 'geer' \(did you mean 'gear'\?\); "
        r"registered widgets: gear",
    ):
        reg["geer"]
    assert reg.get("geer") is None and list(reg) == ["gear"] and "gear" in reg
