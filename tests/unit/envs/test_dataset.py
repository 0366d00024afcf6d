"""Datasets: stable ids, row_to_example, max_examples, and precise errors for bad input."""

import json

import pytest

from looprl.envs import Example, JsonlDataset
from looprl.errors import UserError

ROW = {"prompt_messages": [{"role": "user", "content": "hi"}], "answer": "1"}


def write(tmp_path, lines):
    path = tmp_path / "d.jsonl"
    path.write_text("\n".join(lines) + "\n")
    return path


def test_rows_are_payloads_with_stable_ids(tmp_path):
    path = write(tmp_path, [json.dumps(ROW), json.dumps({**ROW, "answer": "2"})])
    a, b = JsonlDataset(path), JsonlDataset(path)
    assert [e.id for e in a] == [e.id for e in b] and a[0].id != a[1].id
    assert a[0].example_args == {"answer": "1"} and a[0].prompt_messages == ROW["prompt_messages"]


def test_row_to_example_may_return_payload_or_example(tmp_path):
    path = write(tmp_path, [json.dumps({"q": "x"})])
    ds = JsonlDataset(path, row_to_example=lambda r: {"prompt_messages": [{"role": "user", "content": r["q"]}]})
    assert ds[0].prompt_messages[0]["content"] == "x"
    ds = JsonlDataset(path, row_to_example=lambda r: Example(id="mine", payload={**ROW, "q": r["q"]}))
    assert ds[0].id == "mine"


def test_invalid_json_names_file_and_line(tmp_path):
    path = write(tmp_path, [json.dumps(ROW), "{broken"])
    with pytest.raises(UserError, match=rf"{path}:2: invalid JSON"):
        JsonlDataset(path)


@pytest.mark.parametrize("row", [{"answer": 1}, {"prompt_messages": []}, {"prompt_messages": "hi"},
                                 {"prompt_messages": [{"content": "no role"}]}, [1, 2]])
def test_bad_payloads_say_what_is_wrong(tmp_path, row):
    path = write(tmp_path, [json.dumps(row)])
    with pytest.raises(UserError, match=rf"{path}:1: .*(prompt_messages|JSON object)"):
        JsonlDataset(path)


def test_max_examples_stops_reading_early(tmp_path):
    path = write(tmp_path, [json.dumps(ROW), json.dumps({**ROW, "answer": "2"}), "{broken"])
    assert len(JsonlDataset(path, max_examples=2)) == 2


def test_missing_file(tmp_path):
    with pytest.raises(UserError, match="not found"):
        JsonlDataset(tmp_path / "nope.jsonl")
