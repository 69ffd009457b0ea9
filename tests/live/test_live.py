"""toolkit.live: running statistics, the renderer thread, and the Dashboard's wiring.

The Dashboard tests need no kernel: ipywidgets 8 objects work in-process (their comm is a
dummy), so a test clicks Run, waits, and reads the Image bytes and the status text.
Statistics are checked against independent references: per-task means with numpy, the
unbiased pass@k by direct binomial counting (scipy.special.comb), KL by hand with
math.fsum and against ``tk.mean_kl``.
"""

from __future__ import annotations

import math
import re
import threading
import time

import numpy as np
import pytest
from matplotlib.figure import Figure
from scipy.special import comb

import toolkit as tk
from toolkit.live._render import LiveRenderer, render_png
from toolkit.sim import ProgressTracker, run_progress

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


def _rows(n_tasks=6, k=4, seed=0, with_kl=True):
    rng = np.random.default_rng(seed)
    rows = []
    for task in range(n_tasks):
        p = rng.uniform(0.1, 0.9)
        for index in range(k):
            tokens = int(rng.integers(5, 40))
            logprob = float(-rng.uniform(0.1, 2.0) * tokens)
            row = {
                "schema_version": "1",
                "prompt": f"task {task}",
                "scenario_id": f"sc-{task}",
                "rollout_index": index,
                "steps": [],
                "final_text": "",
                "reward": int(rng.uniform() < p),
            }
            if with_kl:
                row["logprob"] = logprob
                row["n_tokens"] = tokens
                row["ref_logprob"] = logprob - float(rng.normal(0.05, 0.2)) * tokens
            rows.append(row)
    return rows


def _unbiased_pass_at_k(n, c, k):
    return 1.0 - comb(n - c, k, exact=True) / comb(n, k, exact=True)


def test_tracker_pass_numbers_match_independent_counts():
    rows = _rows(n_tasks=7, k=4)
    tracker = ProgressTracker(k=4, reference="ref_logprob")
    tracker.extend(rows)
    point = tracker.point(elapsed=1.0)
    by_task = {}
    for row in rows:
        by_task.setdefault(row["scenario_id"], []).append(row["reward"])
    expected_pass_1 = float(np.mean([np.mean(v) for v in by_task.values()]))
    expected_pass_k = float(np.mean([_unbiased_pass_at_k(len(v), sum(v), 4) for v in by_task.values()]))
    assert point.n_rows == 28 and point.n_tasks == 7 and point.k == 4
    assert point.pass_at_1 == pytest.approx(expected_pass_1)
    assert point.pass_at_k == pytest.approx(expected_pass_k)
    assert point.pass_at_1_low <= point.pass_at_1 <= point.pass_at_1_high
    assert point.pass_at_k_low <= point.pass_at_k <= point.pass_at_k_high


def test_tracker_kl_matches_hand_sum_and_mean_kl():
    rows = _rows(n_tasks=5, k=3)
    tracker = ProgressTracker(reference="ref_logprob", seed=3)
    tracker.extend(rows)
    point = tracker.point()
    by_hand = math.fsum(r["logprob"] - r["ref_logprob"] for r in rows) / sum(r["n_tokens"] for r in rows)
    assert point.mean_kl == pytest.approx(by_hand, rel=1e-12)
    assert point.mean_kl == pytest.approx(tk.mean_kl(rows).mean_kl, abs=1e-6)
    assert point.n_kl_rows == len(rows) and point.n_kl_tokens == sum(r["n_tokens"] for r in rows)
    assert point.mean_kl_low <= point.mean_kl <= point.mean_kl_high


def test_kl_interval_is_a_task_bootstrap():
    """Each task's rows identical -> tasks are the unit: a constant per-task ratio gives a
    zero-width interval even though rows differ in length."""
    rows = []
    for task in range(4):
        for index, tokens in enumerate((10, 30)):
            rows.append({"prompt": f"t{task}", "scenario_id": f"t{task}", "steps": [], "final_text": "",
                         "schema_version": "1", "logprob": -1.0 * tokens, "n_tokens": tokens,
                         "ref_logprob": -1.25 * tokens})
    point = run_progress(rows, reference="ref_logprob", checkpoints=1).points[-1]
    assert point.mean_kl == pytest.approx(0.25)
    assert point.mean_kl_low == pytest.approx(0.25) and point.mean_kl_high == pytest.approx(0.25)


