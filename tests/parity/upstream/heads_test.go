// Shared by tests/parity/upstream/parity_test.go and
// bench/kueue_go/shapes_bench_test.go, compiled beside either in a copy of
// upstream Kueue's pkg/scheduler (see tests/parity/upstream.py).
package scheduler

import (
	kueue "sigs.k8s.io/kueue/apis/kueue/v1beta2"
	qcache "sigs.k8s.io/kueue/pkg/cache/queue"
	schdcache "sigs.k8s.io/kueue/pkg/cache/scheduler"
)

// ksHasHeads reports whether Manager.Heads would return at once, without
// popping anything. Heads returns the head of the heap of every active
// ClusterQueue (plus second-pass Workloads, which need TAS or admission
// checks, absent here) and blocks while there is none. A Workload the
// scheduler found NoFit is requeued into its ClusterQueue's inadmissible set,
// not the heap (and SchedulingEquivalenceHashing moves every equivalent
// Workload there with it); only a cluster event (a Workload finishing, being
// evicted or deleted, a quota or flavor change) moves them back. So once no
// active ClusterQueue has a Workload in its heap, Kueue's scheduler would
// block in Heads until such an event.
//
// ClusterQueue.Pending counts the heap plus the Workload popped last
// ("inflight", kept after an admission until the next Pop), so a count of one
// is ambiguous and Dump (the heap only) settles it. probes holds one Workload
// per LocalQueue, to find the ClusterQueues by.
func ksHasHeads(m *qcache.Manager, c *schdcache.Cache, probes []*kueue.Workload) bool {
	m.RLock()
	defer m.RUnlock()
	for _, probe := range probes {
		cq := m.ClusterQueueForWorkloadWithoutLock(probe)
		if cq == nil || !c.ClusterQueueActive(cq.GetName()) {
			continue
		}
		active, _ := cq.Pending()
		if active > 1 {
			return true
		}
		if active == 1 {
			if keys, ok := cq.Dump(); ok && len(keys) > 0 {
				return true
			}
		}
	}
	return false
}
