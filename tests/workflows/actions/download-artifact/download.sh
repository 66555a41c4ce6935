#!/usr/bin/env bash
# actions/download-artifact@v4's rules: a named artifact must exist and lands in path itself; a pattern (or
# nothing) downloads every match, each into path/<name>/ unless merge-multiple.
set -euo pipefail
: "${AUTOLOOP_ACT_ARTIFACTS:?the act harness sets AUTOLOOP_ACT_ARTIFACTS}"
dest="${INPUT_PATH:-$GITHUB_WORKSPACE}"
mkdir -p "$dest"
if [ -n "$INPUT_NAME" ]; then
  if [ ! -d "$AUTOLOOP_ACT_ARTIFACTS/$INPUT_NAME" ]; then
    echo "::error::Unable to download artifact(s): Artifact not found for name: $INPUT_NAME"
    exit 1
  fi
  cp -a "$AUTOLOOP_ACT_ARTIFACTS/$INPUT_NAME/." "$dest/"
  echo "Artifact $INPUT_NAME downloaded to $dest"
else
  count=0
  if [ -d "$AUTOLOOP_ACT_ARTIFACTS" ]; then
    for found in "$AUTOLOOP_ACT_ARTIFACTS"/*/; do
      [ -d "$found" ] || continue
      name="$(basename "$found")"
      # shellcheck disable=SC2053
      if [ -n "$INPUT_PATTERN" ] && [[ "$name" != $INPUT_PATTERN ]]; then continue; fi
      if [ "$INPUT_MERGE_MULTIPLE" = true ]; then into="$dest"; else into="$dest/$name"; fi
      mkdir -p "$into"
      cp -a "$found/." "$into/"
      count=$((count + 1))
    done
  fi
  echo "Found $count artifact(s); downloaded to $dest"
fi
echo "download-path=$dest" >> "$GITHUB_OUTPUT"
