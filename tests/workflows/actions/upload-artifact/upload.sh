#!/usr/bin/env bash
# actions/upload-artifact@v4's rules: a valid name, if-no-files-found, hidden files left out unless asked for,
# retention 1-90 days, no second artifact of one name in a run without overwrite.
set -euo pipefail
: "${AUTOLOOP_ACT_ARTIFACTS:?the act harness sets AUTOLOOP_ACT_ARTIFACTS}"
case "$INPUT_NAME" in
  ''|*[\"\:\<\>\|\*\?\\/]*|*$'\r'*|*$'\n'*)
    echo "::error::The artifact name is not valid: $INPUT_NAME. Contains the following character: one of \" : < > | * ? \\ / CR LF"
    exit 1;;
esac
case "$INPUT_IF_NO_FILES_FOUND" in warn|error|ignore) ;; *) echo "::error::Unexpected input for if-no-files-found: $INPUT_IF_NO_FILES_FOUND"; exit 1;; esac
case "$INPUT_RETENTION_DAYS" in ''|*[!0-9]*) echo "::error::Invalid retention-days: $INPUT_RETENTION_DAYS"; exit 1;; esac
if [ "$INPUT_RETENTION_DAYS" -gt 90 ]; then echo "::error::retention-days must be 1-90"; exit 1; fi
dest="$AUTOLOOP_ACT_ARTIFACTS/$INPUT_NAME"
if [ -e "$dest" ]; then
  if [ "$INPUT_OVERWRITE" != true ]; then
    echo "::error::Failed to CreateArtifact: an artifact with this name already exists on the workflow run"
    exit 1
  fi
  rm -rf "$dest"
fi
staging="$(mktemp -d)"
count=0
while IFS= read -r item; do
  [ -n "$item" ] || continue
  [ -e "$item" ] || continue
  if [ -d "$item" ]; then
    base="$item"; list=(); while IFS= read -r -d '' f; do list+=("${f#"$base"/}"); done < <(find "$item" -type f -print0)
  else
    base="$(dirname "$item")"; list=("$(basename "$item")")
  fi
  for rel in "${list[@]}"; do
    if [ "$INPUT_INCLUDE_HIDDEN_FILES" != true ] && [[ "/$rel" == */.* ]]; then continue; fi
    mkdir -p "$staging/$(dirname "$rel")"
    cp -p "$base/$rel" "$staging/$rel"
    count=$((count + 1))
  done
done <<< "$INPUT_PATH"
if [ "$count" -eq 0 ]; then
  message="No files were found with the provided path: $INPUT_PATH. No artifacts will be uploaded."
  rm -rf "$staging"
  case "$INPUT_IF_NO_FILES_FOUND" in
    error) echo "::error::$message"; exit 1;;
    warn) echo "::warning::$message"; exit 0;;
    ignore) echo "$message"; exit 0;;
  esac
fi
mkdir -p "$AUTOLOOP_ACT_ARTIFACTS"
mv "$staging" "$dest"
echo "artifact-id=$(ls "$AUTOLOOP_ACT_ARTIFACTS" | wc -l)" >> "$GITHUB_OUTPUT"
echo "Uploaded $count file(s) as artifact $INPUT_NAME"
