"""The state file `<name>.md` on memory/autoloop: its sections, Machine State, history, Population, traces, the store."""
