"""Tests for recaudit.audits.language.yamlio: safe YAML loading with line-accurate errors."""

from __future__ import annotations

import textwrap
import time
from typing import Annotated, Literal, Union

import pytest
import yaml
from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    ValidationError,
    field_validator,
    model_validator,
)

from recaudit.audits.language.validation_errors import format_validation_error, line_for, load_and_validate
from recaudit.audits.language.yamlio import ScenarioError, load_yaml
from recaudit.audits.language.yamllimits import MAX_FLOW_DEPTH


# --------------------------------------------------------------------------
# Small models standing in for the real scenario schema
# --------------------------------------------------------------------------


class MaxSense(BaseModel):
    model_config = ConfigDict(extra="forbid")
    kind: Literal["maxsense"]
    epsilon: float = Field(gt=0)


class BitRelease(BaseModel):
    model_config = ConfigDict(extra="forbid")
    kind: Literal["bits"]
    bits: int = Field(ge=1, le=64)

    @field_validator("bits")
    @classmethod
    def _not_thirteen(cls, v: int) -> int:
        if v == 13:
            raise ValueError("13 bits is unlucky")
        return v


MechanismField = Annotated[Union[MaxSense, BitRelease], Field(discriminator="kind")]


class Population(BaseModel):
    model_config = ConfigDict(extra="forbid")
    size: int = Field(gt=0)
    like_probability: list[list[Annotated[float, Field(ge=0, le=1)]]]


class Scenario(BaseModel):
    model_config = ConfigDict(extra="forbid")
    name: str
    seed: int = 0
    mode: Literal["fast", "full"] = "fast"
    population: Population
    mechanism: MechanismField


GOOD = """\
name: demo
seed: 7
population:
  size: 100
  like_probability: [[0.9, 0.1], [0.1, 0.9]]
mechanism:
  kind: maxsense
  epsilon: 1e-5
"""


def write(tmp_path, text: str, name: str = "scenario.yaml") -> str:
    p = tmp_path / name
    p.write_text(textwrap.dedent(text), encoding="utf-8")
    return str(p)


def errors_for(tmp_path, text: str) -> list[str]:
    path = write(tmp_path, text)
    with pytest.raises(ScenarioError) as info:
        load_and_validate(path, Scenario)
    return info.value.messages


# --------------------------------------------------------------------------
# load_yaml: parsing, floats, line map
# --------------------------------------------------------------------------


def test_good_file_loads_and_validates(tmp_path):
    model = load_and_validate(write(tmp_path, GOOD), Scenario)
    assert isinstance(model.mechanism, MaxSense)
    assert model.mechanism.epsilon == 1e-5
    assert model.population.like_probability == [[0.9, 0.1], [0.1, 0.9]]


@pytest.mark.parametrize(
    "text, expected",
    [
        ("1e-5", 1e-5),
        ("1E5", 1e5),
        (".5e-3", 0.5e-3),
        ("-2e+3", -2000.0),
        ("-.5", -0.5),
        ("1.5", 1.5),
        ("3.", 3.0),
        (".inf", float("inf")),
    ],
)
def test_scientific_floats_are_floats(tmp_path, text, expected):
    data, _ = load_yaml(write(tmp_path, f"x: {text}\n"))
    assert isinstance(data["x"], float)
    assert data["x"] == expected


@pytest.mark.parametrize(
    "text, expected",
    [
        ("12", 12),
        ("-3", -3),
        ("1_000", 1000),
        ("0x1F", 31),
        ("true", True),
        ("false", False),
        ("null", None),
        ("~", None),
        ("hello", "hello"),
        ("e5", "e5"),
        ("1e", "1e"),
        ("1.2.3", "1.2.3"),
        ("'1e-5'", "1e-5"),
        ("._", "._"),
    ],
)
def test_other_scalars_resolve_as_before(tmp_path, text, expected):
    data, _ = load_yaml(write(tmp_path, f"x: {text}\n"))
    assert data["x"] == expected
    assert type(data["x"]) is type(expected)


def test_global_safe_loader_is_untouched(tmp_path):
    load_yaml(write(tmp_path, "x: 1e-5\n"))
    assert yaml.safe_load("x: 1e-5") == {"x": "1e-5"}


def test_line_map_block_and_flow(tmp_path):
    data, lines = load_yaml(write(tmp_path, GOOD))
    assert lines[()] == 1
    assert lines[("name",)] == 1
    assert lines[("population",)] == 3
    assert lines[("population", "like_probability")] == 5
    assert lines[("population", "like_probability", 1, 0)] == 5
    assert lines[("mechanism", "epsilon")] == 8


