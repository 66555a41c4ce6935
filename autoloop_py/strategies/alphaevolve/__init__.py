"""AlphaEvolve: operator, parents and island per iteration, from seed 003's playbook (strategies spec §1)."""
