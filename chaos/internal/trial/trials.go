package trial

import (
	"strings"
	"time"

	"github.com/settlehq/settle/chaos"
)

// sqlForms are the claim forms each SQL backend offers.
var sqlForms = map[string][]string{
	"postgres": {"lease", "rowlock", "advisory"},
	"mariadb":  {"lease", "rowlock", "advisory"},
	"sqlite":   {"lease", "advisory"},
}

// amqpForms are the RabbitMQ queue type and delay combinations, as "type" or "type+delay".
var amqpForms = map[string][2]string{
	"classic":           {"classic", "none"},
	"classic+dlxttl":    {"classic", "dlxttl"},
	"classic+inprocess": {"classic", "inprocess"},
	"quorum":            {"quorum", "none"},
	"quorum+dlxttl":     {"quorum", "dlxttl"},
}

// amqpMix is the RabbitMQ kill loops' mix (no side rows: no transaction to write them in).
const amqpMix = "ack=55,drop=8,retry=10,retry_after=8,fail=8,self_kill=6"

func sqlTrial(name, kind, form string, sc Scenario, m *Mark) *Trial {
	m = chargedOnce(m, sc)
	return &Trial{Name: name, Backend: kind, Form: form, Scenario: sc, Mark: m,
		open: func(env *Env) backend { return &sqlBackend{kind: kind, form: form, env: env} }}
}

func amqpTrial(name, form string, sc Scenario, m *Mark) *Trial {
	f := amqpForms[form]
	if sc.Mix == "" {
		sc.Mix = amqpMix
	}
	if f[1] == "none" {
		mix, _ := chaos.ParseMix(sc.Mix, 0)
		sc.Mix = mix.Without(func(k chaos.Kind) bool { return k == chaos.RetryAfter }).String()
	}
	return &Trial{Name: name, Backend: "rabbitmq", Form: form, Scenario: sc, Mark: m,
		open: func(env *Env) backend { return &amqpBackend{env: env, queueType: f[0], delay: f[1]} }}
}

func natsTrial(name string, sc Scenario) *Trial {
	if sc.Mix == "" {
		sc.Mix = amqpMix
	}
	var m *Mark
	switch name {
	case "restart":
		m = &Mark{Issue: 19, Intermittent: true, Cats: cats(chaos.Double, chaos.Stuck, chaos.Stall),
			Reason: "nats-server 2.9 writes JetStream state to disk asynchronously (sync_interval, which could make it synchronous, arrived in 2.10): the SIGKILL restart loses acknowledgements and terminations the server had confirmed, so those messages are delivered and settled again (reported as double: the same attempt settled twice), and others stay in the stream and are never delivered again (stuck, with a stall: acks confirmed 80 ms before the SIGKILL; the restored stream and consumer states seem to disagree, not analysed further)"}
	}
	return &Trial{Name: name, Backend: "nats", Form: "jetstream", Scenario: sc, Mark: m,
		open: func(env *Env) backend { return &natsBackend{env: env} }}
}

