// Package ctest holds the tests that make Go and C processes share one
// region: the C library (../lockword.c) is built with gcc into a temporary
// directory at test time, and its worker (../test/cworker.c) runs in
// processes of its own beside Go processes (this test binary, re-executed).
// There is no cgo. The tests sit in a package of their own so that the root
// package's tests need no C compiler and its imports stay golang.org/x/sys
// only; every test here skips, saying so, where gcc is missing.
//
// The mixed lock torture (Go and C worker processes on one shm.Mutex, with
// kills) is in cmd/lockword, beside the torture it extends
// (kinds_mixed_test.go).
package ctest
