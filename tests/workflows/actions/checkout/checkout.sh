#!/usr/bin/env bash
# actions/checkout@v4's steps, as git commands: init, fetch (all refs with fetch-depth 0), check out the event's ref.
set -euo pipefail
dest="$GITHUB_WORKSPACE${INPUT_PATH:+/$INPUT_PATH}"
case "$INPUT_FETCH_DEPTH" in ''|*[!0-9]*) echo "::error::fetch-depth must be a number: '$INPUT_FETCH_DEPTH'"; exit 1;; esac
case "$INPUT_PERSIST_CREDENTIALS" in true|false) ;; *) echo "::error::persist-credentials must be true or false"; exit 1;; esac
url="$GITHUB_SERVER_URL/$INPUT_REPOSITORY"
mkdir -p "$dest"
find "$dest" -mindepth 1 -maxdepth 1 -exec rm -rf {} +
cd "$dest"
git init -q
git remote add origin "$url"
depth=()
if [ "$INPUT_FETCH_DEPTH" = 0 ]; then
  git fetch -q --prune --no-recurse-submodules origin '+refs/heads/*:refs/remotes/origin/*' '+refs/tags/*:refs/tags/*'
else
  depth=(--depth "$INPUT_FETCH_DEPTH")
fi
ref="${INPUT_REF:-${GITHUB_REF:-}}"
case "$ref" in
  refs/heads/*)
    branch="${ref#refs/heads/}"
    git fetch -q "${depth[@]}" origin "+refs/heads/$branch:refs/remotes/origin/$branch"
    git checkout -q --force -B "$branch" "refs/remotes/origin/$branch";;
  ''|refs/*|*[!0-9a-f]*)
    target="${ref:-$GITHUB_SHA}"
    git fetch -q "${depth[@]}" origin "$target"
    git checkout -q --force --detach FETCH_HEAD;;
  *)
    git fetch -q "${depth[@]}" origin "$ref"
    git checkout -q --force --detach FETCH_HEAD;;
esac
if [ "$INPUT_PERSIST_CREDENTIALS" = true ]; then
  basic="$(printf 'x-access-token:%s' "$INPUT_TOKEN" | base64 -w0)"
  git config --local "http.$GITHUB_SERVER_URL/.extraheader" "AUTHORIZATION: basic $basic"
fi
echo "checked out $(git rev-parse HEAD) of $url"
