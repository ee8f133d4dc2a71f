// Kueue's own scheduler on the two backlog shapes of bench/kueue_shapes_bench.py.
//
// This file is not built inside Kueuestream (which is not a Go module). The
// driver bench/kueue_go_bench.py copies upstream Kueue's module
// (sigs.k8s.io/kueue@v0.19.2) into a temporary folder, puts this file into
// its pkg/scheduler/ (package scheduler: Scheduler.schedule is unexported),
// builds the package's test binary and runs TestKueueShapesBench once per
// measurement, in a fresh process each time.
//
// The shape (the objects of manifests() in kueue_shapes_bench.py): one
// ResourceFlavor "default"; N ClusterQueues cq-NNNN in cohorts cohort-NN
// (q % 10), namespaceSelector {} and one resource group covering cpu with
// flavor default (nominalQuota 20, borrowingLimit 100), each with a Namespace
// ns-NNNN and a LocalQueue "lq" in it; W Workloads wl-NNNNNN in namespace
// ns-(w % N), queueName lq, priority 0, one pod set "main" of count 1 whose
// container requests 1 cpu, created at T0 + w seconds. The ClusterQueues
// carry the defaults Kueue's CRD gives an object applied without them
// (BestEffortFIFO, flavorFungibility, preemption Never, stopPolicy None), as
// the API server would have stored them. Kueue runs with its default feature
// gates and configuration.
//
// Loading: every object is stored in controller-runtime's fake client
// (standing in for the informer cache and the API server) and handed to
// Kueue's scheduler cache and queue manager with the calls Kueue's
// controllers make for an added object: ResourceFlavor ->
// Cache.AddOrUpdateResourceFlavor; ClusterQueue -> Cache.AddClusterQueue and
// Manager.AddClusterQueue; LocalQueue -> Cache.AddLocalQueue and
// Manager.AddLocalQueue; pending Workload -> Manager.AddOrUpdateWorkload.
// They go kind by kind (flavor, Namespaces, ClusterQueues, LocalQueues,
// Workloads): adding a ClusterQueue lists its LocalQueues and adding a
// LocalQueue lists its Workloads, and the fake client answers a List by
// scanning every object of the kind, which an informer's index does not.
//
// Scheduling: Scheduler.schedule(ctx) is called cycle after cycle until
// quiescence (see ksHasHeads). The scheduler's asynchronous admission
// routine writes each admission to the fake client (server-side apply
// patches treated as strategic merge, as upstream's unit tests do); the timer
// stops once every one of them has returned.
//
// Environment (the test skips itself without KUEUE_SHAPES_QUEUES):
//
//	KUEUE_SHAPES_QUEUES     N, the number of ClusterQueues
//	KUEUE_SHAPES_WORKLOADS  W, the number of Workloads
//	KUEUE_SHAPES_TIMED      "schedule": the timer covers the schedule() loop
//	                        only, everything loaded before it starts;
//	                        "loading": the timer also covers storing every
//	                        object in the fake client and adding it to the
//	                        cache and queue manager.
//	KUEUE_SHAPES_CLIENT     "plain" (default): the fake client on client-go's
//	                        plain object tracker; "field-managed": on
//	                        controller-runtime's default managed-fields
//	                        tracker (about 3 ms a write); "discard": plain, but
//	                        Workload status patches are dropped, as upstream's
//	                        BenchmarkSchedulerTAS does (the scheduler's own
//	                        work, without the fake API server's).
//
// It prints one line, "KUEUE_SHAPES_RESULT " followed by a JSON object, and
// fails unless exactly min(W, 20 N) Workloads hold a quota reservation in
// Kueue's cache and in the fake client (none there with "discard"), as many
// QuotaReserved events were recorded, and every other Workload is left
// inadmissible in the queue manager.
package scheduler

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"os"
	goruntime "runtime"
	"strconv"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	"k8s.io/apimachinery/pkg/types"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	clienttesting "k8s.io/client-go/testing"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	kueue "sigs.k8s.io/kueue/apis/kueue/v1beta2"
	qcache "sigs.k8s.io/kueue/pkg/cache/queue"
	schdcache "sigs.k8s.io/kueue/pkg/cache/scheduler"
	preemptexpectations "sigs.k8s.io/kueue/pkg/scheduler/preemption/expectations"
	"sigs.k8s.io/kueue/pkg/util/routine"
	utiltesting "sigs.k8s.io/kueue/pkg/util/testing"
	"sigs.k8s.io/kueue/pkg/workload"
)

