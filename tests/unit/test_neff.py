"""NEFF container: layout, round trip, determinism and a hostile-input battery for the reader."""

from __future__ import annotations

import gzip
import hashlib
import io
import json
import struct
import tarfile
import time
import zlib

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from nkic import __version__
from nkic.runtime.encoding import Instr, Operand, encode_stream, engine_sem, f32_bits, queue_sem
from nkic.runtime.neff import Neff, NeffFormatError, Subgraph, Variable, load_neff, read_neff, save_neff, write_neff

X = Operand("hbm", "float32", ((64, 128), (1, 64)), var_id=0)
Y = Operand("hbm", "float32", ((64, 128), (1, 64)), var_id=1)
T = Operand("sbuf", "float32", ((1, 128), (1, 64)))


def sample_neff(num_subgraphs: int = 2) -> Neff:
    sgs = []
    for i in range(num_subgraphs):
        sp = [
            Instr("DMA_COPY", "sp", (T, X), (0,), signal_sem=queue_sem(0), inst_id=1),
            Instr("DMA_COPY", "sp", (Y, T), (1,), wait_sem=engine_sem("act"), wait_value=1, signal_sem=queue_sem(1)),
        ]
        act = [Instr("ACTIVATE", "act", (T, T), (1, f32_bits(0.5)), wait_sem=queue_sem(0), wait_value=1,
                     signal_sem=engine_sem("act"), inst_id=2 + i)]  # fmt: skip
        sgs.append(Subgraph(f"sg{i:02d}", {"pe": [], "act": act, "dve": [], "pool": [], "sp": sp}))
    variables = [Variable("x", 0, "input", (128, 64), "float32"), Variable("y", 1, "output", (128, 64), "float32"),
                 Variable("scratch", 2, "tmp-buf", (16,), "bfloat16")]  # fmt: skip
    return Neff("my_kernel", variables, sgs, {"kernel": "my_kernel", "source": "k.py", "args": [1, 2]})


@pytest.fixture(scope="module")
def good() -> bytes:
    return write_neff(sample_neff())


def members_of(data: bytes) -> dict[str, bytes]:
    with tarfile.open(fileobj=io.BytesIO(gzip.decompress(data[1024:]))) as tar:
        return {m.name: tar.extractfile(m).read() for m in tar}  # type: ignore[union-attr]


def rewrap(good: bytes, payload: bytes) -> bytes:
    """A header that is valid for ``payload`` (right size and hash), so the reader must look inside."""
    header = bytearray(good[:1024])
    struct.pack_into("<Q", header, 16, len(payload))
    header[172:204] = hashlib.sha256(payload).digest()
    return bytes(header) + payload


def tgz(entries: list[tuple[tarfile.TarInfo, bytes]]) -> bytes:
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w", format=tarfile.PAX_FORMAT) as tar:
        for info, data in entries:
            info.size = len(data) if info.isreg() else 0
            tar.addfile(info, io.BytesIO(data) if info.isreg() else None)
    return gzip.compress(buf.getvalue(), mtime=0)


def entries_of(good: bytes, drop: str | None = None) -> list[tuple[tarfile.TarInfo, bytes]]:
    return [(tarfile.TarInfo(n), d) for n, d in sorted(members_of(good).items()) if n != drop]


# ---------------------------------------------------------------------------------------------------------------


def test_round_trip(good: bytes) -> None:
    assert read_neff(good) == sample_neff()


def test_deterministic(good: bytes) -> None:
    assert write_neff(sample_neff()) == good
    assert write_neff(read_neff(good)) == good


def test_save_load(tmp_path, good: bytes) -> None:  # type: ignore[no-untyped-def]
    path = tmp_path / "k.neff"
    save_neff(sample_neff(), path)
    assert path.read_bytes() == good and load_neff(path) == sample_neff()


def test_header_layout(good: bytes) -> None:
    payload = good[1024:]
    pkg, hsize, dsize, vmaj, vmin = struct.unpack_from("<5Q", good, 0)
    assert (pkg, hsize, dsize, vmaj, vmin) == (1, 1024, len(payload), 2, 0)
    assert good[40:168].rstrip(b"\0") == f"nkic {__version__}".encode()
    assert struct.unpack_from("<I", good, 168) == (2,)
    assert good[172:204] == hashlib.sha256(payload).digest()
    assert good[204:220] == hashlib.sha256(b"my_kernel" + payload).digest()[:16]
    assert good[220:476].rstrip(b"\0") == b"my_kernel"
    assert struct.unpack_from("<I", good, 476) == (2,) and struct.unpack_from("<QI", good, 544) == (0, 2)
    assert not good[480:544].strip(b"\0") and not good[556:1024].strip(b"\0")


def test_payload_is_normalised_tgz(good: bytes) -> None:
    assert good[1024:1026] == b"\x1f\x8b" and good[1028:1032] == b"\0\0\0\0"  # gzip mtime 0
    with tarfile.open(fileobj=io.BytesIO(gzip.decompress(good[1024:]))) as tar:
        infos = tar.getmembers()
    names = [m.name for m in infos]
    assert names == sorted(names)
    assert all((m.mtime, m.uid, m.gid, m.uname, m.gname, m.mode) == (0, 0, 0, "", "", 0o644) for m in infos)
    assert len(names) == 3 + 2 * 11


