"""The inspector's JSON API: runs, every rollout filter, sorting and paging, one rollout, metrics."""

import pytest
from fastapi.testclient import TestClient
from tests.unit.inspector.fake_store import T0, build_store, record

from looprl.inspector.app import create_app
from looprl.store.records import RunInfo
from looprl.store.writer import RunStoreWriter

API = "/api/runs/toy-run"


def ids(client, **params):
    body = client.get(f"{API}/rollouts", params={"limit": 500, **params}).json()
    assert body["total"] == len(body["rows"]), body
    return [row["rollout_id"] for row in body["rows"]]


def test_runs_lists_the_run_with_its_summary(client):
    [run] = client.get("/api/runs").json()
    assert run["id"] == "toy-run" and run["run_id"] == "run-1" and run["kind"] == "rl" and run["env_name"] == "toy"
    assert run["model"] == "tiny-model" and run["status"] == "running" and run["steps"] == 3 and run["last_step"] == 2
    assert run["last_reward"] == 2.0 and run["rollouts"] == {"train": 8, "eval": 2}
    assert client.get(API).json()["id"] == "toy-run"


def test_unknown_run_and_rollout_are_404(client):
    assert client.get("/api/runs/nope/rollouts").status_code == 404
    assert client.get(f"{API}/rollouts/nope").status_code == 404


@pytest.mark.parametrize("params, expected", [
    ({"split": "eval"}, {"eval-2-0", "eval-2-1"}),
    ({"split": "train", "step": 1}, {"train-1-4", "train-1-5"}),
    ({"split": "train", "step_min": 1}, {"train-1-4", "train-1-5", "train-2-6", "train-2-7"}),
    ({"split": "train", "step_max": 0}, {"train-0-0", "train-0-1", "train-0-2", "train-0-3"}),
    ({"split": "train", "step_min": 1, "step_max": 1}, {"train-1-4", "train-1-5"}),
    ({"termination_reason": "timeout"}, {"train-2-6"}),
    ({"split": "train", "reward_min": 1.5}, {"train-0-0", "train-0-3", "train-1-4", "train-2-7"}),
    ({"split": "train", "reward_max": 0.5}, {"train-0-1", "train-1-5"}),
    ({"split": "train", "reward_min": 0.5, "reward_max": 1.5}, {"train-0-0", "train-0-3"}),
    ({"has_error": "true"}, {"train-0-2", "train-2-6"}),
    ({"split": "train", "has_error": "false", "step": 0}, {"train-0-0", "train-0-1", "train-0-3"}),
    ({"min_log_level": 30}, {"train-0-1", "train-0-2"}),
    ({"min_log_level": 40}, {"train-0-2"}),
    ({"q": "needle"}, {"train-1-4"}),  # in a message
    ({"q": "unique-log-marker"}, {"train-1-5"}),  # in a log record
    ({"q": "ValueError: bad"}, {"train-0-2"}),  # in a traceback
    ({"q": "<script>alert(1)"}, {"train-0-3"}),  # markup is just text to search
    ({"q": "ne", "split": "train", "step": 1}, {"train-1-4"}),  # under 3 characters: a scan
    ({"group_id": "train-0-g1"}, {"train-0-2", "train-0-3"}),
    ({"q": "", "termination_reason": "", "split": "eval"}, {"eval-2-0", "eval-2-1"}),  # blank form fields
])
def test_every_filter(client, params, expected):
    assert set(ids(client, **params)) == expected


def test_sorting_paging_and_total(client):
    assert ids(client, split="train", sort="reward", order="asc")[:2] == ["train-0-2", "train-2-6"]  # NULLs first
    # ties: newest first
    assert ids(client, split="train", sort="reward", order="desc")[:2] == ["train-2-7", "train-1-4"]
    assert ids(client, split="train", sort="step", order="desc")[:2] == ["train-2-7", "train-2-6"]
    assert ids(client, split="train", sort="example", order="asc")[0] == "train-0-0"
    page = client.get(f"{API}/rollouts",
                      params={"split": "train", "sort": "step", "order": "asc", "limit": 3, "offset": 3}).json()
    assert page["total"] == 8 and [r["rollout_id"] for r in page["rows"]] == ["train-0-3", "train-1-4", "train-1-5"]
    assert page["limit"] == 3 and page["offset"] == 3
    assert client.get(f"{API}/rollouts", params={"sort": "DROP TABLE"}).status_code == 422
    assert client.get(f"{API}/rollouts", params={"limit": 0}).status_code == 422


