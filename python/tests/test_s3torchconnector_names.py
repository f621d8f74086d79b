"""objdirect.torch under s3torchconnector's names, against the real server: code written for
s3torchconnector (S3MapDataset, S3IterableDataset, S3Checkpoint, S3ReaderConstructor,
S3ClientConfig, with its keyword arguments) runs after an import change, credentials from the
environment as s3torchconnector takes them."""

import io
import json
import time

import pytest
import torch
import torch.utils.data

from conftest import ACCESS_KEY, SECRET_KEY
from objdirect.torch import (S3Checkpoint, S3ClientConfig, S3IterableDataset, S3MapDataset,
                             S3Reader, S3ReaderConstructor, S3Writer)
import objdirect
import objdirect.torch as odt

REGION = "us-east-1"


@pytest.fixture
def env_keys(monkeypatch):
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", ACCESS_KEY)
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", SECRET_KEY)


def _objects(client, bucket, n=12):
    data = {f"p/{i:02d}": bytes([i]) * (1000 + 37 * i) for i in range(n)}
    for k, v in data.items():
        client.put(bucket, k, v)
    return data


def _key_and_bytes(reader):
    return reader.key, reader.read()


def _gets(server, key_prefix, before):
    """(GETs, bytes sent) the access log shows for keys under key_prefix after line `before`."""
    time.sleep(0.3)  # the server logs a request after its reply
    with open(server.access_log) as f:
        rows = [json.loads(line) for line in f if line.endswith("\n")][before:]
    rows = [r for r in rows if r["op"] == "GetObject" and r["key"].startswith(key_prefix)]
    return len(rows), sum(r["bytes_out"] for r in rows)


def _log_len(server):
    with open(server.access_log) as f:
        return sum(1 for line in f if line.endswith("\n"))


def test_datasets_take_s3torchconnector_arguments(server, client, bucket, env_keys):
    data = _objects(client, bucket)
    uri = f"s3://{bucket}/p/"
    m = S3MapDataset.from_prefix(uri, region=REGION, endpoint=server.endpoint,
                                 transform=_key_and_bytes)
    assert len(m) == 12 and [m[i] for i in range(len(m))] == sorted(data.items())
    it = S3IterableDataset.from_prefix(uri, region=REGION, endpoint=server.endpoint,
                                       transform=_key_and_bytes, enable_sharding=True)
    loader = torch.utils.data.DataLoader(it, batch_size=None, num_workers=2)
    got = [(k, bytes(v)) for k, v in loader]
    assert sorted(got) == sorted(data.items())  # each sample once over 2 workers
    one = S3MapDataset.from_objects(f"s3://{bucket}/p/03", region=REGION,
                                    endpoint=server.endpoint, transform=_key_and_bytes)
    assert len(one) == 1 and one[0] == ("p/03", data["p/03"])  # one URI, not its characters
    several = S3IterableDataset.from_objects([f"s3://{bucket}/p/05", f"s3://{bucket}/p/01"],
                                             region=REGION, endpoint=server.endpoint,
                                             transform=_key_and_bytes)
    assert list(several) == [("p/05", data["p/05"]), ("p/01", data["p/01"])]
    assert S3Reader is odt.ObjectReader and S3Writer is odt.ObjectWriter
    assert isinstance(m[0], tuple) and isinstance(S3MapDataset.from_prefix(
        uri, region=REGION, endpoint=server.endpoint), odt.MapDataset)


