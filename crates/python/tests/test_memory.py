"""A real round trip through the extension: build, write, read under a
budget, manage, forget, save and load, on the registry's substrates."""

import concurrent.futures
import json

import pytest

import submem
from conftest import conversation


def test_substrates_lists_every_family_with_settings():
    listed = submem.substrates()
    names = {s.name for s in listed}
    assert {"m1", "m2", "m1-fill", "m2-fill", "hybrid-fill", "flexa", "m10"} <= names
    m2 = next(s for s in listed if s.name == "m2")
    assert m2.family and m2.method
    assert any(setting.key == "stopwords" for setting in m2.settings)
    assert all(isinstance(s, submem.SubstrateInfo) for s in listed)


def test_bm25_round_trip_under_budget(m2):
    recall = m2.read("Which city did Carla move to?", budget=200)
    assert isinstance(recall, submem.Recall)
    assert "Lisbon" in recall.text
    assert recall.sources[0] == "D1:3"
    assert 0 < recall.tokens <= 200
    source, score, resolution = recall.hits[0]
    assert source == "D1:3" and score > 0 and resolution == "raw"
    assert recall.trace is None
    assert "Lisbon" in str(recall)


def test_a_small_budget_is_never_exceeded(m2):
    for budget in (64, 70, 90, 120, 4096):
        recall = m2.read("cat cello Lisbon marathon bicycle Azores", budget=budget)
        assert recall.tokens <= budget, (budget, recall.tokens)
    assert len(m2.read("cat cello Lisbon", budget=64).sources) < len(m2.read("cat cello Lisbon", budget=4096).sources)


def test_dataclass_events_and_dates(turns):
    memory = submem.Memory("m2", memory_llm="none")
    report = memory.write(
        [submem.Turn(session_id="s1", speaker="Ana", text="The ferry leaves at noon.", source_id="X:1"),
         submem.Turn(session_id="s1", speaker="Ben", text="Bring the tickets.", source_id="X:2",
                     session_date="2024-01-02")]
    )
    assert isinstance(report, dict)
    recall = memory.read("When does the ferry leave?", budget=100)
    assert recall.sources[0] == "X:1"


def test_namespaces_are_isolated(turns):
    memory = submem.Memory("m2-fill", memory_llm="none")
    memory.write(turns, namespace="alice")
    memory.write(
        [{"session_id": "b", "speaker": "Bob", "text": "My cat is called Nimbus.", "source_id": "B:1"}],
        namespace="bob",
    )
    bob = memory.read("What is the cat called?", budget=4096, namespace="bob")
    assert bob.sources == ["B:1"]
    assert "Pepper" not in bob.text
    alice = memory.read("What is the cat called?", budget=4096, namespace="alice")
    assert "B:1" not in alice.sources and "D1:1" in alice.sources
    empty = memory.read("What is the cat called?", budget=4096, namespace="carol")
    assert empty.sources == [] and empty.tokens == 0


def test_agent_steps_and_agentic_reads():
    memory = submem.Memory("m2-fill", memory_llm="none")
    memory.write(
        [
            submem.Step(step=1, action="go to shelf 3", observation="On shelf 3 you see a mug.", source_id="r:1"),
            {"step": 2, "action": "take mug from shelf 3", "observation": "You pick up the mug.", "source_id": "r:2"},
        ]
    )
    recall = memory.read("put a clean mug in the coffee machine", budget=300, observation="You are in the kitchen.")
    assert set(recall.sources) == {"r:1", "r:2"}


def test_forget_removes_events_and_namespaces(m2):
    assert m2.forget(["D1:3"]) == 1
    recall = m2.read("Which city did Carla move to?", budget=4096)
    assert "D1:3" not in recall.sources and "Lisbon" not in recall.text
    assert m2.forget() == 5
    assert m2.read("cat", budget=4096).sources == []


def test_cost_footprint_and_manage(m2):
    m2.read("Where is Carla?", budget=100)
    m2.manage()
    cost = m2.cost()
    assert set(cost) == {"write", "read", "manage"}
    assert cost["read"]["llm_calls"] == 0
    footprint = m2.footprint()
    assert footprint["input_tokens"] > 0 and footprint["memory_bytes"] > 0
    assert isinstance(m2.diagnostics(), dict)
    assert m2.info()["method"]


def test_save_and_load_give_the_same_recall(m2, tmp_path):
    before = m2.read("Which city did Carla move to?", budget=120)
    m2.save(tmp_path / "mem")
    manifest = json.loads((tmp_path / "mem" / "submem-memory.json").read_text())
    assert manifest["substrate"] == m2.spec
    loaded = submem.Memory.load(tmp_path / "mem")
    after = loaded.read("Which city did Carla move to?", budget=120)
    assert (after.text, after.sources, after.tokens) == (before.text, before.sources, before.tokens)
    # Saving again over a save replaces it whole.
    m2.forget(["D1:3"])
    m2.save(tmp_path / "mem")
    assert "D1:3" not in submem.Memory.load(tmp_path / "mem").read("Carla Lisbon", budget=4096).sources