def test_zero_filled_components_are_marked(client):
    rows = {r["rollout_id"]: r
            for r in client.get(f"{API}/rollouts", params={"step": 0, "split": "train"}).json()["rows"]}
    assert rows["train-0-1"]["rewards"] == {"correct": 0.0} and rows["train-0-1"]["zero_filled"] == ["format"]
    assert rows["train-0-0"]["zero_filled"] == [] and rows["train-0-2"]["zero_filled"] == []  # failed: not scored
    page = client.get(f"{API}/rollouts", params={"split": "eval"}).json()
    assert page["components"] == ["correct", "style"]
    assert {r["rollout_id"]: r["zero_filled"] for r in page["rows"]} == {"eval-2-0": ["style"], "eval-2-1": []}


def test_rollout_detail(client):
    d = client.get(f"{API}/rollouts/train-0-2").json()
    assert d["termination_reason"] == "tool_error" and d["error"] == "tool_error: it broke" and d["reward"] is None
    assert [m["role"] for m in d["messages"]] == ["system", "user", "assistant", "tool", "assistant"]
    assert d["logs"][0]["message"] == "tool crashed" and "ValueError" in d["logs"][0]["exception"]
    assert [c["finish_reason"] for c in d["model_calls"]] == ["tool_calls", "stop"]
    assert d["model_calls"][0]["latency_s"] == 0.25 and d["prompt_tokens"] == 40
    assert d["sibling_ids"] == ["train-0-2", "train-0-3"] and d["siblings"][1]["reward"] == 1.5
    assert d["example_args"] == {"answer": 4} and d["run"] == "toy-run"
    d = client.get(f"{API}/rollouts/train-0-1").json()
    assert d["rewards"] == {"correct": 0.0} and d["zero_filled"] == ["format"] and d["reward"] == 0.0
    assert d["advantage"] == -1.0


def test_prev_and_next_follow_the_filtered_sorted_list(client):
    for params in [{"split": "train", "sort": "step", "order": "desc"},
                   {"split": "train", "sort": "reward", "order": "asc"},
                   {"split": "train", "sort": "reward", "order": "desc", "reward_max": 1.5}, {"sort": "advantage"}]:
        order = ids(client, **params)
        for i, rid in enumerate(order):
            d = client.get(f"{API}/rollouts/{rid}", params=params).json()
            assert d["prev_id"] == (order[i - 1] if i else None), (params, rid)
            assert d["next_id"] == (order[i + 1] if i + 1 < len(order) else None), (params, rid)


def test_metrics(client):
    m = client.get(f"{API}/metrics").json()
    assert [s["step"] for s in m["steps"]] == [0, 1, 2]
    assert m["keys"] == ["reward", "reward/correct", "loss", "entropy", "lr"]  # "note" is not numeric
    assert m["splits"]["train"]["termination_reasons"] == {"finished": 5, "tool_error": 1, "max_turns_exceeded": 1,
                                                           "timeout": 1}
    assert m["splits"]["train"]["by_step"] == []  # training steps carry the reward means
    [eval_step] = m["splits"]["eval"]["by_step"]
    assert eval_step == {"step": 2, "rollouts": 2, "failed": 0, "reward": 0.75, "reward/correct": 0.5,
                         "reward/style": 0.25}


def test_several_run_dirs_get_unique_ids(tmp_path):
    a = build_store(tmp_path / "a" / "same", run_id="x")
    b = build_store(tmp_path / "b" / "same", run_id="x")
    with TestClient(create_app([a, b]), base_url="http://127.0.0.1:8765") as c:
        runs = c.get("/api/runs").json()
        assert [r["id"] for r in runs] == ["same", "same-2"]
        assert c.get("/api/runs/same-2/rollouts/train-0-0").json()["run"] == "same-2"


def test_a_second_run_in_one_dir_gets_its_own_id(tmp_path):
    run_dir = build_store(tmp_path / "d", run_id="first")
    w = RunStoreWriter(run_dir)
    w.start_run(RunInfo(run_id="second", kind="eval", env="e.py:E", env_name="e", model="m", created_at=T0 + 1))
    w.close()
    with TestClient(create_app([run_dir]), base_url="http://127.0.0.1:8765") as c:
        assert [r["id"] for r in c.get("/api/runs").json()] == ["d", "d~second"]
        assert c.get("/api/runs/d~second/rollouts").json()["total"] == 0
        assert c.get("/api/runs/d/rollouts").json()["total"] == 10


def test_a_run_being_written_is_followed(client, run_dir):
    before = client.get(f"{API}/rollouts").json()["total"]
    w = RunStoreWriter(run_dir)
    w.write_rollouts([record(9, step=3)])
    w.close()
    assert client.get(f"{API}/rollouts").json()["total"] == before + 1
    assert client.get("/api/runs").json()[0]["rollouts"]["train"] == 9
