package bench

import (
	"context"
	"errors"
	"slices"

	"golang.org/x/sys/unix"
)

// seqpacketReceiver is the receiving end of the SOCK_SEQPACKET peer: a
// listening socket and the connections it accepts (one per sender), read
// by one epoll loop on the receiving goroutine, each connection with
// messages waiting read in turn (round robin, so that no sender starves
// the others) until it has none.
//
// Why an epoll loop and not Go's net package (Accept, then a goroutine
// per connection sending each message on a channel to the consumer
// loop): the MPSC consumer is one loop reading into its own buffer, and
// so is this, so the two differ only in the transport. A goroutine per
// connection adds a hand-off between goroutines and a buffer per message
// to each message's cost, which would charge the socket for Go's
// scheduler; the epoll loop is what a user writes who wants the most from
// the socket (one read(2) per message; epoll_wait only once every
// connection is drained).
type seqpacketReceiver struct {
	ep, listener int // epoll set; listening socket, in it
	// cancel is an eventfd in the epoll set, written once ctx ends: a
	// socket read has no context, and a timeout would poll.
	cancel    int
	cancelled chan struct{} // closed once the write to cancel is done
	stop      func() bool   // stops that write
	conns     []int         // accepted; all are closed by close
	ready     []int         // connections that may have messages waiting
	next      int           // the index in ready to read next
	events    []unix.EpollEvent
}

// listenSeqpacket listens on path and returns the receiving end; recv
// returns ctx.Err() once ctx is done.
func listenSeqpacket(ctx context.Context, path string) (queueReceiver, error) {
	s := &seqpacketReceiver{ep: -1, listener: -1, cancel: -1, events: make([]unix.EpollEvent, 16)}
	fail := func(err error) (queueReceiver, error) {
		s.close()
		return queueReceiver{}, err
	}
	var err error
	if s.ep, err = unix.EpollCreate1(unix.EPOLL_CLOEXEC); err != nil {
		return fail(err)
	}
	if s.listener, err = unix.Socket(unix.AF_UNIX, unix.SOCK_SEQPACKET|unix.SOCK_NONBLOCK|unix.SOCK_CLOEXEC, 0); err != nil {
		return fail(err)
	}
	if err := unix.Bind(s.listener, &unix.SockaddrUnix{Name: path}); err != nil {
		return fail(err)
	}
	if err := unix.Listen(s.listener, unix.SOMAXCONN); err != nil {
		return fail(err)
	}
	if s.cancel, err = unix.Eventfd(0, unix.EFD_CLOEXEC|unix.EFD_NONBLOCK); err != nil {
		return fail(err)
	}
	for _, fd := range []int{s.listener, s.cancel} {
		if err := s.watch(fd); err != nil {
			return fail(err)
		}
	}
	s.cancelled = make(chan struct{})
	s.stop = context.AfterFunc(ctx, func() {
		var one [8]byte
		ne.PutUint64(one[:], 1)
		unix.Write(s.cancel, one[:])
		close(s.cancelled)
	})
	return queueReceiver{s.recv, s.close}, nil
}

// watch adds fd to the epoll set, to report when it can be read.
func (s *seqpacketReceiver) watch(fd int) error {
	return unix.EpollCtl(s.ep, unix.EPOLL_CTL_ADD, fd, &unix.EpollEvent{Events: unix.EPOLLIN, Fd: int32(fd)})
}

// recv returns the next message, read whole into buf's space (a longer
// one would be cut to cap(buf), which the caller's size check refuses).
func (s *seqpacketReceiver) recv(ctx context.Context, buf []byte) ([]byte, error) {
	for {
		for len(s.ready) > 0 {
			s.next %= len(s.ready)
			fd := s.ready[s.next]
			n, err := unix.Read(fd, buf[:cap(buf)])
			switch {
			case err == unix.EINTR:
			case err == unix.EAGAIN: // drained: epoll says when more comes
				s.ready = slices.Delete(s.ready, s.next, s.next+1)
			case err != nil:
				return nil, err
			case n == 0: // the sender closed its end: nothing more comes
				s.ready = slices.Delete(s.ready, s.next, s.next+1)
				if err := unix.EpollCtl(s.ep, unix.EPOLL_CTL_DEL, fd, nil); err != nil {
					return nil, err
				}
			default:
				s.next++
				return buf[:n], nil
			}
		}
		if err := s.wait(ctx); err != nil {
			return nil, err
		}
	}
}

// wait blocks until a connection can be read (it joins ready), a sender
// connects (it is accepted and watched) or ctx ends (ctx.Err()).
func (s *seqpacketReceiver) wait(ctx context.Context) error {
	n, err := unix.EpollWait(s.ep, s.events, -1)
	if err == unix.EINTR {
		return nil
	}
	if err != nil {
		return err
	}
	for _, ev := range s.events[:n] {
		switch fd := int(ev.Fd); fd {
		case s.cancel:
			return ctx.Err()
		case s.listener:
			if err := s.accept(); err != nil {
				return err
			}
		default:
			if !slices.Contains(s.ready, fd) {
				s.ready = append(s.ready, fd)
			}
		}
	}
	return nil
}

// accept accepts and watches every connection waiting on the listener.
func (s *seqpacketReceiver) accept() error {
	for {
		fd, _, err := unix.Accept4(s.listener, unix.SOCK_NONBLOCK|unix.SOCK_CLOEXEC)
		switch {
		case errors.Is(err, unix.EAGAIN):
			return nil
		case errors.Is(err, unix.EINTR) || errors.Is(err, unix.ECONNABORTED):
			continue
		case err != nil:
			return err
		}
		s.conns = append(s.conns, fd)
		if err := s.watch(fd); err != nil {
			return err
		}
	}
}

// close closes every descriptor, once the write on ctx's end (if it
// started) is done with cancel.
func (s *seqpacketReceiver) close() {
	if s.stop != nil && !s.stop() {
		<-s.cancelled
	}
	for _, fd := range append(s.conns, s.ep, s.listener, s.cancel) {
		if fd >= 0 {
			unix.Close(fd)
		}
	}
}
