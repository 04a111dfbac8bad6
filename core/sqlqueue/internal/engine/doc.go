// Package engine is the part of the SQL queue engine every claim form shares, and it names no
// form: a queue and its checks against the catalogue (queue.go, open.go), the subscription's
// options (config.go), an opened subscription's runtime with its clock, logger and statement
// deadlines (runtime.go, deadlines.go), the settlement statements every form runs, fenced or not
// (settlements.go, settle.go), custom events (events.go), the rows held back after a failed
// settlement (holds.go), wake-ups (wake.go), waiting out a lost server (recover.go), and what
// every delivery carries (delivery.go, handlertx.go).
//
// Each claim form is a package of its own beside this one (internal/lease, internal/rowlock,
// internal/advisory): it owns its state, renders its own statements on top of the shared ones,
// and runs its goroutines. Package sqlqueue puts the pieces together.
package engine
