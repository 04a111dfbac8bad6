package bench

import (
	"os"
	"strings"
)

// picked reports whether the environment variable env (comma-separated fragments of contender
// names; unset or empty for all) picks the contender called name: SETTLE_BENCH_PG_WHO=lease
// runs only the lease contenders, for profiles and quick comparisons.
func picked(env, name string) bool {
	who := os.Getenv(env)
	if who == "" {
		return true
	}
	for _, w := range strings.Split(who, ",") {
		if w != "" && strings.Contains(name, w) {
			return true
		}
	}
	return false
}
