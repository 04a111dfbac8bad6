#!/usr/bin/env bash
# Vets and tests every module of the workspace (go test ./... at the root covers none of them).
# Prints each module's package results, every skipped test with its reason and every failure in
# full, one summary line per module, and fails if any module fails.
set -u
cd "$(dirname "$0")/.."

mods=$(go list -m -f '{{.Dir}}')
[ -n "$mods" ] || { echo "ci/test.sh: no modules in the workspace" >&2; exit 1; }

failed_mods=0 pass=0 fail=0 skip=0 summary=()
for dir in $mods; do
	name=${dir#"$PWD/"}
	log=$(mktemp)
	echo "== $name"
	if (cd "$dir" && go vet ./... && go test -race -count=1 -v ./...) >"$log" 2>&1; then
		result=ok
	else
		result=FAIL
		failed_mods=$((failed_mods + 1))
	fi
	p=$(grep -c -E '^\s*--- PASS' "$log")
	f=$(grep -c -E '^\s*--- FAIL' "$log")
	s=$(grep -c -E '^\s*--- SKIP' "$log")
	pass=$((pass + p)) fail=$((fail + f)) skip=$((skip + s))
	if [ "$result" = FAIL ]; then
		cat "$log"
	else
		grep -E '^(ok|FAIL|\?)\s' "$log"
		# Each skipped test with its reason: the last "file_test.go:N: ..." line printed before it.
		awk '/^[[:space:]]+[^[:space:]]+_test\.go:[0-9]+: / { reason = $0; sub(/^[[:space:]]+/, "", reason) }
			/^[[:space:]]*--- SKIP: / { name = $3; print "  skipped " name ": " reason }' "$log"
	fi
	summary+=("$(printf '%-4s %-22s %4d passed, %d failed, %d skipped' "$result" "$name" "$p" "$f" "$s")")
	rm -f "$log"
done

echo
echo "== summary"
printf '%s\n' "${summary[@]}"
echo "tests: $pass passed, $fail failed, $skip skipped"
[ "$failed_mods" -eq 0 ]