// List returns every trial, in the order of the table.
func List() []*Trial {
	var ts []*Trial
	add := func(t *Trial) { ts = append(ts, t) }
	for _, b := range []string{"postgres", "mariadb", "sqlite"} {
		for _, f := range sqlForms[b] {
			// kill -9 loop: a worker of four handlers, transactional side rows, the default mix.
			add(sqlTrial("kill", b, f, Scenario{Messages: -1, FaultCount: -1, Faults: []Fault{Kill}, Transactional: true,
				StallBound: 8 * time.Second}, markKill(b, f)))
		}
		for _, f := range sqlForms[b] {
			// poison pill: exits the process on every delivery; must end in the dead letter.
			// Each poison row crashes its process the cap's number of times on its own (a row
			// whose claim lapsed runs alone), each crash waiting out a lease: the drain allows it.
			add(sqlTrial("poison", b, f, Scenario{Messages: 20, Mix: "ack=85,poison=15", Drain: 20 * time.Second}, markPoison(b, f)))
		}
		// lease expiry: one of two workers stopped past its lease, then resumed.
		add(sqlTrial("pause", b, "lease", Scenario{Workers: 2, Faults: []Fault{Pause}, Transactional: true, Work: 40 * time.Millisecond,
			StallBound: 8 * time.Second}, nil))
		if b != "sqlite" {
			for _, f := range sqlForms[b] {
				// server connections terminated while handlers run.
				// (Row lock: each termination rolls back the whole claim batch, so the bound is wider.)
				add(sqlTrial("terminate", b, f, Scenario{Faults: []Fault{Terminate}, FaultCount: 3, Transactional: true, Work: 60 * time.Millisecond,
					StallBound: 12 * time.Second}, markTerminate(b, f)))
			}
			for _, f := range sqlForms[b] {
				// the server restarted mid-drain: a fast (clean) and an immediate (crash) stop.
				add(sqlTrial("restart", b, f, Scenario{Faults: []Fault{RestartGraceful, RestartCrash}, Transactional: true, Work: 30 * time.Millisecond,
					RecoverBound: 2 * time.Second, StallBound: 8 * time.Second}, markRestart(b, f)))
			}
			// one claimed row locked by another connection must not stall the subscription.
			add(sqlTrial("locked-row", b, "lease", Scenario{Messages: 30, Mix: "ack=1", Faults: []Fault{LockRow}, FaultCount: 1,
				Work: 600 * time.Millisecond, LockFor: 6 * time.Second, StallBound: 3 * time.Second, Drain: 30 * time.Second}, markLockedRow(b)))
		}
		for _, f := range sqlForms[b] {
			// two worker processes on one queue (advisory: spelling the table two ways, or on
			// SQLite, the second must be refused).
			sc := Scenario{Workers: 2, Transactional: true, StallBound: 8 * time.Second}
			if f == "advisory" {
				if b == "sqlite" {
					sc.RefuseSecond = true
				} else {
					sc.SecondSpelling = true
				}
			}
			add(sqlTrial("compete", b, f, sc, markCompete(b, f)))
		}
		settleForms := []string{"lease"}
		if b == "postgres" {
			settleForms = sqlForms[b]
		}
		for _, f := range settleForms {
			// the custom ack event fails for some rows: their handler runs stay bounded, the cap
			// ends them in the dead letter, and other rows flow meanwhile (the failing rows wait out
			// their lease between attempts: the stall bound allows the cap × lease).
			add(sqlTrial("settle-fails", b, f, Scenario{Mix: "ack=85,fail_ack=15", WorkerFlags: []string{"-fail-ack"},
				MaxRuns: 4, StallBound: 6 * time.Second, Drain: 10 * time.Second}, markSettleFails(b, f)))
		}
		if b != "mariadb" {
			// the host of an event plugin is SIGKILLed: no plugin process may outlive it.
			add(sqlTrial("plugin-kill", b, "lease", Scenario{Plugin: true, Faults: []Fault{Kill}, StallBound: 8 * time.Second}, markPluginKill()))
		}
	}

	for _, f := range []string{"classic", "classic+dlxttl", "quorum", "quorum+dlxttl"} {
		add(amqpTrial("kill", f, Scenario{Messages: -1, FaultCount: -1, Faults: []Fault{Kill}, StallBound: 8 * time.Second}, markAMQP("kill", f)))
	}
	// poison pill on a quorum queue (a classic queue cannot count deliveries that never
	// settle: there the operator bounds a crash loop).
	add(amqpTrial("poison", "quorum", Scenario{Messages: 20, Mix: "ack=85,poison=15", Drain: 12 * time.Second}, markAMQP("poison", "quorum")))
	for _, f := range []string{"classic+dlxttl", "classic+inprocess", "quorum+dlxttl"} {
		// connections reset at the proxy and closed by the broker, with retries and delayed
		// copies in flight.
		add(amqpTrial("cut", f, Scenario{Faults: []Fault{Cut, Terminate}, FaultCount: 4, Work: 30 * time.Millisecond,
			StallBound: 8 * time.Second}, markAMQP("cut", f)))
	}
	for _, f := range []string{"classic+dlxttl", "quorum+dlxttl"} {
		// the broker restarted mid-drain.
		add(amqpTrial("restart", f, Scenario{Faults: []Fault{RestartGraceful, RestartCrash}, Work: 20 * time.Millisecond,
			StallBound: 15 * time.Second}, markAMQP("restart", f)))
	}
	for _, f := range []string{"classic", "quorum"} {
		add(amqpTrial("compete", f, Scenario{Workers: 2, StallBound: 8 * time.Second}, markAMQP("compete", f)))
	}
	// NATS JetStream: the kill loop, a poison pill, and the suite's own nats-server restarted
	// (SIGTERM, then SIGKILL) mid-drain.
	add(natsTrial("kill", Scenario{Messages: -1, FaultCount: -1, Faults: []Fault{Kill}, StallBound: 8 * time.Second}))
	add(natsTrial("poison", Scenario{Messages: 20, Mix: "ack=85,poison=15", Drain: 12 * time.Second}))
	add(natsTrial("restart", Scenario{Faults: []Fault{RestartGraceful, RestartCrash}, Work: 20 * time.Millisecond,
		RecoverBound: 2 * time.Second, StallBound: 8 * time.Second}))
	add(natsTrial("compete", Scenario{Workers: 2, StallBound: 8 * time.Second}))

	// the dead-letter queue deleted mid-drain and declared again: no copy may be lost, and the
	// failing messages' handlers must not spin.
	add(amqpTrial("refused-copies", "classic", Scenario{Mix: "ack=70,fail=30", Faults: []Fault{DeleteDead}, FaultCount: 1,
		WorkerFlags: []string{"-publish", "confirmed"}, MaxRuns: 6, Drain: 40 * time.Second}, markAMQP("refused-copies", "classic")))
	return ts
}

