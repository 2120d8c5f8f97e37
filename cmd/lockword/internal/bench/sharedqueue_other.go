//go:build !linux

package bench

import "context"

// The seqpacket peer reads with epoll, Linux's; shared regions are
// Linux-only too, so no shared-queue sample runs here.
func listenSeqpacket(context.Context, string) (queueReceiver, error) {
	return queueReceiver{}, errNoProcs
}
