"""The speculative round loop and what it needs: drafters, sampling, acceptance, γ auto,
control, events and the result, behind the Runtime front door."""
