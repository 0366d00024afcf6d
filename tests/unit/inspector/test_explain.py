"""The inspector's explaining endpoints: reward arithmetic and group baseline, tokens and the loss mask,
siblings' replies, an example's history, search snippets, reward histograms, HTML error pages."""

import json
import sqlite3

import pytest
from fastapi.testclient import TestClient
from tests.unit.inspector.fake_store import mark_collapse_recovery

from looprl.inspector.app import create_app
from looprl.store.ledger import LedgerEntry
from looprl.store.writer import RunStoreWriter

API = "/api/runs/toy-run"


def test_reward_arithmetic_and_baseline(client):
    ex = client.get(f"{API}/rollouts/train-0-1/explain").json()
    assert ex["weights"] == {} and not ex["weights_configured"]
    assert ex["terms"] == [{"name": "correct", "value": 0.0, "weight": 1.0, "contribution": 0.0}] and ex["total"] == 0.0
    b = ex["baseline"]
    assert [m["reward"] for m in b["members"]] == [1.5, 0.0] and b["mean"] == 0.75 and b["std"] == 0.75
    assert b["advantage"] == -0.75 and not b["skipped"] and not b["normalize_std"]
    assert client.get(f"{API}/rollouts/eval-2-0/explain").json()["baseline"] is None  # eval: no advantage
    failed = client.get(f"{API}/rollouts/train-0-2/explain").json()["baseline"]  # a failure stays out of the mean
    assert [m["counted"] for m in failed["members"]] == [False, True] and failed["mean"] == 1.5 and failed["skipped"]


def test_weights_and_std_from_the_run_config(run_dir):
    with sqlite3.connect(run_dir / "looprl.db") as db:
        db.execute("UPDATE runs SET config=?", (json.dumps({"orchestrator": {
            "reward_weights": {"format": 2.0}, "normalize_std": True}}),))
    with TestClient(create_app([run_dir]), base_url="http://127.0.0.1:8765") as c:
        ex = c.get(f"{API}/rollouts/train-0-0/explain").json()
    assert {t["name"]: t["contribution"] for t in ex["terms"]} == {"correct": 1.0, "format": 1.0}
    assert ex["weights_configured"] and ex["baseline"]["normalize_std"]
    assert abs(ex["baseline"]["advantage"] - 0.75 / (0.75 + 1e-6)) < 1e-9


def test_tokens_loss_mask_and_missing_trainer_logprobs(client):
    view = client.get(f"{API}/rollouts/train-0-0/tokens").json()
    assert view["trained"] and not view["trainer_logprobs_recorded"] and view["tokenizer"] is None
    assert [c["trained"] for c in view["calls"]] == [False, False]  # no token ids recorded: nothing to train on
    assert not client.get(f"{API}/rollouts/eval-2-0/tokens").json()["trained"]


def test_tokens_show_the_rollout_correction_weight(run_dir):
    with sqlite3.connect(run_dir / "looprl.db") as db:
        db.execute("UPDATE runs SET config=?", (json.dumps({"trainer": {"loss": {"correction": {
            "type": "tis", "cap": 2.0}}}}),))
        db.execute("UPDATE model_calls SET completion_token_ids=?, completion_logprobs=?, trainer_logprobs=? "
                   "WHERE rollout_id='train-0-0' AND idx=0",
                   ("[5, 6]", json.dumps([-1.0, -2.0]), json.dumps([-1.5, 0.0])))
    with TestClient(create_app([run_dir]), base_url="http://127.0.0.1:8765") as c:
        [call] = [c for c in c.get(f"{API}/rollouts/train-0-0/tokens").json()["calls"] if c["idx"] == 0]
    # rho = exp(trainer - sampler): e^-0.5 kept, e^2 truncated at the cap 2
    assert call["correction_weights"] == [pytest.approx(0.6065306597), 2.0]


def test_replies_history_snippets_histogram(client):
    assert client.get(f"{API}/rollouts/train-0-0/replies").json() == {"train-0-0": "The answer is 4.",
                                                                       "train-0-1": "The answer is 4."}
    points = client.get(f"{API}/examples/ex0/history").json()["points"]
    assert [(p["split"], p["step"], p["rollouts"]) for p in points] == [
        ("train", 0, 2), ("train", 1, 2), ("train", 2, 2), ("eval", 2, 2)]
    assert points[2]["scored"] == 1 and points[2]["mean_reward"] == 2.0
    snips = client.get(f"{API}/snippets", params={"q": "needle", "ids": ["train-1-4", "train-0-0"]}).json()
    assert list(snips) == ["train-1-4"] and snips["train-1-4"]["match"] == "needle"
    assert snips["train-1-4"]["where"] == "message #2 (user)" and snips["train-1-4"]["after"] == " in the haystack"
    log = client.get(f"{API}/snippets", params={"q": "UNIQUE-log", "ids": ["train-1-5"]}).json()["train-1-5"]
    assert log["where"] == "log record (toy)" and log["match"] == "unique-log"
    hist = client.get(f"{API}/reward_histogram", params={"split": "train", "bins": 4}).json()
    assert hist["lo"] == 0.0 and hist["hi"] == 2.0 and hist["steps"] == [0, 1, 2]
    assert [sum(c) for c in hist["counts"]] == [3, 2, 1]


def test_unknown_pages_are_html_and_the_api_stays_json(client):
    for path in ("/runs/nope", "/runs/toy-run/rollouts/nope", "/nowhere"):
        r = client.get(path)
        assert r.status_code == 404 and r.headers["content-type"].startswith("text/html") and "All runs" in r.text
    assert "Back to run toy-run" in client.get("/runs/toy-run/rollouts/nope").text
    assert client.get("/api/runs/nope").json() == {"detail": "no run 'nope'"}
    assert client.get(f"{API}/rollouts/nope/explain").status_code == 404


