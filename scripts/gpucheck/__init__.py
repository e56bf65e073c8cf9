"""The prepared GPU check: bundle preparation (run here), the check itself (run on the GPU
machine) and its report. docs/gpu-check.md describes what it covers and how to run it."""