def test_line_map_nested_block_sequences(tmp_path):
    text = """\
    population:
      like_probability:
        - [0.9, 0.1]
        -
          - 0.2
          - 0.8
      groups:
        - name: a
          size: 3
        - {name: b, size: 4}
    """
    _, lines = load_yaml(write(tmp_path, text))
    assert lines[("population", "like_probability", 0)] == 3
    assert lines[("population", "like_probability", 0, 1)] == 3
    assert lines[("population", "like_probability", 1)] == 5
    assert lines[("population", "like_probability", 1, 0)] == 5
    assert lines[("population", "like_probability", 1, 1)] == 6
    assert lines[("population", "groups", 0, "size")] == 9
    assert lines[("population", "groups", 1, "size")] == 10


def test_line_map_multiline_flow(tmp_path):
    text = """\
    m: [
      [0.9, 0.1],
      [0.1, 0.9],
    ]
    """
    _, lines = load_yaml(write(tmp_path, text))
    assert lines[("m",)] == 1
    assert lines[("m", 0, 0)] == 2
    assert lines[("m", 1, 1)] == 3


def test_merge_keys_and_aliases(tmp_path):
    text = """\
    base: &base
      epsilon: 0.5
      kind: maxsense
    mechanism:
      <<: *base
      epsilon: 2.0
    copy: *base
    """
    data, lines = load_yaml(write(tmp_path, text))
    assert data["mechanism"] == {"epsilon": 2.0, "kind": "maxsense"}
    assert lines[("mechanism", "epsilon")] == 6  # explicit key wins
    assert lines[("mechanism", "kind")] == 5  # merged: line of `<<`
    assert lines[("copy", "epsilon")] == 2  # alias: where the value is defined


def test_line_for_longest_prefix():
    lines = {(): 1, ("mechanism",): 4, ("mechanism", "kind"): 5, ("m",): 9, ("m", 1): 10}
    assert line_for(lines, ("mechanism", "epsilon")) == 4
    assert line_for(lines, ("mechanism", "kind")) == 5
    assert line_for(lines, ("m", 1, 0)) == 10
    assert line_for(lines, ("nowhere", "at", "all")) == 1
    assert line_for(lines, ()) == 1
    assert line_for({}, ("x",)) == 1


# --------------------------------------------------------------------------
# load_yaml: file and syntax errors
# --------------------------------------------------------------------------


def test_missing_file(tmp_path):
    path = str(tmp_path / "nope.yaml")
    with pytest.raises(ScenarioError) as info:
        load_yaml(path)
    assert info.value.messages == [f"{path}: file not found"]
    assert str(info.value) == f"{path}: file not found"


def test_directory_is_rejected(tmp_path):
    with pytest.raises(ScenarioError) as info:
        load_yaml(tmp_path)
    assert info.value.messages == [f"{tmp_path}: is a directory, not a file"]


def test_empty_file(tmp_path):
    path = write(tmp_path, "# only a comment\n")
    with pytest.raises(ScenarioError, match=r"file is empty"):
        load_yaml(path)


def test_yaml_syntax_error_has_line(tmp_path):
    path = write(tmp_path, "a: 1\nb: [1, 2\nc: 3\n")
    with pytest.raises(ScenarioError) as info:
        load_yaml(path)
    (msg,) = info.value.messages
    assert msg.startswith(f"{path}:3: YAML syntax error: ")


def test_yaml_syntax_error_bad_indentation(tmp_path):
    path = write(tmp_path, "a:\n  b: 1\n   c: 2\n")
    with pytest.raises(ScenarioError) as info:
        load_yaml(path)
    (msg,) = info.value.messages
    assert msg.startswith(f"{path}:3: YAML syntax error: ")


def test_unsafe_tag_is_rejected(tmp_path):
    path = write(tmp_path, "a: 1\nb: !!python/object/apply:os.system ['echo hi']\n")
    with pytest.raises(ScenarioError) as info:
        load_yaml(path)
    (msg,) = info.value.messages
    assert msg.startswith(f"{path}:2: YAML error: ")


def test_top_level_list_rejected(tmp_path):
    path = write(tmp_path, "- a\n- b\n")
    with pytest.raises(ScenarioError) as info:
        load_yaml(path)
    assert info.value.messages == [f"{path}:1: top level must be a mapping of keys, got a list"]


