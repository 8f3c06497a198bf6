"""Cluster objects as written in manifest files: YAML/JSON, several documents, ``kind: List``.

The one reader of the embedded mode's cluster files, shared by the file source
(:class:`app.sources.files.FileSource`) and the agent's file states, so both see the same objects:

- a file holds one object, several YAML documents, or a ``kind: List`` / ``<Kind>List`` as
  ``kubectl get ... -o yaml`` prints (items without ``kind`` take the list's);
- a directory is read recursively (``*.yaml``, ``*.yml``, ``*.json``), files in sorted order;
- Pods without ``metadata.uid`` get a stable uid derived from ``namespace/name`` (uuid5).

:func:`load_objects` reads everything once and fails on the first bad file. :class:`ClusterFiles`
is the reader of a directory that other processes write while it is read: a file that is
unreadable, malformed or empty (0 bytes, or no document at all) keeps the objects it held at its
last good read, and an object defined in two files is reported (:attr:`ClusterFiles.duplicates`).
"""

from __future__ import annotations

import logging
import os
import uuid
from pathlib import Path
from typing import Any

import orjson
import yaml

from app.api.kinds import object_key

SUFFIXES = (".yaml", ".yml", ".json")

#: PyYAML's C loader when PyYAML was built with libyaml (about 8x faster on 2,000 nodes), else the pure-Python
#: one; both safe (plain data only).
SafeLoader: type[yaml.SafeLoader] = getattr(yaml, "CSafeLoader", yaml.SafeLoader)

log = logging.getLogger(__name__)


class ManifestError(Exception):
    """The cluster files cannot be read or parsed. The message is one line naming the file, the line where
    known (``<file>:<line>: <problem>``, lines counted from 1) and the problem."""


class _ShapeError(Exception):
    """A document that is not an object of a kind with a name: the problem and where (the ``items`` indices)."""

    def __init__(self, problem: str, items: tuple[int, ...]) -> None:
        super().__init__(problem)
        self.problem = problem
        self.items = items


def _one_line(text: str) -> str:
    """``text`` with its lines joined by ``"; "`` (parser messages span several lines)."""
    return "; ".join(part.strip() for part in str(text).splitlines() if part.strip())


def _decode(path: Path) -> str:
    """The file's text (UTF-8).

    Raises:
        ManifestError: unreadable, or not UTF-8 (the line and byte offset of the first bad byte).
    """
    try:
        raw = path.read_bytes()
    except OSError as exc:
        raise ManifestError(f"{path}: cannot read: {exc.strerror}") from None
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = raw.count(b"\n", 0, exc.start) + 1
        raise ManifestError(
            f"{path}:{line}: not UTF-8: byte 0x{raw[exc.start]:02x} at offset {exc.start} ({exc.reason})"
        ) from None


def _documents(path: Path, text: str) -> list[Any]:
    """The documents of ``text`` (blank ones dropped).

    Raises:
        ManifestError: not valid YAML (or JSON for ``*.json``), with the line of the problem.
    """
    try:
        if path.suffix == ".json":
            return [orjson.loads(text)] if text.strip() else []  # blank: no document, as in YAML
        return [d for d in yaml.load_all(text, Loader=SafeLoader) if d is not None]
    except orjson.JSONDecodeError as exc:
        raise ManifestError(f"{path}:{exc.lineno}: not valid JSON: {exc.msg} (column {exc.colno})") from None
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        where = f"{path}:{mark.line + 1}" if mark is not None else str(path)
        column = f" (column {mark.column + 1})" if mark is not None else ""
        problem = " ".join(p for p in (exc.context, exc.problem) if p) or "malformed"
        raise ManifestError(f"{where}: not valid YAML: {_one_line(problem)}{column}") from None
    except yaml.YAMLError as exc:
        raise ManifestError(f"{path}: not valid YAML: {_one_line(str(exc))}") from None


