"""The llama.cpp handle: loading a GGUF, the feed primitive, memory readouts."""
