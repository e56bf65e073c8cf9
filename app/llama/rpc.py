"""llama.cpp's RPC backend (ggml-rpc), bound with ctypes: workers that hold a model's layers.

llama-cpp-python has no bindings for it, so this module binds the few ggml functions it needs:
registering a worker (`ggml_backend_rpc_add_server`), listing devices, reading a worker's memory
(`ggml_backend_rpc_get_device_memory`) and serving this machine (`ggml_backend_rpc_start_server`).

A worker given with a key (KEY@HOST:PORT, app/llama/rpc_keys.py) is reached through a loopback
tunnel that carries llama.cpp's plain protocol over TLS and proves the key (app/llama/
rpc_tunnel.py); llama.cpp only ever sees the tunnel's 127.0.0.1 address, which this module
translates back to the worker's own wherever it shows one.

llama.cpp aborts the whole process when a worker cannot be reached, answers in another protocol
version, or drops its connection: `add_server`, `device_memory` and any model on a worker must
therefore run in a process that may die (see app/engine/isolated.py). `check_reachable` is a
connection with a timeout in Python, safe anywhere, so an unreachable host, a refused key or a
busy worker fails fast in words.
"""

from __future__ import annotations

import ctypes
import threading
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from app.errors import InvalidSettingError, RpcConnectError, RpcUnavailableError
from app.llama import rpc_keys, rpc_tunnel
from app.llama.native import DEVICE_KINDS, RPC_DEVICE_PREFIX, bind, device_functions, is_local_gpu
from app.llama.rpc_auth import MODE_CHECK, connect, new_client_id, open_stream

DEFAULT_PORT = 50052
LOOPBACK = "127.0.0.1"
CONNECT_TIMEOUT_S = 4.0
REBUILD_COMMAND = (
    'CMAKE_ARGS="-DGGML_RPC=on" pip install --force-reinstall --no-cache-dir llama-cpp-python'
)
SECURITY_WARNING = (
    "llama.cpp's plain RPC protocol has no authentication and no encryption: anyone who can "
    "reach the port can run computations on the worker and read and write any memory of its "
    "process, and the network sees the traffic in clear. Use it only on a network you trust."
)

_lock = threading.Lock()
_lib: Any = None
_registered: dict[str, list[int]] = {}  # endpoint -> its device handles, in registration order
_native: dict[str, str] = {}  # endpoint -> the address llama.cpp dials for it (a tunnel's)


@dataclass(frozen=True, slots=True)
class Device:
    """One ggml backend device: CPU, a local GPU, or a worker's device (named RPC0, RPC1, ...)."""

    name: str
    description: str  # a worker's device describes itself as its host:port
    kind: str

    @property
    def remote(self) -> bool:
        return self.name.startswith(RPC_DEVICE_PREFIX)


@dataclass(frozen=True, slots=True)
class WorkerMemory:
    """Free and total memory of one worker's device, as the worker reports it."""

    endpoint: str
    device: str
    free_bytes: int
    total_bytes: int


def supports_rpc() -> bool:
    """Whether the installed llama.cpp was built with the RPC backend."""
    import llama_cpp  # noqa: PLC0415 - native library, loaded on first use

    return bool(llama_cpp.llama_supports_rpc())


def require_rpc() -> None:
    if not supports_rpc():
        raise RpcUnavailableError(
            f"this llama-cpp-python was built without RPC; rebuild it with: {REBUILD_COMMAND}"
        )


def parse_worker_specs(value: str) -> tuple[str, ...]:
    """'[KEY@]host:port[,...]' -> the items, each checked; refused in words when malformed."""
    specs: list[str] = []
    for raw in value.split(","):
        item = raw.strip()
        key, endpoint = rpc_keys.split_key(item)
        host, sep, port = endpoint.rpartition(":")
        if host.startswith("[") and host.endswith("]"):
            # [::1]:50052, as URLs write it; the endpoint's own form splits at its last colon.
            host = host[1:-1]
            endpoint = f"{host}:{port}"
        if not sep or not host or not port.isdigit() or not 0 < int(port) < 65536:
            # A key is a secret: never echoed. plain is none.
            shown = (
                endpoint
                if key is None
                else f"{'plain' if key == rpc_keys.PLAIN else 'KEY'}@{endpoint}"
            )
            raise InvalidSettingError(
                f"RPC worker {shown!r} is not HOST:PORT or KEY@HOST:PORT with a port in "
                f"1..65535 (e.g. KEY@192.168.1.20:{DEFAULT_PORT})"
            )
        if ":" in host and key == rpc_keys.PLAIN:
            # Connected by llama.cpp itself, which resolves hosts for IPv4 only ("Name or
            # service not known" once the model loads); a keyed worker's tunnel takes IPv6.
            raise InvalidSettingError(
                f"RPC worker plain@{endpoint}: llama.cpp's plain RPC reaches workers by IPv4 "
                "address or host name, not by IPv6 address"
            )
        spec = endpoint if key is None else f"{key}@{endpoint}"
        if spec not in specs:
            specs.append(spec)
    return tuple(specs)


