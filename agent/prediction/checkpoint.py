"""Prediction model checkpoints on disk: one JSON file per model, written atomically.

Follows upstream ``pkg/koordlet/prediction/checkpoint.go`` (``fileCheckpointer``): the file is named after
the model's UID (a pod uid, ``__node__``, ``__node-<item>__``) inside the checkpoint directory and holds
``{"UID", "CPU", "Memory", "LastUpdated"}`` (``CPU``/``Memory`` are histogram checkpoints, see
:meth:`agent.prediction.histogram.DecayingHistogram.save`); it is written to ``<uid>.tmp`` and renamed.
:meth:`FileCheckpointer.restore` deletes leftover ``.tmp`` files and returns every other file, with the error of
the ones it could not parse (the caller removes those).

Raises:
    CheckpointError: a UID that is not a plain file name (it would escape the directory).
"""

from __future__ import annotations

import logging
import os
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import orjson

log = logging.getLogger("agent.prediction")

TMP_SUFFIX = ".tmp"


class CheckpointError(ValueError):
    """A checkpoint cannot be written or read; the message names the UID or file."""


@dataclass(slots=True)
class ModelCheckpoint:
    """``ModelCheckpoint``: a model's UID, its cpu and memory histogram checkpoints, and when it was saved
    (``last_updated``, epoch seconds). ``error`` is set by :meth:`FileCheckpointer.restore` on a bad file."""

    uid: str
    cpu: dict[str, Any] = field(default_factory=dict)
    memory: dict[str, Any] = field(default_factory=dict)
    last_updated: float = 0.0
    error: str | None = None


def _check_uid(uid: str) -> str:
    if not uid or uid in (".", "..") or "/" in uid or "\x00" in uid or uid.endswith(TMP_SUFFIX):
        raise CheckpointError(f"checkpoint UID {uid!r} is not a plain file name")
    return uid


class FileCheckpointer:
    """Saves, removes and restores :class:`ModelCheckpoint` files under ``directory`` (created on first save)."""

    def __init__(self, directory: Path) -> None:
        self.directory = Path(directory)

    def save(self, ckpt: ModelCheckpoint, *, timestamp: str) -> None:
        """Write ``ckpt`` atomically; ``timestamp`` is ``LastUpdated`` as RFC 3339.

        Raises:
            CheckpointError: bad UID.
            OSError: the directory is not writable.
        """
        name = _check_uid(ckpt.uid)
        self.directory.mkdir(parents=True, exist_ok=True)
        body = {"UID": ckpt.uid, "CPU": ckpt.cpu, "Memory": ckpt.memory, "LastUpdated": timestamp}
        fd, tmp = tempfile.mkstemp(dir=self.directory, prefix=f".{name}.", suffix=TMP_SUFFIX)
        try:
            with os.fdopen(fd, "wb") as fh:
                fh.write(orjson.dumps(body))
            os.replace(tmp, self.directory / name)
        except BaseException:
            Path(tmp).unlink(missing_ok=True)
            raise

    def remove(self, uid: str) -> None:
        """Delete the checkpoint of ``uid`` (absent is fine).

        Raises:
            CheckpointError: bad UID.
        """
        (self.directory / _check_uid(uid)).unlink(missing_ok=True)

    def restore(self) -> list[tuple[ModelCheckpoint, str]]:
        """Every checkpoint file as ``(checkpoint, LastUpdated text)``; unreadable ones carry ``error``.

        The UID is the file name, as upstream. A missing directory gives an empty list.
        """
        if not self.directory.is_dir():
            return []
        out: list[tuple[ModelCheckpoint, str]] = []
        for path in sorted(self.directory.iterdir()):
            if not path.is_file():
                continue
            if path.name.endswith(TMP_SUFFIX):
                path.unlink(missing_ok=True)
                log.info("removed a half-written prediction checkpoint %s", path)
                continue
            ckpt = ModelCheckpoint(uid=path.name)
            stamp = ""
            try:
                raw = orjson.loads(path.read_bytes())
                if not isinstance(raw, dict):
                    raise CheckpointError("expected a JSON object")
                cpu, memory, stamp = raw.get("CPU") or {}, raw.get("Memory") or {}, raw.get("LastUpdated") or ""
                if not isinstance(cpu, dict) or not isinstance(memory, dict) or not isinstance(stamp, str):
                    raise CheckpointError("CPU/Memory must be objects and LastUpdated a string")
                ckpt.cpu, ckpt.memory = cpu, memory
            except (OSError, orjson.JSONDecodeError, CheckpointError) as exc:
                ckpt.error = f"{path}: {exc}"
            out.append((ckpt, stamp))
        return out
