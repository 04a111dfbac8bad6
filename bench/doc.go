// Package bench holds settle's side-by-side benchmarks: the service against a raw loop running
// the same statements or frames in the same process, and against River and Watermill on the
// same server in the same run. Its own module keeps the peers' dependencies out of every other
// module. See README.md for the commands and the latest figures.
package bench
