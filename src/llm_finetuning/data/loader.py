"""Load one ``DatasetSpec`` as a ``datasets.Dataset``: a Hub dataset, a local file or folder, or generated rows.

Local ``.jsonl`` / ``.json`` / ``.parquet`` / ``.csv`` files (or a folder of one kind of them), local copies
of Hub datasets (a folder whose README.md declares ``configs``) and Hub ids go through the same
``datasets.load_dataset`` call; ``synthetic:<name>`` runs an offline generator instead, and
``reasoning_gym:<task>`` a reasoning-gym task (``tasks/gym_rows.py``). A list of subsets
(``EleutherAI/hendrycks_math`` has one per subject and no default) is loaded subset by subset and
concatenated. Rows are shuffled with the seed and capped at ``max_samples``. The format adapter then
reports what it will change (DAPO's answer instruction), and datasets with a known trap say so
(``qwedsacf/competition_math`` merges MATH's train and test). Any failure a user can fix (no network, a
wrong name, split or path, an unreadable file) becomes a one-line ``DataError`` that names the dataset and
the fix; without network the fix is a local file or the offline demo, ``configs/tiny.yaml``.

    >>> DatasetLoader(DatasetSpec(name="synthetic:arithmetic"), seed=0).load().column_names[:3]
    ['question', 'answer', 'solution']
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import TYPE_CHECKING, Any

import yaml

from ..config import DatasetSpec, PipelineConfig, ReasoningGymConfig, SyntheticDataConfig
from ..errors import DataError
from ..tasks import gym
from ..tasks.gym_rows import generate_task_rows
from .formats import ADAPTERS, detect_format
from .synthetic import GENERATORS

if TYPE_CHECKING:
    from datasets import Dataset

__all__ = ["DATASET_NOTES", "LOCAL_BUILDERS", "DatasetLoader", "dataset_note"]

logger = logging.getLogger(__name__)

LOCAL_BUILDERS = {
    ".jsonl": "json",
    ".json": "json",
    ".parquet": "parquet",
    ".csv": "csv",
}  # suffix -> builder
SYNTHETIC_PREFIX = "synthetic:"
MEMORY_PREFIX = "memory:"  # a datasets.Dataset handed to pipeline.run in Python (``in_memory``)
_IN_MEMORY: dict[str, Any] = {}


def in_memory(key: str, dataset: Any) -> str:
    """Register ``dataset`` (a ``datasets.Dataset`` of this process) and return the name a config gives it."""
    from datasets import Dataset

    if not isinstance(dataset, Dataset):
        raise DataError(f"{key}: expected a datasets.Dataset, got {type(dataset).__name__}")
    _IN_MEMORY[key] = dataset
    return MEMORY_PREFIX + key


# Datasets whose name alone hides a trap; keyed by Hub id (a local copy is matched by its path's end).
DATASET_NOTES = {
    "qwedsacf/competition_math": (
        "has only a train split, MATH's train and test problems merged: scores on it are not MATH test "
        "scores and include problems a model may have trained on; evaluate on HuggingFaceH4/MATH-500 or "
        "EleutherAI/hendrycks_math (split: test)"
    ),
}
_OFFLINE_FIX = (
    "without network, point the dataset name at a local .jsonl/.json/.parquet/.csv file or folder, "
    "or run the offline demo with --config configs/tiny.yaml (synthetic:arithmetic)"
)


class DatasetLoader:
    """Loads ``spec`` with ``seed`` for the shuffle; ``synthetic`` configures ``synthetic:*`` generators,
    ``reasoning_gym`` the ``reasoning_gym:<task>`` ones."""

    def __init__(
        self,
        spec: DatasetSpec,
        seed: int,
        synthetic: SyntheticDataConfig | None = None,
        reasoning_gym: ReasoningGymConfig | None = None,
    ) -> None:
        self.spec, self.seed = spec, seed
        self.synthetic = synthetic or SyntheticDataConfig()
        self.reasoning_gym = reasoning_gym or ReasoningGymConfig()

    @classmethod
    def for_data(cls, spec: DatasetSpec, config: PipelineConfig) -> DatasetLoader:
        """The loader of one of the config's datasets: the problems' seed and the generator settings."""
        data = config.data
        return cls(spec, config.problem_seed, synthetic=data.synthetic, reasoning_gym=data.reasoning_gym)

    def load(self) -> Dataset:
        """The rows of the dataset, shuffled with the seed and capped at ``max_samples``."""
        if not self.spec.name:
            raise DataError("dataset name is empty; set data.sft.name / data.grpo.name (see configs/)")
        if self.spec.name.startswith(SYNTHETIC_PREFIX) or gym.task_of(self.spec.name) is not None:
            return self._generate()
        note = dataset_note(self.spec.name)
        if note:
            logger.warning("%s %s", self.spec.name, note)
        dataset = self._read().shuffle(seed=self.seed)
        if self.spec.max_samples is not None:
            dataset = dataset.select(range(min(self.spec.max_samples, len(dataset))))
        logger.info("%s: loaded %d rows (columns %s)", self.spec.name, len(dataset), dataset.column_names)
        dataset = dataset.flatten_indices()  # one contiguous table: later maps and column reads stay fast
        adapter = ADAPTERS.get(
            self.spec.format if self.spec.format != "auto" else detect_format(dataset.column_names) or ""
        )
        if adapter is not None and adapter.report is not None and len(dataset):
            adapter.report(dataset, self.spec)
        return dataset

    def _generate(self) -> Dataset:
        """Generated rows; ``max_samples`` caps the training rows, the held-out rows are always all kept."""
        task = gym.task_of(self.spec.name)
        if task is not None:
            dataset = generate_task_rows(self.reasoning_gym, task, self.seed, self.spec.train_settings)
        else:
            kind = self.spec.name[len(SYNTHETIC_PREFIX) :]
            if kind not in GENERATORS:
                valid = ", ".join(SYNTHETIC_PREFIX + name for name in GENERATORS)
                raise DataError(f"{self.spec.name}: unknown generator; valid names: {valid}")
            dataset = GENERATORS[kind](self.synthetic, self.seed)
        if self.spec.max_samples is not None:
            splits = dataset["split"]
            train = [i for i, split in enumerate(splits) if split == "train"][: self.spec.max_samples]
            dataset = dataset.select(train + [i for i, split in enumerate(splits) if split != "train"])
        own = f", training problems with train_settings {self.spec.train_settings}" if self.spec.train_settings else ""
        logger.info("%s: generated %d rows (seed %d%s)", self.spec.name, len(dataset), self.seed, own)
        return dataset

    def _read(self) -> Dataset:
        import datasets

        if self.spec.name.startswith(MEMORY_PREFIX):
            key = self.spec.name[len(MEMORY_PREFIX):]
            if key not in _IN_MEMORY:
                raise DataError(f"{self.spec.name}: no dataset was handed to this process under that name")
            return _IN_MEMORY[key]
        path, kwargs = self._source()
        if "data_files" in kwargs and all(Path(f).stat().st_size == 0 for f in kwargs["data_files"]):
            # datasets raises a bare StopIteration on an empty file; say what is wrong instead
            raise DataError(f"{self.spec.name}: the file is empty; point data at a file with rows")
        subsets = kwargs.pop("name", None)
        try:
            if not isinstance(subsets, list):
                return datasets.load_dataset(path, name=subsets, **kwargs)
            parts = [datasets.load_dataset(path, name=subset, **kwargs) for subset in subsets]
            return datasets.concatenate_datasets(parts)
        except (OSError, ValueError, datasets.exceptions.DatasetGenerationError) as exc:
            raise self._error(exc) from None

    def _source(self) -> tuple[str, dict[str, Any]]:
        """``load_dataset`` arguments: a builder plus data files for local data, the Hub id (or a local
        copy of a Hub dataset, with its subsets and splits) otherwise."""
        name = self.spec.name
        local = Path(name).expanduser()
        if local.is_dir() and _declares_configs(local / "README.md"):
            return str(local), {"name": self.spec.subset, "split": self.spec.split}
        if not local.exists():
            if local.suffix in LOCAL_BUILDERS or name.startswith(("/", "./", "../", "~")):
                raise DataError(
                    f"{name}: file or folder not found; check the path (relative to {Path.cwd()})"
                )
            return name, {"name": self.spec.subset, "split": self.spec.split}
        files = (
            [local] if local.is_file() else sorted(p for p in local.rglob("*") if p.suffix in LOCAL_BUILDERS)
        )
        builders = {LOCAL_BUILDERS.get(p.suffix) for p in files}
        if not files or None in builders or len(builders) > 1:
            found = sorted({p.suffix for p in files}) or "no data files"
            raise DataError(
                f"{name}: a local dataset must be one kind of {', '.join(LOCAL_BUILDERS)} files (found {found}); "
                "point the name at a single file or a folder of one kind"
            )
        # A local file or folder is one table: spec.split and spec.subset apply to Hub datasets (and copies).
        return builders.pop(), {"data_files": [str(p) for p in files], "split": "train"}

    def _error(self, exc: Exception) -> DataError:
        reason = (str(exc).strip().splitlines() or [type(exc).__name__])[0][:300]
        name = self.spec.name
        local_copy = _declares_configs(Path(name).expanduser() / "README.md")
        if Path(name).expanduser().exists() and not local_copy:
            return DataError(
                f"{name}: cannot read the file ({reason}); check it is valid {Path(name).suffix or 'data'}"
            )
        if isinstance(exc, ValueError) or local_copy:
            return DataError(
                f"{name}: {reason}; check subset ({self.spec.subset}) and split ({self.spec.split})"
            )
        return DataError(f"cannot load dataset '{name}' from the Hugging Face Hub ({reason}); {_OFFLINE_FIX}")


def dataset_note(name: str) -> str | None:
    """What to know about the dataset ``name`` before scoring on it (``DATASET_NOTES``), or ``None``."""
    for hub_id, note in DATASET_NOTES.items():
        if name == hub_id or name.rstrip("/").endswith("/" + hub_id):
            return note
    return None


def _declares_configs(readme: Path) -> bool:
    """Whether ``readme`` is a Hub dataset card whose YAML header declares ``configs`` (a local copy)."""
    if not readme.is_file():
        return False
    text = readme.read_text(encoding="utf-8", errors="replace")
    if not text.startswith("---"):
        return False
    try:
        header = yaml.safe_load(text[3:].split("\n---", 1)[0])
    except yaml.YAMLError:
        return False
    return isinstance(header, dict) and bool(header.get("configs"))
