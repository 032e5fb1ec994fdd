"""The shared strict layer of the spec readers (`accelmap._schema`)."""

from __future__ import annotations

import pytest

import accelmap._schema as schema
from accelmap.errors import SpecError


def test_join_paths():
    assert schema.join("f.yaml: ", "levels") == "f.yaml: levels"
    assert schema.join("f.yaml: levels", 2) == "f.yaml: levels[2]"
    assert schema.join("f.yaml: levels[2]", "name") == "f.yaml: levels[2].name"


def test_check_keys_messages():
    with pytest.raises(SpecError, match=r"^f.yaml: nmae: unknown key \(did you mean 'name'\?\); accepted keys: name, size$"):
        schema.check_keys({"nmae": 1}, ("name", "size"), "f.yaml: ", "a thing")
    with pytest.raises(SpecError, match=r"^f.yaml: the top level is a list \(\[1\]\); expected a thing with keys name$"):
        schema.check_keys([1], ("name",), "f.yaml: ", "a thing")
    with pytest.raises(SpecError, match=r"^f.yaml: a.name is missing; a thing needs keys name$"):
        schema.check_keys({}, ("name",), "f.yaml: a", "a thing", required=("name",))


@pytest.mark.parametrize(("fn", "obj", "message"), [
    (lambda o: schema.integer(o, "k", "f: ", default=schema.REQUIRED), {"k": 0}, "f: k = 0; expected an int >= 1"),
    (lambda o: schema.integer(o, "k", "f: ", default=schema.REQUIRED), {}, "f: k is missing; expected an int >= 1"),
    (lambda o: schema.integer(o, "k", "f: ", default=1, nullable=True), {"k": True},
     "f: k = True (a bool); expected an int >= 1, or null for unbounded"),
    (lambda o: schema.number(o, "k", "f: x", default=0, minimum=0, strict=True), {"k": "3"},
     "f: x.k = '3' (a string); expected a number > 0"),
    (lambda o: schema.number(o, "k", "f: x", default=0, minimum=0, strict=False), {"k": float("nan")},
     "f: x.k = nan; expected a number >= 0"),
    (lambda o: schema.boolean(o, "k", "f: ", default=False), {"k": 1}, "f: k = 1 (an int); expected true or false"),
    (lambda o: schema.name(o, "k", "f: ", default=schema.REQUIRED), {"k": " "}, "f: k = ' ' (a string); expected a non-empty string"),
    (lambda o: schema.nonempty_list(o, "k", "f: ", "layers"), {"k": []}, "f: k = [] (a list); expected a non-empty list of layers"),
    (lambda o: schema.choice(o, "k", "f: ", ("edp", "energy"), default="edp"), {"k": "edpp"},
     "f: k = 'edpp' (did you mean 'edp'?); expected one of edp, energy"),
])
def test_value_messages(fn, obj, message):
    with pytest.raises(SpecError) as exc:
        fn(obj)
    assert str(exc.value) == message


def test_defaults_and_good_values():
    assert schema.integer({}, "k", "f: ", default=7) == 7
    assert schema.integer({"k": None}, "k", "f: ", default=7, nullable=True) is None
    assert schema.number({"k": 2.5}, "k", "f: ", default=None, minimum=0, strict=True) == 2.5
    assert schema.choice({}, "k", "f: ", ("a",), default="a") == "a"
    assert schema.int_value(3, "p") == 3 and schema.bool_value(False, "p") is False


@pytest.mark.parametrize(("fn", "obj", "message"), [
    (lambda o: schema.int_list(o, "k", "f: ", "sizes"), {"k": [4, 0]}, "f: k[1] = 0; expected an int >= 1"),
    (lambda o: schema.int_list(o, "k", "f: ", "sizes"), {"k": 4}, "f: k = 4 (an int); expected a non-empty list of sizes"),
    (lambda o: schema.names(o, "k", "f: ", "file paths", default=[], single="a file path"), {"k": 3},
     "f: k = 3 (an int); expected a file path or a list of them"),
    (lambda o: schema.names(o, "k", "f: x", "dim names", default=[]), {"k": ["K", ""]},
     "f: x.k[1] = '' (a string); expected a name (a non-empty string)"),
    (lambda o: schema.int_mapping(o, "k", "f: ", ("K", "C"), key_kind="dimension", keys_label="dims",
                                  value_kind="factor", example="{K: 4}"), {"k": {"KK": 2}},
     "f: k.KK: unknown dimension (did you mean 'K'?); dims: K, C"),
    (lambda o: schema.int_mapping(o, "k", "f: ", ("K", "C"), key_kind="dimension", keys_label="dims",
                                  value_kind="factor", example="{K: 4}"), {"k": {"K": 2.0}},
     "f: k.K = 2.0 (a float); expected an int >= 1"),
    (lambda o: schema.items(o, "k", "f: ", "rules"), {"k": {"a": 1}}, "f: k = {'a': 1} (a mapping); expected a list of rules"),
    (lambda o: schema.mapping(o, "k", "f: ", "option: value"), {"k": [1]}, "f: k = [1] (a list); expected a mapping of option: value"),
    (lambda o: schema.number(o, "k", "f: ", default=None, minimum=0, maximum=1, strict=False), {"k": 1.5},
     "f: k = 1.5; expected a number in [0, 1]"),
    (lambda o: schema.choice(o, "k", "f: ", ("DRAM", "GLB"), default=None, label="the levels of a"), {"k": 3},
     "f: k = 3 (an int); expected one of the levels of a: DRAM, GLB"),
    (lambda o: schema.integer(o, "k", "f: ", default=None, nullable=True, null_means="none", note="per search"),
     {"k": 0}, "f: k = 0; expected an int >= 1, or null for none (per search)"),
])
def test_collection_messages(fn, obj, message):
    with pytest.raises(SpecError) as exc:
        fn(obj)
    assert str(exc.value) == message


def test_collections_good_values_and_plugins():
    assert schema.items({}, "k", "f: ", "rules") == [] and schema.items({"k": None}, "k", "f: ", "rules") == []
    assert schema.names({"k": "a.yaml"}, "k", "f: ", "paths", default=[], single="a path") == ["a.yaml"]
    assert schema.int_mapping({"k": {"K": 2}}, "k", "f: ", ("K",), key_kind="dimension", keys_label="dims",
                              value_kind="factor", example="") == {"K": 2}
    assert schema.int_list({"k": [1, 2]}, "k", "f: ", "sizes") == [1, 2]
    assert schema.mapping({"k": None}, "k", "f: ", "x") == {}
    assert schema.plugin_value("edp", "p", ["edp"], "objective") == "edp"
    with pytest.raises(SpecError, match=r"^p: unknown searcher 'anneel'\. Did you mean 'anneal'\?"):
        schema.plugin_value("anneel", "p", ["anneal", "random"], "searcher")
    assert schema.describe(None) == "None (empty)" and schema.describe("8") == "'8' (a string)"
