"""Load one ``DatasetSpec`` as a ``datasets.Dataset``: a Hub dataset, a local file or folder, or generated rows.

Local ``.jsonl`` / ``.json`` / ``.parquet`` / ``.csv`` files (or a folder of one kind of them) and Hub ids go
through the same ``datasets.load_dataset`` call; ``synthetic:<name>`` runs an offline generator instead.
Rows are shuffled with the seed and capped at ``max_samples``. Any failure a user can fix (no network, a
wrong name, split or path, an unreadable file) becomes a one-line ``DataError`` that names the dataset and
the fix; without network the fix is a local file or the offline demo, ``configs/tiny.yaml``.

    >>> DatasetLoader(DatasetSpec(name="synthetic:arithmetic"), seed=0).load().column_names[:3]
    ['question', 'answer', 'solution']
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..config import DatasetSpec, SyntheticDataConfig
from ..errors import DataError
from .synthetic import GENERATORS

if TYPE_CHECKING:
    from datasets import Dataset

__all__ = ["LOCAL_BUILDERS", "DatasetLoader"]

logger = logging.getLogger(__name__)

LOCAL_BUILDERS = {
    ".jsonl": "json",
    ".json": "json",
    ".parquet": "parquet",
    ".csv": "csv",
}  # suffix -> builder
SYNTHETIC_PREFIX = "synthetic:"
_OFFLINE_FIX = (
    "without network, point the dataset name at a local .jsonl/.json/.parquet/.csv file or folder, "
    "or run the offline demo with --config configs/tiny.yaml (synthetic:arithmetic)"
)


class DatasetLoader:
    """Loads ``spec`` with ``seed`` for the shuffle; ``synthetic`` configures ``synthetic:*`` generators."""

    def __init__(self, spec: DatasetSpec, seed: int, synthetic: SyntheticDataConfig | None = None) -> None:
        self.spec, self.seed = spec, seed
        self.synthetic = synthetic or SyntheticDataConfig()

    def load(self) -> Dataset:
        """The rows of the dataset, shuffled with the seed and capped at ``max_samples``."""
        if not self.spec.name:
            raise DataError("dataset name is empty; set data.sft.name / data.grpo.name (see configs/)")
        if self.spec.name.startswith(SYNTHETIC_PREFIX):
            return self._generate()
        dataset = self._read().shuffle(seed=self.seed)
        if self.spec.max_samples is not None:
            dataset = dataset.select(range(min(self.spec.max_samples, len(dataset))))
        logger.info("%s: loaded %d rows (columns %s)", self.spec.name, len(dataset), dataset.column_names)
        return dataset.flatten_indices()  # one contiguous table: later maps and column reads stay fast

    def _generate(self) -> Dataset:
        """Generated rows; ``max_samples`` caps the training rows, the held-out rows are always all kept."""
        kind = self.spec.name[len(SYNTHETIC_PREFIX) :]
        if kind not in GENERATORS:
            valid = ", ".join(SYNTHETIC_PREFIX + name for name in GENERATORS)
            raise DataError(f"{self.spec.name}: unknown generator; valid names: {valid}")
        dataset = GENERATORS[kind](self.synthetic, self.seed)
        if self.spec.max_samples is not None:
            splits = dataset["split"]
            train = [i for i, split in enumerate(splits) if split == "train"][: self.spec.max_samples]
            dataset = dataset.select(train + [i for i, split in enumerate(splits) if split != "train"])
        logger.info("%s: generated %d rows (seed %d)", self.spec.name, len(dataset), self.seed)
        return dataset

    def _read(self) -> Dataset:
        import datasets

        path, kwargs = self._source()
        if "data_files" in kwargs and all(Path(f).stat().st_size == 0 for f in kwargs["data_files"]):
            # datasets raises a bare StopIteration on an empty file; say what is wrong instead
            raise DataError(f"{self.spec.name}: the file is empty; point data at a file with rows")
        try:
            return datasets.load_dataset(path, **kwargs)
        except (OSError, ValueError, datasets.exceptions.DatasetGenerationError) as exc:
            raise self._error(exc) from None

    def _source(self) -> tuple[str, dict[str, Any]]:
        """``load_dataset`` arguments: a builder plus data files for local data, the Hub id otherwise."""
        name = self.spec.name
        local = Path(name).expanduser()
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
        # A local file or folder is one table: spec.split and spec.subset apply to Hub datasets only.
        return builders.pop(), {"data_files": [str(p) for p in files], "split": "train"}

    def _error(self, exc: Exception) -> DataError:
        reason = (str(exc).strip().splitlines() or [type(exc).__name__])[0][:300]
        name = self.spec.name
        if Path(name).expanduser().exists():
            return DataError(
                f"{name}: cannot read the file ({reason}); check it is valid {Path(name).suffix or 'data'}"
            )
        if isinstance(exc, ValueError):
            return DataError(
                f"{name}: {reason}; check subset ({self.spec.subset}) and split ({self.spec.split})"
            )
        return DataError(f"cannot load dataset '{name}' from the Hugging Face Hub ({reason}); {_OFFLINE_FIX}")
