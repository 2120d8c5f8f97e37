// Package faultpoint holds the hooks through which this module's own
// tests and torture workers stop a protocol at a named step, so that a
// process can be killed exactly there: the window between two stores is
// a few nanoseconds, and a kill at a random moment almost never lands in
// it. Nil outside those runs: each step costs one predictable branch.
// Internal: no user can reach it.
package faultpoint

// MPSC, if set, is called by a shm MPSC producer at each named step of a
// send ("claiming": the claim word holds its claim, no record header yet;
// "claimed": the header is written in the claimed state and the claim
// word free again, the payload not yet copied) and by the consumer when
// it has found the claimer of the record at head dead ("claimer-dead"),
// and by Inspect between its loads of a queue's head and tail
// ("inspect-head").
// Set it before the queue's handles are used; it is called from their
// goroutines.
var MPSC func(step string)
