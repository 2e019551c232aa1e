"""The folder of a sharded search (`sharded.ShardedRun`): its fingerprint, written
once and matched by every resume; its lock, held by one search at a time; and files
written atomically, so that a killed writer leaves no half file."""

import fcntl
import hashlib
import json
import os
import socket
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import numpy as np


def save(path: Path, array: np.ndarray) -> None:
    """Write `array` to `path` (.npy) atomically: a killed writer leaves no half file."""
    path.parent.mkdir(parents=True, exist_ok=True)
    partial = path.with_name(path.name + ".part.npy")
    np.save(partial, array)
    os.replace(partial, path)


def write_json(path: Path, data: dict) -> None:
    """Write `data` to `path` atomically, through a file of this writer's own: two
    searches of one folder that start together both write `run.json` (the same text)
    before one of them takes the folder's lock (`folder_lock`), and a shared partial
    file made the second rename fail ("No such file or directory")."""
    partial = path.with_name(f".{path.name}.{uuid.uuid4().hex}.part")
    partial.write_text(json.dumps(data))
    os.replace(partial, path)


def fingerprint(run) -> dict:
    """The problem and shard count a run folder belongs to (a sha256 of the rules,
    group, starts and goals)."""
    p = run.problem
    digest = hashlib.sha256()
    for part in (p.rules, p.group, np.array(p.starts, np.uint64), np.array(p.goals, np.uint64)):
        digest.update(np.ascontiguousarray(part).tobytes())
    return {"size": p.size, "problem": digest.hexdigest(), "shards": run.shards}


@contextmanager
def folder_lock(run) -> Iterator[None]:
    """Hold the run's folder (created if missing) for this process while the `with`
    block runs: an exclusive `flock` on its file `lock`, which names the holder; the
    system lets go of it when the process ends, however it ends. Raises ValueError,
    naming the holder, while another process holds it: two searches expanding into one
    folder at once would read each other's half-written shards."""
    Path(run.folder).mkdir(parents=True, exist_ok=True)
    handle = os.open(Path(run.folder) / "lock", os.O_RDWR | os.O_CREAT, 0o644)
    try:
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = os.read(handle, 200).decode(errors="replace") or "another process"
            raise ValueError(
                f"folder {run.folder} is in use by another search ({holder})"
            ) from None
        os.ftruncate(handle, 0)
        os.write(handle, f"pid {os.getpid()} on {socket.gethostname()}".encode())
        yield
    finally:
        os.close(handle)


def check_folder(run, write: bool = True) -> None:
    """Check that the folder's run is this one, or (`write`) write its `run.json`.
    Raises ValueError when the folder holds a search of another problem or shard count,
    or is not a directory that can be written (a file, a parent without permission)."""
    folder = Path(run.folder)
    path = folder / "run.json"
    mine = fingerprint(run)
    if path.exists():
        if (theirs := json.loads(path.read_text())) != mine:
            if {**theirs, "shards": run.shards} == mine:
                raise ValueError(
                    f"{run.folder} holds a search of {theirs['shards']} shards, not {run.shards}"
                )
            raise ValueError(f"{run.folder} holds another search (of another board or starts)")
        return
    existing = next(p for p in (folder, *folder.resolve().parents) if p.exists())
    if not existing.is_dir() or not os.access(existing, os.W_OK | os.X_OK):
        why = "is not a directory" if not existing.is_dir() else "cannot be written"
        raise ValueError(f"folder {run.folder} cannot be made: {existing} {why}")
    if write:
        folder.mkdir(parents=True, exist_ok=True)
        write_json(path, mine)