@pytest.mark.parametrize("text", ["42\n", "just words\n", "null\n"])
def test_top_level_scalar_rejected(tmp_path, text):
    with pytest.raises(ScenarioError, match="top level must be a mapping"):
        load_yaml(write(tmp_path, text))


def test_duplicate_key_nested(tmp_path):
    text = """\
    name: demo
    mechanism:
      kind: maxsense
      epsilon: 1.0
      epsilon: 2.0
    """
    path = write(tmp_path, text)
    with pytest.raises(ScenarioError) as info:
        load_yaml(path)
    assert info.value.messages == [f"{path}:5: mechanism.epsilon: duplicate key 'epsilon'"]


def test_duplicate_keys_all_reported(tmp_path):
    text = """\
    a: 1
    groups:
      - {x: 1, x: 2}
    a: 3
    """
    path = write(tmp_path, text)
    with pytest.raises(ScenarioError) as info:
        load_yaml(path)
    assert info.value.messages == [
        f"{path}:3: groups[0].x: duplicate key 'x'",
        f"{path}:4: a: duplicate key 'a'",
    ]


def test_recursive_alias_is_refused_in_one_line(tmp_path):
    # a value that contains itself cannot be validated or fingerprinted: refused, not hung
    path = write(tmp_path, "seed: 1\na: &x [1, *x]\n")
    with pytest.raises(ScenarioError) as info:
        load_yaml(path)
    assert info.value.messages == [f"{path}:2: recursive alias: a value may not contain itself"]


# --------------------------------------------------------------------------
# Validation error formatting
# --------------------------------------------------------------------------


def test_negative_epsilon(tmp_path):
    text = GOOD.replace("epsilon: 1e-5", "epsilon: -1e-5")
    path = write(tmp_path, text)
    with pytest.raises(ScenarioError) as info:
        load_and_validate(path, Scenario)
    assert info.value.messages == [f"{path}:8: mechanism.epsilon: must be > 0"]


def test_unknown_key_with_allowed_list(tmp_path):
    text = GOOD + "  epsilom: 3\n"
    path = write(tmp_path, text)
    with pytest.raises(ScenarioError) as info:
        load_and_validate(path, Scenario)
    assert info.value.messages == [
        f"{path}:9: mechanism.epsilom: unknown key (allowed: epsilon, kind)"
    ]


def test_unknown_top_level_key(tmp_path):
    msgs = errors_for(tmp_path, "colour: red\n" + GOOD)
    assert len(msgs) == 1
    assert msgs[0].endswith(
        ":1: colour: unknown key (allowed: mechanism, mode, name, population, seed)"
    )


def test_unknown_key_without_model_cls(tmp_path):
    path = write(tmp_path, GOOD + "  epsilom: 3\n")
    data, lines = load_yaml(path)
    with pytest.raises(ValidationError) as info:
        Scenario.model_validate(data)
    assert format_validation_error(path, info.value, lines) == [
        f"{path}:9: mechanism.epsilom: unknown key"
    ]


def test_several_errors_at_once_sorted_by_line(tmp_path):
    text = """\
    name: demo
    mode: turbo
    population:
      size: 0
      like_probability: [[0.9, 0.1], [0.1, 0.9]]
      extra: 1
    mechanism:
      kind: bits
      bits: 13
    """
    msgs = errors_for(tmp_path, text)
    tails = [m.split(":", 1)[1] for m in msgs]
    assert tails == [
        "2: mode: must be one of: 'fast', 'full'",
        "4: population.size: must be > 0",
        "6: population.extra: unknown key (allowed: like_probability, size)",
        "9: mechanism.bits: 13 bits is unlucky",
    ]
    path = msgs[0].split(":", 1)[0]
    assert all(m.startswith(path + ":") for m in msgs)


def test_str_joins_messages(tmp_path):
    text = GOOD.replace("size: 100", "size: -1").replace("epsilon: 1e-5", "epsilon: 0")
    path = write(tmp_path, text)
    with pytest.raises(ScenarioError) as info:
        load_and_validate(path, Scenario)
    assert str(info.value) == (
        f"{path}:4: population.size: must be > 0\n{path}:8: mechanism.epsilon: must be > 0"
    )


def test_wrong_kind_tag(tmp_path):
    msgs = errors_for(tmp_path, GOOD.replace("kind: maxsense", "kind: maxsens"))
    assert len(msgs) == 1
    assert msgs[0].endswith(
        ":7: mechanism.kind: unknown kind 'maxsens' (expected one of: 'maxsense', 'bits')"
    )


