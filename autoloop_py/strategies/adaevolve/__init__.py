"""AdaEvolve: adaptive islands, an archive per island, paradigm breakthroughs (strategies spec §2)."""