def test_reference_policy_scores_rows_like_score_total():
    tools = tk.dataset_path("tools/airline_support.json")
    agent = tk.seeded_agent(tools, seed=1)
    reference = tk.seeded_agent(tools, seed=1, rate=0.1)
    rows = [tk.run_rollout(agent, "Please cancel booking ABC123", tools=tools, rollout_index=i, logprobs=True)
            for i in range(6)]
    point = run_progress(rows, reference=reference, checkpoints=1).points[-1]
    expected = math.fsum(r["logprob"] - reference.score_total(r) for r in rows) / sum(r["n_tokens"] for r in rows)
    assert point.mean_kl == pytest.approx(expected, rel=1e-9)
    # a policy against itself: KL exactly 0
    assert run_progress(rows, reference=agent, checkpoints=1).points[-1].mean_kl == pytest.approx(0.0, abs=1e-9)


def test_rows_impossible_under_the_reference_are_counted_not_averaged():
    rows = _rows(n_tasks=4, k=2)
    rows[0]["ref_logprob"] = float("-inf")
    point = run_progress(rows, reference="ref_logprob", checkpoints=1).points[-1]
    assert point.n_kl_impossible == 1 and point.n_kl_rows == 7
    kept = rows[1:]
    assert point.mean_kl == pytest.approx(
        math.fsum(r["logprob"] - r["ref_logprob"] for r in kept) / sum(r["n_tokens"] for r in kept))
    assert "probability 0 under the reference" in point.note


def test_no_grader_and_no_logprobs_say_why():
    rows = [{"prompt": "p", "steps": [], "final_text": "", "schema_version": "1"}] * 3
    point = run_progress(rows, checkpoints=1).points[-1]
    assert point.pass_at_1 is None and point.mean_kl is None
    assert "grader" in point.note


def test_failing_reference_is_reported_not_raised():
    def broken(row):
        raise RuntimeError("reference offline")

    point = run_progress(_rows(n_tasks=3, k=2), reference=broken, checkpoints=1).points[-1]
    assert point.mean_kl is None
    assert "reference offline" in point.note
    with pytest.raises(TypeError, match="score_total"):
        ProgressTracker(reference=3.5)


def test_run_progress_checkpoints_cover_every_row_in_order():
    rows = _rows(n_tasks=6, k=4)
    progress = run_progress(rows, k=4, checkpoints=5)
    assert [p.n_rows for p in progress.points] == [5, 10, 14, 19, 24]
    assert len(progress.to_pandas()) == 5
    with pytest.raises(ValueError, match="checkpoints"):
        run_progress(rows, checkpoints=0)


def test_kl_sample_is_seeded_and_not_landing_order():
    rows = _rows(n_tasks=10, k=4)
    first = ProgressTracker(reference="ref_logprob", seed=5)
    first.extend(rows)
    first.point(score_seconds=0.0)
    again = ProgressTracker(reference="ref_logprob", seed=5)
    again.extend(rows)
    again.point(score_seconds=0.0)
    assert first.point(score_seconds=0.0).mean_kl == again.point(score_seconds=0.0).mean_kl
    scored = {t for t, entry in first._kl_by_task.items() if entry.differences}  # noqa: SLF001
    assert scored != {"sc-0", "sc-1"}  # the first chunk is not the first 8 rows landed


def test_scoring_budget_lets_kl_lag_then_catch_up():
    calls = []

    def slow(row):
        calls.append(1)
        time.sleep(0.002)
        return row["ref_logprob"]

    tracker = ProgressTracker(reference=slow)
    tracker.extend(_rows(n_tasks=10, k=4))
    partial = tracker.point(score_seconds=0.0)
    assert partial.n_kl_rows == 8  # one chunk, then the budget is spent
    # a sample is said to be one, and of how many rows, wherever the point is printed
    assert partial.n_kl_pending == 32 and partial.kl_is_sample
    assert "8 of 40 rows scored" in partial.note
    assert "over a random sample of 8 of 40 rows" in str(partial)
    full = tracker.point()
    assert full.n_kl_rows == 40 and len(calls) == 40
    assert full.n_kl_pending == 0 and not full.kl_is_sample
    assert "over 40 rows" in str(full) and "sample" not in str(full)


def test_run_progress_figure_draws_bands_and_n():
    progress = run_progress(_rows(n_tasks=8, k=4), k=4, reference="ref_logprob", checkpoints=6)
    figure = tk.plots.run_progress_figure(progress)
    assert isinstance(figure, Figure)
    left, right = figure.axes
    assert left.collections and right.collections  # interval bands
    labels = [t.get_text() for t in left.get_legend().get_texts()]
    assert labels == ["pass@1 (n=8 tasks)", "pass@4 (n=8 tasks)", "pass@1 anytime-valid 95%"]
    assert "(32 rows, " in right.get_legend().get_texts()[0].get_text()


