"""Git at the edge: hardened git commands, the long-lived object reader, index-free trees, push refusals."""
