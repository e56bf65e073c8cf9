"""SpecChat engine: speculative decoding on llama.cpp, metrics, cost model, CLI. No Qt."""