// The marks: trials that fail today because of defects other work is fixing. Each names the
// issue and the checks it is expected to fail; a failure in any other check is a FAIL, and a
// marked trial that passes is an XPASS (remove its mark).

func cats(c ...chaos.Category) []chaos.Category { return c }

// The crash-neighbour defect (issue 14: every row a crashed process had claimed was charged an
// attempt, so rows that never failed were dead-lettered after three crashes) is fixed in every
// SQL form: a row whose claim lapsed is taken again alone, as core.Suspect. The row-lock form's
// lost batches and crash loops are fixed by its counted claims' marks; recovery after a server
// restart is within the bound.

// The MariaDB row-lock stall (claims and settlements waiting out the 30 s statement timeout,
// in the kill, restart and compete trials) was a claim keeping its lock on the ready-index entry
// of a row it skipped, which the claim holding the row by its primary key then needed to settle
// it; every claim now reads the table through one index (issue 14). No mark.
func markKill(b, f string) *Mark { return nil }

// chargedOnce is what remains of the crash-neighbour defect (issue 14): a row claimed beside a
// crash and never handed to a handler is still charged the attempt its claim counted — once,
// since it is then taken again alone. A self_kill message spends one attempt on its own crash
// by design; so charged, one more fault in its handler (a SIGKILL, a pause past its lease, a
// terminated connection that fails its ack) spends the third, and it is dead-lettered. The
// ledgers show it as start#2 start#3 dead_letter#4 (no start#1).
func chargedOnce(m *Mark, sc Scenario) *Mark {
	mix := sc.Mix
	if mix == "" {
		mix = chaos.DefaultMix
	}
	if !strings.Contains(mix, "self_kill") {
		return m
	}
	c := &Mark{Issue: 14, Intermittent: true, Cats: cats(chaos.Wrong),
		Reason: "a row claimed beside a crash and never handed to a handler is still charged its claim's count once (it is then taken again alone): a self_kill message so charged, whose own crash and one more fault in its handler spend the other two attempts, is dead-lettered (ledger start#2 start#3 dead_letter#4; seen in kill, pause and terminate trials, about 1 run in 3 per backend)"}
	if m == nil {
		return c
	}
	both := *m
	both.Cats = append(append([]chaos.Category(nil), m.Cats...), c.Cats...)
	both.Reason = m.Reason + "; and " + c.Reason
	return &both
}

