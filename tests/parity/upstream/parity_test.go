// Upstream Kueue's scheduler run on scenario files, for tests/parity.
//
// This file is not built inside Kueuestream (which is not a Go module).
// tests/parity/upstream.py copies upstream Kueue's module
// (sigs.k8s.io/kueue@v0.19.2) into a temporary folder, puts this file into its
// pkg/scheduler/ (package scheduler, because Scheduler.schedule is
// unexported), builds the package's test binary and runs TestKueueParity on a
// folder of scenarios.
//
// A scenario is one multi-document YAML file of ResourceFlavors,
// AdmissionChecks, Cohorts, ClusterQueues, Namespaces, LimitRanges,
// RuntimeClasses, LocalQueues and Workloads, and optionally a
// Configuration whose fairSharing stanza turns fair sharing on in the
// scheduler cache and the scheduler (as Kueue's main does from the
// Configuration file) and whose featureGates are set for the scenario's
// run; written with every
// field the API server would default already set (the harness applies no
// defaulting). Its objects are stored in controller-runtime's fake client and
// handed to Kueue's scheduler cache and queue manager the way Kueue's
// controllers hand over added objects, in that order (a Workload through the
// workload controller's Create handler, which adds RuntimeClass overhead and
// LimitRange defaults and takes missing requests from limits, and then its
// Reconcile, which tells one its queue, namespace selector or resources
// block); then
// Scheduler.schedule(ctx) runs cycle after cycle until no active
// ClusterQueue has a head (Manager.Heads would block, see ksHasHeads in
// heads_test.go): quiescence, since no Workload finishes. Inadmissible requeue
// notifications are processed before each cycle, as the real requeuer does
// once its batch period passes.
//
// A Workload the scheduler evicts (preemption) is stopped after the cycle
// as Kueue's job framework stops a Job's: its Requeued condition set and its
// quota reservation unset with the eviction's message (GenericJobReconciler,
// "handle eviction"), the update stored and handed to Kueue's own
// WorkloadReconciler.Update, which frees the quota in the cache and queues
// the Workload again; a stopped Workload its admission checks evicted is then
// reconciled, so the workload controller ends its backoff (Requeued=True,
// BackoffFinished) as it does once the stop's update reaches it, when the
// checks asked for no delay. Each
// reservation is followed by the queue manager's part of the workload
// controller's Update handler (queues.DeleteWorkload), as its informer update
// would bring it within milliseconds on a cluster, so the queue does not hold
// the Workload as in flight when its status changes again. After each
// quiescence, Kueue's workload controller
// reconciles every Workload holding quota in a ClusterQueue with admission
// checks (it lists the checks, Pending, and syncs the Admitted condition),
// every pending one whose ClusterQueue is inactive (it says so) and every
// inactive one; when an update changes a ClusterQueue's stopPolicy or
// admissionChecksStrategy, every Workload of that ClusterQueue
// (workloadQueueHandler.Update).
// Once the first Workloads have reached quiescence, those annotated
// parity.kueuestream.io/finish: "true" that are admitted (and not being
// evicted) finish, as Kueue's job framework finishes the Workload
// of a Job that completed, those annotated parity.kueuestream.io/delete:
// "true" are deleted, the admission checks of those annotated
// parity.kueuestream.io/checks-state that hold quota are set to the state it
// names (Ready, Retry or Rejected; the workload controller evicts or
// deactivates the latter two, and their jobs stop), a
// ClusterQueue annotated parity.kueuestream.io/update: "true" (a second copy,
// with a new spec, which may start it again) is updated, and the cycles run to quiescence again; then
// the Workloads annotated parity.kueuestream.io/wave: "2" arrive, and the
// cycles run to quiescence once more.
//
// Feature gates: a scenario's Configuration may turn some off for its run;
// otherwise Kueue's main branch at v0.19's defaults, as Kueuestream
// follows it: v0.19.2's own defaults except UnadmittedWorkloadsObservability,
// on (main turns it on from 0.19), and FlavorFungibilityPreserveScanProgress,
// off (v0.19.2 ships it on, main lists it from 0.20).
//
// Environment (the test skips itself without KUEUE_PARITY_DIR):
//
//	KUEUE_PARITY_DIR    the folder of scenario files (*.yaml, in name order)
//	KUEUE_PARITY_DEBUG  set: each cycle's events and each stopped Workload on stderr
//
// For each scenario it prints one line, "KUEUE_PARITY_RESULT " followed by a
// JSON object: the scenario's file name, the number of cycles, and every
// Workload's status as stored in the fake client.
package scheduler

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"sync"
	"testing"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	nodev1 "k8s.io/api/node/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	utilfeature "k8s.io/apiserver/pkg/util/feature"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	clienttesting "k8s.io/client-go/testing"
	"k8s.io/component-base/featuregate"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"
	"sigs.k8s.io/controller-runtime/pkg/event"

	config "sigs.k8s.io/kueue/apis/config/v1beta2"
	kueue "sigs.k8s.io/kueue/apis/kueue/v1beta2"
	qcache "sigs.k8s.io/kueue/pkg/cache/queue"
	schdcache "sigs.k8s.io/kueue/pkg/cache/scheduler"
	"sigs.k8s.io/kueue/pkg/controller/core"
	"sigs.k8s.io/kueue/pkg/controller/core/indexer"
	"sigs.k8s.io/kueue/pkg/features"
	preemptexpectations "sigs.k8s.io/kueue/pkg/scheduler/preemption/expectations"
	"sigs.k8s.io/kueue/pkg/util/routine"
	utiltesting "sigs.k8s.io/kueue/pkg/util/testing"
	"sigs.k8s.io/kueue/pkg/workload"
)

