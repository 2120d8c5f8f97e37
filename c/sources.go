// Package c carries the C library's sources inside Go binaries: the
// library (lockword.h, internal.h and the rooms that lockword.c joins), the test worker (test/cworker.c)
// and the Python ctypes worker. The lockword command builds its C and
// Python torture workers from them with the system C compiler at run time
// (internal/cbuild), so that an installed lockword needs no clone of the
// module. The package has no code and no cgo: the C library runs in
// processes of its own.
//
// The go command refuses C files in a package that does not use cgo, so
// every .c file here starts with the build constraint "ignore": it is no
// part of any Go build, and go:embed still carries it.
package c

import "embed"

// Sources holds the C sources at their paths relative to this directory:
// lockword.h, internal.h, the library's rooms (*.c, joined by lockword.c),
// test/cworker.c (with the test/cworker_*.c it includes), python/lockword_worker.py.
//
//go:embed lockword.h internal.h *.c test/cworker.c test/cworker_api.c test/cworker_nullargs.c test/cworker_sem.c test/cworker_deadlock.c test/cworker_mpsc.c python/lockword_worker.py
var Sources embed.FS
