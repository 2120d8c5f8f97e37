package etcdlock_test

// The examples of README.md ("Across machines") and docs/etcd.md: each
// function the docs show is here, run by an Example against the tests'
// embedded etcd, and TestDocsShowExamples checks that the docs show it
// verbatim.

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/lockword/lockword"
	"github.com/lockword/lockword/etcdlock"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
)

func updateOrder(ctx context.Context, cli *clientv3.Client, id, state string) error {
	mu, err := etcdlock.NewMutex(ctx, cli, "/locks/orders", &etcdlock.Options{TTL: 5 * time.Second})
	if err != nil {
		return err
	}
	defer mu.Close() // a program keeps its Mutex; Close ends its lease
	switch err := mu.LockContext(ctx); {
	case errors.Is(err, lockword.ErrOwnerDead): // the last holder's lease expired while it held
		repairOrders(ctx, mu)
		mu.MarkConsistent()
	case err != nil:
		return err // nothing held, nothing left behind
	}
	defer mu.Unlock()
	// Write only while still holding: a holder paused past its lease gets
	// etcdlock.ErrNotHolder here, not a lost update. mu.Token() is the
	// fencing token for a store outside etcd; mu.Lost() fires when the
	// lease is gone.
	return mu.Put(ctx, "/orders/"+id, state)
}

func reserveStock(ctx context.Context, cli *clientv3.Client) error {
	s, err := etcdlock.NewSession(ctx, cli, &etcdlock.SessionOptions{TTL: 5 * time.Second})
	if err != nil {
		return err
	}
	defer s.Close()
	orders, err := etcdlock.NewMutex(ctx, cli, "/locks/orders", &etcdlock.Options{Session: s})
	if err != nil {
		return err
	}
	stock, err := etcdlock.NewMutex(ctx, cli, "/locks/stock", &etcdlock.Options{Session: s})
	if err != nil {
		return err
	}
	for _, mu := range []*etcdlock.Mutex{orders, stock} {
		if err := mu.LockContext(ctx); err != nil {
			return err // (ErrOwnerDead: held; s.Close reports it on to the next holder)
		}
		defer mu.Unlock()
	}
	return stock.Put(ctx, "/stock/42", "reserved") // ErrNotHolder once the Session is lost
}

func runGPUJob(ctx context.Context, cli *clientv3.Client) error {
	jobs, err := etcdlock.NewSemaphore(ctx, cli, "/sem/gpu-jobs", 8, nil) // 8 permits
	if err != nil {
		return err
	}
	defer jobs.Close()
	switch err := jobs.Acquire(ctx, 2); { // 2 of the 8
	case errors.Is(err, lockword.ErrOwnerDead):
		// We hold our 2; holders died holding permits, now returned
		// (errors.As gives *etcdlock.SemOwnerDeadError: who, how many).
	case err != nil:
		return err // we hold nothing
	}
	defer jobs.Release(ctx)
	return jobs.Put(ctx, "/jobs/42/state", "running") // ErrNotHolder once our permits are lost
}

func lead(ctx context.Context, cli *clientv3.Client, addr string) error {
	el, err := etcdlock.NewElection(ctx, cli, "/elections/orders-db", &etcdlock.Options{TTL: 5 * time.Second})
	if err != nil {
		return err
	}
	defer el.Close()
	switch err := el.Campaign(ctx, addr); {
	case errors.Is(err, lockword.ErrOwnerDead): // elected; the last leader's lease expired while it led
		finishWhatItLeft(ctx, el)
	case err != nil:
		return err // not elected, and never will be by this call: nothing of it is left
	}
	defer el.Resign(context.Background())
	// A leader paused or cut off past its lease is deposed: its writes then
	// fail with etcdlock.ErrNotHolder instead of overwriting its successor's.
	// el.Token() is the fencing token for a store outside etcd.
	return el.Put(ctx, "/orders-db/primary", addr)
}

func reprice(ctx context.Context, cli *clientv3.Client) error {
	rw, err := etcdlock.NewRWMutex(ctx, cli, "/locks/catalog", &etcdlock.Options{TTL: 5 * time.Second})
	if err != nil {
		return err
	}
	defer rw.Close()

	if err := rw.RLockContext(ctx); err != nil { // readers share; a dead reader is dropped with its lease
		return err
	}
	price, err := cli.Get(ctx, "/catalog/42/price")
	if err == nil && len(price.Kvs) == 1 { // a reader's writes are fenced by its read hold too
		err = rw.Put(ctx, "/cache/42/price", string(price.Kvs[0].Value))
	}
	rw.RUnlock()
	if err != nil {
		return err
	}

	switch err := rw.LockContext(ctx); {
	case errors.Is(err, lockword.ErrOwnerDead): // the last writer died holding; readers are kept out
		repairCatalog(ctx, rw)
		rw.MarkConsistent()
	case err != nil:
		return err
	}
	defer rw.Unlock()
	return rw.Put(ctx, "/catalog/42/price", "17.50") // ErrNotHolder once the hold has ended
}

// What the examples' repairs would do: nothing to repair here.
func repairOrders(context.Context, *etcdlock.Mutex)        {}
func repairCatalog(context.Context, *etcdlock.RWMutex)     {}
func finishWhatItLeft(context.Context, *etcdlock.Election) {}

// exampleClient is a client of the tests' embedded etcd (in a program:
// clientv3.New with the cluster's endpoints).
func exampleClient() *clientv3.Client {
	cli, err := clientv3.New(clientv3.Config{Endpoints: etcdlock.ServerEndpoints(), DialTimeout: 5 * time.Second, Logger: zap.NewNop()})
	if err != nil {
		panic(err)
	}
	return cli
}

// run runs call against the tests' etcd, after deleting keys (the
// examples' output is the same in every run), and prints its error or
// the values of keys.
func run(call func(context.Context, *clientv3.Client) error, keys ...string) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cli := exampleClient()
	defer cli.Close()
	for _, k := range keys {
		cli.Delete(ctx, k)
	}
	if err := call(ctx, cli); err != nil {
		fmt.Println(err)
		return
	}
	for _, k := range keys {
		r, err := cli.Get(ctx, k)
		if err != nil || len(r.Kvs) == 0 {
			fmt.Println(k, "missing", err)
			continue
		}
		fmt.Printf("%s = %s\n", k, r.Kvs[0].Value)
	}
}

func ExampleMutex() {
	run(func(ctx context.Context, cli *clientv3.Client) error { return updateOrder(ctx, cli, "42", "paid") }, "/orders/42")
	// Output: /orders/42 = paid
}

func ExampleSession() {
	run(reserveStock, "/stock/42")
	// Output: /stock/42 = reserved
}

func ExampleSemaphore() {
	run(runGPUJob, "/jobs/42/state")
	// Output: /jobs/42/state = running
}

func ExampleElection() {
	run(func(ctx context.Context, cli *clientv3.Client) error { return lead(ctx, cli, "db-1:5432") }, "/orders-db/primary")
	// Output: /orders-db/primary = db-1:5432
}

func ExampleRWMutex() {
	run(func(ctx context.Context, cli *clientv3.Client) error {
		if _, err := cli.Put(ctx, "/catalog/42/price", "16.00"); err != nil {
			return err
		}
		return reprice(ctx, cli)
	}, "/cache/42/price", "/catalog/42/price")
	// Output:
	// /cache/42/price = 16.00
	// /catalog/42/price = 17.50
}