def test_a_kl_sample_is_called_a_sample_in_the_figure():
    """With rows still waiting for the reference, the figure's KL legend and title say the
    mean is over a random sample, of how many rows; once all are scored, neither does."""
    tracker = ProgressTracker(reference=lambda row: (time.sleep(0.002), row["ref_logprob"])[1])
    tracker.extend(_rows(n_tasks=10, k=4))
    partial = tracker.point(score_seconds=0.0)
    figure = tk.plots.run_progress_figure([partial], legend=False)
    right = figure.axes[1]
    assert "a random sample of 8 of 40 rows" in right.get_title()
    figure = tk.plots.run_progress_figure([partial], legend=True)
    assert "a random sample of 8 of 40 rows" in figure.axes[1].get_legend().get_texts()[0].get_text()
    full = tracker.point()
    figure = tk.plots.run_progress_figure([partial, full], legend=True)
    label = figure.axes[1].get_legend().get_texts()[0].get_text()
    assert "40 rows" in label and "sample" not in label


def test_empty_figure_says_what_is_missing():
    figure = tk.plots.run_progress_figure([])
    texts = [t.get_text() for ax in figure.axes for t in ax.texts]
    assert any("no rows" in t for t in texts)
    assert render_png([])[:8] == PNG_MAGIC


def test_renderer_frames_while_rows_land_and_final_has_all():
    tracker = ProgressTracker(k=4, reference="ref_logprob")
    frames = []
    lock = threading.Lock()

    def on_frame(png, point, final):
        with lock:
            frames.append((png[:8], point.n_rows, final))

    started = time.monotonic()
    renderer = LiveRenderer(tracker, on_frame, clock=lambda: time.monotonic() - started,
                            refresh_seconds=0.05, max_duty=1.0).start()
    rows = _rows(n_tasks=10, k=4)
    for row in rows:
        tracker.add(row)
        time.sleep(0.02)
    renderer.finish()
    assert renderer.join(30)
    assert renderer.error is None
    assert len(frames) >= 3
    assert all(magic == PNG_MAGIC for magic, _, _ in frames)
    counts = [n for _, n, _ in frames]
    assert counts == sorted(counts)
    assert frames[-1] == (PNG_MAGIC, 40, True)
    assert [f for f in frames if f[2]] == [frames[-1]]


def test_renderer_duty_cap_spaces_frames():
    """With a 0.1% duty cap a frame costing t seconds of CPU is followed by >= 999 t of sleep.

    (A 1% cap made the test depend on speed: a frame under 10 ms of CPU, as on an idle machine,
    let a second live frame in within the 1 s window. A PNG frame costs well over 1 ms, so at
    0.1% the next frame is at least 1 s away on any machine.)"""
    tracker = ProgressTracker()
    times = []
    renderer = LiveRenderer(tracker, lambda png, point, final: times.append(time.perf_counter()),
                            clock=lambda: 0.0, refresh_seconds=0.01, max_duty=0.001, max_wait_seconds=60).start()
    for row in _rows(n_tasks=2, k=2, with_kl=False):
        tracker.add(row)
    time.sleep(1.0)
    renderer.finish()
    assert renderer.join(30)
    # first frame at once, the final one on finish(); nothing in between
    assert len(times) == 2
    assert renderer.busy_seconds > 0  # it measured its own CPU (how much is bench_live.py's job, not a unit test's)


# ---------------------------------------------------------------------------------------
# Dashboard wiring (no kernel: ipywidgets objects work in-process)
# ---------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def offline():
    tools = tk.dataset_path("tools/airline_support.json")
    policy = tk.dataset_path("tools/airline_support_policy.md").read_text()
    return {
        "agent": tk.seeded_agent(tools, seed=0),
        "tools": tools,
        "system_prompt": policy,
        "grader": tk.conduct_grader(policy),
        "reference": tk.seeded_agent(tools, rate=0.1, seed=0),
    }


def _dashboard(offline, **kwargs):
    settings = dict(budget=24, repeats=4, repeat_policy="fixed", logprobs=True, concurrency=2, refresh_seconds=0.05,
                    max_duty=1.0)
    settings.update(kwargs)
    return tk.Dashboard(**offline, **settings)


def test_controls_and_advanced_section_come_from_runknobs(offline):
    dashboard = _dashboard(offline)
    assert set(dashboard.controls) == {"mode", "budget", "situations", "phrasings", "repeats", "fault_rate",
                                       "hard_share", "patience", "concurrency", "seed", "reproducible", "logprobs"}
    specs = tk.RunKnobs.describe()
    expected = {s.name for s in specs} - {"seed", "concurrency", "patience"}
    assert set(dashboard.advanced_controls) == expected
    for spec in specs:
        if spec.name in expected:
            control = dashboard.advanced_controls[spec.name]
            assert spec.reason in control.tooltip and repr(spec.default) in control.tooltip
            assert control.disabled == (not spec.used)
    assert dashboard.controls["patience"].options == tuple(tk.RunKnobs.spec("patience").choices)
    assert dashboard.controls["budget"].value == 24 and dashboard.controls["logprobs"].value is True


