"""Type stubs of the native module; use the wrappers in ``submem``."""

from os import PathLike
from typing import Any, Dict, List, Optional, Sequence, Tuple, Union

__version__: str

class Error(Exception):
    """Every error submem raises: the message is the Rust error's chain."""

class SettingsError(Error):
    """An unknown substrate, an unknown or invalid setting, or a bad option."""

class InputError(Error):
    """Events, a namespace, a question or a budget the substrate cannot accept."""

class StoreError(Error):
    """A saved memory or data file that is missing, torn or foreign, or an I/O failure."""

class ModelError(Error):
    """A model (embedder, LLM, token counter) could not be loaded or failed."""

class Recall:
    """What a read returns."""

    @property
    def text(self) -> str:
        """The rendered memory block, ready for the reader's context."""
    @property
    def tokens(self) -> int:
        """``text``'s length in o200k tokens (never above the budget)."""
    @property
    def sources(self) -> List[str]:
        """Source ids of the events shown, most relevant first."""
    @property
    def hits(self) -> List[Tuple[str, float, str]]:
        """``(source_id, score, resolution)`` of each event shown; resolution is
        ``raw`` (whole), ``excerpt`` or ``record`` (in an LLM-written record)."""
    @property
    def trace(self) -> Optional[Dict[str, Any]]:
        """The read's trace of the requested source ids, when the substrate keeps one."""

class Memory:
    def __init__(
        self,
        name: str,
        settings: Sequence[Tuple[str, str]] = ...,
        memory_llm: Optional[str] = None,
    ) -> None: ...
    @staticmethod
    def load(path: Union[str, PathLike[str]], memory_llm: Optional[str] = None) -> Memory: ...
    @property
    def spec(self) -> str: ...
    def info(self) -> Dict[str, Any]: ...
    def write(self, events: List[Dict[str, Any]], namespace: str = "default") -> Dict[str, Any]: ...
    def read(
        self,
        question: str,
        budget: int = 4096,
        namespace: str = "default",
        top_k: int = 10,
        observation: Optional[str] = None,
        trace: Optional[List[str]] = None,
    ) -> Recall: ...
    def manage(self) -> Dict[str, Any]: ...
    def forget(self, source_ids: Optional[List[str]] = None, namespace: str = "default") -> int: ...
    def footprint(self) -> Dict[str, int]: ...
    def cost(self) -> Dict[str, Dict[str, Any]]: ...
    def diagnostics(self) -> Dict[str, int]: ...
    def save(self, path: Union[str, PathLike[str]]) -> None: ...

def substrates() -> List[Dict[str, Any]]: ...
def bench(
    dataset: str = "synthetic",
    data: Optional[str] = None,
    substrates: List[str] = ...,
    budgets: List[int] = ...,
    k: List[int] = ...,
    out: Optional[str] = None,
    reader: str = "none",
    judge: Optional[str] = None,
    memory_llm: str = "none",
    limit: Optional[int] = None,
    conversations: Optional[int] = None,
    baselines: bool = True,
    synthetic: Optional[Dict[str, Any]] = None,
    jobs: int = 1,
    progress: bool = False,
) -> Dict[str, Any]: ...
