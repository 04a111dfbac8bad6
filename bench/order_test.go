package bench

import (
	"slices"
	"testing"
)

// roundOrder is the order in which round r runs k contenders (indices 0…k-1): row r of a
// Williams design, k rows when k is even and 2k when it is odd, so that over a whole cycle of
// rounds every contender runs first as often as any other and follows every other contender
// equally often. A fixed order, or one rotated a place a round, runs each contender after the
// same neighbour in most rounds, and what a drain leaves behind (a server's checkpoint or
// clean-up of the table or queue just dropped, a heap grown in this process) then weighs on the
// same contender round after round.
func roundOrder(r, k int) []int {
	if k <= 0 {
		return nil
	}
	r %= roundCycle(k)
	// The first row 0, 1, k-1, 2, k-2, …; row i adds i to each (mod k); with k odd, rows k…2k-1
	// are rows 0…k-1 reversed.
	order := make([]int, k)
	for j := range order {
		var a int
		switch {
		case j == 0:
		case j%2 == 1:
			a = (j + 1) / 2
		default:
			a = k - j/2
		}
		order[j] = (a + r%k) % k
	}
	if r >= k {
		slices.Reverse(order)
	}
	return order
}

// roundCycle is how many rounds roundOrder's design has for k contenders: k when k is even, 2k
// when it is odd.
func roundCycle(k int) int {
	if k%2 == 1 {
		return 2 * k
	}
	return k
}

func TestRoundOrder(t *testing.T) {
	for k := 1; k <= 8; k++ {
		rows := roundCycle(k)
		first := make([]int, k)
		follows := map[[2]int]int{}
		for r := range rows {
			o := roundOrder(r, k)
			for i, c := range slices.Sorted(slices.Values(o)) {
				if c != i {
					t.Fatalf("k=%d round %d: %v is not a permutation of 0…%d", k, r, o, k-1)
				}
			}
			first[o[0]]++
			for j := 1; j < k; j++ {
				follows[[2]int{o[j-1], o[j]}]++
			}
		}
		for c, n := range first {
			if n != rows/k {
				t.Errorf("k=%d: contender %d runs first in %d of %d rounds, want %d", k, c, n, rows, rows/k)
			}
		}
		for a := range k {
			for b := range k {
				if a == b {
					continue
				}
				// rows*(k-1) adjacent pairs over k*(k-1) ordered pairs of contenders
				if n := follows[[2]int{a, b}]; n != rows/k {
					t.Errorf("k=%d: %d follows %d in %d rounds, want %d", k, b, a, n, rows/k)
				}
			}
		}
		if !slices.Equal(roundOrder(rows, k), roundOrder(0, k)) {
			t.Errorf("k=%d: the design does not repeat after %d rounds", k, rows)
		}
	}
}