def endpoints_of(specs: Sequence[str]) -> tuple[str, ...]:
    """The HOST:PORT of each spec; a key given with one is remembered for this process."""
    endpoints: list[str] = []
    for item in specs:
        key, endpoint = rpc_keys.split_key(item)
        if key is not None:
            rpc_keys.remember(endpoint, key)
        if endpoint not in endpoints:
            endpoints.append(endpoint)
    return tuple(endpoints)


def parse_endpoints(value: str) -> tuple[str, ...]:
    """'[KEY@]host:port[,...]' -> endpoints, remembering their keys; refused in words."""
    return endpoints_of(parse_worker_specs(value))


def split_endpoint(endpoint: str) -> tuple[str, int]:
    host, _, port = endpoint.rpartition(":")
    return host, int(port)


def is_loopback(host: str) -> bool:
    return host in {"localhost", "::1"} or host.startswith("127.")


def _require_key(endpoint: str) -> str:
    key = rpc_keys.key_for(endpoint)
    if key is None:
        raise RpcConnectError(
            endpoint,
            f"no key given for it: use KEY@{endpoint} with the key the worker printed (or set "
            f"{rpc_keys.RPC_KEY_ENV}); a worker without a key (llama.cpp's rpc-server, "
            f"`specchat worker --insecure-plain`) is reached with plain@{endpoint}",
        )
    return key


def check_reachable(endpoint: str, timeout: float = CONNECT_TIMEOUT_S) -> None:
    """Reach a worker in Python first; RpcConnectError in words when it fails.

    A keyed worker is asked, over TLS and with the key, whether it is free (without taking
    it); a plain one gets a TCP connect and close.
    """
    _require_key(endpoint)
    token = rpc_keys.token_for(endpoint)
    if token is not None:
        open_stream(endpoint, token, MODE_CHECK, new_client_id(), timeout).sock.close()
        return
    connect(endpoint, timeout).close()


def connect_spec(endpoint: str) -> str:
    """The endpoint with its key (KEY@HOST:PORT), to register it in another process."""
    return rpc_keys.spec(endpoint)


def tunnel_refusal(log: str) -> RpcConnectError | None:
    """Why a tunnel refused llama.cpp's connection, from the log of the process that then ended.

    A worker that turns a connection away after the Python check passed (taken by another
    client in between, or its llama.cpp server down) only looks like a dead worker to
    llama.cpp; the tunnel leaves its reason in the log first.
    """
    for line in reversed(log.splitlines()):
        if line.startswith(rpc_tunnel.REFUSED_MARKER):
            endpoint, _, reason = line[len(rpc_tunnel.REFUSED_MARKER) :].strip().partition(" ")
            return RpcConnectError(endpoint, reason)
    return None


def public_name(name: str) -> str:
    """A llama.cpp buffer or device text with tunnel addresses replaced by the workers' own."""
    with _lock:
        pairs = list(_native.items())
    for endpoint, native in pairs:
        if native != endpoint:
            name = name.replace(native, endpoint)
    return name


# -- native side: everything below may abort the process on a network failure -----------------


def _ggml() -> Any:
    global _lib  # noqa: PLW0603 - one binding per process
    if _lib is not None:
        return _lib
    require_rpc()
    from app.llama.backend import ensure_backend  # noqa: PLC0415 - loads llama.cpp on first use

    ensure_backend()
    lib = device_functions()
    vp, sz, cp, u32 = ctypes.c_void_p, ctypes.c_size_t, ctypes.c_char_p, ctypes.c_uint32
    psz = ctypes.POINTER(sz)
    bind(
        lib,
        (
            ("ggml_backend_reg_by_name", [cp], vp),
            ("ggml_backend_reg_get_proc_address", [vp, cp], vp),
            ("ggml_backend_register", [vp], None),
            ("ggml_backend_reg_dev_count", [vp], sz),
            ("ggml_backend_reg_dev_get", [vp, sz], vp),
            ("ggml_backend_rpc_get_device_memory", [cp, u32, psz, psz], None),
            ("ggml_backend_rpc_start_server", [cp, cp, sz, sz, ctypes.POINTER(vp)], None),
        ),
    )
    _lib = lib
    return lib


def _describe(handle: int) -> Device:
    lib = _ggml()
    return Device(
        name=lib.ggml_backend_dev_name(handle).decode(),
        description=public_name((lib.ggml_backend_dev_description(handle) or b"").decode()),
        kind=DEVICE_KINDS.get(int(lib.ggml_backend_dev_type(handle)), "unknown"),
    )


