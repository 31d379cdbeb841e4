"""The run directory of a search: its config and a journal of everything that happened.

Every answer, program, prescreen score, evaluation result and human feedback is appended
to ``journal.jsonl`` as one JSON line the moment it exists, flushed and synced to disk,
so a crash or ``kill -9`` loses at most the record being written (a torn last line is
dropped when the run is opened again). ``--resume`` reads the journal back: what is in it
is never asked for or computed again. What it reads is data of unknown type: a line that
is not an object with a string ``type`` is skipped, and each field is typed where the
search takes it (a malformed candidate record fails that candidate, never the run). Every
text written here first has the run's secrets (the API key) removed.

Layout::

    OUT/
      config.json        what the run is (a resumed run must match it)
      journal.jsonl      the records, in the order they happened
      candidates/it00_s01/
          answer.md      the LLM's answer (or the evolve proposer's program), as a code block
          program.py     the program found in it
          prescreen/     the sandboxed prescreen's files
          train/         llm_reward.evaluate's run: program, result.json, TensorBoard logs
      final/{best,sparse,human}/seed_S/   the 5-seed re-training, same layout as train/
      prescreen/trajectories.json         the stored trajectories of known fitness
      report.md, best_reward.py, tensorboard/search/
"""

from __future__ import annotations

import json
import os
import threading
from collections.abc import Callable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

from rewardlab.llm_reward.clients import redact

__all__ = ["CONFIG_FILE", "JOURNAL_FILE", "RunStore"]

CONFIG_FILE = "config.json"
JOURNAL_FILE = "journal.jsonl"


#: config keys a run saved before they existed does not hold, with the value such a run had
#: (it trained every candidate to the end: ``--no-early-stopping`` resumes it)
SAVED_BEFORE = {"early_stopping": False}