def test_member_contents(good: bytes) -> None:
    m = members_of(good)
    kelf = json.loads(m["kelf-0.json"])
    assert kelf == {"graphs": [{"name": "sg00", "definition": "sg00/def.json"},
                               {"name": "sg01", "definition": "sg01/def.json"}], "version": "0.5"}  # fmt: skip
    defn = json.loads(m["sg00/def.json"])
    assert defn["name"] == "definition" and defn["pe"] == "PE.json" and defn["act_instr"] == "Activation.bin"
    assert defn["var"]["scratch"] == {"type": "tmp-buf", "var_id": 2, "size": 32, "shape": [16],
                                      "dtype": "bfloat16"}  # fmt: skip
    assert set(defn["dma_queue"]) == {"q0", "q1"}
    node = json.loads(m["neff.json"])["nodes"][1]
    assert node["subgraph"] == "sg01" and [(e["name"], e["usage"]) for e in node["io"]] == [("x", "IN"), ("y", "OUT")]
    assert json.loads(m["info.json"]) == {"tool_version": f"nkic {__version__}",
                                          "metadata": sample_neff().metadata}  # fmt: skip
    sp = json.loads(m["sg00/SP.json"])
    assert [d["desc"]["from"] for d in sp["dma"]] == ["x", "sbuf"] and sp["dma"][0]["queue"] == "q0"
    act = json.loads(m["sg00/Activation.json"])["instructions"]
    assert act[0]["mnemonic"] == "ACTIVATE" and act[0]["imms"]["func"] == "exp" and act[0]["imms"]["scale"] == 0.5
    assert m["sg00/PE.bin"] == encode_stream("pe", [])


def test_writer_validates() -> None:
    neff = sample_neff()
    neff.variables[1].var_id = 0
    with pytest.raises(ValueError):
        write_neff(neff)
    neff = sample_neff()
    neff.subgraphs[1].name = "sg07"
    with pytest.raises(ValueError):
        write_neff(neff)
    neff = sample_neff()
    neff.subgraphs[0].engines["sp"].append(Instr("DMA_COPY", "sp", (T, Operand("hbm", "float32", ((1, 1),),
                                                                                 var_id=9))))  # fmt: skip
    with pytest.raises(ValueError, match="unknown variable"):
        write_neff(neff)


# ---------------------------------------------------------------------------------------------------------------
# hostile input


def _rejects(data: bytes, match: str | None = None, **kw: int) -> None:
    with pytest.raises(NeffFormatError, match=match):
        read_neff(data, **kw)


