"""FunSearch: islands of score-signature clusters, numbered versions of one function (strategies spec §4)."""
