"""Streamed puts and reads (``put_file``/``iter_chunks``) on the S3, GCS and Azure emulators
and the local disk: an object of several parts, blocks or resumable chunks round-trips
byte-exact with its SHA-256, read back in chunks of exactly the asked size; a streamed put
is create-only like ``put``, also when the object appears while the upload runs; a failed
upload leaves no object and nothing pending (no multipart upload on moto, no uncommitted
block on Azurite); the small-file path is one ordinary put.

Parts are kept small (S3's 5 MiB minimum; 256 KiB elsewhere), so each test moves a few MiB.
"""

from __future__ import annotations

import base64
import hashlib
import io
import os
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from storage_adapters.base import (
    IntegrityError,
    ObjectExists,
    ObjectNotFound,
    StorageUnavailable,
    StreamingAdapter,
    iter_object,
    put_file,
)
from storage_adapters.local import LocalAdapter
from tests.support.emulators import Azurite, FakeGcsServer, MotoServer

S3_PART = 5 << 20
SMALL_PART = 256 << 10


class Failing(io.RawIOBase):
    """A file whose reads fail once ``fail_after`` bytes have been read; each read gives
    at most ``most`` bytes (a raw file or a pipe answers short)."""

    def __init__(self, data: bytes, fail_after: int, most: int = 1 << 30) -> None:
        self._data, self._at, self._fail_after, self._most = data, 0, fail_after, most

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: Any) -> int:
        if self._at >= self._fail_after:
            raise OSError("the source disk failed")
        n = min(len(buffer), len(self._data) - self._at, self._fail_after - self._at,
                self._most)
        buffer[:n] = self._data[self._at:self._at + n]
        self._at += n
        return n


class Racing(io.RawIOBase):
    """A file that, when its second part is asked for, runs ``meanwhile`` once: another
    writer creates the object while the streamed upload is under way."""

    def __init__(self, data: bytes, part: int, meanwhile: Callable[[], None]) -> None:
        self._data, self._at, self._part, self._meanwhile = data, 0, part, meanwhile

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: Any) -> int:
        if self._meanwhile is not None and self._at >= self._part:
            self._meanwhile()
            self._meanwhile = None  # type: ignore[assignment]
        n = min(len(buffer), len(self._data) - self._at)
        buffer[:n] = self._data[self._at:self._at + n]
        self._at += n
        return n