def _document_line(text: str, index: int, items: tuple[int, ...]) -> int | None:
    """The line (from 1) where document ``index`` (from 0, blank documents not counted) of a YAML or JSON
    ``text`` starts, or its ``items[i]...`` element; None when it cannot be told. Parses ``text`` again: only
    called for a file already found bad."""
    try:
        nodes = [n for n in yaml.compose_all(text, Loader=SafeLoader) if n is not None]
        node: yaml.Node = nodes[index]
        for i in items:
            if not isinstance(node, yaml.MappingNode):
                return None
            values = [v for k, v in node.value if isinstance(k, yaml.ScalarNode) and k.value == "items"]
            if not values or not isinstance(values[0], yaml.SequenceNode):
                return None
            node = values[0].value[i]
        return int(node.start_mark.line) + 1
    except (yaml.YAMLError, IndexError):
        return None


def _file_objects(path: Path) -> tuple[int, list[dict[str, Any]]]:
    """How many documents one file holds, and its objects in order (Pods given their derived uid).

    Raises:
        ManifestError: unreadable or malformed (the message names the file, the line where known, and
            the document).
    """
    text = _decode(path)
    docs = _documents(path, text)
    out: list[dict[str, Any]] = []
    for i, doc in enumerate(docs):
        try:
            objects = _flatten(doc, ())
        except _ShapeError as exc:
            line = _document_line(text, i, exc.items)  # JSON reads as YAML too
            where = f"{path}:{line}" if line is not None else str(path)
            items = "".join(f" items[{j}]" for j in exc.items)
            raise ManifestError(f"{where}: document {i + 1}{items}: {exc.problem}") from None
        for obj in objects:
            if obj["kind"] == "Pod":
                meta = obj["metadata"]
                if not meta.get("uid"):
                    ns = meta.get("namespace") or "default"
                    uid = str(uuid.uuid5(uuid.NAMESPACE_URL, f"{ns}/{meta['name']}"))
                    obj = {**obj, "metadata": {**meta, "uid": uid}}
            out.append(obj)
    return len(docs), out


def _flatten(doc: Any, items: tuple[int, ...]) -> list[dict[str, Any]]:
    """The objects of one document (a ``List``'s items, recursively).

    Raises:
        _ShapeError: not an object, no kind, or no ``metadata.name``.
    """
    if not isinstance(doc, dict):
        raise _ShapeError(f"expected an object with apiVersion and kind, got {type(doc).__name__}", items)
    kind = doc.get("kind")
    if isinstance(kind, str) and kind.endswith("List") and isinstance(doc.get("items"), list):
        item_kind = kind[: -len("List")] if kind != "List" else None
        out: list[dict[str, Any]] = []
        for i, item in enumerate(doc["items"]):
            if isinstance(item, dict) and item_kind and "kind" not in item:
                item = {**item, "kind": item_kind}
            out.extend(_flatten(item, (*items, i)))
        return out
    if not isinstance(kind, str) or not kind:
        raise _ShapeError("missing kind", items)
    meta = doc.get("metadata")
    if not isinstance(meta, dict) or not isinstance(meta.get("name"), str) or not meta["name"]:
        raise _ShapeError(f"{kind} without metadata.name", items)
    return [doc]


def files_under(path: Path) -> list[Path]:
    """The cluster files at ``path`` (itself if a file), sorted.

    Raises:
        ManifestError: ``path`` does not exist.
    """
    if path.is_file():
        return [path]
    if path.is_dir():
        return sorted(p for p in path.rglob("*") if p.is_file() and p.suffix in SUFFIXES)
    raise ManifestError(f"{path}: no such file or directory")


def load_objects(path: Path) -> dict[str, dict[str, dict[str, Any]]]:
    """Read every object under ``path``, grouped as kind -> key -> object.

    Raises:
        ManifestError: a file is unreadable or malformed (the message names it).
    """
    out: dict[str, dict[str, dict[str, Any]]] = {}
    for file in files_under(path):
        for obj in _file_objects(file)[1]:
            out.setdefault(obj["kind"], {})[object_key(obj)] = obj
    return out


#: A file's identity for change detection: (inode, mtime in ns, size in bytes).
FileStamp = tuple[int, int, int]


def _stamp(path: Path) -> FileStamp | None:
    try:
        st = os.stat(path)
    except OSError:
        return None
    return (st.st_ino, st.st_mtime_ns, st.st_size)


