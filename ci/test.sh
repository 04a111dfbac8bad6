#!/usr/bin/env bash
# Vets and tests every module of the workspace (go test ./... at the root covers none of them).
# Prints each module's package results, every skipped test with its reason and every failure in
# full, running totals after each module, one summary line per module at the end (also when the
# run is interrupted), and fails if any module fails.
#
#   bash ci/test.sh                       # every module
#   bash ci/test.sh core dialect-sqlite   # those modules only
#
# Tests run with -json and ci/testreport pairs every output line with the test that printed it:
# parallel subtests print interleaved, so a skip's reason cannot be read from the line before it.
set -u
cd "$(dirname "$0")/.."

# With arguments (module folders, e.g. ci/test.sh core dialect-sqlite), only those modules.
if [ $# -gt 0 ]; then
	mods=$(for m in "$@"; do (cd "$m" && [ -f go.mod ] && pwd) || { echo "ci/test.sh: $m is not a module folder" >&2; exit 1; }; done) || exit 1
else
	mods=$(go list -m -f '{{.Dir}}')
fi
[ -n "$mods" ] || { echo "ci/test.sh: no modules in the workspace" >&2; exit 1; }

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
# The report tool is a module of its own, outside the workspace; its tests run first.
(cd ci/testreport && GOWORK=off go vet . && GOWORK=off go test -count=1 . >/dev/null && GOWORK=off go build -o "$tmp/testreport" .) || {
	echo "ci/test.sh: ci/testreport does not build or pass its tests" >&2
	exit 1
}
# So is ci/bench.sh's chart tool (gonum.org/v1/plot stays out of the workspace); its output only on failure.
(cd ci/benchchart && GOWORK=off go vet ./... && GOWORK=off go test -count=1 ./... && GOWORK=off go build -o "$tmp/benchchart" .) >"$tmp/benchchart.log" 2>&1 || {
	cat "$tmp/benchchart.log"
	echo "ci/test.sh: ci/benchchart does not build or pass its tests" >&2
	exit 1
}

# SETTLE_TEST_RACE=0 leaves out -race (ci/noservers.sh: the same tests, quicker, no cgo needed
# for the detector); every other run keeps it.
race=-race
[ "${SETTLE_TEST_RACE:-1}" = 0 ] && race=
nmods=$(echo "$mods" | wc -w)
failed_mods=0 pass=0 fail=0 skip=0 summary=()
# print_summary prints one line per module tested so far and the totals.
print_summary() {
	echo
	echo "== summary"
	[ ${#summary[@]} -gt 0 ] && printf '%s\n' "${summary[@]}"
	echo "tests: $pass passed, $fail failed, $skip skipped; ${#summary[@]} of $nmods modules in $(elapsed $SECONDS)"
}
elapsed() { printf '%dm%02ds' $(($1 / 60)) $(($1 % 60)); }
# A run cut short (Ctrl-C, a CI timeout) still says what the modules done so far counted.
trap 'trap - INT TERM; echo; echo "ci/test.sh: cut short during $name"; print_summary; exit 130' INT TERM
name=
for dir in $mods; do
	name=${dir#"$PWD/"}
	echo "== $name"
	result=ok p=0 f=0 s=0 t0=$SECONDS
	if ! (cd "$dir" && go vet ./...) >"$tmp/vet" 2>&1; then
		cat "$tmp/vet"
		result=FAIL
	fi
	(cd "$dir" && go test $race -count=1 -json ./...) >"$tmp/json" 2>&1
	"$tmp/testreport" -counts "$tmp/counts" -exit $? <"$tmp/json" || result=FAIL
	read -r p f s <"$tmp/counts" || result=FAIL
	[ "$result" = FAIL ] && failed_mods=$((failed_mods + 1))
	pass=$((pass + p)) fail=$((fail + f)) skip=$((skip + s))
	summary+=("$(printf '%-4s %-22s %4d passed, %d failed, %d skipped in %s' "$result" "$name" "$p" "$f" "$s" "$(elapsed $((SECONDS - t0)))")")
	# Running totals after every module, so that a run cut short shows what it counted.
	printf -- '-- %s %s: %d passed, %d failed, %d skipped in %s; so far %d of %d modules (%d failed): %d passed, %d failed, %d skipped in %s\n' \
		"$result" "$name" "$p" "$f" "$s" "$(elapsed $((SECONDS - t0)))" ${#summary[@]} "$nmods" "$failed_mods" "$pass" "$fail" "$skip" "$(elapsed $SECONDS)"
done

print_summary
[ "$failed_mods" -eq 0 ]