class RunStore:
    """Append-only journal and files of one search run.

    Open one with :meth:`open`; it is safe to use from several threads.

    :param root: the run directory (must exist).
    :param secrets: strings removed from everything written.
    """

    def __init__(self, root: Path, secrets: Sequence[str] = ()):
        self.root = root
        self.secrets = tuple(secret for secret in secrets if secret)
        self._lock = threading.Lock()
        self._records: list[dict[str, Any]] = []
        self._index: dict[tuple[str, str], dict[str, Any]] = {}
        self._load()

    @classmethod
    def open(
        cls,
        root: str | os.PathLike[str],
        config: Mapping[str, Any],
        identity: Sequence[str],
        resume: bool,
        secrets: Sequence[str] = (),
    ) -> RunStore:
        """Create the run directory, or reopen the run in it.

        A directory that holds a run's config and nothing more (the run stopped before its
        first record: a failed start) holds nothing to resume, and is opened afresh.

        :param root: the output directory.
        :param config: the run's config (JSON data; written to ``config.json``).
        :param identity: the config keys a resumed run must share with the saved one (the
            others, such as the number of workers, may change).
        :param resume: continue the run found there.
        :param secrets: strings never to write.
        :raises ValueError: the directory holds a run and ``resume`` is False, holds a
            different run, or holds files that are not a search run.
        """
        root = Path(root)
        config_path = root / CONFIG_FILE
        if config_path.exists() and _started(root):
            saved = _saved_config(config_path)
            current = json.loads(json.dumps(dict(config)))
            saved = {**SAVED_BEFORE, **saved}
            changed = sorted(key for key in identity if saved.get(key) != current.get(key))
            if changed:
                details = "; ".join(f"{key}: {saved.get(key)!r} there, {current.get(key)!r} now" for key in changed)
                raise ValueError(
                    f"{root} holds a different search run ({details}); use another --out, or the "
                    "same settings with --resume"
                )
            if not resume:
                raise ValueError(
                    f"{root} already holds this search run; pass --resume to continue it (nothing "
                    "done is repeated) or use another --out"
                )
        elif not config_path.exists() and root.exists() and any(root.iterdir()):
            raise ValueError(
                f"{root} is not empty and holds no search run ({CONFIG_FILE} is missing); use an "
                "empty or new --out"
            )
        root.mkdir(parents=True, exist_ok=True)
        store = cls(root, secrets)
        store.write_text(CONFIG_FILE, json.dumps(dict(config), indent=2) + "\n")
        return store

    def _load(self) -> None:
        path = self.root / JOURNAL_FILE
        if not path.exists():
            return
        data = path.read_bytes()
        *lines, torn = data.split(b"\n")  # the records' own newlines and returns are escaped
        for line in lines:
            try:
                record = json.loads(line)
            except (ValueError, RecursionError):  # a whole line that is no JSON (nested past the limit)
                continue
            self._remember(record)
        if torn:  # a crash while the last record was written
            with open(path, "r+b") as journal:
                journal.truncate(len(data) - len(torn))

    def _remember(self, record: Any) -> None:
        # a line of another shape (written by hand, or by another program) is no record of
        # this run: kept in the file, never read as one
        if not isinstance(record, dict) or not isinstance(record.get("type"), str):
            return
        if "key" in record and not isinstance(record["key"], str):
            return
        self._records.append(record)
        if "key" in record:
            self._index[(record["type"], record["key"])] = record

    def append(self, record: Mapping[str, Any]) -> dict[str, Any]:
        """Write ``record`` (with ``type`` and usually ``key``) to the journal now, durably.

        :param record: JSON data; secrets are removed from it first.
        :return: the record as written.
        """
        line = redact(json.dumps(dict(record)), self.secrets)
        written = json.loads(line)
        with self._lock:
            with open(self.root / JOURNAL_FILE, "a", encoding="utf-8") as journal:
                journal.write(line + "\n")
                journal.flush()
                os.fsync(journal.fileno())
            self._remember(written)
        return written

    def get(self, kind: str, key: str) -> dict[str, Any] | None:
        """The latest record of type ``kind`` with ``key``, or ``None``.

        :param kind: the record type.
        :param key: the record key.
        """
        with self._lock:
            return self._index.get((kind, key))

    def journaled(
        self, kind: str, key: str, compute: Callable[[], Mapping[str, Any] | None]
    ) -> tuple[dict[str, Any] | None, bool]:
        """The record of type ``kind`` with ``key``: the journal's, or else ``compute()``'s,
        journaled now. The one way the search gets what it may have done before: a resumed
        search never asks for or computes again what the journal holds.

        :param kind: the record type.
        :param key: the record key.
        :param compute: makes the record's fields (JSON data), called only when the journal
            has none; ``None`` when there is nothing to keep (a later run computes it again).
        :return: the record as journaled (``None`` when ``compute`` had nothing), and whether
            ``compute`` ran.
        """
        record = self.get(kind, key)
        if record is not None:
            return record, False
        fields = compute()
        return (None if fields is None else self.append({"type": kind, "key": key, **fields})), True

    def records(self, kind: str) -> Iterator[dict[str, Any]]:
        """Every record of type ``kind``, in journal order.

        :param kind: the record type.
        """
        with self._lock:
            found = [record for record in self._records if record["type"] == kind]
        return iter(found)

    def path(self, *parts: str) -> Path:
        """A path inside the run directory.

        :param parts: path components.
        """
        return self.root.joinpath(*parts)

    def write_text(self, relative: str, text: str) -> Path:
        """Write a file atomically (a reader sees the old or the new one), secrets removed.

        :param relative: its path inside the run directory.
        :param text: the content.
        """
        path = self.root / relative
        path.parent.mkdir(parents=True, exist_ok=True)
        temporary = path.with_name(path.name + ".tmp")
        # a lone surrogate (JSON can carry one) cannot be encoded: written as its escape, not a crash
        temporary.write_text(redact(text, self.secrets), encoding="utf-8", errors="backslashreplace")
        os.replace(temporary, path)
        return path


def _saved_config(path: Path) -> dict[str, Any]:
    """The config a run directory's ``config.json`` holds, read as data of unknown type.

    :raises ValueError: it is not a JSON object, naming the file and what to do.
    """
    try:
        saved = json.loads(path.read_text(encoding="utf-8"))
    except (ValueError, RecursionError):  # not UTF-8, not JSON, nested past the parser's limit
        saved = None
    if not isinstance(saved, dict):
        raise ValueError(f"{path} is not a search run's config (a JSON object of its settings); use "
                         "another --out")
    return saved


def _started(root: Path) -> bool:
    """Whether the run in ``root`` wrote anything besides its config (its journal, its files)."""
    return any(entry.name not in (CONFIG_FILE, CONFIG_FILE + ".tmp") for entry in root.iterdir())
