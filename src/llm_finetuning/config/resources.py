"""Files the package ships: the chat template and the example configs, found installed or in the repository.

A wheel carries ``templates/`` and ``configs/`` inside the package (``pyproject.toml``'s force-include), where
``importlib.resources`` finds them from any directory; a checkout of the repository (an editable install) keeps
them at the repository root. ``packaged(relative)`` looks in the package first, then the repository.
``config_path(name)`` lets a command take a shipped config by name (``--config tiny``) as well as by path.

    >>> config_path("tiny").name
    'tiny.yaml'
"""

from __future__ import annotations

from importlib import resources
from pathlib import Path

__all__ = ["REPOSITORY", "config_path", "packaged", "shipped_configs"]

REPOSITORY = Path(__file__).resolve().parents[3]  # src/llm_finetuning/config/ -> the checkout, in development


def packaged(relative: str | Path) -> Path | None:
    """A shipped file: inside the installed package, else in the repository checkout; None when neither has it."""
    inside = Path(str(resources.files("llm_finetuning"))) / relative
    for candidate in (inside, REPOSITORY / relative):
        if candidate.exists():
            return candidate
    return None


def shipped_configs() -> list[str]:
    """The names of the configs the package ships (``tiny``, ``smollm2``, ``default_config``)."""
    folder = packaged("configs")
    return sorted(path.stem for path in folder.glob("*.yaml")) if folder else []


def config_path(name: str | Path) -> Path:
    """``name`` as given when it is a file; else a shipped config of that name (``tiny`` or ``configs/tiny.yaml``)."""
    path = Path(name)
    if path.is_file():
        return path
    shipped = packaged(Path("configs") / (path.name if path.suffix == ".yaml" else f"{path.name}.yaml"))
    return shipped if shipped is not None else path