class StreamingContract:
    """Run against each backend; ``part`` is the adapter's part size in the test."""

    part = SMALL_PART
    parts_kind = ""  # the stats kind counting one request per part, where there is one

    def pending(self, adapter: Any, path: str) -> list[str]:
        """What a failed upload might have left pending at ``path`` (parts, blocks)."""
        return []

    def test_is_a_streaming_adapter(self, adapter: Any) -> None:
        assert isinstance(adapter, StreamingAdapter)

    def test_several_parts_round_trip_byte_exact_in_chunks_of_the_asked_size(
            self, adapter: Any) -> None:
        data = os.urandom(self.part * 2 + self.part // 2 + 7)
        adapter.stats.reset()
        adapter.put_file("big/object", io.BytesIO(data))
        if self.parts_kind:
            assert adapter.stats.counts[self.parts_kind] == 3
        chunk = 100_003
        chunks = list(adapter.iter_chunks("big/object", chunk))
        assert [len(c) for c in chunks[:-1]] == [chunk] * (len(chunks) - 1)
        assert 0 < len(chunks[-1]) <= chunk
        joined = b"".join(chunks)
        assert hashlib.sha256(joined).hexdigest() == hashlib.sha256(data).hexdigest()
        assert joined == data
        assert adapter.get("big/object") == data
        assert adapter.head("big/object").size == len(data)

    def test_a_file_smaller_than_a_part_is_one_put(self, adapter: Any) -> None:
        adapter.stats.reset()
        adapter.put_file("small/object", io.BytesIO(b"tiny"))
        assert adapter.stats.counts["put"] == 1
        assert list(adapter.iter_chunks("small/object", 3)) == [b"tin", b"y"]

    def test_an_empty_file_is_an_empty_object(self, adapter: Any) -> None:
        adapter.put_file("empty/object", io.BytesIO(b""))
        assert list(adapter.iter_chunks("empty/object", 1024)) == []
        assert adapter.get("empty/object") == b""

    def test_a_file_that_answers_short_reads_is_sent_whole(self, adapter: Any) -> None:
        data = os.urandom(self.part * 2 + 1)
        adapter.put_file("raw/object", Failing(data, len(data) + 1, most=1000))
        assert adapter.get("raw/object") == data

    def test_streamed_put_is_create_only(self, adapter: Any) -> None:
        adapter.put("taken/object", b"first")
        with pytest.raises(ObjectExists):
            adapter.put_file("taken/object", io.BytesIO(os.urandom(self.part * 2)))
        with pytest.raises(ObjectExists):
            adapter.put_file("taken/object", io.BytesIO(b"small"))
        assert adapter.get("taken/object") == b"first"
        assert self.pending(adapter, "taken/object") == []

    def test_an_object_created_during_the_upload_wins_and_nothing_is_left_pending(
            self, adapter: Any) -> None:
        """Another writer puts the object after the first part went out: exactly one of the
        two writes succeeds and the object is that one's (on Azurite a path with staged
        blocks already counts as taken, so there the other writer is the one refused)."""
        data = os.urandom(self.part * 3)
        theirs: list[str] = []

        def other_writer() -> None:
            try:
                adapter.put("race/object", b"theirs")
                theirs.append("stored")
            except ObjectExists:
                theirs.append("refused")

        racing = Racing(data, self.part, other_writer)
        try:
            adapter.put_file("race/object", io.BufferedReader(racing, self.part))
            ours = "stored"
        except ObjectExists:
            ours = "refused"
        assert sorted([ours, *theirs]) == ["refused", "stored"]
        assert adapter.get("race/object") == (b"theirs" if theirs == ["stored"] else data)
        assert self.pending(adapter, "race/object") == []

    def test_a_failed_upload_leaves_no_object_and_nothing_pending(self, adapter: Any) -> None:
        data = os.urandom(self.part * 3)
        # The source's own error (the local adapter words it as StorageUnavailable).
        with pytest.raises((OSError, StorageUnavailable)):
            adapter.put_file("failed/object", io.BufferedReader(
                Failing(data, self.part * 2 + 5), self.part))
        with pytest.raises(ObjectNotFound):
            adapter.head("failed/object")
        assert [i.path for i in adapter.list("failed/")] == []
        assert self.pending(adapter, "failed/object") == []
        adapter.put_file("failed/object", io.BytesIO(data))  # the path is free again
        assert adapter.get("failed/object") == data

    def test_missing_object_raises_on_first_next(self, adapter: Any) -> None:
        chunks = adapter.iter_chunks("no/such/object", 1024)
        with pytest.raises(ObjectNotFound):
            next(chunks)

    def test_module_helpers_stream_through_the_adapter(self, adapter: Any) -> None:
        data = os.urandom(self.part + 3)
        put_file(adapter, "helper/object", io.BytesIO(data))
        assert list(iter_object(adapter, "helper/object", self.part)) == [data[:self.part],
                                                                           data[self.part:]]

    def test_chunk_size_must_be_positive(self, adapter: Any) -> None:
        adapter.put("some/object", b"x")
        with pytest.raises(ValueError, match="chunk_size"):
            next(adapter.iter_chunks("some/object", 0))


class TestLocalStreaming(StreamingContract):
    @pytest.fixture
    def adapter(self, tmp_path: Path) -> Iterator[Any]:
        adapter = LocalAdapter(tmp_path / "bucket", fsync=False)
        yield adapter
        adapter.close()

    def test_chunk_size_must_be_positive(self, adapter: Any) -> None:
        pytest.skip("the local adapter reads with whatever size it is given")

    def test_a_file_smaller_than_a_part_is_one_put(self, adapter: Any) -> None:
        pytest.skip("the local adapter has no parts: every file is copied in chunks")

    def test_an_object_created_during_the_upload_wins_and_nothing_is_left_pending(
            self, adapter: Any) -> None:
        data = os.urandom(self.part * 3)
        racing = Racing(data, self.part, lambda: adapter.put("race/object", b"theirs"))
        with pytest.raises(ObjectExists):
            adapter.put_file("race/object", io.BufferedReader(racing, self.part))
        assert adapter.get("race/object") == b"theirs"
        assert os.listdir(adapter.root / ".memplane-tmp") == []


class TestS3Streaming(StreamingContract):
    part = S3_PART
    parts_kind = "put_part"

    @pytest.fixture
    def adapter(self, s3_config: dict[str, Any], moto_server: MotoServer) -> Iterator[Any]:
        from storage_adapters.s3 import S3Adapter

        self.bucket = s3_config["bucket"]
        self.raw = moto_server.client()
        adapter = S3Adapter.from_config(s3_config)
        adapter.part_size = S3_PART
        yield adapter
        adapter.close()
        self.raw.close()

    def pending(self, adapter: Any, path: str) -> list[str]:
        uploads = self.raw.list_multipart_uploads(Bucket=self.bucket).get("Uploads", [])
        return [u["Key"] for u in uploads]

    def test_each_part_carries_its_sha256_and_a_put_is_one_request(
            self, adapter: Any) -> None:
        adapter.stats.reset()
        adapter.put_file("one/object", io.BytesIO(b"z" * (S3_PART - 1)))
        assert dict(adapter.stats.counts) == {"put": 1}
        adapter.stats.reset()
        adapter.put_file("two/object", io.BytesIO(b"z" * (S3_PART + 1)))
        assert dict(adapter.stats.counts) == {"head": 1, "put_start": 1, "put_part": 2,
                                              "put_complete": 1}


    def test_the_parts_checksum_is_recomputed_while_streaming(self, adapter: Any) -> None:
        """S3 keeps a multipart object's SHA-256 as the SHA-256 of its parts' SHA-256s; the
        read recomputes it from the bytes it streams: the stored one for the true bytes, a
        different one for bytes with one bit flipped."""
        from storage_adapters.s3_reads import PART_SIZE_META
        from storage_adapters.s3_reads import Composite as _Composite

        data = os.urandom(S3_PART * 2 + 9)
        adapter.put_file("sum/object", io.BytesIO(data))
        response = self.raw.get_object(Bucket=self.bucket, Key="sum/object",
                                       ChecksumMode="ENABLED")
        response["Body"].close()
        assert response["Metadata"] == {PART_SIZE_META: str(S3_PART)}
        assert response["ChecksumSHA256"].endswith("-3")
        for altered, expected in ((data, True), (data[:-1] + bytes([data[-1] ^ 1]), False)):
            composite = _Composite.of(response)
            assert composite is not None
            for start in range(0, len(altered), 777_777):  # chunks that straddle parts
                composite.update(altered[start:start + 777_777])
            assert composite.matches() is expected

    def test_a_multipart_object_that_does_not_add_up_is_refused_at_its_end(
            self, adapter: Any) -> None:
        """Parts that do not give the stored checksum (here: recorded with another part
        size than they have) are refused after the last chunk, with IntegrityError."""
        from storage_adapters.s3_reads import PART_SIZE_META

        data = os.urandom(S3_PART + 100)
        upload = self.raw.create_multipart_upload(
            Bucket=self.bucket, Key="bad/multipart", ChecksumAlgorithm="SHA256",
            Metadata={PART_SIZE_META: str(S3_PART - 1)})["UploadId"]
        done = []
        for number, part in enumerate([data[:S3_PART], data[S3_PART:]], 1):
            digest = base64.b64encode(hashlib.sha256(part).digest()).decode()
            answer = self.raw.upload_part(
                Bucket=self.bucket, Key="bad/multipart", UploadId=upload, PartNumber=number,
                Body=part, ChecksumAlgorithm="SHA256", ChecksumSHA256=digest)
            done.append({"PartNumber": number, "ETag": answer["ETag"],
                         "ChecksumSHA256": digest})
        self.raw.complete_multipart_upload(Bucket=self.bucket, Key="bad/multipart",
                                           UploadId=upload, MultipartUpload={"Parts": done})
        received = []
        with pytest.raises(IntegrityError, match="do not match"):
            for chunk in adapter.iter_chunks("bad/multipart", 1 << 20):
                received.append(chunk)
        assert b"".join(received) == data  # every byte came, and then the refusal


class TestGCSStreaming(StreamingContract):
    @pytest.fixture
    def adapter(self, gcs_config: dict[str, Any], gcs_server: FakeGcsServer) -> Iterator[Any]:
        from storage_adapters.gcs import GCSAdapter

        adapter = GCSAdapter.from_config(gcs_config)
        adapter.part_size = SMALL_PART
        yield adapter
        adapter.close()

    def test_an_object_created_during_the_upload_wins_and_nothing_is_left_pending(
            self, adapter: Any) -> None:
        """fake-gcs-server ignores ``ifGenerationMatch`` on resumable uploads (real GCS
        applies it when the upload is finalised), so what is checked here is that the
        upload asks for it: the session is opened with ``ifGenerationMatch=0``."""
        urls: list[str] = []
        adapter._client("put")._http.hooks["response"].append(
            lambda response, *args, **kwargs: urls.append(response.request.url))
        adapter.put_file("race/object", io.BytesIO(os.urandom(SMALL_PART * 2)))
        opened = [u for u in urls if "uploadType=resumable" in u and "upload_id" not in u]
        assert len(opened) == 1 and "ifGenerationMatch=0" in opened[0]

    def test_a_file_that_cannot_seek_is_sent_whole(self, adapter: Any) -> None:
        data = os.urandom(SMALL_PART * 3 + 11)
        unseekable = Failing(data, len(data) + 1, most=4096)
        assert not unseekable.seekable()
        adapter.stats.reset()
        adapter.put_file("pipe/object", unseekable)
        assert adapter.stats.counts["put"] >= 4  # the session, then one request a chunk
        assert adapter.get("pipe/object") == data


class TestAzureStreaming(StreamingContract):
    parts_kind = "put_block"

    @pytest.fixture
    def adapter(self, azure_config: dict[str, Any], azurite_server: Azurite) -> Iterator[Any]:
        from storage_adapters.azure import AzureAdapter

        self.raw = azurite_server.client().get_container_client(azure_config["container"])
        adapter = AzureAdapter.from_config(azure_config)
        adapter.part_size = SMALL_PART
        yield adapter
        adapter.close()
        self.raw.close()

    def pending(self, adapter: Any, path: str) -> list[str]:
        from azure.core.exceptions import ResourceNotFoundError

        try:
            blocks = self.raw.get_blob_client(path).get_block_list("uncommitted")
        except ResourceNotFoundError:
            return []
        return [b.id for b in blocks[1]]

    def test_the_whole_blob_md5_is_stored_and_checked_on_read(self, adapter: Any) -> None:
        data = os.urandom(SMALL_PART * 2 + 3)
        adapter.put_file("md5/object", io.BytesIO(data))
        stored = self.raw.get_blob_client("md5/object").get_blob_properties()
        assert bytes(stored.content_settings.content_md5) == hashlib.md5(data).digest()