def test_invalid_knob_is_refused_with_the_engines_message(offline):
    dashboard = _dashboard(offline)
    control = dashboard.advanced_controls["collect_wait_s"]
    with pytest.raises(tk.KnobError) as engine_error:
        tk.RunKnobs.validate("collect_wait_s", -1.0)
    control.value = -1.0
    assert control.value == tk.RunKnobs.spec("collect_wait_s").default  # reverted
    assert html_unescape(dashboard.message.value).endswith(str(engine_error.value) + "</span>")
    control.value = 0.2
    assert dashboard.message.value == ""
    assert dashboard.simulate_kwargs()["advanced"] == {"collect_wait_s": 0.2}
    # a JSON-typed knob (nullable float) goes through the same check
    text = dashboard.advanced_controls["user_temperature"]
    text.value = "7"
    assert text.value == "" and "user_temperature" in dashboard.message.value
    text.value = "0.7"
    assert dashboard.simulate_kwargs()["advanced"]["user_temperature"] == 0.7
    nullable_bool = dashboard.advanced_controls["mutate_graded_failures"]
    assert nullable_bool.label == "engine decides"
    nullable_bool.value = False
    assert dashboard.simulate_kwargs()["advanced"]["mutate_graded_failures"] is False
    nullable_bool.value = "engine decides"
    assert "mutate_graded_failures" not in dashboard.simulate_kwargs()["advanced"]
    dashboard.controls["concurrency"].value = 0
    assert dashboard.controls["concurrency"].value == 2 and "concurrency" in dashboard.message.value


def html_unescape(text):
    import html

    return html.unescape(text)


def test_misspelled_simulate_keyword_names_the_nearest(offline):
    with pytest.raises(TypeError, match="fault_rate"):
        tk.Dashboard(**offline, fault_rat=0.3)
    with pytest.raises(tk.ConfigError, match="on_row"):
        tk.Dashboard(**offline, on_row=print)


def test_sliders_pass_only_when_moved(offline):
    dashboard = _dashboard(offline)
    assert "fault_rate" not in dashboard.simulate_kwargs()  # the mode's preset applies
    dashboard.controls["fault_rate"].value = 0.25
    assert dashboard.simulate_kwargs()["fault_rate"] == 0.25
    assert "fault_rate" in _dashboard(offline, fault_rate=0.5).simulate_kwargs()


def test_click_run_draws_frames_and_finishes(offline):
    dashboard = _dashboard(offline)
    first_image = dashboard.image.value
    dashboard.controls["budget"].value = 32
    dashboard.controls["fault_rate"].value = 0.3
    dashboard.advanced_controls["stop_grace"].value = 2.0
    started = time.monotonic()
    dashboard.run_button.click()
    assert time.monotonic() - started < 1.0  # the callback only starts threads
    assert dashboard.running and dashboard.run_button.disabled
    assert dashboard.wait(120)
    assert dashboard.error is None, dashboard.error
    data = dashboard.data
    assert len(data.rows) == 32 == len(dashboard.rows)
    assert [r.get("rollout_index") for r in data.rows] == [r.get("rollout_index") for r in dashboard.rows]
    report = data.report()
    assert report["fault_rate"] == 0.3 and report["knobs"]["stop_grace"] == 2.0
    status = dashboard.status.value
    assert "finished" in status and "rows 32" in status and "budget=32" in status
    assert f"stopped_because={data.stopped_because}" in status and "fault_rate=0.3" in status
    image = dashboard.image.value
    assert image[:8] == PNG_MAGIC and image != first_image
    assert dashboard._renderer.frames >= 2  # noqa: SLF001
    last = dashboard.progress.points[-1]
    assert last.n_rows == 32 and last.mean_kl is not None
    # every row is either in the KL or counted as impossible under the reference
    assert last.n_kl_rows + last.n_kl_impossible == 32 and last.n_kl_rows > 0
    assert 0 <= last.pass_at_1 <= 1
    assert "<table" in dashboard.table.value
    figure = dashboard.figure(checkpoints=4)
    assert isinstance(figure, Figure) and len(figure.axes) == 2
    assert not dashboard.run_button.disabled and dashboard.stop_button.disabled