func markPoison(b, f string) *Mark {
	if b == "sqlite" && f == "advisory" {
		return &Mark{Issue: 14, Intermittent: true, Cats: cats(chaos.Stuck, chaos.Stall),
			Reason: "after a few poison crashes some rows can sit unclaimed for the rest of the drain (seen 1 run in 6; cause not yet found, reported to the lead)"}
	}
	return nil
}

func markTerminate(b, f string) *Mark { return nil }

func markRestart(b, f string) *Mark { return nil }

func markLockedRow(b string) *Mark {
	if b == "mariadb" {
		return &Mark{Issue: 14, Intermittent: true, Cats: cats(chaos.Stall),
			Reason: "the lease form still stalls a little past the 3 s bound while another connection holds a claimed row on MariaDB (3.26 s in one CI run at a66f29e, 3.1 s before 21e1ec5): a statement waiting on the held row is not yet cut short enough"}
	}
	return nil
}

func markCompete(b, f string) *Mark {
	// Advisory keys name the table's canonical identity, and a second SQLite process opening
	// the file in the advisory form is refused (issue 14): both fixed, no mark.
	return nil
}

func markSettleFails(b, f string) *Mark {
	// A failing settlement holds its row back for a doubling backoff in every form (issue 23);
	// the attempt counts, so the cap ends the loop, and the other rows flow.
	return nil
}

func markPluginKill() *Mark { return nil }

func markAMQP(trial, form string) *Mark {
	quorum := form == "quorum" || form == "quorum+dlxttl"
	switch {
	case trial == "refused-copies":
		return &Mark{Issue: 15, Intermittent: true, Cats: cats(chaos.Lost, chaos.Stuck),
			Reason: "a dead letter confirmed while its queue was being deleted is lost (RabbitMQ confirms a routed copy that a concurrent queue.delete then drops: possibly the fault itself, reported); originals held back after a refused copy may still be held when the bounded drain ends"}
	case trial == "cut" && form == "classic+inprocess":
		return &Mark{Issue: 15, Intermittent: true, Cats: cats(chaos.Lost, chaos.Double),
			Reason: "an in-process delayed copy was lost when the connection was cut (its original acked when it was parked, its publish on the dead connection failed); since dd9a6e7 the copy stays in the process and is published again (TestInProcessDelayedCopySurvivesConnectionLoss), but the trial showed the loss only intermittently (0 in 3 runs before the fix, 0 in 3 after), so the mark stays until more runs show it gone"}
	case quorum && (trial == "kill" || trial == "cut" || trial == "restart"):
		return &Mark{Issue: 15, Intermittent: true, Cats: cats(chaos.Wrong, chaos.NoCount),
			Reason: "the residue of the crash-neighbour defect: the worker sets no Prefetch, so the window the first clean delivery opens is unlimited, and a SIGKILL, a cut or a broker restart charges every delivery prefetched but not yet handed out; a message caught that way and by two more faults (or one and its own retry) reaches the cap of 3 with an attempt that never reached a handler (dead_letter#4 after start#1 retry#1 start#3, or with no start at all; 4 FAIL in one of 5 bounded runs). A default Prefetch of twice the workers removed it in the trials but made Watermill's TestContinueAfterErrors on quorum miss 15 of 50 messages (not analysed), so it was not landed"}
	case trial == "compete" && quorum:
		return &Mark{Issue: 15, Intermittent: true, Cats: cats(chaos.NoCount, chaos.Wrong),
			Reason: "two consumers with the full window (no Prefetch: unlimited): a crash of one returns its whole window, which the other takes as suspects beside its own clean deliveries; when the other crashes too (a self_kill among them), the same innocent messages are charged again, and with a retry of their own they reach the cap (dead-lettered as not settled, or moved by the server's delivery limit without settle-retry-count). A window cannot be narrowed safely within a session (a quorum delivery in flight to a cancelled consumer is charged)"}
	}
	return nil
}
