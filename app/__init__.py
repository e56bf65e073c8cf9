"""SpecChat engine: speculative decoding over llama.cpp, metrics, cost model, CLI. Never imports Qt."""
