#!/usr/bin/env bash
# The README's main job: offline `tune` iterations of function_minimization in a scratch copy of
# this repository, ending with the state file that autoloop wrote on branch memory/autoloop.
set -euo pipefail
src="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
iterations="${1:-10}"
scratch="$(mktemp -d "${TMPDIR:-/tmp}/autoloop-demo.XXXXXX")"
if git -C "$src" rev-parse --verify -q HEAD >/dev/null; then
  git clone -q "$src" "$scratch"
else
  cp -R "$src/." "$scratch" && rm -rf "$scratch/.git"
  git -C "$scratch" init -q -b main && git -C "$scratch" add -A
  git -C "$scratch" -c user.name=autoloop -c user.email=autoloop@example.invalid commit -qm "scratch copy"
fi
git -C "$scratch" config user.name "autoloop demo"
git -C "$scratch" config user.email "autoloop-demo@example.invalid"
git -C "$scratch" remote remove origin 2>/dev/null || true
cd "$scratch"
echo "scratch repository: $scratch"
autoloop run --program function_minimization --iterations "$iterations" --proposer tune
echo
autoloop status
echo
# HEAD, not main: a clone of a feature branch has no main
echo "accepted candidates on autoloop/function_minimization:"
git log --oneline HEAD..autoloop/function_minimization
echo
echo "state file on memory/autoloop (function_minimization.md):"
autoloop state function_minimization