def test_missing_kind_tag(tmp_path):
    msgs = errors_for(tmp_path, GOOD.replace("  kind: maxsense\n", ""))
    assert len(msgs) == 1
    assert msgs[0].endswith(":6: mechanism: missing 'kind' (needed to select the variant)")


def test_missing_required_key_reports_parent_line(tmp_path):
    msgs = errors_for(tmp_path, GOOD.replace("  epsilon: 1e-5\n", ""))
    assert len(msgs) == 1
    assert msgs[0].endswith(":6: mechanism.epsilon: required")


def test_missing_top_level_key_reports_line_1(tmp_path):
    msgs = errors_for(tmp_path, GOOD.replace("name: demo\n", ""))
    assert len(msgs) == 1
    assert msgs[0].endswith(":1: name: required")


def test_list_of_lists_out_of_range(tmp_path):
    text = """\
    name: demo
    population:
      size: 10
      like_probability:
        - [0.9, 0.1]
        - [1.5, 0.9]
    mechanism: {kind: maxsense, epsilon: 1}
    """
    msgs = errors_for(tmp_path, text)
    assert len(msgs) == 1
    assert msgs[0].endswith(":6: population.like_probability[1][0]: must be <= 1")


def test_list_of_lists_flow_style_wrong_type(tmp_path):
    msgs = errors_for(
        tmp_path, GOOD.replace("[[0.9, 0.1], [0.1, 0.9]]", "[[0.9, 0.1], [0.1, abc]]")
    )
    assert len(msgs) == 1
    assert msgs[0].endswith(":5: population.like_probability[1][1]: must be a number")


def test_type_errors(tmp_path):
    text = GOOD.replace("seed: 7", "seed: seven").replace("size: 100", "size: [1]")
    msgs = errors_for(tmp_path, text)
    tails = [m.split(":", 1)[1] for m in msgs]
    assert tails == [
        "2: seed: must be an integer",
        "4: population.size: must be an integer",
    ]


def test_discriminator_tag_dropped_from_path(tmp_path):
    # pydantic reports ('mechanism', 'bits', 'bits'): the first 'bits' is the
    # tag and must go, the second is a real key and must stay.
    text = GOOD.replace("kind: maxsense\n  epsilon: 1e-5", "kind: bits\n  bits: 65")
    msgs = errors_for(tmp_path, text)
    assert len(msgs) == 1
    assert msgs[0].endswith(":8: mechanism.bits: must be <= 64")


def test_wrong_container_type(tmp_path):
    msgs = errors_for(tmp_path, GOOD.replace("[[0.9, 0.1], [0.1, 0.9]]", "0.5"))
    assert msgs[0].endswith(":5: population.like_probability: must be a list")


def test_model_given_scalar(tmp_path):
    msgs = errors_for(tmp_path, "name: demo\npopulation: 3\nmechanism: {kind: bits, bits: 8}\n")
    assert [m.split(":", 1)[1] for m in msgs] == ["2: population: must be a mapping"]


class Wrapper(BaseModel):
    model_config = ConfigDict(extra="forbid")
    counts: dict[str, int] = {}
    value: int | list[int] = 0


def test_synthetic_union_and_key_locs_are_cleaned(tmp_path):
    path = write(tmp_path, "counts:\n  a: 1\n  b: x\nvalue: word\n")
    with pytest.raises(ScenarioError) as info:
        load_and_validate(path, Wrapper)
    assert info.value.messages == [
        f"{path}:3: counts.b: must be an integer",
        f"{path}:4: value: must be a list",
        f"{path}:4: value: must be an integer",
    ]


def test_non_string_mapping_key(tmp_path):
    path = write(tmp_path, "counts:\n  a: 1\n  7: 2\n")
    with pytest.raises(ScenarioError) as info:
        load_and_validate(path, Wrapper)
    assert info.value.messages == [f"{path}:3: counts.7: must be a string"]


def test_multiple_documents_rejected(tmp_path):
    path = write(tmp_path, "a: 1\n---\nb: 2\n")
    with pytest.raises(ScenarioError) as info:
        load_yaml(path)
    assert info.value.messages == [
        f"{path}:2: YAML syntax error: expected a single document in the stream"
        " but found another document"
    ]


