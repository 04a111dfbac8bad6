// Package chaos is settle's fault suite (module chaos/): the ledger its worker processes append
// to, the handler mix they follow, and the checker that reads a trial's ledger and the backend's
// final state and says what went wrong.
//
// A trial seeds messages whose ids choose their kind through a Mix (ack, drop, retry, retry
// after a delay, fail until the cap, write a side row in the delivery's transaction, kill the
// process once, exit on every delivery, have the ack statement fail). Worker processes
// (cmd/chaos-worker) handle them and append a line per handler start, handler end and
// settlement to a Ledger, one write(2) each, so the lines survive SIGKILL; the driver
// (cmd/chaos) appends its faults to the same file. Check then reads the ledger and a Snapshot of
// the backend, taken with the backend's own client, against what the Mix says each message must
// end as, and reports lost messages, messages finished twice, dead letters without their count,
// stalls and slow recoveries:
//
//	entries, _, _ := chaos.ReadLedgerFile("ledger")
//	res := chaos.Check(entries, snap, chaos.Expect{IDs: ids, Mix: mix, Cap: 3, SideRows: true})
//	chaos.WriteTable(os.Stdout, []chaos.Row{{Trial: "kill", Backend: "postgres", Form: "lease", Result: res}})
//
// The trials, their servers and faults are in internal/trial; ci/chaos.sh runs them.
package chaos
