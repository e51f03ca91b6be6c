"""`memplane witness`: a transparency-log witness a tenant runs in its own infrastructure.

``memplane witness key --out witness.key`` makes the witness's key (mode 0600) and prints its
verifier key, which the tenant registers with ``PUT /v1/audit/witnesses``;
``memplane witness serve`` answers C2SP tlog-witness ``POST /add-checkpoint`` requests
(control_plane/tlog/witness.py says what it checks and keeps). ``GET /`` answers the
witness's verifier key. The service is plain HTTP: put TLS in front of it (a reverse proxy)
when it is reached over a network the tenant does not control.
"""

from __future__ import annotations

import contextlib
import stat
import sys
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Annotated, Any

import typer

READ_SECONDS = 10.0


def _fail(sentence: str) -> typer.Exit:
    typer.echo(f"memplane: {sentence}", err=True)
    return typer.Exit(1)


def witness_key(
    out: Annotated[Path, typer.Option("--out", help="The key file (created mode 0600 if it "
                                      "does not exist; an existing one is only read).")],
    name: Annotated[str, typer.Option(help="The witness's name, when the key is created "
                                      "(no spaces or '+'), such as witness.example.com/w1.")]
    = "memplane-witness",
) -> None:
    """Create the witness's key in OUT unless it exists, and print its verifier key (the
    cosignature key, type 0x04) for PUT /v1/audit/witnesses."""
    from control_plane.secret_files import SecretFileExists, create_secret_file
    from control_plane.tlog import note
    from control_plane.tlog.witness import WitnessError, cosigner_verifier, new_key

    if not out.exists():
        try:
            create_secret_file(out, new_key(name))
        except note.NoteError as exc:
            raise _fail(f"--name: {exc}") from None
        except SecretFileExists:
            pass  # another process made it just now: read that one
        except OSError as exc:
            raise _fail(f"cannot write {out} ({type(exc).__name__})") from None
        else:
            typer.echo(f"wrote {out}", err=True)
    try:
        signer = _load_key(out)
    except WitnessError as exc:
        raise _fail(str(exc)) from None
    typer.echo(cosigner_verifier(signer).text())


def _load_key(path: Path) -> Any:
    from control_plane.tlog.witness import WitnessError, parse_key

    try:
        text = path.read_text(encoding="utf-8")
        mode = path.stat().st_mode
    except (OSError, UnicodeDecodeError) as exc:
        raise WitnessError(f"cannot read the key file {path} ({type(exc).__name__})") from None
    if mode & (stat.S_IRWXG | stat.S_IRWXO):
        typer.echo(f"memplane: warning: {path} is readable by other users; make it "
                   f"mode 0600 (chmod 600 {path})", err=True)
    return parse_key(text)


def _log_key(value: str) -> Any:
    """A --log-vkey: the verifier key itself, or a file holding it."""
    from control_plane.tlog.witness import parse_log_key

    path = Path(value)
    with contextlib.suppress(OSError, ValueError):
        if path.is_file():
            value = path.read_text(encoding="utf-8")
    return parse_log_key(value)


def witness_serve(
    key: Annotated[Path, typer.Option("--key", help="The witness key file (`memplane witness "
                                      "key` makes one).")],
    log_vkey: Annotated[list[str], typer.Option(
        "--log-vkey", help="A log's verifier key (GET /v1/audit/verifier-key), or a file "
        "holding it; repeat for several. A key named N covers the origins N and N/…")],
    state: Annotated[Path, typer.Option("--state", help="Directory of the witness's state: "
                                        "the last checkpoint it cosigned of each log. Back it "
                                        "up; never start afresh.")],
    port: Annotated[int, typer.Option(help="Port to listen on.")] = 7380,
    host: Annotated[str, typer.Option(help="Interface to listen on.")] = "127.0.0.1",
) -> None:
    """Run the witness: cosign each checkpoint of these logs that a consistency proof shows
    extends the last one it cosigned (C2SP tlog-witness, POST /add-checkpoint)."""
    from control_plane.tlog.witness import State, Witness, WitnessError

    try:
        signer = _load_key(key)
        logs = [_log_key(value) for value in log_vkey]
        kept = State(state)
    except WitnessError as exc:
        raise _fail(str(exc)) from None
    witness = Witness(signer, logs, kept)
    try:
        server = ThreadingHTTPServer((host, port), _handler(witness))
    except OSError as exc:
        kept.close()
        raise _fail(f"cannot listen on {host}:{port} ({exc.strerror})") from None
    server.daemon_threads = True
    typer.echo(f"witness {witness.verifier.text()} serving on http://{host}:{port} for "
               f"{', '.join(k.name for k in logs)} (state: {state})", err=True)
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass
    finally:
        server.server_close()
        kept.close()


def _handler(witness: Any) -> type[BaseHTTPRequestHandler]:
    from control_plane.tlog.witness import MAX_BODY_BYTES, TEXT_TYPE, Answer

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"
        timeout = READ_SECONDS  # a client that stalls is dropped, not waited on
        server_version = "memplane-witness"
        sys_version = ""

        def log_message(self, format: str, *args: Any) -> None:  # noqa: A002
            sys.stderr.write(f"witness: {format % args}\n")

        def _send(self, answer: Answer) -> None:
            data = answer.body.encode()
            self.send_response(answer.status)
            self.send_header("Content-Type", answer.content_type)
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def do_GET(self) -> None:  # noqa: N802
            if self.path != "/":
                self._send(Answer(404, "not found\n"))
                return
            self._send(Answer(200, witness.verifier.text() + "\n"))

        def do_POST(self) -> None:  # noqa: N802
            if self.path != "/add-checkpoint":
                self._send(Answer(404, "not found\n"))
                return
            try:
                length = int(self.headers.get("Content-Length") or "")
            except ValueError:
                length = -1
            if not 0 <= length <= MAX_BODY_BYTES:
                self.close_connection = True
                self._send(Answer(400, "send the body with a Content-Length of at most "
                                  f"{MAX_BODY_BYTES} bytes\n", TEXT_TYPE))
                return
            body = self._read(length)
            if body is None:
                self.close_connection = True
                self._send(Answer(408, "the body did not arrive in time\n"))
                return
            self._send(witness.add_checkpoint(body))

        def _read(self, length: int) -> bytes | None:
            """The body, if all of it arrives within READ_SECONDS."""
            deadline = time.monotonic() + READ_SECONDS
            chunks: list[bytes] = []
            while length > 0:
                if time.monotonic() > deadline:
                    return None
                try:
                    chunk = self.rfile.read1(min(length, 8192))
                except TimeoutError:
                    return None
                if not chunk:
                    return None
                chunks.append(chunk)
                length -= len(chunk)
            return b"".join(chunks)

    return Handler