// kpWaveAnnotation marks the Workloads that arrive once the others have settled.
const kpWaveAnnotation = "parity.kueuestream.io/wave"

// kpFinishAnnotation ("true") marks the Workloads whose jobs complete once the
// first wave has settled, those of them that then hold quota.
const kpFinishAnnotation = "parity.kueuestream.io/finish"

// kpDeleteAnnotation ("true") marks the Workloads deleted once the first wave
// has settled, whether pending or admitted.
const kpDeleteAnnotation = "parity.kueuestream.io/delete"

// kpUpdateAnnotation ("true") marks a ClusterQueue's new spec, applied once the
// first wave has settled.
const kpUpdateAnnotation = "parity.kueuestream.io/update"

// kpChecksStateAnnotation (Ready, Retry or Rejected) marks the Workloads whose
// admission checks their controllers set to that state once the first wave
// has settled, those of them that then hold quota.
const kpChecksStateAnnotation = "parity.kueuestream.io/checks-state"

// The Finished condition's reason and message, as Kueue's job framework
// writes them for a Job that succeeded.
const (
	kpFinishReason  = "Succeeded"
	kpFinishMessage = "Job finished successfully"
)

type kpWorkload struct {
	Namespace string               `json:"namespace"`
	Name      string               `json:"name"`
	Status    kueue.WorkloadStatus `json:"status"`
	// Every QuotaReserved condition the Workload had in the cycles since the
	// last reservation or preemption, when there was more than one: a head
	// whose flavor search resumes where the last one stopped goes round its
	// flavors for ever, its message changing from cycle to cycle, and the
	// run stops in whichever state the cut-off finds.
	Alternates []metav1.Condition `json:"alternates,omitempty"`
}

type kpResult struct {
	Scenario string `json:"scenario"`
	Cycles   int64  `json:"cycles"`
	Error    string `json:"error,omitempty"`
	// Still reserving or preempting after kpMaxCycles: Workloads preempting
	// each other back and forth, which Kueue's scheduler does not stop.
	Unsettled bool         `json:"unsettled,omitempty"`
	Workloads []kpWorkload `json:"workloads"`
}

// kpMaxCycles bounds a scenario's scheduling cycles.
const kpMaxCycles = 400

// kpTrail collects the QuotaReserved conditions of each Workload over idle cycles.
type kpTrail map[string][]metav1.Condition

func (t kpTrail) record(ctx context.Context, cl client.Client) error {
	var list kueue.WorkloadList
	if err := cl.List(ctx, &list); err != nil {
		return err
	}
	for _, wl := range list.Items {
		c := apimeta.FindStatusCondition(wl.Status.Conditions, kueue.WorkloadQuotaReserved)
		if c == nil {
			continue
		}
		key := wl.Namespace + "/" + wl.Name
		known := false
		for _, seen := range t[key] {
			known = known || (seen.Status == c.Status && seen.Reason == c.Reason && seen.Message == c.Message)
		}
		if !known {
			t[key] = append(t[key], metav1.Condition{Type: c.Type, Status: c.Status, Reason: c.Reason, Message: c.Message})
		}
	}
	return nil
}

