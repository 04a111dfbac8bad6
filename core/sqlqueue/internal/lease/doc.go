// Package lease is the lease claim form of settle's SQL queue engine: a claim stamps
// locked_until (the delivery's token) and attempt + 1 and commits, so a long handler holds no
// transaction, and every finishing statement is fenced by the token. The path of one delivery:
//
//	source.go          Next hands out claimed deliveries; Finish routes a finished one
//	claimer.go         a claim cycle: settle what finished and claim the next batch
//	ahead.go           the claimer goroutine, one claim ahead of the workers
//	handout.go         what Next hands out, and the claim made ahead
//	tracker.go         the claimed deliveries not settled yet
//	extender.go        the extender goroutine, renewing leases at half the lease
//	settler.go         the settler goroutine and its queue of finished deliveries
//	completer_*.go     the three ways to write a settlement: alone, grouped, with the next claim
//	report.go          recording and reporting settlements
//	giver.go           giving back the rows never handed out when the subscription stops
//	delivery.go        a leased row, its token, and Charge; tokens.go, the tokens
//	rescue.go, look.go the rescue of rows whose lease ran out without a settlement
//	statements.go      the form's statements, over the ones every form shares (internal/engine)
package lease