def test_load_and_save_refuse_what_is_not_a_saved_memory(m2, tmp_path):
    with pytest.raises(submem.StoreError, match="not a saved memory"):
        submem.Memory.load(tmp_path)
    (tmp_path / "submem-memory.json").write_text("{not json")
    with pytest.raises(submem.StoreError, match="torn or foreign"):
        submem.Memory.load(tmp_path)
    precious = tmp_path / "precious"
    precious.mkdir()
    (precious / "thesis.txt").write_text("keep me")
    with pytest.raises(submem.StoreError, match="not a saved memory"):
        m2.save(precious)
    assert (precious / "thesis.txt").read_text() == "keep me"


def test_settings_are_validated():
    memory = submem.Memory("m2", memory_llm="none", stopwords="lucene", fill=True, candidates=50)
    assert memory.spec == "m2:stopwords=lucene,fill=true,candidates=50"
    with pytest.raises(submem.SettingsError, match="known substrates") as unknown:
        submem.Memory("m99")
    assert isinstance(unknown.value, submem.Error)
    with pytest.raises(submem.SettingsError, match="stopwords") as bad_key:
        submem.Memory("m2", colour="blue")
    assert "colour" in str(bad_key.value)
    with pytest.raises(submem.SettingsError):
        submem.Memory("m2", stopwords="klingon")
    with pytest.raises(submem.SettingsError):
        submem.Memory("m2", memory_llm="gpt-99")


def test_bad_input_raises_and_keeps_the_memory(m2):
    with pytest.raises(submem.InputError, match="event 1"):
        m2.write([conversation()[0] | {"source_id": "N:1"}, {"session_id": "s", "speaker": "Ana", "source_id": "N:2"}])
    with pytest.raises(submem.InputError, match="cannot tell a turn"):
        m2.write([{"text": "hello"}])
    with pytest.raises(submem.InputError):
        m2.write(conversation())  # every source id is already written
    with pytest.raises(submem.InputError, match="no events"):
        m2.write([])
    for budget in (0, 10, 1 << 40):
        with pytest.raises(submem.InputError, match="budget"):
            m2.read("cat", budget=budget)
    with pytest.raises(submem.InputError, match="namespace"):
        m2.read("cat", namespace="a/b")
    with pytest.raises(submem.InputError):
        m2.write("not a list")
    with pytest.raises(submem.InputError):
        m2.write([{"session_id": "s", "speaker": "Ana", "text": 5, "source_id": "N:3"}])
    # Nothing of the failed writes landed; what was there is intact.
    assert m2.read("cat cello Lisbon marathon bicycle Azores", budget=4096).sources.__len__() == 6
    assert m2.read("N:1 hello", budget=4096).sources.count("N:1") == 0


def test_unicode_and_huge_text():
    memory = submem.Memory("m2-fill", memory_llm="none")
    memory.write(
        [
            {"session_id": "u", "speaker": "Zoë", "text": "Ich wohne in Zürich 🏔️ — 東京 next year", "source_id": "U:1"},
            {"session_id": "u", "speaker": "Ana", "text": "word " * 20000, "source_id": "U:2"},
        ]
    )
    recall = memory.read("Zürich 東京", budget=64)
    assert recall.sources[:1] == ["U:1"] and recall.tokens <= 64


def test_reads_from_threads_match_serial_reads(m2):
    questions = ["Where is Carla?", "What did Ben learn?", "Which marathon?", "What was repaired?"] * 8
    serial = [m2.read(q, budget=80).sources for q in questions]
    with concurrent.futures.ThreadPoolExecutor(max_workers=4) as pool:
        threaded = list(pool.map(lambda q: m2.read(q, budget=80).sources, questions))
    assert threaded == serial


def test_dense_fill_on_the_embedded_minilm(turns):
    # Real all-MiniLM-L6-v2 (fetched into the cache on first use).
    memory = submem.Memory("m1-fill", memory_llm="none")
    memory.write(turns)
    recall = memory.read("Does anyone have a pet?", budget=64)
    assert recall.sources[0] == "D1:1"
    assert memory.cost()["write"]["embed_calls"] >= 1


def test_flexa_trace_on_request(turns):
    memory = submem.Memory("flexa", memory_llm="none")
    memory.write(turns)
    # Everything fits in 300 tokens: shown whole, nothing ranked, no trace.
    whole = memory.read("Which city did Carla move to?", budget=300, trace=["D1:3"])
    assert "Lisbon" in whole.text and whole.trace is None
    # At 80 tokens the pieces are ranked, and the trace says where D1:3 went.
    cut = memory.read("Which city did Carla move to?", budget=80, trace=["D1:3"])
    assert cut.tokens <= 80
    assert isinstance(cut.trace, dict), cut
    assert "D1:3" in str(cut.trace)
