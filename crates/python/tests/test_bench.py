"""submem.bench: the harness from Python on the generated synthetic set."""

import pytest

import submem

SMALL = {"conversations": 1, "units": 100, "questions": 4, "session_size": 25}


def test_bench_returns_the_summary():
    result = submem.bench(substrates=["m2"], budgets=[512], baselines=False, synthetic=SMALL)
    assert result["failures"] == [] and result["out"] is None
    (run,) = result["runs"]
    assert run["substrate"] == "m2" and run["budget"] == 512 and run["k"] == 10
    assert 0.0 <= run["metrics"]["P6"] <= 1.0
    assert run["metrics"]["questions"] == 4


def test_bench_adds_packing_baselines_and_writes_files(tmp_path):
    result = submem.bench(substrates=["m10"], budgets=[256], synthetic=SMALL, out=tmp_path / "run")
    names = {r["substrate"] for r in result["runs"]}
    assert {"m10", "m2-fill", "m1-fill", "hybrid-fill"} <= names
    for f in ("items.jsonl", "summary.json", "report.md"):
        assert (tmp_path / "run" / f).exists(), f


def test_bench_bad_options_raise():
    with pytest.raises(submem.SettingsError):
        submem.bench(dataset="nosuchset")
    with pytest.raises(submem.StoreError, match="not found"):
        submem.bench(dataset="locomo", data="/nonexistent/locomo.json")
    with pytest.raises(submem.SettingsError, match="valid"):
        submem.bench(synthetic={"unitz": 5})
    with pytest.raises(submem.SettingsError, match="known substrates"):
        submem.bench(substrates=["m2", "m77"])
    with pytest.raises(submem.SettingsError):
        submem.bench(substrates=[])
