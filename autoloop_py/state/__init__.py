"""The state file `<name>.md` on memory/autoloop: sections, Machine State, history, Population, traces, the store."""
