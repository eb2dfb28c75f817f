"""submem: pluggable memory substrates for LLM agents.

Every substrate of the Rust workspace (dense and BM25 retrieval, gist index,
evolving notes, dual-level graph, RAPTOR tree, refinement, LoRA adapter, KV
re-prefill, FlexA-Mem, the packing baselines and the router), the benchmark
harness and its registry, on the embedded models (all-MiniLM-L6-v2 and
SmolLM2-135M-Instruct run with candle, o200k token budgets), with no server.

    >>> import submem
    >>> memory = submem.Memory("m2-fill")
    >>> memory.write([{"session_id": "s1", "speaker": "Ana", "text": "I moved to Lisbon.",
    ...                "source_id": "D1:1"}])
    >>> recall = memory.read("Where does Ana live?", budget=256)
    >>> recall.sources
    ['D1:1']

Reads and writes release the GIL, so a thread pool of readers runs in
parallel. Models are loaded on first use and cached as the command line
caches them (``SUBMEM_CACHE_DIR``); the ``SUBMEM_*`` variables configure them.
With ``multiprocessing``, use the ``spawn`` start method: a forked child
inherits the runtime and the models' thread pools without their threads.
"""

from __future__ import annotations

import dataclasses
import os
from dataclasses import dataclass, field
from typing import Any, Dict, Iterable, List, Mapping, Optional, Sequence, Union

from . import _submem
from ._submem import (
    Error,
    InputError,
    ModelError,
    Recall,
    SettingsError,
    StoreError,
    __version__,
)

__all__ = [
    "Error",
    "InputError",
    "Memory",
    "ModelError",
    "Recall",
    "SettingsError",
    "Setting",
    "Step",
    "StoreError",
    "SubstrateInfo",
    "Turn",
    "bench",
    "substrates",
    "__version__",
]


@dataclass(frozen=True)
class Turn:
    """One utterance of a conversation (the core ``Turn``)."""

    session_id: str
    speaker: str
    text: str
    source_id: str
    session_date: Optional[str] = None


@dataclass(frozen=True)
class Step:
    """One agent action and what the environment answered (the core ``Step``)."""

    step: int
    action: str
    observation: str
    source_id: str


Event = Union[Turn, Step, Mapping[str, Any]]


@dataclass(frozen=True)
class Setting:
    """One setting of a substrate: its key, type, default and a line of doc."""

    key: str
    kind: str
    default: Any
    doc: str


@dataclass(frozen=True)
class SubstrateInfo:
    """A substrate the registry can build."""

    name: str
    aliases: List[str]
    family: str
    method: str
    paper: str
    summary: str
    llm: str
    settings: List[Setting] = field(default_factory=list)


def substrates() -> List[SubstrateInfo]:
    """Every substrate ``Memory`` and ``bench`` accept, with its settings."""
    out = []
    for d in _submem.substrates():
        settings = [
            Setting(key=s["key"], kind=s["kind"], default=s.get("default"), doc=s["doc"])
            for s in d.get("settings", [])
        ]
        out.append(
            SubstrateInfo(
                name=d["name"],
                aliases=list(d.get("aliases", [])),
                family=str(d["family"]),
                method=str(d["method"]),
                paper=d.get("paper", ""),
                summary=d.get("summary", ""),
                llm=str(d["llm"]),
                settings=settings,
            )
        )
    return out


def _event_dict(event: Event, index: int) -> Dict[str, Any]:
    if isinstance(event, Turn):
        d = dataclasses.asdict(event)
        if d["session_date"] is None:
            del d["session_date"]
        d["kind"] = "turn"
        return d
    if isinstance(event, Step):
        d = dataclasses.asdict(event)
        d["kind"] = "step"
        return d
    if not isinstance(event, Mapping):
        raise InputError(
            f"event {index}: expected a dict, Turn or Step, got {type(event).__name__}"
        )
    d = dict(event)
    if "kind" not in d:
        if "speaker" in d:
            d["kind"] = "turn"
        elif "action" in d or "observation" in d:
            d["kind"] = "step"
        else:
            raise InputError(
                f"event {index}: cannot tell a turn (session_id, speaker, text, source_id) "
                f"from a step (step, action, observation, source_id); keys: {sorted(d)}"
            )
    if d.get("session_date", 0) is None:
        del d["session_date"]
    return d


def _setting_value(key: str, value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (list, tuple)):
        return "+".join(str(v) for v in value)
    if isinstance(value, (str, int, float)):
        return str(value)
    raise SettingsError(f"setting {key}: {type(value).__name__} values are not supported")


