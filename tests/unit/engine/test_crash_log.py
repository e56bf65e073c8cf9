"""crash_error: the one reading of the log a process running llama.cpp leaves when it ends."""

from __future__ import annotations

from app.engine.crash_log import WORKER_LOST_MARKER, crash_error
from app.errors import RpcConnectError, RpcWorkerLostError
from app.llama.rpc_tunnel import REFUSED_MARKER

WORKERS = ["10.0.0.2:50052", "10.0.0.3:50052"]
AFTER = "the reply so far is kept"
ENDED = "the model process stopped unexpectedly (exit code -6)"


def test_a_lost_worker_is_named_with_what_became_of_the_work() -> None:
    log = f"loading...\nggml_rpc: 10.0.0.2:50052 {WORKER_LOST_MARKER}\nabort\n"
    error = crash_error(log, WORKERS, afterwards=AFTER, ended=ENDED)
    assert isinstance(error, RpcWorkerLostError)
    assert str(error) == (
        "an RPC worker (10.0.0.2:50052, 10.0.0.3:50052) stopped answering; the reply so far is kept"
    )


def test_a_tunnel_refusal_says_which_worker_and_why() -> None:
    log = f"{REFUSED_MARKER} 10.0.0.3:50052 busy with another client\n{WORKER_LOST_MARKER}\n"
    error = crash_error(log, WORKERS, afterwards=AFTER, ended=ENDED)
    assert isinstance(error, RpcConnectError)
    assert (error.endpoint, error.reason) == ("10.0.0.3:50052", "busy with another client")


def test_a_handshake_in_another_protocol_version_is_named() -> None:
    log = "RPC server version mismatch: 2.0.0\n"
    error = crash_error(log, [], afterwards=AFTER, ended=ENDED, connecting="10.0.0.2:50052")
    assert isinstance(error, RpcConnectError)
    assert error.endpoint == "10.0.0.2:50052"
    assert "RPC protocol 2.0.0" in error.reason


def test_a_handshake_that_fails_otherwise_blames_the_worker_being_connected() -> None:
    error = crash_error("", [], afterwards=AFTER, ended=ENDED, connecting="10.0.0.2:50052")
    assert isinstance(error, RpcConnectError)
    assert "not llama.cpp's RPC protocol" in error.reason


def test_an_unexplained_end_quotes_the_last_line_of_the_log() -> None:
    error = crash_error("one\nGGML_ASSERT failed\n\n", WORKERS, afterwards=AFTER, ended=ENDED)
    assert isinstance(error, RpcWorkerLostError)
    assert str(error) == f"{ENDED}: GGML_ASSERT failed"
    assert str(crash_error("", WORKERS, afterwards=AFTER, ended=ENDED)) == ENDED
