package chaos

import (
	"fmt"
	"hash/fnv"
	"slices"
	"strconv"
	"strings"
)

// Kind is what the chaos worker's handler does with one message. The driver and the worker
// derive it from the same Mix, so the checker knows what each message should end as.
type Kind uint8

const (
	// Ack acknowledges the message.
	Ack Kind = iota + 1
	// Drop drops the message.
	Drop
	// Retry retries on the first attempt, then acknowledges.
	Retry
	// RetryAfter retries after a short delay on the first attempt, then acknowledges.
	RetryAfter
	// Fail retries on every attempt, so the cap moves it to the dead letter.
	Fail
	// Side writes a side row in the delivery's transaction, then acknowledges: exactly one side
	// row must remain.
	Side
	// SideDrop writes a side row, then drops: the write must be rolled back.
	SideDrop
	// SideRetry writes a side row and retries on the first attempt (rolled back), then writes
	// again and acknowledges: exactly one side row must remain.
	SideRetry
	// SelfKill writes a side row (in transactional mode) and then SIGKILLs its own process, once
	// per message; the next delivery acknowledges.
	SelfKill
	// Poison exits the process on every delivery: only the cap at claim ends it, in the dead
	// letter.
	Poison
	// FailAck acknowledges, but the worker's custom ack statement for it fails every time: the
	// attempt must still count, so the cap ends it in the dead letter.
	FailAck
	numKinds
)

var kindNames = [numKinds]string{
	Ack: "ack", Drop: "drop", Retry: "retry", RetryAfter: "retry_after", Fail: "fail", Side: "side",
	SideDrop: "side_drop", SideRetry: "side_retry", SelfKill: "self_kill", Poison: "poison", FailAck: "fail_ack",
}

func (k Kind) String() string {
	if k > 0 && k < numKinds {
		return kindNames[k]
	}
	return "kind(" + strconv.Itoa(int(k)) + ")"
}

// ParseKind reads a kind's name.
func ParseKind(s string) (Kind, error) {
	for k := Ack; k < numKinds; k++ {
		if kindNames[k] == s {
			return k, nil
		}
	}
	return 0, fmt.Errorf("unknown message kind %q (one of %s)", s, strings.Join(kindNames[1:], ", "))
}

// Final is how a message of a kind must end.
type Final uint8

const (
	// FinalAck: acknowledged (the row marked processed or deleted, the AMQP message gone).
	FinalAck Final = iota + 1
	// FinalDrop: dropped.
	FinalDrop
	// FinalDead: in the dead letter, with its count.
	FinalDead
)

func (f Final) String() string {
	switch f {
	case FinalAck:
		return "ack"
	case FinalDrop:
		return "drop"
	case FinalDead:
		return "dead_letter"
	}
	return "final(" + strconv.Itoa(int(f)) + ")"
}

// Final is how a message of kind k must end.
func (k Kind) Final() Final {
	switch k {
	case Drop, SideDrop:
		return FinalDrop
	case Fail, Poison, FailAck:
		return FinalDead
	}
	return FinalAck
}

// SideRows is how many side rows a message of kind k leaves in transactional mode.
func (k Kind) SideRows() int {
	switch k {
	case Side, SideRetry, SelfKill:
		return 1
	}
	return 0
}

// NeedsTransaction reports whether kind k writes a side row, which only the transactional mode
// of a SQL queue can roll back with the delivery.
func (k Kind) NeedsTransaction() bool {
	switch k {
	case Side, SideDrop, SideRetry:
		return true
	}
	return false
}

// Mix chooses a Kind for every message id: weights per kind, and a seed. The same Mix gives
// the same kind for an id in every process.
type Mix struct {
	Seed    int64
	weights [numKinds]int
	total   int
}

// DefaultMix is the handler mix of the kill loops: mostly acks, some of every other outcome,
// no poison and no failing acks (they have trials of their own).
const DefaultMix = "ack=50,drop=8,retry=8,retry_after=6,fail=6,side=8,side_drop=4,side_retry=5,self_kill=5"

// ParseMix reads "kind=weight,…" (weights are non-negative integers, at least one positive).
func ParseMix(spec string, seed int64) (Mix, error) {
	m := Mix{Seed: seed}
	if strings.TrimSpace(spec) == "" {
		return Mix{}, fmt.Errorf("mix %q: empty; give kind=weight pairs, e.g. %q", spec, DefaultMix)
	}
	for part := range strings.SplitSeq(spec, ",") {
		name, w, ok := strings.Cut(strings.TrimSpace(part), "=")
		if !ok {
			return Mix{}, fmt.Errorf("mix %q: %q is not kind=weight", spec, part)
		}
		k, err := ParseKind(strings.TrimSpace(name))
		if err != nil {
			return Mix{}, fmt.Errorf("mix %q: %w", spec, err)
		}
		n, err := strconv.Atoi(strings.TrimSpace(w))
		if err != nil || n < 0 {
			return Mix{}, fmt.Errorf("mix %q: weight of %s must be a non-negative integer, not %q", spec, k, w)
		}
		m.weights[k] += n
		m.total += n
	}
	if m.total == 0 {
		return Mix{}, fmt.Errorf("mix %q: every weight is zero", spec)
	}
	return m, nil
}

// Without returns m with the weight of every kind for which drop reports true moved to Ack:
// the side-row kinds on a backend without transactions, say.
func (m Mix) Without(drop func(Kind) bool) Mix {
	for k := Ack + 1; k < numKinds; k++ {
		if drop(k) {
			m.weights[Ack] += m.weights[k]
			m.weights[k] = 0
		}
	}
	return m
}

// Has reports whether kind k has a positive weight.
func (m Mix) Has(k Kind) bool { return k > 0 && k < numKinds && m.weights[k] > 0 }

// String spells m as ParseMix reads it (positive weights only).
func (m Mix) String() string {
	var parts []string
	for k := Ack; k < numKinds; k++ {
		if m.weights[k] > 0 {
			parts = append(parts, kindNames[k]+"="+strconv.Itoa(m.weights[k]))
		}
	}
	return strings.Join(parts, ",")
}

// Kind returns the kind of message id.
func (m Mix) Kind(id string) Kind {
	h := fnv.New64a()
	h.Write([]byte(strconv.FormatInt(m.Seed, 10)))
	h.Write([]byte{0})
	h.Write([]byte(id))
	r := int(h.Sum64() % uint64(m.total))
	for k := Ack; k < numKinds; k++ {
		if r < m.weights[k] {
			return k
		}
		r -= m.weights[k]
	}
	return Ack // unreachable: r < total
}

// Counts returns how many of ids have each kind, in kind order, for reports.
func (m Mix) Counts(ids []string) map[Kind]int {
	out := make(map[Kind]int)
	for _, id := range ids {
		out[m.Kind(id)]++
	}
	return out
}

// MessageID names the n-th seeded message of a trial.
func MessageID(n int) string { return fmt.Sprintf("m-%06d", n) }

// MessageIDs names messages 1..n.
func MessageIDs(n int) []string {
	ids := make([]string, n)
	for i := range ids {
		ids[i] = MessageID(i + 1)
	}
	return slices.Clip(ids)
}
