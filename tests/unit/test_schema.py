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
