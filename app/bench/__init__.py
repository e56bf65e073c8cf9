"""The benchmark: prompt sets, runs side by side in one process, summaries and reports."""