def test_truncation(good: bytes) -> None:
    for n in sorted({0, 1, 7, 8, 171, 500, 1023, 1024, 1025, 1034, len(good) // 2, len(good) - 9, len(good) - 1}):
        _rejects(good[:n])


def test_truncated_payload_with_valid_hash(good: bytes) -> None:
    payload = good[1024:]
    for n in (5, 10, 200, len(payload) - 8, len(payload) - 1):
        _rejects(rewrap(good, payload[:n]))


@pytest.mark.parametrize(
    "offset",
    [0, 9, 17, 25, 33, 168, 180, 230, 476, 500, 544, 552, 600, 1023],
    ids=["pkg", "hsize", "dsize", "vmaj", "vmin", "num_tpb", "hash", "name", "req", "per_node", "features", "lnc",
         "pad", "pad_end"],
)  # fmt: skip
def test_header_bit_flips(good: bytes, offset: int) -> None:
    bad = bytearray(good)
    bad[offset] ^= 0x04
    _rejects(bytes(bad))


def test_payload_bit_flips_caught_by_hash(good: bytes) -> None:
    for offset in (1024, 1030, 1100, len(good) // 2, len(good) - 1):
        bad = bytearray(good)
        bad[offset] ^= 0x80
        _rejects(bytes(bad), match="SHA-256")


def test_oversized_data_size(good: bytes) -> None:
    bad = bytearray(good)
    struct.pack_into("<Q", bad, 16, 1 << 62)
    _rejects(bytes(bad), match="data_size")


def test_gzip_bomb_is_bounded(good: bytes) -> None:
    comp = zlib.compressobj(1, zlib.DEFLATED, 31)
    zeros = bytes(1 << 20)
    bomb = b"".join(comp.compress(zeros) for _ in range(64)) + comp.flush()  # 64 MiB of zeros in ~300 KB
    start = time.perf_counter()
    _rejects(rewrap(good, bomb), match="more than", max_unpacked_bytes=1 << 20)
    assert time.perf_counter() - start < 0.5  # stops at the limit instead of inflating everything


def test_trailing_garbage_after_gzip(good: bytes) -> None:
    _rejects(rewrap(good, good[1024:] + b"junk"), match="trailing")


def test_plain_tar_payload_is_accepted(good: bytes) -> None:
    assert read_neff(rewrap(good, gzip.decompress(good[1024:]))) == sample_neff()


def _member(name: str, kind: bytes = tarfile.REGTYPE, link: str = "") -> tarfile.TarInfo:
    info = tarfile.TarInfo(name)
    info.type, info.linkname = kind, link
    return info


@pytest.mark.parametrize(
    "extra, match",
    [
        ((_member("../x"), b"x"), "unsafe"),
        ((_member("/etc/passwd"), b"x"), "unsafe"),
        ((_member("sg00/../../x"), b"x"), "unsafe"),
        ((_member("link", tarfile.SYMTYPE, "/etc/passwd"), b""), "regular file"),
        ((_member("hard", tarfile.LNKTYPE, "neff.json"), b""), "regular file"),
        ((_member("dev", tarfile.CHRTYPE), b""), "regular file"),
        ((_member("fifo", tarfile.FIFOTYPE), b""), "regular file"),
        ((_member("sg00", tarfile.DIRTYPE), b""), "regular file"),
        ((_member("evil.sh"), b"rm -rf"), "unexpected"),
        ((_member("sg00/extra.json"), b"{}"), "unexpected"),
        ((_member("sg05/def.json"), b"{}"), "unexpected"),
        ((_member("neff.json"), b"{}"), "duplicate"),
    ],
)
def test_hostile_members(good: bytes, extra: tuple[tarfile.TarInfo, bytes], match: str) -> None:
    _rejects(rewrap(good, tgz(entries_of(good) + [extra])), match=match)


@pytest.mark.parametrize(
    "name, content, match",
    [
        ("sg00/def.json", b"{not json", "not valid JSON"),
        ("sg00/def.json", b"[1, 2]", "JSON object"),
        ("neff.json", b"\xff\xfe", "not valid JSON"),
        ("kelf-0.json", b'{"graphs": [], "version": "0.5"}', "graphs"),
        ("sg01/def.json", None, "missing"),
        ("sg00/PE.bin", None, "missing"),
        ("sg00/PE.bin", b"NKIS\x01\x00", "ISA stream"),
        ("sg00/PE.bin", encode_stream("dve", []), "dve stream"),
        ("sg00/SP.json", b'{"instructions": []}', "does not list"),
        ("info.json", b'{"metadata": 3}', "info.json"),
        ("info.json", b"[" * 100000 + b"]" * 100000, "not valid JSON"),
    ],
)
def test_bad_member_contents(good: bytes, name: str, content: bytes | None, match: str) -> None:
    entries = entries_of(good, drop=name)
    if content is not None:
        entries.append((tarfile.TarInfo(name), content))
    _rejects(rewrap(good, tgz(entries)), match=match)


def _edit_json(good: bytes, name: str, edit) -> bytes:  # type: ignore[no-untyped-def]
    entries = entries_of(good, drop=name)
    obj = json.loads(members_of(good)[name])
    edit(obj)
    return rewrap(good, tgz(entries + [(tarfile.TarInfo(name), json.dumps(obj).encode())]))


@pytest.mark.parametrize(
    "name, edit, match",
    [
        ("sg00/def.json", lambda d: d["var"]["x"].update(size=3), "size"),
        ("sg00/def.json", lambda d: d["var"]["x"].update(dtype="float64"), "dtype"),
        ("sg00/def.json", lambda d: d["var"]["x"].update(type="weird"), "type"),
        ("sg00/def.json", lambda d: d["var"]["x"].update(shape="big"), "shape"),
        ("sg00/def.json", lambda d: d["var"].pop("x"), "unknown variable id 0"),
        ("sg01/def.json", lambda d: d["var"]["y"].update(shape=[64, 128]), "size|disagree"),
        ("sg00/def.json", lambda d: d.update(pe="Other.json"), "PE.json"),
        ("sg00/def.json", lambda d: d.update(dma_queue={}), "not declared"),
        ("neff.json", lambda d: d["nodes"][0]["io"][0].update(usage="OUT"), "disagrees"),
        ("neff.json", lambda d: d.update(name="other"), "name"),
        ("kelf-0.json", lambda d: d.update(version="9"), "version"),
        ("neff.json", lambda d: d["nodes"][0]["io"][0].update(name=["x"]), "disagrees"),
        ("sg00/def.json", lambda d: d.update(var=[]), "'var' must be an object"),
    ],
)
def test_inconsistent_json(good: bytes, name: str, edit, match: str) -> None:  # type: ignore[no-untyped-def]
    _rejects(_edit_json(good, name, edit), match=match)


@settings(max_examples=60, deadline=None)
@given(st.data())
def test_fuzzed_payload_never_crashes(good: bytes, data: st.DataObject) -> None:
    raw = bytearray(gzip.decompress(good[1024:]))
    for _ in range(data.draw(st.integers(1, 3))):
        raw[data.draw(st.integers(0, len(raw) - 1))] = data.draw(st.integers(0, 255))
    try:
        read_neff(rewrap(good, gzip.compress(bytes(raw), mtime=0)))
    except NeffFormatError:
        pass
