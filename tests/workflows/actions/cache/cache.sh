#!/usr/bin/env bash
# actions/cache@v4's rules, folder-backed: a cache is a key plus a version (the hash of its paths); save never
# replaces a key that exists; restore matches the key exactly (cache-hit true), else the newest cache whose key
# begins with a restore key. Paths are stored relative to the workspace, as the real action's tar is.
#
# Two things stand in for GitHub's runners, where every job has its own machine with the same layout: paths are
# compared relative to the job's workspace (act gives each job its own temp and workspace folders), and the
# `#!` lines of restored scripts that named the saving job's Python (pythonLocation) name this job's.
set -euo pipefail
: "${AUTOLOOP_ACT_CACHE:?the act harness sets AUTOLOOP_ACT_CACHE}"
mode="$1"
case "$INPUT_KEY" in
  ''|*,*) echo "::error::Key Validation Error: '$INPUT_KEY' cannot be empty or contain commas."; exit 1;;
esac
if [ "${#INPUT_KEY}" -gt 512 ]; then echo "::error::Key Validation Error: $INPUT_KEY cannot be larger than 512 characters."; exit 1; fi
paths=()
while IFS= read -r line; do
  line="${line#"${line%%[![:space:]]*}"}"; line="${line%"${line##*[![:space:]]}"}"
  [ -n "$line" ] || continue
  case "$line" in "~"*) line="$HOME${line#"~"}";; esac
  paths+=("$(realpath -m --relative-to="$GITHUB_WORKSPACE" "$line")")
done <<< "$INPUT_PATH"
if [ ${#paths[@]} -eq 0 ]; then echo "::error::Input required and not supplied: path"; exit 1; fi
version="$(printf '%s\n' "${paths[@]}" | sha256sum | cut -c1-64)"
entry_of() { printf '%s\n%s' "$1" "$version" | sha256sum | cut -c1-32; }
mkdir -p "$AUTOLOOP_ACT_CACHE"

if [ "$mode" = save ]; then
  cd "$GITHUB_WORKSPACE"
  present=(); for p in "${paths[@]}"; do [ -e "$p" ] && present+=("$p"); done
  if [ ${#present[@]} -eq 0 ]; then
    echo "::warning::Path Validation Error: Path(s) specified in the action for caching do(es) not exist, hence no cache is being saved."
    exit 0
  fi
  entry="$AUTOLOOP_ACT_CACHE/$(entry_of "$INPUT_KEY")"
  if [ -e "$entry" ]; then
    echo "::warning::Failed to save: Unable to reserve cache with key $INPUT_KEY, another job may be creating this cache."
    exit 0
  fi
  staging="$(mktemp -d "$AUTOLOOP_ACT_CACHE/.saving-XXXXXX")"
  tar -P -cf "$staging/files.tar" -- "${present[@]}"
  printf '%s' "$INPUT_KEY" > "$staging/key"
  printf '%s' "${pythonLocation:-}" > "$staging/python-location"
  if mv -T "$staging" "$entry" 2>/dev/null; then
    echo "Cache saved with key: $INPUT_KEY ($(du -sh "$entry/files.tar" | cut -f1))"
  else
    rm -rf "$staging"
    echo "::warning::Failed to save: Unable to reserve cache with key $INPUT_KEY, another job may be creating this cache."
  fi
  exit 0
fi

matched=""
if [ -d "$AUTOLOOP_ACT_CACHE/$(entry_of "$INPUT_KEY")" ]; then
  matched="$INPUT_KEY"
else
  while IFS= read -r prefix; do
    [ -n "$prefix" ] || continue
    newest=""
    for entry in "$AUTOLOOP_ACT_CACHE"/*/; do
      [ -f "$entry/key" ] || continue
      key="$(cat "$entry/key")"
      [[ "$key" == "$prefix"* ]] && [ "$(basename "$entry")" = "$(entry_of "$key")" ] || continue
      if [ -z "$newest" ] || [ "$entry" -nt "$newest" ]; then newest="$entry"; matched="$key"; fi
    done
    [ -n "$matched" ] && break
  done <<< "$INPUT_RESTORE_KEYS"
fi
echo "cache-primary-key=$INPUT_KEY" >> "$GITHUB_OUTPUT"
if [ -z "$matched" ]; then
  if [ "$INPUT_FAIL_ON_CACHE_MISS" = true ]; then
    echo "::error::Failed to restore cache entry. Exiting as fail-on-cache-miss is set. Input key: $INPUT_KEY"
    exit 1
  fi
  echo "Cache not found for input keys: $INPUT_KEY"
  echo "cache-hit=false" >> "$GITHUB_OUTPUT"
  exit 0
fi
echo "cache-matched-key=$matched" >> "$GITHUB_OUTPUT"
if [ "$matched" = "$INPUT_KEY" ]; then echo "cache-hit=true"; else echo "cache-hit=false"; fi >> "$GITHUB_OUTPUT"
if [ "$INPUT_LOOKUP_ONLY" = true ]; then
  echo "Cache found and can be restored from key: $matched"
  exit 0
fi
entry="$AUTOLOOP_ACT_CACHE/$(entry_of "$matched")"
cd "$GITHUB_WORKSPACE"
tar -P -xf "$entry/files.tar"
saved_python="$(cat "$entry/python-location")"
if [ -n "$saved_python" ] && [ -n "${pythonLocation:-}" ] && [ "$saved_python" != "$pythonLocation" ]; then
  for p in "${paths[@]}"; do
    [ -d "$p/bin" ] || continue
    # A long interpreter path makes pip write `#!/bin/sh` and an `exec` line naming it (the kernel cuts `#!`
    # lines), so the path is replaced in the first lines; a bin folder naming no Python is no error.
    { grep -rlIF --null "$saved_python/" "$p/bin" 2>/dev/null || true; } \
      | xargs -0 -r sed -i "1,3s|$saved_python/|$pythonLocation/|g"
  done
fi
echo "Cache restored from key: $matched"
