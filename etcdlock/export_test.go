package etcdlock

// ServerEndpoints gives the examples (package etcdlock_test) the
// endpoints of the tests' embedded etcd, started by TestMain.
var ServerEndpoints = func() []string { return endpoints }