@pytest.mark.parametrize("how", ["sequential", "range_based", "range_based_0", "default"])
def test_reader_constructor_decides_what_items_fetch(server, client, bucket, env_keys, how):
    """Each item reads 5 bytes at offset 10: sequential (and default) fetch whole objects in
    one GET each; range_based one window GET each (the window covers the object: 8 MiB), and
    with buffer_size=0 a GET of exactly the 5 bytes."""
    data = _objects(client, bucket, n=6)
    ctor = {"sequential": S3ReaderConstructor.sequential(),
            "default": S3ReaderConstructor.default(),
            "range_based": S3ReaderConstructor.range_based(),
            "range_based_0": S3ReaderConstructor.range_based(buffer_size=0)}[how]

    def peek(r):
        r.seek(10)
        return r.read(5)

    before = _log_len(server)
    m = S3MapDataset.from_prefix(f"s3://{bucket}/p/", region=REGION, endpoint=server.endpoint,
                                 transform=peek, reader_constructor=ctor)
    assert [m[i] for i in range(len(m))] == [v[10:15] for _, v in sorted(data.items())]
    gets, sent = _gets(server, "p/", before)
    whole = sum(len(v) for v in data.values())
    assert gets == 6
    assert sent == {"sequential": whole, "default": whole, "range_based": whole - 6 * 10,
                    "range_based_0": 6 * 5}[how], (how, sent)
    with pytest.raises(ValueError):
        S3ReaderConstructor.range_based(buffer_size=-1)
    with pytest.raises(ValueError):
        S3MapDataset.from_prefix(f"s3://{bucket}/p/", reader_constructor=odt.ReaderConstructor(
            "mapped"), region=REGION, endpoint=server.endpoint)


def test_s3checkpoint_round_trip_reads_sequentially_by_default(server, client, bucket,
                                                                env_keys):
    state = {"w": torch.randn(64, 64), "step": 7, "nested": {"b": torch.arange(10)}}
    uri = f"s3://{bucket}/ckpt/model.pt"
    ckpt = S3Checkpoint(region=REGION, endpoint=server.endpoint)
    with ckpt.writer(uri) as w:
        torch.save(state, w)
    for reader_constructor, gets_max in ((None, 2), (S3ReaderConstructor.range_based(0), None)):
        ck = S3Checkpoint(REGION, server.endpoint, reader_constructor=reader_constructor)
        before = _log_len(server)
        with ck.reader(uri) as r:
            got = torch.load(r)
        assert torch.equal(got["w"], state["w"]) and got["step"] == 7
        assert torch.equal(got["nested"]["b"], state["nested"]["b"])
        gets, _ = _gets(server, "ckpt/", before)
        if gets_max is not None:  # sequential: the whole object (a first window, the rest)
            assert gets <= gets_max, gets
        else:  # range_based(0): one GET per read torch.load makes
            assert gets > 4, gets
    # objdirect's Checkpoint keeps its ranged default; a call's mode= wins over the constructor
    plain = odt.Checkpoint(region=REGION, endpoint=server.endpoint)
    assert plain.reader(uri)._mode == "ranged"
    assert ck.reader(uri, mode="whole")._mode == "whole"


def test_s3clientconfig_maps_to_the_client_settings(server, client, bucket, env_keys):
    cfg = S3ClientConfig(part_size=5 << 20, force_path_style=True, max_attempts=2,
                         throughput_target_gbps=100.0)
    ckpt = S3Checkpoint(REGION, server.endpoint, s3client_config=cfg)
    c = ckpt._source.get()
    assert (c.config["part_size_bytes"], c.config["max_attempts"],
            c.config["addressing_style"]) == (5 << 20, 2, "path")
    with ckpt.writer(f"s3://{bucket}/parts.bin") as w:
        w.write(b"z" * (11 << 20))  # parts of 5 MiB: 3
    assert w.result.etag.endswith("-3"), w.result.etag
    m = S3MapDataset.from_prefix(f"s3://{bucket}/", region=REGION, endpoint=server.endpoint,
                                 s3client_config=cfg, transform=lambda r: r.size)
    assert list(m) == [11 << 20]
    assert S3ClientConfig().client_config().addressing_style == "virtual"  # its default
    assert S3ClientConfig().client_config().max_attempts == 10
    with pytest.raises(NotImplementedError):
        S3ClientConfig(unsigned=True).client_config()
    with pytest.raises(TypeError):
        S3MapDataset.from_prefix(f"s3://{bucket}/", s3client_config=cfg,
                                 config=objdirect.ClientConfig(), endpoint=server.endpoint)
    with pytest.raises(TypeError):
        S3IterableDataset.from_prefix(f"s3://{bucket}/", s3client_config={"part_size": 1},
                                      endpoint=server.endpoint)
