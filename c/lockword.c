//go:build ignore

/*
 * lockword.c: the C library, one translation unit. The region ABI of
 * docs/abi.md in C, step for step as the Go package does it: each
 * function names its Go twin; the check order, the error per check, the
 * slot and generation rules and the futex words are the same. Shared
 * words are changed only with sequentially consistent atomics, and every
 * futex on region memory is a shared one (no FUTEX_PRIVATE_FLAG).
 *
 * The code lives in rooms, one file per layer mirroring the Go files
 * (docs/architecture.md), each with its contract at the top; what they
 * share is in internal.h. This file joins them, so building the library
 * stays one line: cc -O2 -pthread -c c/lockword.c
 *
 * Every .c file here starts with the build constraint "ignore": the go
 * command refuses C files in a package without cgo, and package c only
 * embeds them (sources.go).
 */
#include "wait.c"
#include "proc.c"
#include "regionabi.c"
#include "regionflock.c"
#include "regionowner.c"
#include "waitsfor.c"
#include "regionopen.c"
#include "region.c"
#include "sharedmutex.c"
#include "sharedring.c"
#include "sharedsemaphore.c"
#include "mpscqueue.c"
#include "mpscconsumer.c"
#include "errors.c"