def test_stop_keeps_rows_and_says_stopped(offline):
    dashboard = _dashboard(offline, budget=5000, concurrency=2)
    dashboard.run()
    deadline = time.monotonic() + 60
    while len(dashboard.rows) < 5 and time.monotonic() < deadline:
        time.sleep(0.05)
    with pytest.raises(tk.errors.DashboardBusy):
        dashboard.run()
    dashboard.stop_button.click()
    assert dashboard.wait(60)
    data = dashboard.data
    assert data.stopped_because == "stopped"
    assert 5 <= len(data.rows) < 5000
    assert len(dashboard.rows) == len(data.rows)
    assert "stopped_because=stopped" in dashboard.status.value
    assert dashboard.progress.points[-1].n_rows == len(data.rows)


def test_a_failing_run_shows_the_error_and_frees_the_button(offline):
    dashboard = _dashboard(offline)
    dashboard.run(mode="no-such-mode")
    assert dashboard.wait(60)
    assert dashboard.data is None and dashboard.error
    assert "failed" in dashboard.status.value
    assert not dashboard.run_button.disabled


def test_displaying_a_dashboard_shows_its_widget_tree(offline):
    dashboard = _dashboard(offline)
    bundle = dashboard._repr_mimebundle_()
    view = bundle["application/vnd.jupyter.widget-view+json"]
    assert view["model_id"] == dashboard.widget.model_id
    children = dashboard.widget.children
    assert dashboard.image in children and dashboard.status in children and dashboard.table in children
    assert dashboard.image.value[:8] == PNG_MAGIC  # an empty frame before any run
    assert "idle" in dashboard.status.value and "Dashboard idle" in repr(dashboard)


# ---------------------------------------------------------------------------------------
# A model spec as agent and reference: the backend's logprobs and reference_logprobs,
# offline against the local OpenAI-protocol server (tests/_chat_server.py)
# ---------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def chat_server():
    import sys
    from pathlib import Path

    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
    from _chat_server import ChatServer

    with ChatServer() as running:
        yield running


def _model_dashboard(agent, reference, **kwargs):
    settings = dict(tools=tk.dataset_path("tools/airline_support.json"), reference=reference, budget=6, repeats=2,
                    logprobs=True, concurrency=2, refresh_seconds=0.05, max_duty=1.0)
    settings.update(kwargs)
    return tk.Dashboard(agent, **settings)


def _prompt_logprob_calls(server, model):
    return [body for path, body in server.requests
            if path.endswith("/chat/completions") and body.get("model") == model and body.get("prompt_logprobs") is not None]


@pytest.mark.parametrize("form", ["vllm spec", "bare url"])
def test_dashboard_with_a_model_spec_draws_kl_from_the_backend(chat_server, form):
    """Agent and reference are served models: the agent's rows carry the backend's
    logprobs, the reference scores them with prompt logprobs. The server gives every token
    the same logprob under every model (token_logprob), so the exact KL is 0 on every row;
    a scoring path that misaligned turns or tokens would move it away from 0."""
    from _chat_server import token_logprob, tokenize

    url = chat_server.url
    if form == "vllm spec":
        agent, reference, reference_model = f"vllm:echo@{url}", f"vllm:chatty@{url}", "chatty"
    else:
        agent, reference, reference_model = url, url, "echo"  # a bare URL serves the first listed model
    before = len(_prompt_logprob_calls(chat_server, reference_model))
    dashboard = _model_dashboard(agent, reference)
    dashboard.run()
    assert dashboard.wait(120)
    assert dashboard.error is None, dashboard.error
    rows = dashboard.rows
    assert len(rows) == 6 and all(r.get("logprob") is not None and r.get("n_tokens") for r in rows)
    # the row's logprob is the server's: the sum of token_logprob over each reply's tokens
    for row in rows:
        replies = [s.get("text") or "" for s in row["steps"] if s.get("logprob") is not None]
        assert row["logprob"] == pytest.approx(math.fsum(token_logprob(t) for text in replies for t in tokenize(text)))
    last = dashboard.progress.points[-1]
    assert last.n_kl_rows == 6 and last.mean_kl == pytest.approx(0.0, abs=1e-9)
    assert last.n_kl_tokens == sum(r["n_tokens"] for r in rows)
    assert len(_prompt_logprob_calls(chat_server, reference_model)) - before >= 6  # one per assistant turn
    assert "KL 0.0000/token over 6 rows" in dashboard.status.value
    # the paper figure rescored every row through the same path
    figure = dashboard.figure(checkpoints=3)
    assert isinstance(figure, Figure)


