// Package bench holds the cross-process benchmarks of lockword's shared
// locks against their peers: gofrs/flock, raw flock(2) on a kept file
// descriptor, and (through run.sh, which builds cpeer/pthread_robust.c with gcc) a
// C pthread mutex with PTHREAD_PROCESS_SHARED and PTHREAD_MUTEX_ROBUST in an
// mmap'd file. It is a separate package so that the core package's tests
// never import the third-party peers. It has no non-test code; see
// BENCHMARKS.md for the commands and the latest figures.
package bench
