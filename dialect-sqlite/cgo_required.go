//go:build !cgo

package sqlite

// This file is built only without cgo, to say why the build fails: mattn/go-sqlite3, which this
// dialect is built on, is C. Install a C compiler (gcc or clang) and build with CGO_ENABLED=1,
// or use a backend that needs no cgo (docs/choosing.md).
var _ = dialect_sqlite_needs_cgo__install_a_C_compiler_and_build_with_CGO_ENABLED_1__see_docs_choosing_md