type kpScenario struct {
	fairSharing   *config.FairSharing // set: fair sharing on, with these strategies
	featureGates  map[string]bool
	flavors       []*kueue.ResourceFlavor
	checks        []*kueue.AdmissionCheck
	cohorts       []*kueue.Cohort
	clusterQueues []*kueue.ClusterQueue
	cqUpdates     []*kueue.ClusterQueue
	namespaces    []*corev1.Namespace
	limitRanges   []*corev1.LimitRange
	runtimes      []*nodev1.RuntimeClass
	localQueues   []*kueue.LocalQueue
	workloads     []*kueue.Workload
}

func kpScheme() *runtime.Scheme {
	scheme := runtime.NewScheme()
	utilruntime.Must(clientgoscheme.AddToScheme(scheme))
	utilruntime.Must(kueue.AddToScheme(scheme))
	utilruntime.Must(config.AddToScheme(scheme))
	return scheme
}

func kpRead(path string, scheme *runtime.Scheme) (*kpScenario, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	decoder := serializer.NewCodecFactory(scheme).UniversalDeserializer()
	reader := utilyaml.NewYAMLReader(bufio.NewReader(bytes.NewReader(data)))
	s := &kpScenario{}
	for {
		doc, err := reader.Read()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, err
		}
		if len(bytes.TrimSpace(doc)) == 0 {
			continue
		}
		obj, _, err := decoder.Decode(doc, nil, nil)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", path, err)
		}
		switch o := obj.(type) {
		case *config.Configuration:
			s.fairSharing = o.FairSharing
			s.featureGates = o.FeatureGates
		case *kueue.ResourceFlavor:
			s.flavors = append(s.flavors, o)
		case *kueue.AdmissionCheck:
			s.checks = append(s.checks, o)
		case *kueue.Cohort:
			s.cohorts = append(s.cohorts, o)
		case *kueue.ClusterQueue:
			if o.Annotations[kpUpdateAnnotation] == "true" {
				s.cqUpdates = append(s.cqUpdates, o)
			} else {
				s.clusterQueues = append(s.clusterQueues, o)
			}
		case *corev1.Namespace:
			s.namespaces = append(s.namespaces, o)
		case *corev1.LimitRange:
			s.limitRanges = append(s.limitRanges, o)
		case *nodev1.RuntimeClass:
			s.runtimes = append(s.runtimes, o)
		case *kueue.LocalQueue:
			s.localQueues = append(s.localQueues, o)
		case *kueue.Workload:
			s.workloads = append(s.workloads, o)
		default:
			return nil, fmt.Errorf("%s: unexpected object %T", path, obj)
		}
	}
	return s, nil
}

// kpParked counts the Workloads set aside as inadmissible in every ClusterQueue.
func kpParked(m *qcache.Manager, probes []*kueue.Workload) int {
	m.RLock()
	defer m.RUnlock()
	seen := map[string]bool{}
	n := 0
	for _, probe := range probes {
		cq := m.ClusterQueueForWorkloadWithoutLock(probe)
		if cq == nil || seen[string(cq.GetName())] {
			continue
		}
		seen[string(cq.GetName())] = true
		_, inadmissible := cq.Pending()
		n += inadmissible
	}
	return n
}

// kpProgress counts the scheduler's reservations and preemptions so far.
func kpProgress(recorder *utiltesting.EventRecorder) int {
	n := 0
	for _, event := range recorder.RecordedEvents {
		if event.Reason == "QuotaReserved" || event.Reason == "Preempted" {
			n++
		}
	}
	return n
}

// kpEach calls act on every stored Workload, by namespace then name; act
// says whether it did anything to the Workload, and what to add to the line
// KUEUE_PARITY_DEBUG prints for it. It returns how many act did something to.
func kpEach(ctx context.Context, cl client.Client, what string, act func(*kueue.Workload) (bool, string, error)) (int, error) {
	var list kueue.WorkloadList
	if err := cl.List(ctx, &list); err != nil {
		return 0, err
	}
	sort.Slice(list.Items, func(i, j int) bool {
		a, b := list.Items[i], list.Items[j]
		if a.Namespace != b.Namespace {
			return a.Namespace < b.Namespace
		}
		return a.Name < b.Name
	})
	done := 0
	for i := range list.Items {
		wl := &list.Items[i]
		acted, note, err := act(wl)
		if err != nil {
			return done, fmt.Errorf("%s/%s: %w", wl.Namespace, wl.Name, err)
		}
		if !acted {
			continue
		}
		if os.Getenv("KUEUE_PARITY_DEBUG") != "" {
			fmt.Fprintf(os.Stderr, "%s %s/%s%s\n", what, wl.Namespace, wl.Name, note)
		}
		done++
	}
	return done, nil
}

