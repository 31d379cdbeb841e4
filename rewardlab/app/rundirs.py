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


def prepare_run_dir(run_dir: Path, run_config: dict[str, Any], resume: bool) -> None:
    """Create the run directory, or check that the one there holds this same run."""
    config_path = run_dir / "config.json"
    if config_path.exists():
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

