#!/usr/bin/env bash
# Fails when a file outgrows what a reader takes in: a Go file of more than
# 750 lines (generated code aside: *.pb.go and files whose first line is
# "// Code generated"), ARCHITECTURE.md of more than 600, README.md of more
# than 450, bench/README.md of more than 700. Split a long Go file by
# subject; condense a long document to a reference and move depth to docs/.
set -euo pipefail
cd "$(dirname "$0")/.."

status=0

# over LIMIT FILE... names each FILE of more than LIMIT lines and its count.
over() {
  local limit=$1
  shift
  while read -r n f; do
    if [[ $f != total ]] && ((n > limit)); then
      echo "check-sizes: $f has $n lines, more than $limit" >&2
      status=1
    fi
  done < <(wc -l -- "$@")
}

gofiles=()
while IFS= read -r f; do
  [[ -f $f && $f != *.pb.go ]] || continue
  first=''
  IFS= read -r first <"$f" || true
  [[ $first == '// Code generated'* ]] || gofiles+=("$f")
done < <(git ls-files --cached --others --exclude-standard -- '*.go')

over 750 "${gofiles[@]}"
over 600 ARCHITECTURE.md
over 450 README.md
over 700 bench/README.md

if ((status != 0)); then
  echo 'check-sizes: split the files above by subject, or condense the documents' >&2
fi
exit "$status"