// kpUpdateStatus stores wl's status and hands the update to the workload
// controller's Update handler as its informer would deliver it.
func kpUpdateStatus(ctx context.Context, cl client.Client, wr *core.WorkloadReconciler, old, wl *kueue.Workload) error {
	if err := cl.Status().Update(ctx, wl); err != nil {
		return err
	}
	var stored kueue.Workload
	if err := cl.Get(ctx, client.ObjectKeyFromObject(wl), &stored); err != nil {
		return err
	}
	wr.Update(event.TypedUpdateEvent[*kueue.Workload]{ObjectOld: old, ObjectNew: &stored})
	return nil
}

// kpStopEvicted does for every evicted Workload still holding quota what
// Kueue's job framework does once the Job has stopped (GenericJobReconciler,
// "handle eviction"): Requeued set (True after a preemption), QuotaReserved
// unset with the eviction's message. It returns how many it stopped.
func kpStopEvicted(ctx context.Context, cl client.Client, wr *core.WorkloadReconciler) (int, error) {
	return kpEach(ctx, cl, "stopped", func(old *kueue.Workload) (bool, string, error) {
		evicted := apimeta.FindStatusCondition(old.Status.Conditions, kueue.WorkloadEvicted)
		if evicted == nil || evicted.Status != metav1.ConditionTrue || !workload.HasQuotaReservation(old) {
			return false, "", nil
		}
		wl := old.DeepCopy()
		requeued := evicted.Reason == kueue.WorkloadEvictedByPreemption || evicted.Reason == kueue.WorkloadEvictedDueToNodeFailures
		workload.SetRequeuedCondition(wl, evicted.Reason, evicted.Message, requeued)
		reason := workload.UnadmittedWorkloadReasonWithFallback(
			kueue.WorkloadQuotaReservedReasonPendingEvaluation,
			kueue.WorkloadPending, //nolint:staticcheck // the gate-off reason
		)
		workload.UnsetQuotaReservationWithCondition(wl, reason, evicted.Message, time.Now())
		return true, ": " + evicted.Message, kpUpdateStatus(ctx, cl, wr, old, wl)
	})
}

// kpBackingOff tells a stopped Workload whose Requeued condition is False
// after an eviction by its admission checks (or its pods' readiness): the
// queue keeps it aside until the workload controller sets it True.
func kpBackingOff(wl *kueue.Workload) bool {
	requeued := apimeta.FindStatusCondition(wl.Status.Conditions, kueue.WorkloadRequeued)
	return requeued != nil && requeued.Status == metav1.ConditionFalse && !workload.HasQuotaReservation(wl) &&
		(requeued.Reason == kueue.WorkloadEvictedByAdmissionCheck || requeued.Reason == kueue.WorkloadEvictedByPodsReadyTimeout)
}

// kpFinish does for every Workload annotated kpFinishAnnotation that is
// admitted and not being evicted what Kueue's job framework does once its Job
// has completed (finish.Finish): the Finished condition set, True, with the
// job's reason. Kueue's Update handler then drops it from the cache and
// requeues the Workloads its quota may now let in. It returns how many
// finished.
func kpFinish(ctx context.Context, cl client.Client, wr *core.WorkloadReconciler) (int, error) {
	return kpEach(ctx, cl, "finished", func(old *kueue.Workload) (bool, string, error) {
		if old.Annotations[kpFinishAnnotation] != "true" || !workload.IsAdmitted(old) ||
			apimeta.IsStatusConditionTrue(old.Status.Conditions, kueue.WorkloadEvicted) {
			return false, "", nil
		}
		wl := old.DeepCopy()
		apimeta.SetStatusCondition(&wl.Status.Conditions, metav1.Condition{
			Type:               kueue.WorkloadFinished,
			Status:             metav1.ConditionTrue,
			Reason:             kpFinishReason,
			Message:            kpFinishMessage,
			ObservedGeneration: wl.Generation,
		})
		return true, "", kpUpdateStatus(ctx, cl, wr, old, wl)
	})
}

// kpDelete deletes every Workload annotated kpDeleteAnnotation and hands each
// deletion to the workload controller's Delete handler, which drops it from
// the cache and the queues and requeues the Workloads its quota may now let
// in. It returns how many it deleted.
func kpDelete(ctx context.Context, cl client.Client, wr *core.WorkloadReconciler) (int, error) {
	return kpEach(ctx, cl, "deleted", func(wl *kueue.Workload) (bool, string, error) {
		if wl.Annotations[kpDeleteAnnotation] != "true" {
			return false, "", nil
		}
		if err := cl.Delete(ctx, wl); err != nil {
			return true, "", err
		}
		wr.Delete(event.TypedDeleteEvent[*kueue.Workload]{Object: wl})
		return true, "", nil
	})
}

