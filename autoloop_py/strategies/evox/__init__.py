"""EvoX: a population of search strategies run in a sandboxed worker, evolved when the search stalls (§3)."""