class Memory:
    """One substrate instance: write events, read under a token budget.

    ``Memory(name, **settings)`` builds the substrate ``name`` (any name or
    alias ``substrates()`` lists) with its settings; an unknown setting raises
    ``SettingsError`` naming the valid ones. ``memory_llm`` (``"local"``,
    ``"openai"`` or ``"none"``) overrides the configured memory LLM (by
    default the embedded SmolLM2); ``"none"`` makes the substrates that can
    work without one use their rule writers.

    Events go to a namespace (``"default"`` unless given); reads in one
    namespace never see another's events.
    """

    __slots__ = ("_inner",)

    def __init__(self, name: str, *, memory_llm: Optional[str] = None, **settings: Any) -> None:
        pairs = [(k, _setting_value(k, v)) for k, v in settings.items()]
        self._inner = _submem.Memory(name, pairs, memory_llm)

    @classmethod
    def load(cls, path: Union[str, os.PathLike], *, memory_llm: Optional[str] = None) -> "Memory":
        """Loads a memory written by :meth:`save` (same substrate and settings)."""
        memory = cls.__new__(cls)
        memory._inner = _submem.Memory.load(os.fspath(path), memory_llm)
        return memory

    @property
    def spec(self) -> str:
        """The substrate spec (``name:key=value,...``) the memory was built from."""
        return self._inner.spec

    def info(self) -> Dict[str, Any]:
        """Static facts: the method, family and kind of memory."""
        return self._inner.info()

    def write(self, events: Iterable[Event], namespace: str = "default") -> Dict[str, Any]:
        """Appends events (oldest first): dicts with the ``Turn`` or ``Step``
        fields, or ``Turn``/``Step`` objects. Returns the write report."""
        batch = [_event_dict(e, i) for i, e in enumerate(events)]
        return self._inner.write(batch, namespace)

    def read(
        self,
        question: str,
        budget: int = 4096,
        *,
        namespace: str = "default",
        top_k: int = 10,
        observation: Optional[str] = None,
        trace: Optional[Sequence[str]] = None,
    ) -> Recall:
        """Renders memory for ``question`` within ``budget`` o200k tokens.

        ``observation`` makes it an agentic read (``question`` is the task,
        ``observation`` the newest thing the agent saw). ``trace`` lists source
        ids whose fate (ranked, shown, cut) the recall's ``trace`` explains,
        for substrates that keep one.
        """
        return self._inner.read(
            question,
            budget,
            namespace,
            top_k,
            observation,
            list(trace) if trace is not None else None,
        )

    def manage(self) -> Dict[str, Any]:
        """Runs the substrate's maintenance (consolidation, clustering...)."""
        return self._inner.manage()

    def forget(self, source_ids: Optional[Sequence[str]] = None, namespace: str = "default") -> int:
        """Deletes the listed events (every event of the namespace when
        ``source_ids`` is ``None``) and what was derived from them."""
        return self._inner.forget(list(source_ids) if source_ids is not None else None, namespace)

    def footprint(self) -> Dict[str, int]:
        """Bytes in memory and on disk, stored and input tokens."""
        return self._inner.footprint()

    def cost(self) -> Dict[str, Dict[str, Any]]:
        """Per phase (``write``, ``read``, ``manage``): LLM and embedder calls,
        tokens and time, as metered since the memory was built."""
        return self._inner.cost()

    def diagnostics(self) -> Dict[str, int]:
        """The substrate's behaviour counters (LLM replies used, fallbacks...)."""
        return self._inner.diagnostics()

    def save(self, path: Union[str, os.PathLike]) -> None:
        """Saves the whole memory under ``path``; an earlier save there is
        replaced only once the new one is complete."""
        self._inner.save(os.fspath(path))

    def __repr__(self) -> str:
        inner = getattr(self, "_inner", None)
        return f"Memory({inner.spec!r})" if inner is not None else "Memory(<not built>)"


def bench(
    dataset: str = "synthetic",
    data: Optional[Union[str, os.PathLike]] = None,
    substrates: Sequence[str] = ("m1", "m2", "flexa"),
    budgets: Sequence[int] = (1024,),
    k: Sequence[int] = (10,),
    out: Optional[Union[str, os.PathLike]] = None,
    *,
    reader: str = "none",
    judge: Optional[str] = None,
    memory_llm: str = "none",
    limit: Optional[int] = None,
    conversations: Optional[int] = None,
    baselines: bool = True,
    synthetic: Optional[Mapping[str, Any]] = None,
    jobs: int = 1,
    progress: bool = False,
) -> Dict[str, Any]:
    """Runs the harness of ``submem bench`` and returns its summary.

    ``dataset`` is ``synthetic`` (generated; ``synthetic=`` overrides its
    fields, e.g. ``{"units": 240, "questions": 12}``), ``locomo``,
    ``longmemeval`` or ``alfworld`` (with ``data=`` the file). ``substrates``
    are specs as the command line takes them (``"flexa:rho=0.2"``); unless
    ``baselines=False`` the packing baselines are added. The result has
    ``runs`` (one dict per substrate × budget × k, with ``metrics`` by id:
    ``R@k``, ``coverage``, ``E4``...), ``notes``, ``failures`` and
    ``skipped``; a run with a judge (``reader=`` and ``judge=``) also checks
    it on known answers (20 sampled questions) and has ``judge_checks``:
    its strictness and leniency, as in ``summary.json``. With ``out=`` the
    usual files are written there.
    """
    return _submem.bench(
        dataset,
        os.fspath(data) if data is not None else None,
        list(substrates),
        list(budgets),
        list(k),
        os.fspath(out) if out is not None else None,
        reader,
        judge,
        memory_llm,
        limit,
        conversations,
        baselines,
        dict(synthetic) if synthetic is not None else None,
        jobs,
        progress,
    )
