"""One module per `autoloop` command; each exposes add_parser() and a cmd_<name>() function."""