const (
	kqsCohorts   = 10
	kqsNominal   = 20
	kqsBorrowing = 100
	// T0 of kueue_shapes_bench.py (1_700_000_000_000 ms), in seconds.
	kqsT0 = 1_700_000_000
)

type kqsResult struct {
	Timed               string  `json:"timed"`
	Client              string  `json:"client"`
	Queues              int     `json:"queues"`
	Workloads           int     `json:"workloads"`
	Seconds             float64 `json:"seconds"`
	CPUSeconds          float64 `json:"cpu_seconds"`
	LoadClientSeconds   float64 `json:"load_client_seconds"`
	LoadKueueSeconds    float64 `json:"load_kueue_seconds"`
	ScheduleSeconds     float64 `json:"schedule_seconds"`
	Cycles              int64   `json:"cycles"`
	AdmittedClient      int     `json:"admitted_client"`
	AdmittedCache       int     `json:"admitted_cache"`
	QuotaReservedEvents int     `json:"quota_reserved_events"`
	Inadmissible        int     `json:"inadmissible"`
	StillQueued         int     `json:"still_queued"`
}

func kqsEnvInt(t *testing.T, name string) int {
	t.Helper()
	v, err := strconv.Atoi(os.Getenv(name))
	if err != nil || v <= 0 {
		t.Fatalf("%s must be a positive integer, got %q", name, os.Getenv(name))
	}
	return v
}

func kqsCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

func kqsClusterQueue(q int) *kueue.ClusterQueue {
	return &kueue.ClusterQueue{
		ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("cq-%04d", q), UID: types.UID(fmt.Sprintf("cq-%04d", q))},
		Spec: kueue.ClusterQueueSpec{
			CohortName:        kueue.CohortReference(fmt.Sprintf("cohort-%02d", q%kqsCohorts)),
			NamespaceSelector: &metav1.LabelSelector{},
			ResourceGroups: []kueue.ResourceGroup{{
				CoveredResources: []corev1.ResourceName{corev1.ResourceCPU},
				Flavors: []kueue.FlavorQuotas{{
					Name: "default",
					Resources: []kueue.ResourceQuota{{
						Name:           corev1.ResourceCPU,
						NominalQuota:   *resource.NewQuantity(kqsNominal, resource.DecimalSI),
						BorrowingLimit: resource.NewQuantity(kqsBorrowing, resource.DecimalSI),
					}},
				}},
			}},
			// The defaults of Kueue's CRD, which the API server would fill in.
			QueueingStrategy: kueue.BestEffortFIFO,
			FlavorFungibility: &kueue.FlavorFungibility{
				WhenCanBorrow:  kueue.MayStopSearch,
				WhenCanPreempt: kueue.TryNextFlavor,
			},
			Preemption: &kueue.ClusterQueuePreemption{
				ReclaimWithinCohort: kueue.PreemptionPolicyNever,
				BorrowWithinCohort:  &kueue.BorrowWithinCohort{Policy: kueue.BorrowWithinCohortPolicyNever},
				WithinClusterQueue:  kueue.PreemptionPolicyNever,
			},
			StopPolicy: ptr.To(kueue.None),
		},
	}
}

func kqsWorkload(w, queues int) *kueue.Workload {
	name := fmt.Sprintf("wl-%06d", w)
	return &kueue.Workload{
		ObjectMeta: metav1.ObjectMeta{
			Name:              name,
			Namespace:         fmt.Sprintf("ns-%04d", w%queues),
			UID:               types.UID(name),
			CreationTimestamp: metav1.NewTime(time.Unix(kqsT0+int64(w), 0)),
		},
		Spec: kueue.WorkloadSpec{
			QueueName: "lq",
			Priority:  ptr.To[int32](0),
			Active:    ptr.To(true),
			PodSets: []kueue.PodSet{{
				Name:  "main",
				Count: 1,
				Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{
					RestartPolicy: corev1.RestartPolicyNever,
					Containers: []corev1.Container{{
						Name:  "c",
						Image: "registry.k8s.io/pause:3.9",
						Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{
							corev1.ResourceCPU: resource.MustParse("1"),
						}},
					}},
				}},
			}},
		},
	}
}

