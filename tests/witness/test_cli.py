"""`memplane witness key` and `memplane witness serve`, as the tenant runs them: a real child
process on a real port, killed with SIGKILL and started again on the same state."""

from __future__ import annotations

import socket
import stat
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from control_plane.tlog import note

from .logs import Log, new_log
from .process import WitnessProcess, run_cli


@pytest.fixture
def key_file(tmp_path: Path) -> Path:
    return tmp_path / "witness.key"


@pytest.fixture
def vkey(key_file: Path) -> str:
    made = run_cli("witness", "key", "--out", str(key_file), "--name",
                   "witness.example.com/w1")
    assert made.returncode == 0, made.stderr
    return made.stdout.strip()


@pytest.fixture
def log() -> Log:
    return new_log()


@pytest.fixture
def served(key_file: Path, vkey: str, log: Log, tmp_path: Path) -> Iterator[WitnessProcess]:
    process = WitnessProcess(key_file, [log.vkey], tmp_path / "state").start()
    try:
        yield process
    finally:
        process.stop()


def test_key_writes_a_private_file_once_and_prints_the_cosignature_vkey(
        key_file: Path, vkey: str) -> None:
    assert stat.S_IMODE(key_file.stat().st_mode) == 0o600
    parsed = note.parse_verifier(vkey)
    assert (parsed.name, parsed.kind) == ("witness.example.com/w1", note.COSIGNATURE)
    again = run_cli("witness", "key", "--out", str(key_file))
    assert (again.returncode, again.stdout.strip()) == (0, vkey)
    assert key_file.read_text().startswith("PRIVATE+KEY+witness.example.com/w1+")
    bad = run_cli("witness", "key", "--out", str(key_file.with_name("x.key")), "--name",
                  "has space")
    assert bad.returncode == 1
    assert "--name: a key name must be non-empty, without spaces or '+'" in bad.stderr
    assert not key_file.with_name("x.key").exists()


def test_the_served_witness_refuses_a_fork_before_and_after_a_kill(
        served: WitnessProcess, vkey: str, log: Log) -> None:
    fork = log.fork(5)
    assert httpx.get(f"{served.url}/", timeout=5).text == vkey + "\n"
    first = served.add_checkpoint(log.request(0, 7))
    assert (first.status_code, first.headers["content-type"]) == (
        200, "text/plain; charset=utf-8")
    cosigned = log.checkpoint(7) + first.text
    assert note.verify_cosignature(cosigned, note.parse_verifier(vkey)) > 0

    def fork_answers() -> list[tuple[int, str, str]]:
        answers = [served.add_checkpoint(fork.request(7, 10)),
                   served.add_checkpoint(fork.request(5, 10))]
        return [(a.status_code, a.headers["content-type"], a.text) for a in answers]

    expected = [(422, "text/plain; charset=utf-8", "the consistency proof does not verify\n"),
                (409, "text/x.tlog.size", "7\n")]
    assert fork_answers() == expected
    served.kill()
    served.start()
    assert fork_answers() == expected
    extension = served.add_checkpoint(log.request(7, 12))
    assert extension.status_code == 200
    assert note.verify_cosignature(log.checkpoint(12) + extension.text,
                                   note.parse_verifier(vkey)) > 0


def test_the_served_witness_answers_bad_requests_and_unknown_paths(
        served: WitnessProcess, log: Log) -> None:
    impostor = new_log()
    assert served.add_checkpoint(impostor.request(0, 3)).status_code == 403
    assert served.add_checkpoint(b"old x\n\n").status_code == 400
    assert httpx.post(f"{served.url}/other", content=b"", timeout=5).status_code == 404
    with socket.create_connection(("127.0.0.1", served.port), timeout=5) as sock:
        sock.sendall(b"POST /add-checkpoint HTTP/1.1\r\nHost: x\r\n"
                     b"Content-Length: 9999999\r\n\r\n")
        assert sock.recv(100).startswith(b"HTTP/1.1 400 ")


def test_one_state_directory_serves_one_witness(served: WitnessProcess, key_file: Path,
                                                 log: Log, tmp_path: Path) -> None:
    second = WitnessProcess(key_file, [log.vkey], tmp_path / "state")
    try:
        with pytest.raises(RuntimeError, match="another witness process holds"):
            second.start()
    finally:
        second.stop()


def test_serve_refuses_a_log_key_that_is_a_witness_key(key_file: Path, vkey: str,
                                                       tmp_path: Path) -> None:
    refused = run_cli("witness", "serve", "--key", str(key_file), "--log-vkey", vkey,
                      "--state", str(tmp_path / "s"), "--port", "1")
    assert refused.returncode == 1
    assert refused.stderr == ("memplane: a log verifier key must be an Ed25519 signed-note "
                              "key (type 0x01), as GET /v1/audit/verifier-key gives it\n")
