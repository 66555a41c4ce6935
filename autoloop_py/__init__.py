"""autoloop_py: an LLM-driven improvement loop whose state is markdown on a git branch."""

__version__ = "0.1.0"
