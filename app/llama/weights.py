"""How a model's weights are loaded: whether a draft model takes llama.cpp's AMX buffers in
one-token passes, and on which thread the weights load (docs/design.md, Threads and memory)."""

from __future__ import annotations

import os
import threading
from typing import Any

from app.llama.backend import one_token_buffers
from app.llama.config import ModelConfig
from app.llama.native import local_gpu


def reads_one_token_a_pass(config: ModelConfig) -> bool:
    """Whether this model decodes one token a pass on llama.cpp's extra CPU buffers: a draft
    held in host memory on a CPU with AMX (app/llama/backend.one_token_buffers). Devices are
    listed only for a draft: listing them binds what some builds lack."""
    if not config.one_token_passes:
        return False
    on_host = not config.rpc_servers and (config.n_gpu_layers == 0 or not local_gpu())
    return one_token_buffers(config.one_token_passes, on_host)


def load_weights(llama_cpp: Any, path: str, params: Any) -> Any:
    """llama_model_load_from_file, on a thread of its own where llama.cpp repacks weights for
    its extra CPU buffers: it repacks with an OpenMP team of the loading thread, and a team
    slows every later pass made on another thread for as long as its own thread lives (see
    check_decoding_thread). Loaded by `specchat serve`'s main thread and run on its engine
    thread, the demo's Q4_1 draft took 36 ms a pass against 5.4 when loaded so."""
    if not params.use_extra_bufts:
        return llama_cpp.llama_model_load_from_file(os.fsencode(path), params)
    loaded: list[Any] = [None]

    def load() -> None:
        loaded[0] = llama_cpp.llama_model_load_from_file(os.fsencode(path), params)

    loader = threading.Thread(target=load, name="llama-load")
    loader.start()
    loader.join()
    return loaded[0]
