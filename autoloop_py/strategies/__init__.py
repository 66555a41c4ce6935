"""Search strategies: the runner's deterministic bookkeeping for each playbook (AlphaEvolve, ...)."""
