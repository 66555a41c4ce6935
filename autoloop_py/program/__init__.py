"""Programs: program.md and its frontmatter, the Target and its EVOLVE-BLOCK regions, playbooks, reply edits."""
