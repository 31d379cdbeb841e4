"""Run directories of the ``rewardlab`` commands: one folder per seed, written atomically.

``config.json`` holds the resolved config (the same command with ``--resume`` checks it),
``metrics.json`` the outcome; models and checkpoints are saved through
:func:`save_atomically`, so a reader never sees half a file.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any


def run_dir_for(logdir: Path, seed: int) -> Path:
    return logdir / f"seed_{seed}"


def prepare_run_dir(run_dir: Path, run_config: dict[str, Any], resume: bool) -> bool:
    """Create the run directory, or check that the one there holds this same run.

    :return: whether this call wrote the run's ``config.json`` (a new run).
    """
    config_path = run_dir / "config.json"
    existed = config_path.exists()
    if existed:
        saved = json.loads(config_path.read_text())
        # a setting added since that run was made (such as env_kwargs), left at its default
        saved |= {key: value for key, value in run_config.items() if key not in saved and _is_unset(value)}
        if saved != json.loads(json.dumps(run_config)):
            changed = sorted(k for k in set(saved) | set(run_config) if saved.get(k) != run_config.get(k))
            raise ValueError(
                f"{run_dir} holds a different run (it differs in {changed}); use another --logdir"
            )
        if not resume and (run_dir / "metrics.json").exists():
            raise ValueError(
                f"{run_dir} already holds a finished or started run; pass --resume to continue "
                "it or use another --logdir"
            )
    run_dir.mkdir(parents=True, exist_ok=True)
    write_json(config_path, run_config)
    return not existed


def remove_run_dir(run_dir: Path) -> None:
    """Undo :func:`prepare_run_dir` for a run that never started: its ``config.json`` goes,
    and the folder too when nothing else is in it."""
    (run_dir / "config.json").unlink(missing_ok=True)
    if run_dir.is_dir() and not any(run_dir.iterdir()):
        run_dir.rmdir()


def _is_unset(value: Any) -> bool:
    return value is None or value is False or value == {} or value == []


def write_json(path: Path, data: dict) -> None:
    """Write ``data`` atomically: a reader sees the old file or the new one, never half."""
    temporary = path.with_suffix(path.suffix + ".tmp")
    temporary.write_text(json.dumps(data, indent=2) + "\n")
    os.replace(temporary, path)


def save_atomically(save: Callable[[str], None], path: Path) -> None:
    """Save through ``save`` to a temporary file, then move it over ``path``."""
    temporary = path.with_name("tmp_" + path.name)
    save(str(temporary))
    os.replace(temporary, path)

