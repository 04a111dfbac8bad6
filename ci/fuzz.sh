#!/usr/bin/env bash
# Runs every Go fuzz target of the workspace for a bounded time and fails on any finding.
#
# Targets are found, not listed: every `func FuzzXxx(f *testing.F)` in a _test.go file of any
# package of any module (go list -m), so a new target runs here without touching this script.
#
#   bash ci/fuzz.sh                 # every target, 10 s each
#   bash ci/fuzz.sh --time 30s      # every target, 30 s each (or SETTLE_FUZZTIME=30s)
#   bash ci/fuzz.sh --long          # every target, 5 min each: by hand, before a release
#   bash ci/fuzz.sh --budget 100    # at most 10 s each and 100 s of fuzzing in all (CI)
#   bash ci/fuzz.sh --list          # print the targets and exit
#   bash ci/fuzz.sh Placeholders    # only targets whose "package.FuzzName" matches the regex
#
# SETTLE_FUZZ_PARALLEL sets the fuzzing workers per target (default 2). Targets that need a
# server follow the test rules: they skip when it is unreachable, and fail under
# SETTLE_REQUIRE_SERVERS=1.
#
# A finding: `go test` stops, prints the failing input and writes it to
# <package>/testdata/fuzz/<FuzzName>/<hash>; this script names the file and the command that
# replays it. To keep it as a seed-corpus entry: fix the code (or the property, if the property
# was wrong), check that the replay passes, rename the file to say what it holds
# (e.g. testdata/fuzz/FuzzIdentifiers/leading-dot) and commit it. Every file there runs as a
# test case in the ordinary `go test` from then on.
#
# A target that stops with a bare "context deadline exceeded", writes no input and whose corpus
# replays clean is reported as RACE, not as a failure: Go 1.26's fuzzing coordinator can report its
# own -fuzztime deadline that way on a loaded machine (go.dev/issue/75804, fixed in Go 1.27).
set -u
cd "$(dirname "$0")/.."

per=${SETTLE_FUZZTIME:-10s}
budget=0
list=false
filter=.
while [ $# -gt 0 ]; do
	case $1 in
	--time) per=$2; shift ;;
	--time=*) per=${1#--time=} ;;
	--long) per=5m ;;
	--budget) budget=$2; shift ;;
	--budget=*) budget=${1#--budget=} ;;
	--list) list=true ;;
	-h | --help) sed -n '2,/^set -u/p' "$0" | sed 's/^# \{0,1\}//;/^set -u/d'; exit 0 ;;
	-*) echo "ci/fuzz.sh: unknown option $1 (see --help)" >&2; exit 2 ;;
	*) filter=$1 ;;
	esac
	shift
done

# Discover: "module-dir<TAB>package-import-path<TAB>package-dir<TAB>FuzzName" per target.
targets=()
for mod in $(go list -m -f '{{.Dir}}'); do
	while IFS=$'\t' read -r pkg dir; do
		[ -n "$dir" ] || continue
		for name in $(grep -hoE '^func Fuzz[A-Za-z0-9_]*\([A-Za-z_][A-Za-z0-9_]* \*testing\.F\)' "$dir"/*_test.go 2>/dev/null |
			sed -E 's/^func (Fuzz[A-Za-z0-9_]*)\(.*/\1/' | sort -u); do
			short=${pkg##*/}.$name
			[[ $short =~ $filter ]] || continue
			targets+=("$mod"$'\t'"$pkg"$'\t'"$dir"$'\t'"$name")
		done
	done < <(cd "$mod" && go list -f '{{.ImportPath}}{{"\t"}}{{.Dir}}' ./...)
done
n=${#targets[@]}
if [ "$n" -eq 0 ]; then
	echo "ci/fuzz.sh: no fuzz target matches ${filter}" >&2
	exit 1
fi

if $list; then
	printf '%s\n' "${targets[@]}" | awk -F'\t' '{ print $2 "\t" $4 }'
	exit 0
fi

# Seconds in a Go duration like 10s, 2m or 1m30s (what the budget divides).
seconds() {
	local d=$1 total=0 num
	while [[ $d =~ ^([0-9]+)(h|m|s)(.*)$ ]]; do
		num=${BASH_REMATCH[1]}
		case ${BASH_REMATCH[2]} in h) total=$((total + num * 3600)) ;; m) total=$((total + num * 60)) ;; s) total=$((total + num)) ;; esac
		d=${BASH_REMATCH[3]}
	done
	[ -z "$d" ] || { echo "ci/fuzz.sh: cannot read the duration $1 (use e.g. 10s, 2m)" >&2; exit 2; }
	echo "$total"
}
per_s=$(seconds "$per")
if [ "$budget" -gt 0 ] && [ $((per_s * n)) -gt "$budget" ]; then
	per_s=$((budget / n))
	[ "$per_s" -ge 2 ] || per_s=2
	echo "ci/fuzz.sh: $n targets in a budget of ${budget}s: ${per_s}s each instead of $per"
	per=${per_s}s
