# %% [markdown]
# # Three substrates on the bundled synthetic set
#
# Notebook-style (each `# %%` is a cell; it also runs as a script):
# `python examples/python/compare_substrates.py` after `pip install ./crates/python`.
# Dense retrieval (M1), BM25 (M2) and FlexA-Mem hold the same generated
# conversations; each is read under the same token budgets, and the table
# shows how often the gold evidence is retrieved (R@k), how much of it is
# shown whole (coverage), what a read costs (E4, milliseconds) and how many
# tokens it fills (E7).

# %%
import submem

SUBSTRATES = ["m1", "m2", "flexa"]
BUDGETS = [512, 1024]

result = submem.bench(
    dataset="synthetic",
    substrates=SUBSTRATES,
    budgets=BUDGETS,
    baselines=False,
    memory_llm="none",  # the rule writers; "local" has SmolLM2 write FlexA-Mem's records
)
for note in result["notes"]:
    print("note:", note)


# %%
def number(metric):
    if isinstance(metric, dict):
        return metric.get("p50", metric.get("mean"))
    return metric


def fmt(x, digits=3):
    return "n/a" if x is None else f"{x:.{digits}f}"


print(f"{'substrate':<10} {'budget':>6} {'R@k':>6} {'coverage':>9} {'read p50 ms':>12} {'tokens shown':>13}")
for run in sorted(result["runs"], key=lambda r: (r["budget"], SUBSTRATES.index(r["substrate"]))):
    m = run["metrics"]
    print(
        f"{run['substrate']:<10} {run['budget']:>6} {fmt(number(m.get('P6'))):>6} "
        f"{fmt(number(m.get('evidence_coverage'))):>9} {fmt(1000 * number(m['E4']), 2):>12} "
        f"{fmt(number(m.get('E7')), 0):>13}"
    )

# %% [markdown]
# The same substrates by hand: write a conversation, read under a budget.

# %%
memory = submem.Memory("m2-fill", memory_llm="none")
memory.write(
    [
        submem.Turn(session_id="s1", speaker="Ana", text="My sister Carla moved to Lisbon.", source_id="D1:1"),
        submem.Turn(session_id="s1", speaker="Ben", text="I started learning the cello.", source_id="D1:2"),
    ]
)
recall = memory.read("Where does Carla live?", budget=64)
print(f"\nm2-fill, 64 tokens: {recall.tokens} tokens, sources {recall.sources}\n{recall.text}")
