#!/usr/bin/env bash
# actions/setup-python@v5's checks (cache dependency files must exist), then a venv of the test interpreter on PATH.
set -euo pipefail
case "$INPUT_CACHE" in
  '') ;;
  pip)
    patterns="${INPUT_CACHE_DEPENDENCY_PATH:-$'**/requirements.txt\n**/pyproject.toml'}"
    shopt -s globstar nullglob
    found=()
    while IFS= read -r pattern; do
      [ -n "$pattern" ] || continue
      # shellcheck disable=SC2206
      matches=($GITHUB_WORKSPACE/$pattern)
      found+=("${matches[@]}")
    done <<< "$patterns"
    if [ ${#found[@]} -eq 0 ]; then
      echo "::error::No file in $GITHUB_WORKSPACE matched to [${patterns//$'\n'/ or }], make sure you have checked out the target repository"
      exit 1
    fi;;
  *) echo "::error::Caching for '$INPUT_CACHE' is not supported"; exit 1;;
esac
: "${AUTOLOOP_ACT_PYTHON:?the act harness sets AUTOLOOP_ACT_PYTHON}"
have="$("$AUTOLOOP_ACT_PYTHON" -c 'import sys; print("%d.%d" % sys.version_info[:2])')"
if [ -n "$INPUT_PYTHON_VERSION" ] && [ "$INPUT_PYTHON_VERSION" != "$have" ]; then
  echo "::warning::python-version $INPUT_PYTHON_VERSION asked for; the test stand-in sets up Python $have"
fi
# A self-hosted runner's tool cache outlives the job; the harness's (AUTOLOOP_ACT_TOOLCACHE) outlives the tick.
venv="${AUTOLOOP_ACT_TOOLCACHE:-$RUNNER_TEMP}/setup-python-$GITHUB_JOB-$$"
"$AUTOLOOP_ACT_PYTHON" -m venv --without-pip --system-site-packages "$venv"
echo "$venv/bin" >> "$GITHUB_PATH"
echo "pythonLocation=$venv" >> "$GITHUB_ENV"
echo "python-version=$have" >> "$GITHUB_OUTPUT"
echo "python-path=$venv/bin/python" >> "$GITHUB_OUTPUT"
echo "Python $have at $venv"