// kpReconcile runs Kueue's workload controller (WorkloadReconciler.Reconcile)
// on every Workload that needs it, as each update of the Workload would have
// it run, until it changes nothing more.
func kpReconcile(ctx context.Context, cl client.Client, wr *core.WorkloadReconciler, needs func(*kueue.Workload) bool) error {
	_, err := kpEach(ctx, cl, "reconciled", func(wl *kueue.Workload) (bool, string, error) {
		if !needs(wl) {
			return false, "", nil
		}
		key := client.ObjectKeyFromObject(wl)
		before := wl.DeepCopy()
		acted := false
		for range 5 {
			if _, err := wr.Reconcile(ctx, ctrl.Request{NamespacedName: key}); err != nil {
				return acted, "", err
			}
			var after kueue.Workload
			if err := cl.Get(ctx, key, &after); err != nil {
				return acted, "", err
			}
			if after.ResourceVersion == before.ResourceVersion {
				break
			}
			acted = true
			wr.Update(event.TypedUpdateEvent[*kueue.Workload]{ObjectOld: before, ObjectNew: &after})
			before = &after
		}
		return acted, "", nil
	})
	return err
}

// kpChecksState does for every Workload annotated kpChecksStateAnnotation
// that holds quota, is not being evicted and has a check in another state
// what the checks' controllers do once they have decided: every check's state
// set to the annotation's (Ready, Retry without requeueAfterSeconds, or
// Rejected). It returns how many it changed.
func kpChecksState(ctx context.Context, cl client.Client, wr *core.WorkloadReconciler) (int, error) {
	return kpEach(ctx, cl, "checks set", func(old *kueue.Workload) (bool, string, error) {
		state := kueue.CheckState(old.Annotations[kpChecksStateAnnotation])
		if state == "" || !workload.HasQuotaReservation(old) ||
			apimeta.IsStatusConditionTrue(old.Status.Conditions, kueue.WorkloadEvicted) {
			return false, "", nil
		}
		wl := old.DeepCopy()
		now := metav1.NewTime(time.Now())
		changed := false
		for i := range wl.Status.AdmissionChecks {
			if wl.Status.AdmissionChecks[i].State == state {
				continue
			}
			wl.Status.AdmissionChecks[i].State = state
			wl.Status.AdmissionChecks[i].Message = ""
			wl.Status.AdmissionChecks[i].LastTransitionTime = now
			changed = true
		}
		if !changed {
			return false, "", nil
		}
		return true, ": " + string(state), kpUpdateStatus(ctx, cl, wr, old, wl)
	})
}

