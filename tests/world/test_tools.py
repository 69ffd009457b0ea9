"""Tool schema normalisation: three input shapes, human tools, exports, schema errors."""

import json

import pytest

import toolkit as tk

PARAMETERS = {
    "type": "object",
    "properties": {"booking_id": {"type": "string", "description": "like ABC123"}},
    "required": ["booking_id"],
}


def test_three_shapes_give_the_same_spec():
    openai_shape = {"type": "function", "function": {"name": "get_booking", "description": "Look up", "parameters": PARAMETERS}}
    bare_shape = {"name": "get_booking", "description": "Look up", "parameters": PARAMETERS}
    anthropic_shape = {"name": "get_booking", "description": "Look up", "input_schema": PARAMETERS}
    specs = [tk.world.normalize_tools([shape])[0] for shape in (openai_shape, bare_shape, anthropic_shape)]
    assert specs[0] == specs[1] == specs[2]
    assert specs[0].required == ("booking_id",)
    assert specs[0].kind == "function"


def test_round_trip_exports():
    spec = tk.world.normalize_tools([{"name": "get_booking", "description": "Look up", "parameters": PARAMETERS}])[0]
    assert tk.world.normalize_tools([spec.to_openai()])[0] == spec
    assert tk.world.normalize_tools([spec.to_anthropic()])[0] == spec
    assert tk.world.normalize_tools([spec.to_dict()])[0] == spec
    assert spec.to_openai()["type"] == "function"
    assert "kind" not in spec.to_openai()["function"]  # the API refuses unknown keys
    assert spec.to_anthropic()["input_schema"] == PARAMETERS


def test_exports_are_copies():
    spec = tk.world.normalize_tools([{"name": "a", "parameters": PARAMETERS}])[0]
    spec.to_openai()["function"]["parameters"]["properties"]["x"] = {}
    assert "x" not in spec.properties


def test_human_kind_top_level_and_inside_function():
    top = tk.world.normalize_tools([{"name": "ask_person", "kind": "human"}])[0]
    inner = tk.world.normalize_tools([{"type": "function", "function": {"name": "ask_person", "kind": "human"}}])[0]
    assert top.is_human and inner.is_human
    with pytest.raises(tk.SchemaError, match="kind"):
        tk.world.normalize_tools([{"name": "ask_person", "kind": "humane"}])


def test_missing_parameters_is_an_empty_object_schema():
    spec = tk.world.normalize_tools([{"name": "ping"}])[0]
    assert spec.parameters == {"type": "object", "properties": {}}
    assert spec.required == ()


@pytest.mark.parametrize(
    "tool, fragments",
    [
        ({"name": "a", "parameters": {"type": "object", "properties": {"x": {"type": "strin"}}}}, ["'a'", "parameters.properties.x.type"]),
        ({"name": "a", "parameters": {"type": "array"}}, ["'a'", "parameters.type", "object"]),
        ({"name": "a", "parameters": {"type": "object", "properties": {"x": {}}, "required": ["y"]}}, ["'a'", "parameters.required", "'y'"]),
        ({"name": "a", "parameters": "not a schema"}, ["'a'", "parameters"]),
        ({"name": "a b"}, ["'a b'", "name"]),
        ({"name": "a", "paramters": {}}, ["'a'", "did you mean 'parameters'"]),
        ({"type": "function", "function": {"description": "no name"}}, ["function.name"]),
        ({"name": "a", "input_schema": {"type": "object", "properties": {"x": {"type": "object", "properties": {"y": {}}, "required": ["z"]}}}},
         ["'a'", "parameters.properties.x.required", "'z'"]),
        ({"name": "a", "description": 5}, ["'a'", "description"]),
    ],
)
def test_malformed_schema_names_tool_and_field(tool, fragments):
    with pytest.raises(tk.SchemaError) as caught:
        tk.world.normalize_tools([tool])
    for fragment in fragments:
        assert fragment in str(caught.value)


def test_schema_error_is_a_value_error_and_toolkit_error():
    with pytest.raises(ValueError):
        tk.world.normalize_tools([{"name": "a", "parameters": {"type": "array"}}])
    with pytest.raises(tk.ToolkitError):
        tk.world.normalize_tools(["get_booking"])


def test_duplicate_names_refused():
    with pytest.raises(tk.SchemaError, match="twice"):
        tk.world.normalize_tools([{"name": "a"}, {"name": "a"}])


def test_reference_parameters():
    spec = tk.world.normalize_tools([{"name": "update_profile", "parameters": {"type": "object", "properties": {
        "user_id": {"type": "string"}, "name": {"type": "string"}, "note": {"type": "string"}}}}])[0]
    # "name" beside an id is data to set, not a second key that must exist
    assert spec.reference_parameters == ("user_id",)
    only_name = tk.world.normalize_tools([{"name": "get_repo", "parameters": {"type": "object", "properties": {
        "repo_name": {"type": "string"}, "branch": {"type": "string"}}}}])[0]
    assert only_name.reference_parameters == ("repo_name",)
    assert tk.world.normalize_tools([{"name": "getBookingDetails"}])[0].words == ("get", "booking", "details")