def add_server(spec: str) -> list[Device]:
    """Register a worker ([KEY@]HOST:PORT) so models can place layers on it; returns its devices.

    Connects and shakes hands: aborts the process if the worker is unreachable or speaks
    another protocol version. Registering the same endpoint twice returns the same devices.
    """
    (endpoint,) = endpoints_of([spec])
    lib = _ggml()
    with _lock:
        if endpoint not in _registered:
            _require_key(endpoint)
            token = rpc_keys.token_for(endpoint)
            native = endpoint if token is None else rpc_tunnel.tunnel_to(endpoint, token)
            _native[endpoint] = native
            rpc_reg = lib.ggml_backend_reg_by_name(RPC_DEVICE_PREFIX.encode())
            address = lib.ggml_backend_reg_get_proc_address(rpc_reg, b"ggml_backend_rpc_add_server")
            add = ctypes.CFUNCTYPE(ctypes.c_void_p, ctypes.c_char_p)(address)
            reg = add(native.encode())
            if not reg:
                raise RpcConnectError(endpoint, "the worker offers no devices")
            lib.ggml_backend_register(reg)
            count = int(lib.ggml_backend_reg_dev_count(reg))
            handles = [int(lib.ggml_backend_reg_dev_get(reg, i)) for i in range(count)]
            _registered[endpoint] = handles
    return [_describe(h) for h in _registered[endpoint]]


def devices() -> list[Device]:
    """Every device llama.cpp knows in this process, workers' included."""
    lib = _ggml()
    return [_describe(lib.ggml_backend_dev_get(i)) for i in range(lib.ggml_backend_dev_count())]


def device_memory(endpoint: str, device: int = 0) -> tuple[int, int]:
    """(free, total) bytes of a worker's device, as the worker reports them."""
    lib = _ggml()
    free, total = ctypes.c_size_t(0), ctypes.c_size_t(0)
    native = _native.get(endpoint, endpoint)
    lib.ggml_backend_rpc_get_device_memory(
        native.encode(), device, ctypes.byref(free), ctypes.byref(total)
    )
    return int(free.value), int(total.value)


def registered_memory() -> list[WorkerMemory]:
    """Memory of every device of every worker registered in this process."""
    out: list[WorkerMemory] = []
    for endpoint, handles in list(_registered.items()):
        for index, handle in enumerate(handles):
            free, total = device_memory(endpoint, index)
            out.append(WorkerMemory(endpoint, _describe(handle).name, free, total))
    return out


def model_devices(endpoints: Sequence[str]) -> ctypes.Array[ctypes.c_void_p] | None:
    """The NULL-terminated device list for `llama_model_params.devices`, or None for the default.

    Registering a worker makes llama.cpp put every later model's layers on it; a model loaded
    with no endpoints is kept on this machine's own devices instead. None (llama.cpp's default:
    all devices) while no worker is registered in this process, so plain loads are untouched.
    """
    if not endpoints and not _registered:
        return None
    lib = _ggml()
    handles: list[int] = []
    for i in range(int(lib.ggml_backend_dev_count())):
        handle = int(lib.ggml_backend_dev_get(i))
        device = _describe(handle)
        if is_local_gpu(device.kind, device.name):
            handles.append(handle)  # local accelerators always take part, as in llama.cpp
    for endpoint in endpoints:
        handles.extend(_registered.get(endpoint) or [])
    array = (ctypes.c_void_p * (len(handles) + 1))(*handles, None)
    return array


def local_devices() -> list[Device]:
    """This machine's own devices (what a worker can serve)."""
    return [d for d in devices() if not d.remote]


def find_device(name: str) -> int:
    """The handle of a local device by its llama.cpp name (CPU, CUDA0, Vulkan0, ...)."""
    handle = _ggml().ggml_backend_dev_by_name(name.encode())
    if not handle:
        known = ", ".join(d.name for d in local_devices())
        raise InvalidSettingError(f"no device named {name!r} here (devices: {known})")
    return int(handle)


def start_server(
    endpoint: str, device_names: Sequence[str], n_threads: int, cache_dir: str | None
) -> None:
    """Serve the named local devices over RPC on endpoint; blocks while serving.

    Returns (after llama.cpp prints why) only when the port cannot be bound.
    """
    lib = _ggml()
    handles = [find_device(name) for name in device_names]
    array = (ctypes.c_void_p * len(handles))(*handles)
    lib.ggml_backend_rpc_start_server(
        endpoint.encode(),
        cache_dir.encode() if cache_dir else None,
        n_threads,
        len(handles),
        array,
    )


def default_worker_device() -> str:
    """A worker serves its first local GPU when it has one, else the CPU (as llama.cpp does)."""
    local = local_devices()
    for device in local:
        if device.kind in {"gpu", "igpu"}:
            return device.name
    cpu = [d for d in local if d.kind == "cpu"]
    if not cpu:
        raise RpcUnavailableError("llama.cpp reports no device to serve")
    return cpu[0].name