func kpRun(t *testing.T, path string, scheme *runtime.Scheme) kpResult {
	result := kpResult{Scenario: filepath.Base(path), Workloads: []kpWorkload{}}
	s, err := kpRead(path, scheme)
	if err != nil {
		result.Error = err.Error()
		return result
	}
	// As Kueue's main applies the Configuration's featureGates; the gates the
	// test set come back once the scenario has run.
	before := map[string]bool{}
	for gate := range s.featureGates {
		before[gate] = features.Enabled(featuregate.Feature(gate))
	}
	if err := utilfeature.DefaultMutableFeatureGate.SetFromMap(s.featureGates); err != nil {
		result.Error = err.Error()
		return result
	}
	defer func() {
		if err := utilfeature.DefaultMutableFeatureGate.SetFromMap(before); err != nil {
			t.Fatal(err)
		}
	}()
	log := logr.Discard()
	ctx := ctrl.LoggerInto(context.Background(), log)
	cl := utiltesting.NewClientBuilder().
		WithScheme(scheme).
		WithObjectTracker(clienttesting.NewObjectTracker(scheme, serializer.NewCodecFactory(scheme).UniversalDecoder())).
		WithStatusSubresource(&kueue.Workload{}).
		// As Kueue's manager indexes them: AdjustResources lists a namespace's LimitRanges by it.
		WithIndex(&corev1.LimitRange{}, indexer.LimitRangeHasContainerOrPodType, indexer.IndexLimitRangeHasContainerOrPodType).
		WithInterceptorFuncs(interceptor.Funcs{SubResourcePatch: utiltesting.TreatSSAAsStrategicMerge}).
		Build()
	recorder := &utiltesting.EventRecorder{}
	cqCache := schdcache.New(cl, schdcache.WithFairSharing(s.fairSharing != nil))
	expectations := preemptexpectations.New()
	qManager, requeuer := qcache.NewManagerForUnitTestsWithRequeuer(cl, cqCache, qcache.WithPreemptionExpectations(expectations))
	sched := New(qManager, cqCache, cl, recorder, WithPreemptionExpectations(expectations), WithFairSharing(s.fairSharing))
	workloads := core.NewWorkloadReconciler(cl, qManager, cqCache, recorder, core.WithPreemptionExpectations(expectations))
	var admissions sync.WaitGroup
	sched.setAdmissionRoutineWrapper(routine.NewWrapper(
		func() { admissions.Add(1) },
		func() { admissions.Done() },
	))
	fail := func(what string, err error) kpResult {
		result.Error = fmt.Sprintf("%s: %v", what, err)
		return result
	}
	store := func(obj client.Object) error { return cl.Create(ctx, obj) }
	for _, ns := range s.namespaces {
		if err := store(ns); err != nil {
			return fail("namespace "+ns.Name, err)
		}
	}
	for _, lr := range s.limitRanges {
		if err := store(lr); err != nil {
			return fail("limitrange "+lr.Name, err)
		}
	}
	for _, rc := range s.runtimes {
		if err := store(rc); err != nil {
			return fail("runtimeclass "+rc.Name, err)
		}
	}
	for _, rf := range s.flavors {
		if err := store(rf); err != nil {
			return fail("flavor "+rf.Name, err)
		}
		cqCache.AddOrUpdateResourceFlavor(log, rf)
	}
	for _, ac := range s.checks {
		if err := store(ac); err != nil {
			return fail("admissioncheck "+ac.Name, err)
		}
		cqCache.AddOrUpdateAdmissionCheck(log, ac)
	}
	// The ClusterQueues whose Workloads Kueue's workload controller gives admission checks.
	checked := map[string]bool{}
	for _, cq := range append(append([]*kueue.ClusterQueue{}, s.clusterQueues...), s.cqUpdates...) {
		if cq.Spec.AdmissionChecksStrategy != nil && len(cq.Spec.AdmissionChecksStrategy.AdmissionChecks) > 0 {
			checked[cq.Name] = true
		}
	}
	// What the scheduler leaves to Kueue's workload controller: a Workload holding
	// quota where checks are required gets them listed in status.admissionChecks
	// (new ones Pending) and its Admitted condition synced with their states; a
	// pending one whose ClusterQueue is inactive, which the scheduler never sees,
	// is told so (syncQuotaReservedFalseCondition).
	reconciled := func(wl *kueue.Workload) bool {
		if !workload.IsActive(wl) {
			return true
		}
		if workload.HasQuotaReservation(wl) {
			return checked[string(wl.Status.Admission.ClusterQueue)]
		}
		cqName, ok := qManager.ClusterQueueForWorkload(wl)
		return ok && !cqCache.ClusterQueueActive(cqName)
	}
	for _, cohort := range s.cohorts {
		if err := store(cohort); err != nil {
			return fail("cohort "+cohort.Name, err)
		}
		if err := cqCache.AddOrUpdateCohort(cohort); err != nil {
			return fail("cache cohort "+cohort.Name, err)
		}
		qManager.AddOrUpdateCohort(ctx, cohort)
	}
	for _, cq := range s.clusterQueues {
		if err := store(cq); err != nil {
			return fail("clusterqueue "+cq.Name, err)
		}
		if err := cqCache.AddClusterQueue(ctx, cq); err != nil {
			return fail("cache clusterqueue "+cq.Name, err)
		}
		if err := qManager.AddClusterQueue(ctx, cq); err != nil {
			return fail("queues clusterqueue "+cq.Name, err)
		}
	}
	probes := make([]*kueue.Workload, 0, len(s.localQueues))
	for _, lq := range s.localQueues {
		if err := store(lq); err != nil {
			return fail("localqueue "+lq.Name, err)
		}
		if err := cqCache.AddLocalQueue(lq); err != nil {
			return fail("cache localqueue "+lq.Name, err)
		}
		if err := qManager.AddLocalQueue(ctx, lq); err != nil {
			return fail("queues localqueue "+lq.Name, err)
		}
		probes = append(probes, &kueue.Workload{
			ObjectMeta: lq.ObjectMeta,
			Spec:       kueue.WorkloadSpec{QueueName: kueue.LocalQueueName(lq.Name)},
		})
	}
	add := func(wave bool) error {
		for _, wl := range s.workloads {
			if (wl.Annotations[kpWaveAnnotation] == "2") != wave {
				continue
			}
			if err := store(wl); err != nil {
				return fmt.Errorf("workload %s: %w", wl.Name, err)
			}
			// As its informer delivers a new Workload: the handler takes missing
			// requests from limits (AdjustResources) and queues it; one without
			// a LocalQueue stays pending.
			workloads.Create(event.TypedCreateEvent[*kueue.Workload]{Object: wl})
		}
		return nil
	}
	// A StrictFIFO head that does not fit stays at the head of its queue, so
	// Heads never blocks: the scheduler then goes round for ever admitting
	// nothing. Without a StrictFIFO head, every cycle that neither admits
	// nor preempts moves its heads out of the heaps, so more than one cycle
	// per Workload in a row without either is quiescence too.
	trail := kpTrail{}
	// settle runs cycles to quiescence; deferring, the requeues asked for
	// before it (by jobs that finished) wait as those of stopped jobs do.
	settle := func(deferring bool) error {
		idle, reserved := 0, kpProgress(recorder)
		// The requeues a stopped or finished job's freed quota asks for wait
		// until a cycle changes nothing (no reservation, preemption or head
		// set aside) or the scheduler has no head left: Kueue's requeuer
		// batches them for a second, far longer than a run of cycles that do,
		// while a StrictFIFO head is tried again at once.
		deferred, quiet := deferring, false
		// Requeued heads are evaluated again, each in a cycle of its own, so
		// the count of cycles without progress starts again, and the states
		// recorded before are no longer the ones the run ends in.
		requeue := func() int {
			n := requeuer.ProcessRequeues(ctx)
			if n > 0 {
				idle = 0
				trail = kpTrail{}
			}
			return n
		}
		for idle <= len(s.workloads)+1 {
			if sched.schedulingCycle >= kpMaxCycles {
				result.Unsettled = true
				return nil
			}
			if !deferred || quiet {
				requeue()
				deferred = false
			}
			if stopped, err := kpStopEvicted(ctx, cl, workloads); err != nil {
				return err
			} else if stopped > 0 {
				deferred = true
				// The stop's update has the workload controller end the backoff of
				// a Workload its checks evicted (Requeued=False), at once when
				// they asked for no delay.
				if err := kpReconcile(ctx, cl, workloads, kpBackingOff); err != nil {
					return err
				}
			}
			if !ksHasHeads(qManager, cqCache, probes) {
				admissions.Wait()
				if !ksHasHeads(qManager, cqCache, probes) {
					if !deferred || requeue() == 0 {
						break
					}
					deferred = false
					continue
				}
			}
			seen, parked := len(recorder.RecordedEvents), kpParked(qManager, probes)
			sched.schedule(ctx)
			admissions.Wait()
			// On a cluster each reservation reaches the workload controller's Update
			// handler within milliseconds; its part on the queues is done here
			// (queues.DeleteWorkload), so the queue no longer holds the Workload
			// as in flight when its status changes again.
			for _, e := range recorder.RecordedEvents[seen:] {
				if e.Reason == "QuotaReserved" {
					qManager.DeleteWorkload(log, workload.NewReference(e.Key.Namespace, e.Key.Name))
				}
			}
			quiet = kpProgress(recorder) == reserved && kpParked(qManager, probes) == parked
			if os.Getenv("KUEUE_PARITY_DEBUG") != "" {
				fmt.Fprintf(os.Stderr, "cycle %d\n", sched.schedulingCycle)
				for _, e := range recorder.RecordedEvents[seen:] {
					fmt.Fprintf(os.Stderr, "  %s %s: %s\n", e.Key, e.Reason, e.Message)
				}
			}
			if now := kpProgress(recorder); now != reserved {
				idle, reserved = 0, now
				trail = kpTrail{}
			} else {
				idle++
				if err := trail.record(ctx, cl); err != nil {
					return err
				}
			}
		}
		return nil
	}
	for _, wave := range []bool{false, true} {
		if err := add(wave); err != nil {
			return fail("adding workloads", err)
		}
		// Each new Workload is reconciled once created, before the scheduler's
		// next cycle: one its queue or namespace selector blocks is told so.
		added := func(wl *kueue.Workload) bool { return (wl.Annotations[kpWaveAnnotation] == "2") == wave }
		if err := kpReconcile(ctx, cl, workloads, added); err != nil {
			return fail("reconciling", err)
		}
		if err := settle(false); err != nil {
			return fail("scheduling", err)
		}
		if err := kpReconcile(ctx, cl, workloads, reconciled); err != nil {
			return fail("reconciling", err)
		}
		if wave || result.Unsettled {
			continue
		}
		finished, err := kpFinish(ctx, cl, workloads)
		if err != nil {
			return fail("finishing", err)
		}
		deleted, err := kpDelete(ctx, cl, workloads)
		if err != nil {
			return fail("deleting", err)
		}
		ready, err := kpChecksState(ctx, cl, workloads)
		if err != nil {
			return fail("setting checks' states", err)
		}
		// As Kueue's ClusterQueueReconciler.Update hands a changed spec over. A
		// changed stopPolicy or admissionChecksStrategy also has the workload
		// controller reconcile every Workload of the ClusterQueue
		// (workloadQueueHandler.Update).
		restated := map[kueue.ClusterQueueReference]bool{}
		for _, cq := range s.cqUpdates {
			var stored kueue.ClusterQueue
			if err := cl.Get(ctx, client.ObjectKeyFromObject(cq), &stored); err != nil {
				return fail("clusterqueue "+cq.Name, err)
			}
			cq.ResourceVersion = stored.ResourceVersion
			specUpdated := !equality.Semantic.DeepEqual(stored.Spec, cq.Spec)
			if !ptr.Equal(stored.Spec.StopPolicy, cq.Spec.StopPolicy) ||
				!equality.Semantic.DeepEqual(stored.Spec.AdmissionChecksStrategy, cq.Spec.AdmissionChecksStrategy) {
				restated[kueue.ClusterQueueReference(cq.Name)] = true
			}
			if err := cl.Update(ctx, cq); err != nil {
				return fail("updating clusterqueue "+cq.Name, err)
			}
			if err := cqCache.UpdateClusterQueue(log, cq); err != nil {
				return fail("cache clusterqueue "+cq.Name, err)
			}
			if err := qManager.UpdateClusterQueue(ctx, cq, specUpdated); err != nil {
				return fail("queues clusterqueue "+cq.Name, err)
			}
		}
		inRestated := func(wl *kueue.Workload) bool {
			cqName, ok := qManager.ClusterQueueForWorkload(wl)
			return ok && restated[cqName]
		}
		if err := kpReconcile(ctx, cl, workloads, inRestated); err != nil {
			return fail("reconciling", err)
		}
		if err := kpReconcile(ctx, cl, workloads, reconciled); err != nil {
			return fail("reconciling", err)
		}
		if finished+deleted+ready+len(s.cqUpdates) > 0 {
			if err := settle(true); err != nil {
				return fail("scheduling", err)
			}
			if err := kpReconcile(ctx, cl, workloads, reconciled); err != nil {
				return fail("reconciling", err)
			}
		}
	}
	result.Cycles = sched.schedulingCycle
	var stored kueue.WorkloadList
	if err := cl.List(ctx, &stored); err != nil {
		return fail("listing workloads", err)
	}
	for _, wl := range stored.Items {
		alternates := trail[wl.Namespace+"/"+wl.Name]
		if len(alternates) < 2 {
			alternates = nil
		}
		result.Workloads = append(result.Workloads, kpWorkload{Namespace: wl.Namespace, Name: wl.Name, Status: wl.Status, Alternates: alternates})
	}
	sort.Slice(result.Workloads, func(i, j int) bool {
		a, b := result.Workloads[i], result.Workloads[j]
		if a.Namespace != b.Namespace {
			return a.Namespace < b.Namespace
		}
		return a.Name < b.Name
	})
	return result
}

func TestKueueParity(t *testing.T) {
	dir := os.Getenv("KUEUE_PARITY_DIR")
	if dir == "" {
		t.Skip("run by tests/parity/upstream.py (KUEUE_PARITY_DIR unset)")
	}
	features.SetFeatureGateDuringTest(t, features.UnadmittedWorkloadsObservability, true)
	features.SetFeatureGateDuringTest(t, features.FlavorFungibilityPreserveScanProgress, false)
	ctrl.SetLogger(logr.Discard())
	paths, err := filepath.Glob(filepath.Join(dir, "*.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	sort.Strings(paths)
	scheme := kpScheme()
	for _, path := range paths {
		line, err := json.Marshal(kpRun(t, path, scheme))
		if err != nil {
			t.Fatal(err)
		}
		fmt.Printf("KUEUE_PARITY_RESULT %s\n", line)
	}
}