fi
echo "ci/fuzz.sh: $n fuzz targets, $per each, ${SETTLE_FUZZ_PARALLEL:-2} workers"

failed=0
summary=()
start=$SECONDS
for t in "${targets[@]}"; do
	IFS=$'\t' read -r mod pkg dir name <<<"$t"
	corpus="$dir/testdata/fuzz/$name"
	before=$(ls "$corpus" 2>/dev/null | sort)
	log=$(mktemp)
	echo "== $pkg $name"
	if (cd "$mod" && go test -run '^$' -fuzz "^${name}\$" -fuzztime "$per" -fuzzminimizetime 10s \
		-parallel "${SETTLE_FUZZ_PARALLEL:-2}" "$pkg") >"$log" 2>&1; then
		result=ok
	else
		result=FAIL
		failed=$((failed + 1))
	fi
	execs=$(grep -oE 'execs: [0-9]+' "$log" | tail -1 | grep -oE '[0-9]+')
	if grep -qE '^--- SKIP|no fuzz tests to fuzz|skipping' "$log" && [ "$result" = ok ] && [ -z "$execs" ]; then
		result=SKIP
		grep -E '_test\.go:[0-9]+: ' "$log" | head -3
	fi
	after=$(ls "$corpus" 2>/dev/null | sort)
	new=$(comm -13 <(echo "$before") <(echo "$after") | grep -v '^$' || true)
	if [ "$result" = FAIL ] && [ -z "$new" ] && grep -q '^    context deadline exceeded$' "$log" &&
		(cd "$mod" && go test -count=1 -run "^${name}\$" "$pkg") >/dev/null 2>&1; then
		# Go 1.26's fuzzing coordinator can report its own -fuzztime deadline as a failure when a
		# worker is slow to stop on a loaded machine (go.dev/issue/75804, fixed in Go 1.27): no
		# input was written and the corpus replays clean, so nothing was found.
		result=RACE
		failed=$((failed - 1))
		echo "ci/fuzz.sh: $name stopped with the fuzzing engine's deadline race (go.dev/issue/75804); its corpus replays clean"
	fi
	if [ "$result" = FAIL ]; then
		cat "$log"
		if [ -n "$new" ]; then
			for f in $new; do
				echo "ci/fuzz.sh: finding of $name written to ${corpus#"$PWD/"}/$f"
				echo "  replay:   (cd ${mod#"$PWD/"} && go test -run '^$name/$f\$' $pkg)"
			done
			echo "  then fix the code (or the property), replay until it passes, rename the file to say"
			echo "  what it holds and commit it: it stays in the seed corpus that every go test runs."
		fi
	fi
	summary+=("$(printf '%-4s %-46s %-28s %10s execs' "$result" "$pkg" "$name" "${execs:-0}")")
	rm -f "$log"
done

echo
echo "== fuzz summary ($((SECONDS - start))s)"
printf '%s\n' "${summary[@]}"
[ "$failed" -eq 0 ] || { echo "ci/fuzz.sh: $failed of $n targets failed" >&2; exit 1; }