def test_tracker_with_a_bare_url_reference_is_not_read_as_a_field(chat_server):
    rows = [tk.run_rollout(tk.model_agent(f"vllm:echo@{chat_server.url}"), f"hello {i}", rollout_index=i,
                           logprobs=True) for i in range(3)]
    tracker = ProgressTracker(reference=chat_server.url)
    tracker.extend(rows)
    point = tracker.point()
    assert point.n_kl_rows == 3 and point.mean_kl == pytest.approx(0.0, abs=1e-9), point.note


def test_misspelled_model_spec_reference_names_the_nearest_prefix():
    with pytest.raises(tk.ConfigError, match="vllm"):
        ProgressTracker(reference="vlm:echo@http://127.0.0.1:9/v1")
    with pytest.raises(tk.ConfigError, match="http://"):
        ProgressTracker(reference="localhost:8000/v1")
    with pytest.raises(tk.ConfigError, match="vllm"):  # at construction, not when Run is pressed
        tk.Dashboard(reference="vlm:echo@http://127.0.0.1:9/v1")


def test_a_reference_field_no_row_carries_is_named_in_the_note():
    rows = _rows(n_tasks=3, k=2)
    point = run_progress(rows, reference="ref_lopgrob", checkpoints=1).points[-1]
    assert point.mean_kl is None
    assert "6 rows with logprobs have no reference log-probability" in point.note
    assert "'ref_lopgrob'" in point.note


def test_an_unreachable_model_reference_is_reported_not_raised():
    rows = _rows(n_tasks=3, k=2)
    for row in rows:
        row.pop("ref_logprob")
        row["steps"] = [{"text": "answer", "logprob": row["logprob"], "n_tokens": row["n_tokens"]}]
    # port 9 (discard) on loopback: nothing listens, the connection is refused at once
    point = run_progress(rows, reference="vllm:echo@http://127.0.0.1:9/v1", checkpoints=1).points[-1]
    assert point.mean_kl is None
    assert "reference scoring failed" in point.note


