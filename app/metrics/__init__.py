"""The one home of the speculative arithmetic: metric definitions, summaries, cost model,
insight."""
