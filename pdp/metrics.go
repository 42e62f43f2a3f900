package pdp

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/toolpdp/toolpdp/pdp/policy"
	pb "github.com/toolpdp/toolpdp/proto/toolpdp/v1"
)

// metrics are the engine's own Prometheus metrics: what was decided, how
// long deciding took, and which policy is loaded since when.
type metrics struct {
	reloads    *prometheus.CounterVec
	decisions  *prometheus.CounterVec
	duration   prometheus.Histogram
	lastReload prometheus.Gauge
	info       *prometheus.GaugeVec
}

func newMetrics() *metrics {
	m := &metrics{
		reloads: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "toolpdp_bundle_reloads_total",
			Help: "Bundle loads by result: ok, or rejected (the last good policy kept serving).",
		}, []string{"result"}),
		decisions: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "toolpdp_decisions_total",
			Help: "Decide answers by decision (allow, deny, ask) and the axis of the deciding rule (permission, scope, guardrail, session, policy).",
		}, []string{"decision", "axis"}),
		duration: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "toolpdp_decision_duration_seconds",
			Help:    "Time to decide one call: input building (paths, shell parsing) and policy evaluation.",
			Buckets: []float64{.00005, .0001, .00025, .0005, .001, .0025, .005, .01, .025, .05, .1, .25},
		}),
		lastReload: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "toolpdp_bundle_last_successful_reload_timestamp_seconds",
			Help: "Unix time of the last bundle load that was swapped in.",
		}),
		info: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "toolpdp_bundle_info",
			Help: "The policy in force: 1 for its revision (every loaded bundle's, comma-separated).",
		}, []string{"revision"}),
	}
	for _, r := range []string{"ok", "rejected"} {
		m.reloads.WithLabelValues(r) // present at 0, so alerts on increase() see the first one
	}
	return m
}

func (m *metrics) collectors() []prometheus.Collector {
	return []prometheus.Collector{m.reloads, m.decisions, m.duration, m.lastReload, m.info}
}

// loaded records a successful load of snap at now.
func (m *metrics) loaded(snap *policy.Snapshot, now time.Time) {
	m.reloads.WithLabelValues("ok").Inc()
	m.lastReload.Set(float64(now.UnixNano()) / 1e9)
	m.info.Reset()
	m.info.WithLabelValues(snap.Revision).Set(1)
}

// decided records one answer and how long it took.
func (m *metrics) decided(resp *pb.DecideResponse, took time.Duration) {
	m.duration.Observe(took.Seconds())
	m.decisions.WithLabelValues(policy.EffectName(resp.GetDecision()), decidingAxis(resp)).Inc()
}

// decidingAxis is the axis of the first reason whose effect is the
// decision (reasons come in precedence order), "none" when no reason has it.
func decidingAxis(r *pb.DecideResponse) string {
	for _, reason := range r.GetReasons() {
		if reason.GetEffect() == r.GetDecision() {
			return reason.GetAxis()
		}
	}
	return "none"
}
