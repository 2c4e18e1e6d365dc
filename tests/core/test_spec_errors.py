"""Every broken pipeline shape fails at load time with a message naming file, YAML path and fix."""

import pytest

from cascade import ConnectError, Pipeline, SpecError

BROKEN = {
    # fixture: (error class, substrings the message must contain)
    "broken_cycle": (SpecError, ["broken_cycle.yaml", "cycle:", "a -> b -> c -> a"]),
    "broken_unknown_type": (
        SpecError,
        [
            ":5: stages.a.type",
            "unknown stage type 'test_ad'",
            "did you mean 'test_add'?",
            "registered stage types:",
        ],
    ),
    "broken_bad_param": (
        SpecError,
        [":8: stages.a.params.amout", "no param 'amout'", "did you mean 'amount'?"],
    ),
    "broken_param_type": (SpecError, ["stages.a.params.amount", "valid integer", "'three'"]),
    "broken_type_mismatch": (
        ConnectError,
        ["stages.a.inputs.value", "'text.text' is str", "'a.value' (test_add) expects int"],
    ),
    "broken_missing_input": (
        ConnectError,
        ["stages.total.inputs", "missing required input(s) a", "a: int, b: int"],
    ),
    "broken_yaml_syntax": (SpecError, ["broken_yaml_syntax.yaml:6", "invalid YAML"]),
    "broken_unknown_port": (
        ConnectError,
        [":7: outputs.y", "has no output 'valu'", "did you mean 'value'?"],
    ),
    "broken_duplicate_stage": (SpecError, [":6", "duplicate key 'a' (first defined on line 5)"]),
    "broken_unreachable": (SpecError, ["stages.orphan", "feeds no pipeline output"]),
    "broken_bad_branch": (
        SpecError,
        ["stages.a.when", "no branch 'positve'", "did you mean 'positive'?", "negative, positive"],
    ),
    "broken_unknown_input_ref": (
        SpecError,
        ["stages.a.inputs.value", "unknown pipeline input '$xx'", "did you mean 'x'?"],
    ),
}


@pytest.mark.parametrize("name", sorted(BROKEN))
def test_broken_fixture_fails_with_located_message(name, fixture_path):
    cls, parts = BROKEN[name]
    with pytest.raises(cls) as info:
        Pipeline.load(fixture_path(name))
    message = str(info.value)
    assert "\n" not in message
    assert str(fixture_path(name)) in message
    for part in parts:
        assert part in message, f"{part!r} not in {message!r}"


def test_unknown_top_level_field_is_suggested():
    with pytest.raises(SpecError, match=r"unknown field 'stage' \(did you mean 'stages'\?\)"):
        Pipeline.from_yaml("name: x\nstage: {}\noutputs: {}\n", label="inline.yaml")


def test_unknown_stage_field_is_suggested():
    text = (
        "name: x\ninputs: {x: int}\nstages:\n"
        "  a: {type: test_add, input: {value: $x}}\noutputs: {y: a.value}\n"
    )
    with pytest.raises(SpecError, match=r"inline.yaml:4: stages.a.input: .*did you mean 'inputs'"):
        Pipeline.from_yaml(text, label="inline.yaml")


def test_unknown_input_type():
    with pytest.raises(SpecError, match=r"inputs.x.type: unknown input type 'integer'"):
        Pipeline.from_yaml("name: x\ninputs: {x: integer}\nstages: {}\noutputs: {}\n")


def test_missing_file_and_non_mapping(tmp_path):
    with pytest.raises(SpecError, match="pipeline file not found"):
        Pipeline.load(tmp_path / "nope.yaml")
    (tmp_path / "list.yaml").write_text("- a\n- b\n")
    with pytest.raises(SpecError, match="must be a YAML mapping"):
        Pipeline.load(tmp_path / "list.yaml")


def test_yaml_tags_are_refused(tmp_path):
    evil = tmp_path / "evil.yaml"
    evil.write_text("name: !!python/object/apply:os.system ['true']\nstages: {}\noutputs: {}\n")
    with pytest.raises(SpecError, match="invalid YAML"):
        Pipeline.load(evil)


def test_override_of_unknown_stage_is_suggested(fixture_path):
    with pytest.raises(SpecError, match=r"no stage 'plus_on' \(did you mean 'plus_one'\?\)"):
        Pipeline.load(fixture_path("linear"), overrides={"plus_on.amount": 3})
    with pytest.raises(SpecError, match=r"stages.plus_one.params.amount"):
        Pipeline.load(fixture_path("linear"), overrides={"plus_one.amount": "many"})