def test_run_page_metrics_replay_the_stopped_exploring_warning(run_dir):
    with sqlite3.connect(run_dir / "looprl.db") as db:
        for step in (0, 1, 2):
            db.execute("UPDATE steps SET metrics=? WHERE step=?",
                       (json.dumps({"reward": 1.0, "groups_sampled": 4, "groups_skipped": 4}), step))
        db.execute("UPDATE rollouts SET advantage=NULL WHERE rollout_id='train-2-7'")
    with TestClient(create_app([run_dir]), base_url="http://127.0.0.1:8765") as c:
        [warning] = c.get(f"{API}/metrics").json()["exploration"]
    assert warning["step"] == 2 and warning["rollout_id"] == "train-2-7"
    assert warning["message"].startswith("the policy stopped exploring: at each of steps 0-2 most groups (4 of 4")


def test_no_exploration_warning_without_group_counts(client):
    assert client.get(f"{API}/metrics").json()["exploration"] == []


def test_run_page_metrics_carry_each_epochs_coverage_from_the_prompt_ledger(run_dir):
    writer = RunStoreWriter(run_dir)
    writer.record_draws("run-1", [LedgerEntry(group_id=f"d{i}", epoch=1, position=i, example_id=str(i),
                                                epoch_size=3, drawn_at=float(i)) for i in range(3)])
    writer.settle_draws("run-1", [("d0", "trained", 1, None), ("d1", "stale", 1, "old weights")])
    writer.close()
    with TestClient(create_app([run_dir]), base_url="http://127.0.0.1:8765") as c:
        [epoch] = c.get(f"{API}/metrics").json()["coverage"]
    assert epoch["outcomes"] == {"trained": 1, "stale": 1, "in_flight": 1} and epoch["size"] == 3
    assert epoch["line"] == "epoch 1: 1/3 examples trained, 1 dropped stale, 1 in flight"


def test_run_page_marks_collapse_recovery_interventions(run_dir):
    """When looprl stepped in (`[orchestrator.collapse]`), why and what it changed, from the step metrics."""
    mark_collapse_recovery(run_dir)
    with TestClient(create_app([run_dir]), base_url="http://127.0.0.1:8765") as c:
        marks = c.get(f"{API}/metrics").json()["interventions"]
    assert [(m["step"], m["action"], m["method"], m["value_from"], m["value_to"]) for m in marks] == [
        (1, "raise", "temperature", 1.0, 1.25), (2, "decay", "temperature", 1.25, 1.15),
        (2, "bonus_off", "temperature", 0.01, 0.0)]
    assert marks[0]["message"] == ("collapse recovery: 4 of 4 groups at step 1 without signal, policy not exploring; "
                                   "sampling temperature of the next groups 1 -> 1.25 (raise 1); entropy bonus 0.01 "
                                   "in the loss from now on")
    assert marks[2]["message"] == ("collapse recovery: the policy's entropy at step 1, 1.5 a token, is above 1.2 "
                                   "(entropy_ceiling 1 times 1.2, the mean over the run's first 3 steps that trained): "
                                   "the entropy bonus is off until the entropy is back under it")


@pytest.mark.parametrize(("action", "says"), [("give_up", "gave up"), ("hold", "stays at 1.5 and the raises start")])
def test_run_page_marks_a_plateau_as_one(run_dir, action, says):
    """A give-up, or the temperature's hold, where the reward had risen well above the run's first steps': the mark
    says a plateau, with both means, and carries `plateau` for a client."""
    marked = {"groups_sampled": 8, "groups_skipped": 5, "collapse/temperature": 1.5, "collapse/attempt": 0.0,
              f"collapse/{action}": 1.0, "collapse/reward_start": 0.2, "collapse/reward_recent": 1.25,
              "collapse/recent_steps": 10.0, "collapse/reward_best": 1.5}
    with sqlite3.connect(run_dir / "looprl.db") as db:
        db.execute("UPDATE steps SET metrics=? WHERE step=2", (json.dumps(marked),))
    with TestClient(create_app([run_dir]), base_url="http://127.0.0.1:8765") as c:
        [mark] = c.get(f"{API}/metrics").json()["interventions"]
    assert (mark["step"], mark["action"], mark["plateau"]) == (2, action, True)
    assert mark["progress"] == pytest.approx(1.05 / 1.3)
    assert ("a plateau (mean reward 0.20 over the run's first 3 steps, 1.25 over its last 10: 81% of the way to the "
            "best, 1.5)" in mark["message"]) and says in mark["message"]


def test_tokens_carry_the_policy_version_of_each_token(run_dir):
    """A reply that an in-flight weight update split: the token view and the rollout name each token's version."""
    with sqlite3.connect(run_dir / "looprl.db") as db:
        db.execute("UPDATE model_calls SET completion_token_ids=?, completion_logprobs=?, completion_policy_versions=? "
                   "WHERE rollout_id='train-0-0' AND idx=0", ("[5, 6, 7]", "[-1.0, -2.0, -0.5]", "[12, 13, 14]"))
    with TestClient(create_app([run_dir]), base_url="http://127.0.0.1:8765") as c:
        calls = c.get(f"{API}/rollouts/train-0-0/tokens").json()["calls"]
        detail = c.get(f"{API}/rollouts/train-0-0").json()
    assert [call["policy_versions"] for call in calls] == [[12, 13, 14], None]
    assert [call["completion_policy_versions"] for call in detail["model_calls"]] == [[12, 13, 14], None]