func TestKueueShapesBench(t *testing.T) {
	if os.Getenv("KUEUE_SHAPES_QUEUES") == "" {
		t.Skip("run by bench/kueue_go_bench.py (KUEUE_SHAPES_QUEUES unset)")
	}
	queues := kqsEnvInt(t, "KUEUE_SHAPES_QUEUES")
	workloads := kqsEnvInt(t, "KUEUE_SHAPES_WORKLOADS")
	timed := os.Getenv("KUEUE_SHAPES_TIMED")
	if timed != "schedule" && timed != "loading" {
		t.Fatalf("KUEUE_SHAPES_TIMED must be schedule or loading, got %q", timed)
	}
	clientKind := cmp.Or(os.Getenv("KUEUE_SHAPES_CLIENT"), "plain")
	if clientKind != "plain" && clientKind != "field-managed" && clientKind != "discard" {
		t.Fatalf("KUEUE_SHAPES_CLIENT must be plain, field-managed or discard, got %q", clientKind)
	}
	expected := min(workloads, queues*kqsNominal)

	// No log output: the scheduler's V(2) lines per Workload would time a
	// logger rather than the scheduler.
	ctrl.SetLogger(logr.Discard())
	log := logr.Discard()
	ctx := ctrl.LoggerInto(context.Background(), log)

	// Server-side apply patches of a Workload's status become strategic
	// merge patches (as in upstream's unit tests), or are dropped.
	patchStatus := utiltesting.TreatSSAAsStrategicMerge
	if clientKind == "discard" {
		patchStatus = func(ctx context.Context, c client.Client, sub string, obj client.Object, patch client.Patch,
			opts ...client.SubResourcePatchOption) error {
			if _, ok := obj.(*kueue.Workload); ok && sub == "status" {
				return nil
			}
			return utiltesting.TreatSSAAsStrategicMerge(ctx, c, sub, obj, patch, opts...)
		}
	}
	builder := utiltesting.NewClientBuilder().
		WithStatusSubresource(&kueue.Workload{}).
		WithInterceptorFuncs(interceptor.Funcs{SubResourcePatch: patchStatus})
	if clientKind != "field-managed" {
		// client-go's plain object tracker, without the managed-fields one
		// controller-runtime's fake client uses by default, which builds a
		// REST mapper of every type in the scheme on every write (about 3 ms).
		scheme := runtime.NewScheme()
		utilruntime.Must(clientgoscheme.AddToScheme(scheme))
		utilruntime.Must(kueue.AddToScheme(scheme))
		builder = builder.WithScheme(scheme).
			WithObjectTracker(clienttesting.NewObjectTracker(scheme, serializer.NewCodecFactory(scheme).UniversalDecoder()))
	}
	cl := builder.Build()
	recorder := &utiltesting.EventRecorder{}
	cqCache := schdcache.New(cl)
	expectations := preemptexpectations.New()
	qManager := qcache.NewManagerForUnitTests(cl, cqCache, qcache.WithPreemptionExpectations(expectations))
	sched := New(qManager, cqCache, cl, recorder, WithPreemptionExpectations(expectations))
	var admissions sync.WaitGroup
	sched.setAdmissionRoutineWrapper(routine.NewWrapper(
		func() { admissions.Add(1) },
		func() { admissions.Done() },
	))

	// Built before any timer starts: the objects themselves, as a watch
	// would deliver them decoded.
	flavor := &kueue.ResourceFlavor{ObjectMeta: metav1.ObjectMeta{Name: "default", UID: "default"}}
	namespaces := make([]*corev1.Namespace, queues)
	clusterQueues := make([]*kueue.ClusterQueue, queues)
	localQueues := make([]*kueue.LocalQueue, queues)
	probes := make([]*kueue.Workload, queues)
	for q := range queues {
		ns := fmt.Sprintf("ns-%04d", q)
		namespaces[q] = &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns, UID: types.UID(ns)}}
		clusterQueues[q] = kqsClusterQueue(q)
		localQueues[q] = &kueue.LocalQueue{
			ObjectMeta: metav1.ObjectMeta{Name: "lq", Namespace: ns, UID: types.UID(ns + "/lq")},
			Spec:       kueue.LocalQueueSpec{ClusterQueue: kueue.ClusterQueueReference(clusterQueues[q].Name)},
		}
		probes[q] = &kueue.Workload{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns},
			Spec:       kueue.WorkloadSpec{QueueName: "lq"},
		}
	}
	wls := make([]*kueue.Workload, workloads)
	for w := range workloads {
		wls[w] = kqsWorkload(w, queues)
	}

	var clientTime, kueueTime time.Duration
	store := func(obj client.Object) {
		start := time.Now()
		if err := cl.Create(ctx, obj); err != nil {
			t.Fatalf("creating %s in the fake client: %v", obj.GetName(), err)
		}
		clientTime += time.Since(start)
	}
	hand := func(what string, add func() error) {
		start := time.Now()
		if err := add(); err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		kueueTime += time.Since(start)
	}
	load := func() {
		store(flavor)
		hand("cache.AddOrUpdateResourceFlavor", func() error {
			cqCache.AddOrUpdateResourceFlavor(log, flavor)
			return nil
		})
		for _, ns := range namespaces {
			store(ns)
		}
		for _, cq := range clusterQueues {
			store(cq)
			hand("cache.AddClusterQueue", func() error { return cqCache.AddClusterQueue(ctx, cq) })
			hand("queues.AddClusterQueue", func() error { return qManager.AddClusterQueue(ctx, cq) })
		}
		for _, lq := range localQueues {
			store(lq)
			hand("cache.AddLocalQueue", func() error { return cqCache.AddLocalQueue(lq) })
			hand("queues.AddLocalQueue", func() error { return qManager.AddLocalQueue(ctx, lq) })
		}
		for _, wl := range wls {
			store(wl)
			hand("queues.AddOrUpdateWorkload", func() error { return qManager.AddOrUpdateWorkload(log, wl) })
		}
	}
	cycleLimit := int64(2*workloads + 100)
	settle := func() {
		for {
			for ksHasHeads(qManager, cqCache, probes) {
				sched.schedule(ctx)
				if sched.schedulingCycle > cycleLimit {
					t.Fatalf("no quiescence after %d scheduling cycles", sched.schedulingCycle)
				}
			}
			// A failed admission patch requeues its Workload from the
			// admission routine: only quiescent once every routine returned.
			admissions.Wait()
			if !ksHasHeads(qManager, cqCache, probes) {
				return
			}
		}
	}

	if timed == "schedule" {
		load()
	}
	goruntime.GC()
	startCPU, start := kqsCPU(), time.Now()
	if timed == "loading" {
		load()
	}
	scheduleStart := time.Now()
	settle()
	end, endCPU := time.Now(), kqsCPU()

	result := kqsResult{
		Timed:             timed,
		Client:            clientKind,
		Queues:            queues,
		Workloads:         workloads,
		Seconds:           end.Sub(start).Seconds(),
		CPUSeconds:        (endCPU - startCPU).Seconds(),
		LoadClientSeconds: clientTime.Seconds(),
		LoadKueueSeconds:  kueueTime.Seconds(),
		ScheduleSeconds:   end.Sub(scheduleStart).Seconds(),
		Cycles:            sched.schedulingCycle,
	}

	var stored kueue.WorkloadList
	if err := cl.List(ctx, &stored); err != nil {
		t.Fatalf("listing Workloads: %v", err)
	}
	for i := range stored.Items {
		if workload.HasQuotaReservation(&stored.Items[i]) {
			result.AdmittedClient++
		}
	}
	for _, cq := range clusterQueues {
		stats, err := cqCache.Usage(cq)
		if err != nil {
			t.Fatalf("usage of %s: %v", cq.Name, err)
		}
		result.AdmittedCache += stats.ReservingWorkloads
	}
	for _, event := range recorder.RecordedEvents {
		if event.Reason == "QuotaReserved" {
			result.QuotaReservedEvents++
		}
	}
	for _, keys := range qManager.DumpInadmissible() {
		result.Inadmissible += len(keys)
	}
	for _, keys := range qManager.Dump() {
		result.StillQueued += len(keys)
	}

	line, err := json.Marshal(result)
	if err != nil {
		t.Fatal(err)
	}
	fmt.Printf("KUEUE_SHAPES_RESULT %s\n", line)

	wantClient := expected
	if clientKind == "discard" {
		wantClient = 0 // no admission reaches the client
	}
	if result.AdmittedClient != wantClient || result.AdmittedCache != expected || result.QuotaReservedEvents != expected ||
		result.Inadmissible != workloads-expected || result.StillQueued != 0 {
		t.Fatalf("expected %d admitted (%d in the client) and %d inadmissible, got %d reserved in the client, "+
			"%d in the cache, %d QuotaReserved events, %d inadmissible and %d still queued",
			expected, wantClient, workloads-expected, result.AdmittedClient, result.AdmittedCache, result.QuotaReservedEvents,
			result.Inadmissible, result.StillQueued)
	}
}