def test_alias_bomb_is_refused_in_one_line(tmp_path):
    # 10**9 values once expanded: validating them would never end, so the document is refused
    lines = ["a0: &a0 [x, x, x, x, x, x, x, x, x, x]"]
    lines += [f"a{i}: &a{i} [" + ", ".join([f"*a{i - 1}"] * 10) + "]" for i in range(1, 9)]
    path = write(tmp_path, "\n".join(lines) + "\n")
    with pytest.raises(ScenarioError) as info:
        load_yaml(path)
    sizes = [11]  # a0: the list and its 10 scalars; each next level: the list and 10 copies of the last
    for _ in range(8):
        sizes.append(1 + 10 * sizes[-1])
    total = 1 + 9 + sum(sizes)  # the root mapping, its 9 keys and their values
    assert info.value.messages == [f"{path}:1: aliases expand the document to {total:.3g} values (more than "
                                   f"100000); write the values out"]


def test_merge_key_alias_bomb_is_refused_quickly(tmp_path):
    # each level merges the previous one twice: PyYAML's flattening alone took > 60 s on this
    lines = ["m0: &m0 {k0: 1}"]
    lines += [f"m{i}: &m{i} {{<<: [*m{i - 1}, *m{i - 1}], k{i}: 1}}" for i in range(1, 40)]
    path = write(tmp_path, "\n".join(lines) + "\n")
    with pytest.raises(ScenarioError) as info:
        load_yaml(path)
    assert len(info.value.messages) == 1 and "aliases expand the document" in info.value.messages[0]


def test_small_aliases_still_load(tmp_path):
    data, _ = load_yaml(write(tmp_path, "a: &a [1, 2]\nb: *a\nbase: &b {x: 1}\nc: {<<: *b, y: 2}\n"))
    assert data == {"a": [1, 2], "b": [1, 2], "base": {"x": 1}, "c": {"x": 1, "y": 2}}


def test_flow_nesting_is_refused_at_its_limit_before_pyyaml_parses(tmp_path):
    # PyYAML's scanner is quadratic in flow nesting: a 5,000-deep list took 0.8 s to reach its RecursionError
    deepest = MAX_FLOW_DEPTH
    data, _ = load_yaml(write(tmp_path, "a: 1\nx: " + "[" * deepest + "1" + "]" * deepest + "\n"))
    inner = data["x"]
    for _ in range(deepest - 1):
        (inner,) = inner
    assert inner == [1]
    text = "a: 1\nb: '" + "[" * 500 + "'\nx:\n  - " + "{k: [" * 60 + "1" + "]}" * 60 + "\n"
    path = write(tmp_path, text)  # 120 levels on line 4; the quoted brackets on line 2 nest nothing
    with pytest.raises(ScenarioError) as info:
        load_yaml(path)
    assert info.value.messages == [
        f"{path}:4: YAML error: nested too deeply (more than {deepest} levels of [ ] or {{ }})"]
    unclosed = write(tmp_path, "a: 1\nx: " + "[" * 5000 + "1\n")
    started = time.process_time()
    with pytest.raises(ScenarioError, match="nested too deeply"):
        load_yaml(unclosed)
    assert time.process_time() - started < 0.2  # refused from libyaml's linear pass, not PyYAML's 0.8 s


class Ranged(BaseModel):
    model_config = ConfigDict(extra="forbid")
    low: float
    high: float

    @model_validator(mode="after")
    def _ordered(self):
        if self.low >= self.high:
            raise ValueError("low must be < high")
        return self


def test_model_validator_error_at_root(tmp_path):
    path = write(tmp_path, "low: 2\nhigh: 1\n")
    with pytest.raises(ScenarioError) as info:
        load_and_validate(path, Ranged)
    assert info.value.messages == [f"{path}:1: <root>: low must be < high"]


@pytest.mark.skipif(not yaml.__with_libyaml__, reason="PyYAML built without libyaml: only the pure-Python reader runs")
def test_libyaml_reads_every_shipped_scenario_as_the_pure_python_reader_does():
    """load_yaml reads through libyaml when it can; the data and every line must be the pure-Python reader's."""
    from pathlib import Path

    from recaudit.audits.language import yamlio

    files = sorted((Path(__file__).resolve().parents[1] / "scenarios").rglob("*.yaml"))
    assert len(files) > 30
    for path in files:
        text = path.read_text()
        assert yamlio._load(text, str(path), yamlio._FastScenarioLoader) == \
            yamlio._load(text, str(path), yamlio._ScenarioLoader), path