def test_status_and_table_follow_rows_between_frames():
    """Frames are CPU-capped (max_duty); the status line and the latest-rows table must not
    wait for them: they refresh from the row callback up to 4 times a second."""

    def agent(messages, tools):  # a chat-shaped agent that takes 0.1 s per reply
        time.sleep(0.1)
        return {"role": "assistant", "content": "ok"}

    dashboard = tk.Dashboard(agent, budget=30, concurrency=2, max_duty=0.001)
    changes = {"status": [], "table": []}
    dashboard.status.observe(lambda change: changes["status"].append(time.monotonic()), names="value")
    dashboard.table.observe(lambda change: changes["table"].append(time.monotonic()), names="value")
    dashboard.run()
    assert dashboard.wait(120)
    assert dashboard.error is None, dashboard.error
    assert len(dashboard.rows) == 30
    seconds = dashboard._ended_at - dashboard._started_at  # noqa: SLF001
    assert seconds >= 30 * 0.1 / 2
    frames = dashboard._renderer.frames  # noqa: SLF001
    assert frames <= 2 + int(seconds // 3)  # the first frame, one per 3 s ceiling, the final one
    # 4 refreshes a second while rows land: at least half that rate counted here (a loaded
    # box delays the row callback), and well above the frame count
    assert len(changes["table"]) >= max(4, int(seconds * 2)) > frames
    assert len(changes["status"]) >= max(4, int(seconds * 2))


@pytest.mark.parametrize("keyword, value, message", [
    ("mode", "explor", "did you mean 'explore'"),
    ("fault_rate", 2.0, r"fault_rate must be a number in \[0, 1\]; got 2.0"),  # a slider would clamp it to 1.0
    ("hard_share", -0.1, "hard_share"),
    ("budget", 0, "budget must be an integer >= 1; got 0"),
    ("budget", "ten", "budget must be an integer >= 1; got 'ten'"),
    ("repeats", 2.5, "repeats"),
    ("logprobs", "yes", "logprobs"),
])
def test_bad_starting_values_are_refused_not_clamped(keyword, value, message):
    with pytest.raises(tk.ConfigError, match=message):
        tk.Dashboard(**{keyword: value})


@pytest.mark.parametrize("keyword, value", [("fault_rate", 2.0), ("budget", 0), ("repeats", 2.5), ("mode", "explor"), ("logprobs", "yes")])
def test_the_dashboard_refuses_what_simulate_refuses_with_the_same_message(keyword, value):
    # one check (SimulateConfig) behind both: the dashboard cannot drift from the engine
    with pytest.raises(tk.ConfigError) as engine_error:
        tk.simulate(**{"budget": 1, keyword: value, "progress": False})
    with pytest.raises(tk.ConfigError) as dashboard_error:
        tk.Dashboard(**{keyword: value})
    assert str(dashboard_error.value) == str(engine_error.value)


def test_bad_starting_patience_gets_the_engines_message():
    with pytest.raises(tk.KnobError) as engine_error:
        tk.RunKnobs.validate("patience", "slow")
    with pytest.raises(tk.KnobError) as dashboard_error:
        tk.Dashboard(patience="slow")
    assert str(dashboard_error.value) == str(engine_error.value)


# ---------------------------------------------------------------------------------------
# The README's line (no grader, no reference): both panels filled, and said with what
# ---------------------------------------------------------------------------------------


@pytest.mark.parametrize("with_agent", [False, True], ids=["engine's seeded agent", "tk.seeded_agent"])
def test_readme_dashboard_with_no_grader_and_no_reference_fills_both_panels(offline, with_agent):
    tools, policy = offline["tools"], offline["system_prompt"]
    agent = tk.seeded_agent(tools, seed=0) if with_agent else None
    dashboard = tk.Dashboard(agent=agent, tools=tools, system_prompt=policy, budget=24, repeats=4,
                             repeat_policy="fixed", concurrency=2, refresh_seconds=0.05, max_duty=1.0)
    assert dashboard.controls["logprobs"].value is True  # KL needs them; on for the default reference
    assert "conduct grader" in dashboard.grading and "conduct grader" in dashboard.about.value
    assert dashboard.kl_reference.startswith("tk.seeded_agent(rate=0.1, seed=0)")
    dashboard.run()
    assert dashboard.wait(120)
    assert dashboard.error is None, dashboard.error
    rows = dashboard.rows
    # graded by the conduct grader of the policy (simulate(grade="conduct")), every row
    report = dashboard.data.report()
    assert report["grade"] == "conduct" and report["grader"] == "conduct"
    assert all(r["label_source"] == "conduct" and r["reward"] is not None for r in rows)
    last = dashboard.progress.points[-1]
    assert last.pass_at_1 is not None and last.pass_at_k is not None and last.mean_kl is not None
    # the KL is against exactly the reference named: the same seeded policy at rate 0.1
    named = tk.seeded_agent(tools, rate=0.1, seed=0)
    expected = math.fsum(r["logprob"] - named.score_total(r) for r in rows) / sum(r["n_tokens"] for r in rows)
    assert last.mean_kl == pytest.approx(expected, rel=1e-9)
    figure = dashboard.figure(checkpoints=3)
    left, right = figure.axes
    assert left.lines and right.lines
    assert not left.texts and not right.texts, [t.get_text() for t in left.texts + right.texts]  # no "why empty" notes


def test_grade_false_runs_ungraded_and_the_panel_says_what_to_pass(offline):
    dashboard = tk.Dashboard(tools=offline["tools"], system_prompt=offline["system_prompt"], grade=False, budget=8,
                             concurrency=2, refresh_seconds=0.05, max_duty=1.0)
    assert "grade=False" in dashboard.grading
    dashboard.run()
    assert dashboard.wait(120) and dashboard.error is None, dashboard.error
    assert all(r.get("reward") is None for r in dashboard.rows)
    last = dashboard.progress.points[-1]
    assert last.pass_at_1 is None and "pass a grader=" in last.note


def test_another_agent_without_reference_is_told_what_to_pass():
    def agent(messages, tools):
        return {"role": "assistant", "content": "ok"}

    dashboard = tk.Dashboard(agent)
    assert dashboard.kl_reference.startswith("none: pass reference=")
    assert "pass reference=" in dashboard.about.value
    assert dashboard.controls["logprobs"].value is False  # an arbitrary agent may have no logprobs


def test_status_text_is_the_status_line_without_html(offline):
    import html

    dashboard = _dashboard(offline, budget=8)
    dashboard.run()
    assert dashboard.wait(120) and dashboard.error is None, dashboard.error
    text = dashboard.status_text
    assert text.startswith("status: finished · rows 8 ") and "<" not in text
    assert html.unescape(re.sub(r"<[^>]+>", "", dashboard.status.value)) == text
    plain = dashboard._repr_mimebundle_()["text/plain"]
    assert "<span" not in plain and "<div" not in plain and text in plain


def test_a_kl_sample_is_labelled_a_sample_in_the_status(offline):
    """A reference slower than the final frame's 2 s scoring budget (8 rows of 0.26 s is one
    chunk of 2.08 s) leaves rows unscored: the status must say the KL is over a sample, of
    how many rows, and why, rather than "KL over 24 rows" of 64."""
    reference = tk.seeded_agent(offline["tools"], rate=0.1, seed=0)

    def slow_reference(row):
        time.sleep(0.26)
        return reference.score_total(row)

    settings = {**offline, "reference": slow_reference}
    dashboard = tk.Dashboard(**settings, budget=64, repeats=4, repeat_policy="fixed", logprobs=True, concurrency=2,
                             refresh_seconds=0.05, max_duty=1.0)
    dashboard.run()
    assert dashboard.wait(180) and dashboard.error is None, dashboard.error
    last = dashboard.progress.points[-1]
    assert last.kl_is_sample and last.n_kl_rows + last.n_kl_impossible + last.n_kl_pending == 64
    text = dashboard.status_text
    assert f"over a random sample of {last.n_kl_rows} of {last.n_kl_rows + last.n_kl_pending} rows" in text, text
    assert "at most 2 s per final frame" in text and "dashboard.figure() scores every row" in text, text


def test_advanced_tooltips_say_no_ceiling(offline):
    dashboard = _dashboard(offline)
    tooltip = dashboard.advanced_controls["tier_mix_min_rows"].tooltip
    assert "allowed 1 .. no ceiling" in tooltip and "4611686018427387904" not in tooltip


def _interleaved(n_tasks=120, k=4, rate=0.85, seed=0):
    """Rows of tasks landing interleaved (a task completes when its k-th row lands)."""
    rng = np.random.default_rng(seed)
    rows = [{"scenario_id": f"t{i}", "rollout_index": j, "reward": int(rng.random() < rate)}
            for i in range(n_tasks) for j in range(k)]
    order = rng.permutation(len(rows))
    return [rows[i] for i in order]


def test_tracker_decides_where_the_confidence_sequence_first_excludes_the_threshold():
    """Reference: tk.stats.confidence_sequence over each task's mean, taken in the order
    tasks got their k-th row, recomputed here from the rows."""
    rows = _interleaved()
    tracker = ProgressTracker(k=4, threshold=0.7)
    tracker.extend(rows)
    point = tracker.point()
    seen, values, completed_at = {}, [], []
    for position, row in enumerate(rows, start=1):
        seen.setdefault(row["scenario_id"], []).append(row["reward"])
        if len(seen[row["scenario_id"]]) == 4:
            values.append(sum(seen[row["scenario_id"]]) / 4)
            completed_at.append(position)
    sequence = tk.stats.confidence_sequence(values)
    at, side = sequence.decided(0.7)
    assert point.decided == side == "above"
    assert point.decided_at_rows == completed_at[at - 1]
    assert point.n_tasks_complete == len(values)
    assert point.sequence_low == pytest.approx(sequence.low[-1]) and point.sequence_high == pytest.approx(sequence.high[-1])
    assert f"decided above 0.7 at {point.decided_at_rows} rows" in str(point)
    # no question, no decision; the bounds are there all the same
    plain = ProgressTracker(k=4)
    plain.extend(rows)
    unasked = plain.point()
    assert unasked.decided is None and unasked.sequence_low == point.sequence_low
    with pytest.raises(tk.ConfigError, match="threshold"):
        ProgressTracker(threshold=1.5)


def test_the_figure_draws_the_anytime_bounds_and_marks_the_decision():
    progress = run_progress(_interleaved(), k=4, threshold=0.7, checkpoints=8)
    figure = tk.plots.run_progress_figure(progress)
    labels = [t.get_text() for t in figure.axes[0].get_legend().get_texts()]
    assert "pass@1 anytime-valid 95%" in labels and "threshold 0.7" in labels
    decided = progress.points[-1].decided_at_rows
    assert f"decided above at {decided} rows" in labels
    live = tk.plots.run_progress_figure(progress, layout=None, legend=False)
    assert "decided above 0.7" in live.axes[0].get_title()
    undecided = run_progress(_interleaved(rate=0.7, n_tasks=30), k=4, threshold=0.7, checkpoints=4)
    title = tk.plots.run_progress_figure(undecided, layout=None, legend=False).axes[0].get_title()
    assert "0.7 not decided yet" in title


def test_dashboard_threshold_reaches_the_status_line(offline):
    dashboard = tk.Dashboard(**offline, budget=48, repeats=4, repeat_policy="fixed", threshold=0.3,
                             refresh_seconds=0.05, max_duty=1.0)
    dashboard.run()
    assert dashboard.wait(180) and dashboard.error is None, dashboard.error
    last = dashboard.progress.points[-1]
    assert last.threshold == 0.3
    if last.decided:
        assert f"decided {last.decided} 0.3 at {last.decided_at_rows} rows (anytime-valid)" in dashboard.status_text
    else:
        assert "0.3 not decided by the anytime-valid bounds" in dashboard.status_text
    with pytest.raises(tk.ConfigError, match="threshold"):
        tk.Dashboard(**offline, threshold=0)