def test_json_file_and_single_dict(tmp_path):
    path = tmp_path / "tools.json"
    path.write_text(json.dumps({"tools": [{"name": "a"}, {"name": "b", "kind": "human"}]}))
    assert [s.name for s in tk.world.normalize_tools(path)] == ["a", "b"]
    assert [s.name for s in tk.world.normalize_tools({"name": "solo"})] == ["solo"]
    assert tk.world.normalize_tools(None) == []
    with pytest.raises(tk.SchemaError, match="does not exist"):
        tk.world.normalize_tools(tmp_path / "missing.json")


def test_a_dict_keyed_by_tool_name_takes_every_tool_shape_and_names_each_tool_by_its_key():
    listed = tk.world.normalize_tools([{"name": "get_booking", "description": "Look up", "parameters": PARAMETERS},
                                       {"name": "ask_person", "kind": "human"}])  # fmt: skip
    human = {"kind": "human"}
    for get_booking in (
        {"type": "function", "function": {"description": "Look up", "parameters": PARAMETERS}},  # OpenAI, unnamed
        {"type": "function", "function": {"name": "get_booking", "description": "Look up", "parameters": PARAMETERS}},
        {"description": "Look up", "parameters": PARAMETERS},  # bare function dict
        {"description": "Look up", "input_schema": PARAMETERS},  # Anthropic
    ):
        assert tk.world.normalize_tools({"get_booking": get_booking, "ask_person": human}) == listed
    # just the parameters schema: the key is the name, no description
    assert tk.world.normalize_tools({"get_booking": PARAMETERS}) == [tk.world.ToolSpec("get_booking", "", PARAMETERS)]
    assert tk.world.normalize_tools({}) == []


def test_a_dict_keyed_by_name_is_refused_with_the_accepted_shapes_or_the_field():
    with pytest.raises(tk.SchemaError, match=r"tools\['get_booking'\]: the key names the tool 'get_booking' but its field 'name' says 'lookup'"):
        tk.world.normalize_tools({"get_booking": {"name": "lookup", "parameters": PARAMETERS}})
    with pytest.raises(tk.SchemaError, match=r"key 'get_booking' holds a str\); accepted: a list of tool dicts .* keyed by name"):
        tk.world.normalize_tools({"get_booking": "look a booking up"})
    with pytest.raises(tk.SchemaError, match="tool 'get_booking': unknown key 'paramters'; did you mean 'parameters'"):
        tk.world.normalize_tools({"get_booking": {"paramters": PARAMETERS}})
    with pytest.raises(tk.SchemaError, match="tools of type int are not accepted; accepted: "):
        tk.world.normalize_tools(3)


def test_the_wrapper_of_a_tools_file_also_works_in_memory():
    wrapped = {"description": "two tools", "tools": [{"name": "a"}, {"name": "b", "kind": "human"}]}
    assert [(s.name, s.kind) for s in tk.world.normalize_tools(wrapped)] == [("a", "function"), ("b", "human")]
    with pytest.raises(tk.SchemaError, match="tools dict: unknown key 'descripton'; did you mean 'description'"):
        tk.world.normalize_tools({"descripton": "two tools", "tools": []})


def test_the_shipped_tool_file_is_one_shape_and_its_human_tool_is_documented():
    path = tk.dataset_path("tools/airline_support.json")
    entries = json.loads(path.read_text(encoding="utf-8"))
    assert {entry["type"] for entry in entries} == {"function"} and all("function" in entry for entry in entries)
    human = [spec.name for spec in tk.world.normalize_tools(path) if spec.is_human]
    assert human == ["ask_passenger"]
    readme = (path.parents[1] / "README.md").read_text(encoding="utf-8")
    assert all(f"`{name}` carries `\"kind\": \"human\"`" in readme for name in human)


def test_properties_without_type_read_as_object():
    spec = tk.world.normalize_tools([{"name": "a", "parameters": {"properties": {"x": {"type": "string"}}}}])[0]
    assert spec.parameters["type"] == "object"


def test_importing_the_toolkit_does_not_import_jsonschema():
    # jsonschema is imported on the first schema check: with rfc3987-syntax installed (as
    # JupyterLab installs it) importing it costs ~1 s, which a statistics-only session skips
    import subprocess
    import sys

    code = "import sys, toolkit; print('jsonschema' in sys.modules)"
    assert subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.strip() == "False"
    code = "import sys, toolkit; toolkit.world.ToolSpec(name='get_order', parameters={'type': 'object'}); print('jsonschema' in sys.modules)"
    assert subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.strip() == "True"


@pytest.mark.parametrize(
    "default, shown",
    [(__import__("datetime").date(2026, 1, 2), "is a date"), ({"a", "b"}, "is a set"), (float("nan"), "nan")],
)
def test_a_non_json_schema_default_is_refused_up_front_naming_tool_and_field(default, shown):
    # Issue 21 row 10: it passed this check, then died mid-planning with a bare TypeError.
    tool = {"name": "book_flight", "description": "Book a flight", "parameters": {"type": "object", "properties": {
        "date": {"type": "string", "default": default}, "seats": {"type": "integer", "default": 1}}}}  # fmt: skip
    with pytest.raises(tk.SchemaError) as info:
        tk.simulate(tools=[tool], budget=4, progress=False)
    message = str(info.value)
    assert "tool 'book_flight'" in message and "'parameters.properties.date.default'" in message and shown in message
    tool["parameters"]["properties"]["date"]["default"] = "2026-01-02"  # the same schema with a JSON default runs
    assert len(tk.simulate(tools=[tool], budget=4, progress=False).rows) == 4