class ClusterFiles:
    """The objects under ``path``, re-read file by file as other processes write them.

    - Only files whose stamp (inode, mtime, size) changed are read again.
    - A file that cannot be read or parsed keeps the objects of its last good read; so does a file that
      holds no document at all (0 bytes, blanks or only comments, in YAML and JSON alike), which is what
      a writer truncating before it writes leaves for a moment. To drop a file's objects, remove the
      file or write an empty ``kind: List``. Each such file is logged once per version, and counted in
      :attr:`read_errors` (unreadable or malformed) or :attr:`empty_reads`.
    - An object (kind and namespace/name) defined in more than one file: the file last in sorted order
      wins, as ``kubectl apply -f DIR`` would leave it; it is logged once and listed in :attr:`duplicates`.

    Args:
        path: a file, or a directory read recursively (``*.yaml``, ``*.yml``, ``*.json``).
    """

    def __init__(self, path: Path) -> None:
        self.path = path
        self._files: dict[Path, tuple[FileStamp | None, list[dict[str, Any]]]] = {}
        self._stamps: dict[Path, FileStamp | None] = {}
        #: (kind, key) -> the files defining it, in sorted order, for objects defined more than once.
        self.duplicates: dict[tuple[str, str], list[Path]] = {}
        #: Failed reads (unreadable or malformed files) since start.
        self.read_errors = 0
        #: Reads that found a file empty and kept its objects, since start.
        self.empty_reads = 0
        self._reported: set[tuple[Path, FileStamp | None]] = set()
        self._reported_duplicates: set[tuple[str, str, tuple[Path, ...]]] = set()

    def changed(self) -> bool:
        """Whether any file was added, removed or changed since the last :meth:`load`.

        Raises:
            ManifestError: ``path`` does not exist.
        """
        return {f: _stamp(f) for f in files_under(self.path)} != self._stamps

    def load(self, *, strict: bool = False) -> dict[str, dict[str, dict[str, Any]]]:
        """The objects of every file, grouped as kind -> key -> object.

        Args:
            strict: raise on a bad file instead of keeping its last good objects (the first load).

        Raises:
            ManifestError: ``path`` does not exist; with ``strict``, a file is unreadable or malformed.
        """
        files = files_under(self.path)
        fresh: dict[Path, tuple[FileStamp | None, list[dict[str, Any]]]] = {}
        for file in files:
            stamp = _stamp(file)
            known = self._files.get(file)
            if known is not None and known[0] == stamp:
                fresh[file] = known
                continue
            fresh[file] = (stamp, self._read(file, stamp, known[1] if known else [], strict))
        self._files = fresh
        self._stamps = {f: entry[0] for f, entry in fresh.items()}
        return self._merge(files)

    def _read(
        self, file: Path, stamp: FileStamp | None, last: list[dict[str, Any]], strict: bool
    ) -> list[dict[str, Any]]:
        try:
            documents, objects = _file_objects(file)
        except ManifestError as exc:
            if strict:
                raise
            self.read_errors += 1
            self._report(file, stamp, f"{exc}; keeping the {len(last)} object(s) of its last good read")
            return last
        if not documents and last:
            self.empty_reads += 1
            self._report(file, stamp, f"{file}: empty; keeping the {len(last)} object(s) of its last good read")
            return last
        return objects

    def _report(self, file: Path, stamp: FileStamp | None, message: str) -> None:
        if (file, stamp) not in self._reported:
            self._reported.add((file, stamp))
            log.warning("%s", message)

    def _merge(self, files: list[Path]) -> dict[str, dict[str, dict[str, Any]]]:
        out: dict[str, dict[str, dict[str, Any]]] = {}
        where: dict[tuple[str, str], list[Path]] = {}
        for file in files:
            for obj in self._files[file][1]:
                kind, key = obj["kind"], object_key(obj)
                out.setdefault(kind, {})[key] = obj
                where.setdefault((kind, key), []).append(file)
        self.duplicates = {k: v for k, v in where.items() if len(v) > 1}
        for (kind, key), defined_in in self.duplicates.items():
            marker = (kind, key, tuple(defined_in))
            if marker not in self._reported_duplicates:
                self._reported_duplicates.add(marker)
                log.warning(
                    "%s %s is defined in %d files (%s): the last one, %s, is used",
                    kind,
                    key,
                    len(defined_in),
                    ", ".join(str(f) for f in defined_in),
                    defined_in[-1],
                )
        return out
