"""`specchat serve`: an OpenAI-compatible HTTP API over the speculative engine.

app.py routes requests, schemas.py turns JSON bodies into engine settings, owner.py is the one
thread that owns the models and runs requests in order, sse.py streams replies, stops.py applies
stop strings and timings.py writes the llama-server-style `timings` and SpecChat's `speculation`.
"""
