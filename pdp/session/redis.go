package session

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"

	pb "github.com/toolpdp/toolpdp/proto/toolpdp/v1"
)

// Redis is the store several replicas share: every count, halt, pin, ask
// and approval is in one Redis, changed only by scripts that run
// atomically there, so a central decision point of several replicas is one
// decision point. Its keys share one hash tag (one slot).
type Redis struct {
	client *redis.Client
	prefix string
	b      Bounds
	where  string // the URL without its password, for messages

	mu        sync.Mutex
	pinsThere map[[sha256.Size]byte]bool // pins this process knows the store holds
	activated bool
	epoch     string
	// storeEpoch is the store's epoch as this process knows it: every
	// script runs only while the store holds it.
	storeEpoch string

	waiters *waiters

	evicted prometheus.Counter
	refused prometheus.Counter
}

// redisPrefix is every key's prefix; the braces make it the hash tag.
const redisPrefix = "{toolpdp}:"

// OpenRedis connects to the Redis at rawURL (redis:// or rediss://) and
// checks that it cannot evict keys: an evicted key would clear a halt.
func OpenRedis(ctx context.Context, rawURL string, b Bounds, o OpenOptions) (*Redis, error) {
	where := redactURL(rawURL)
	opts, err := redis.ParseURL(rawURL)
	if err != nil {
		return nil, fmt.Errorf("--state %s: %w", where, err)
	}
	if o.PasswordFile != "" {
		raw, err := os.ReadFile(o.PasswordFile)
		if err != nil {
			return nil, fmt.Errorf("--state-password-file: %w", err)
		}
		opts.Password = strings.TrimRight(string(raw), "\r\n")
	}
	if o.CACert != "" {
		if opts.TLSConfig == nil {
			return nil, fmt.Errorf("--state-ca-cert: only for rediss:// (TLS)")
		}
		pemBytes, err := os.ReadFile(o.CACert)
		if err != nil {
			return nil, fmt.Errorf("--state-ca-cert: %w", err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pemBytes) {
			return nil, fmt.Errorf("--state-ca-cert %s: no PEM certificate in it", o.CACert)
		}
		opts.TLSConfig.RootCAs = pool
	}
	if opts.TLSConfig != nil && opts.TLSConfig.MinVersion < tls.VersionTLS12 {
		opts.TLSConfig.MinVersion = tls.VersionTLS12
	}
	// Fail fast and let the pool reconnect: a call waits at most about a
	// second for a Redis that is gone, then is denied.
	opts.DialTimeout, opts.ReadTimeout, opts.WriteTimeout = time.Second, 500*time.Millisecond, 500*time.Millisecond
	opts.MaxRetries = 1
	opts.DisableIdentity = true
	r := &Redis{client: redis.NewClient(opts), prefix: redisPrefix, b: b, where: where, pinsThere: map[[sha256.Size]byte]bool{},
		evicted: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "toolpdp_sessions_evicted_total",
			Help: "Sessions released because --max-sessions, --max-sessions-per-agent or --max-session-bytes was reached (the longest idle that is not halted first), by this process.",
		}),
		refused: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "toolpdp_sessions_refused_total",
			Help: "New sessions refused because every session a bound counts was halted (their calls are denied), by this process.",
		})}
	if err := r.checkEviction(ctx); err != nil {
		r.client.Close()
		return nil, err
	}
	out, err := r.runPlain(ctx, openScript, time.Now(), newStoreEpoch())
	if err != nil {
		r.client.Close()
		return nil, fmt.Errorf("--state %s: reading the store's epoch: %w", where, err)
	}
	// A store whose epoch another process saw vanish starts lost: its
	// calls are refused until an operator accepts the loss.
	r.storeEpoch, _ = out[1].(string)
	r.waiters = newWaiters(r.client, r.channel())
	return r, nil
}

// checkEviction refuses a Redis whose maxmemory-policy could evict keys.
// INFO answers where CONFIG is renamed away, as managed services do.
func (r *Redis) checkEviction(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	info, err := r.client.Info(ctx, "memory").Result()
	if err != nil {
		return fmt.Errorf("--state %s: %w", r.where, err)
	}
	policy := ""
	for _, line := range strings.Split(info, "\n") {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), "maxmemory_policy:"); ok {
			policy = v
		}
	}
	if policy != "noeviction" {
		if policy == "" {
			policy = "unknown (INFO memory does not say)"
		}
		return fmt.Errorf("--state %s: its maxmemory-policy is %s: Redis could evict keys and so clear a halt or forget an ask; set maxmemory-policy noeviction", r.where, policy)
	}
	return nil
}

// redactURL is the URL with its password hidden.
func redactURL(raw string) string {
	u, err := url.Parse(raw)
	if err != nil {
		return "the Redis URL"
	}
	return u.Redacted()
}

func (r *Redis) fail(err error) error {
	if err == nil || errors.Is(err, redis.Nil) {
		return nil
	}
	return fmt.Errorf("%w: %s: %v", ErrUnavailable, r.where, err)
}

// run runs a script with the prefix and the time before its arguments,
// only while the store's epoch is this process's: a store that lost its
// data is refused (ErrStateLost) unless an operator accepted the loss, in
// which case the epoch in force is adopted and the script runs once more.
func (r *Redis) run(ctx context.Context, s *redis.Script, now time.Time, args ...any) (any, error) {
	for attempt := 0; ; attempt++ {
		r.mu.Lock()
		mine := r.storeEpoch
		r.mu.Unlock()
		v, err := s.Run(ctx, r.client, []string{r.prefix + "s"}, append([]any{r.prefix, fmt.Sprintf("%d|%s", now.UnixMilli(), mine)}, args...)...).Result()
		if err == nil || !strings.HasPrefix(err.Error(), "STATELOST") {
			return v, r.fail(err)
		}
		if cerr := r.check(ctx); cerr != nil || attempt > 0 {
			return nil, r.lostError(cerr)
		}
	}
}

// runPlain runs a script that needs no epoch check.
func (r *Redis) runPlain(ctx context.Context, s *redis.Script, now time.Time, args ...any) ([]any, error) {
	v, err := s.Run(ctx, r.client, []string{r.prefix + "s"}, append([]any{r.prefix, now.UnixMilli()}, args...)...).Result()
	if err != nil {
		return nil, r.fail(err)
	}
	out, _ := v.([]any)
	if len(out) < 2 {
		return nil, fmt.Errorf("%w: %s: an unexpected answer %v", ErrUnavailable, r.where, v)
	}
	return out, nil
}

// check compares the store's epoch with this process's: nil when they
// agree or an operator accepted the loss of this process's epoch (the
// epoch in force is adopted), ErrStateLost when the epoch vanished or
// changed, ErrUnavailable when the store cannot tell.
func (r *Redis) check(ctx context.Context) error {
	r.mu.Lock()
	mine := r.storeEpoch
	r.mu.Unlock()
	out, err := r.runPlain(ctx, checkScript, time.Now(), mine)
	if err != nil {
		return err
	}
	status, _ := out[0].(string)
	cur, _ := out[1].(string)
	switch status {
	case "ok":
		return nil
	case "adopted":
		r.mu.Lock()
		if r.storeEpoch == mine {
			r.storeEpoch = cur
		}
		r.mu.Unlock()
		return nil
	}
	if cur == "" || strings.HasPrefix(cur, "lost:") {
		return fmt.Errorf("%w: %s holds no epoch of its own any more (it was restarted without its data, flushed or replaced): halts, pins, asks and remembered approvals it held may be gone", ErrStateLost, r.where)
	}
	return fmt.Errorf("%w: %s holds another store's epoch than this process knew (it was replaced, or restored from elsewhere): halts, pins, asks and remembered approvals it held may be gone", ErrStateLost, r.where)
}

// sameEpoch checks an epoch read beside data: a read from a store that
// lost its data would say an ask never existed.
func (r *Redis) sameEpoch(ctx context.Context, got string) error {
	r.mu.Lock()
	mine := r.storeEpoch
	r.mu.Unlock()
	if got == mine && !strings.HasPrefix(mine, "lost:") {
		return nil
	}
	return r.check(ctx)
}

// lostError is the error of a script refused for the epoch.
func (r *Redis) lostError(err error) error {
	if err != nil {
		return err
	}
	return fmt.Errorf("%w: %s", ErrStateLost, r.where)
}

// AcceptReset records that an operator (by) accepts the loss of what the
// store held: this process, and every other one that held the lost epoch,
// goes on with the epoch in force (a new one when none is). It returns
// the epoch given up and the one in force; from is "" when nothing was
// lost.
func (r *Redis) AcceptReset(ctx context.Context, by string) (from, to string, err error) {
	r.mu.Lock()
	mine := r.storeEpoch
	r.mu.Unlock()
	out, err := r.runPlain(ctx, acceptScript, time.Now(), mine, newStoreEpoch(), by)
	if err != nil {
		return "", "", err
	}
	if len(out) != 3 {
		return "", "", fmt.Errorf("%w: accept: an unexpected answer %v", ErrUnavailable, out)
	}
	status, _ := out[0].(string)
	from, _ = out[1].(string)
	to, _ = out[2].(string)
	r.mu.Lock()
	r.storeEpoch = to
	r.mu.Unlock()
	if status == "none" {
		return "", to, nil
	}
	if from == "" {
		from = "(unknown)"
	}
	return from, to, nil
}

// newStoreEpoch names one store, for as long as it keeps its data.
func newStoreEpoch() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

func sk(k Key) string { return k.Workspace + "\x00" + k.Agent + "\x00" + k.Session }

func (r *Redis) Begin(ctx context.Context, k Key, current *Pin, now time.Time) (Begun, error) {
	if k.Session == "" {
		return Begun{Pin: current}, nil
	}
	pin, body := "", ""
	if current != nil {
		pin = hex.EncodeToString(current.Digest[:])
		r.mu.Lock()
		if !r.pinsThere[current.Digest] {
			body = string(current.Body)
		}
		r.mu.Unlock()
	}
	for range 2 {
		v, err := r.run(ctx, beginScript, now, sk(k), k.Agent, pin, body, r.b.SessionIdle.Milliseconds(), r.b.MaxSessions,
			r.perAgent(), r.maxSessionBytes(), 4*r.b.MaxSessions)
		if err != nil {
			return Begun{}, err
		}
		out, _ := v.([]any)
		if len(out) != 5 {
			return Begun{}, fmt.Errorf("%w: begin: an unexpected answer %v", ErrUnavailable, v)
		}
		if toInt(out[3]) == 1 { // the store lost the definition's copy: send it
			body = string(current.Body)
			continue
		}
		if current != nil {
			r.mu.Lock()
			r.pinsThere[current.Digest] = true
			r.mu.Unlock()
		}
		r.evicted.Add(float64(toInt(out[4])))
		b := Begun{Lost: toInt(out[1]) == 1, Refused: toInt(out[2]) == 1}
		if b.Refused {
			r.refused.Inc()
			return b, nil
		}
		got, _ := out[0].(string)
		if got != "" {
			p := &Pin{}
			if raw, err := hex.DecodeString(got); err == nil && len(raw) == len(p.Digest) {
				copy(p.Digest[:], raw)
			}
			if current != nil && current.Digest == p.Digest {
				p.Body = current.Body
			}
			b.Pin = p
		}
		return b, nil
	}
	return Begun{}, fmt.Errorf("%w: begin: the pinned definition could not be stored", ErrUnavailable)
}

func (r *Redis) perAgent() int {
	if r.b.MaxSessionsPerAgent > 0 {
		return min(r.b.MaxSessionsPerAgent, r.b.MaxSessions)
	}
	return max(1, r.b.MaxSessions/2)
}

func (r *Redis) maxSessionBytes() int64 {
	if r.b.MaxSessionBytes > 0 {
		return r.b.MaxSessionBytes
	}
	return DefaultMaxSessionBytes
}

func (r *Redis) maxPendingBytes() int64 {
	if r.b.MaxPendingBytes > 0 {
		return r.b.MaxPendingBytes
	}
	return DefaultMaxPendingBytes
}

func (r *Redis) PinBody(ctx context.Context, digest [sha256.Size]byte) ([]byte, error) {
	v, err := r.client.Get(ctx, r.prefix+"pin:"+hex.EncodeToString(digest[:])).Bytes()
	if errors.Is(err, redis.Nil) {
		return nil, nil
	}
	return v, r.fail(err)
}

func (r *Redis) Decided(ctx context.Context, c *Call, now time.Time) (bool, error) {
	doc, err := json.Marshal(callDoc{Call: *c})
	if err != nil {
		return false, err
	}
	skey, cid, sig := "", "", ""
	if c.SessionID != "" {
		skey = sk(c.Key())
	}
	if c.CallID != "" {
		cid = c.Workspace + "\x00" + c.AgentID + "\x00" + c.SessionID + "\x00" + c.CallID
		sig = hex.EncodeToString(c.Signature[:])
	}
	ask := 0
	if c.Decision == pb.Decision_DECISION_ASK {
		ask = 1
	}
	v, err := r.run(ctx, decidedScript, now, skey, effect(c.countedAs(c.Decision)), c.MaxDenials, c.DecisionID, c.Workspace, int(c.Decision), doc,
		c.size(), cid, sig, ask, r.b.MaxPending, r.maxPendingBytes(), r.b.PendingTTL.Milliseconds(), r.channel())
	if err != nil {
		return false, err
	}
	out, _ := v.([]any)
	return len(out) == 1 && toInt(out[0]) == 1, nil
}

// effect is how a script counts a decision.
func effect(d pb.Decision) string {
	switch d {
	case pb.Decision_DECISION_ALLOW:
		return "allow"
	case pb.Decision_DECISION_ASK:
		return "ask"
	}
	return "deny"
}

func (r *Redis) Remember(ctx context.Context, k Key, key RememberKey, epoch string, expires, now time.Time) error {
	_, err := r.run(ctx, rememberScript, now, sk(k), hex.EncodeToString(key[:]), epoch, expires.UnixMilli(), MaxRememberedPerSession,
		rememberedSize, r.maxSessionBytes(), 4*r.b.MaxSessions)
	return err
}

func (r *Redis) Remembered(ctx context.Context, k Key, key RememberKey, epoch string, now time.Time) (bool, error) {
	pipe := r.client.Pipeline()
	used := pipe.HGet(ctx, r.prefix+"s:"+sk(k), "u")
	rem := pipe.HGet(ctx, r.prefix+"m:"+sk(k), hex.EncodeToString(key[:]))
	if _, err := pipe.Exec(ctx); r.fail(err) != nil {
		return false, r.fail(err)
	}
	u, err := used.Int64()
	if err != nil || now.Sub(time.UnixMilli(u)) > r.b.SessionIdle {
		return false, nil
	}
	e, x, ok := strings.Cut(rem.Val(), "|")
	exp, err := strconv.ParseInt(x, 10, 64)
	return ok && err == nil && e == epoch && now.Before(time.UnixMilli(exp)), nil
}

func (r *Redis) ByCallID(ctx context.Context, workspace, agentID, sessionID, callID string) (string, bool, error) {
	pipe := r.client.Pipeline()
	fields := pipe.HMGet(ctx, r.prefix+"cid:"+workspace+"\x00"+agentID+"\x00"+sessionID+"\x00"+callID, "id", "held", "conflict")
	epoch := pipe.Get(ctx, r.prefix+"epoch")
	if _, err := pipe.Exec(ctx); r.fail(err) != nil {
		return "", false, r.fail(err)
	}
	if err := r.sameEpoch(ctx, epoch.Val()); err != nil {
		return "", false, err
	}
	v := fields.Val()
	id, _ := v[0].(string)
	held, _ := v[1].(string)
	conflict, _ := v[2].(string)
	n, _ := strconv.Atoi(held)
	return id, n > 1 && conflict == "1", nil
}

// get is a decided call as the store holds it, or nil.
func (r *Redis) get(ctx context.Context, id string) (*Call, map[string]string, error) {
	pipe := r.client.Pipeline()
	hash := pipe.HGetAll(ctx, r.prefix+"c:"+id)
	epoch := pipe.Get(ctx, r.prefix+"epoch")
	if _, err := pipe.Exec(ctx); r.fail(err) != nil {
		return nil, nil, r.fail(err)
	}
	if err := r.sameEpoch(ctx, epoch.Val()); err != nil {
		return nil, nil, err
	}
	f := hash.Val()
	if len(f) == 0 {
		return nil, nil, nil
	}
	c, err := decodeCall(f)
	return c, f, err
}

func decodeCall(f map[string]string) (*Call, error) {
	var d callDoc
	if err := json.Unmarshal([]byte(f["doc"]), &d); err != nil {
		return nil, fmt.Errorf("%w: a decided call: %v", ErrUnavailable, err)
	}
	c := d.Call
	if ans, err := strconv.Atoi(f["ans"]); err == nil {
		c.Answer = pb.Decision(ans)
	}
	c.reported = f["rep"] == "1"
	c.Expired = f["exp"] == "1"
	c.Halt = f["halt"] == "1"
	if raw := f["adoc"]; raw != "" {
		var a answerDoc
		if err := json.Unmarshal([]byte(raw), &a); err == nil {
			c.AnswerMessage, c.Execution, c.AnsweredBy = a.Message, a.Execution, a.AnsweredBy
		}
	}
	if c.Answer != pb.Decision_DECISION_UNSPECIFIED || c.Expired {
		c.Request, c.Response = nil, nil // an ask keeps them only while it waits
	}
	if seq, err := strconv.ParseUint(f["seq"], 10, 64); err == nil {
		c.seq = seq
	}
	return &c, nil
}

// answerDoc is what goes with an answer, as the store keeps it.
type answerDoc struct {
	Message    string `json:"message,omitempty"`
	Execution  []byte `json:"execution,omitempty"`
	AnsweredBy string `json:"by,omitempty"`
}

// settleBound is how long an answer whose reply was lost is settled for:
// Redis is asked, again and again, whether the answer was stored.
const settleBound = 10 * time.Second

func (r *Redis) Answer(ctx context.Context, id, workspace string, answer func(*Call), now time.Time) (*Call, Lookup, bool, error) {
	c, found, err := r.Get(ctx, id, workspace, now)
	if err != nil || found != Found {
		return nil, found, false, err
	}
	if c.Decision != pb.Decision_DECISION_ASK || c.Answer != pb.Decision_DECISION_UNSPECIFIED {
		return &c, Found, false, nil
	}
	answer(&c)
	adoc, err := json.Marshal(answerDoc{Message: c.AnswerMessage, Execution: c.Execution, AnsweredBy: c.AnsweredBy})
	if err != nil {
		return nil, NotFound, false, err
	}
	nonce := newNonce()
	v, err := r.run(ctx, answerScript, now, id, workspace, int(c.Answer), effect(c.countedAs(c.Answer)), adoc, r.b.PendingTTL.Milliseconds(),
		r.b.MaxPending, r.maxPendingBytes(), r.channel(), nonce)
	if err != nil && !errors.Is(err, ErrStateLost) {
		// The script may have run although its reply was lost (a stall, a
		// timeout): ask whether it did rather than answer again.
		v, err = r.settle(ctx, id, workspace, nonce, now)
	}
	if err != nil {
		return nil, NotFound, false, err
	}
	out, _ := v.([]any)
	if len(out) != 4 {
		return nil, NotFound, false, fmt.Errorf("%w: answer: an unexpected answer %v", ErrUnavailable, v)
	}
	status, _ := out[0].(string)
	if status == "answered" && fmt.Sprint(out[3]) == nonce { // this very answer, stored by an attempt whose reply was lost
		status = "ok"
	}
	switch status {
	case "ok":
		c.Halt = toInt(out[1]) == 1
		c.Request, c.Response = nil, nil
		return &c, Found, true, nil
	case "answered": // another replica answered first: as it stands now
		now, found, err := r.Get(ctx, id, workspace, now)
		if err != nil || found == NotFound {
			return nil, found, false, err
		}
		return &now, found, false, nil
	case "expired":
		return nil, Expired, false, nil
	case "notask":
		c.Answer = pb.Decision_DECISION_UNSPECIFIED
		return &c, Found, false, nil
	case "void":
		return nil, NotFound, false, fmt.Errorf("%w: %s: the answer could not be stored (the store did not reply in time); the ask is still pending: answer it again", ErrUnavailable, r.where)
	}
	return nil, NotFound, false, nil
}

// settle learns whether the answer of nonce to ask id was stored, asking
// again within settleBound: answered (by this nonce or another), or void —
// not stored, and now never to be. Its reads are not cut by the caller's
// deadline: a person who was not told must not be overruled later by a
// copy of their answer still on its way.
func (r *Redis) settle(ctx context.Context, id, workspace, nonce string, now time.Time) (any, error) {
	deadline := time.Now().Add(settleBound)
	pause := 50 * time.Millisecond
	for {
		sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 2*time.Second)
		v, err := r.run(sctx, settleScript, now, id, workspace, nonce, max(r.b.PendingTTL, time.Minute).Milliseconds())
		cancel()
		if err == nil || errors.Is(err, ErrStateLost) || time.Now().After(deadline) {
			return v, err
		}
		time.Sleep(pause)
		pause = min(2*pause, 500*time.Millisecond)
	}
}

// newNonce names one attempt to answer an ask.
func newNonce() string {
	var b [12]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

func (r *Redis) channel() string { return r.prefix + "answered" }

func (r *Redis) Report(ctx context.Context, id, workspace string, isError bool, now time.Time) (*Call, Lookup, bool, bool, error) {
	c, _, err := r.get(ctx, id)
	if err != nil {
		return nil, NotFound, false, false, err
	}
	if c == nil || c.Workspace != workspace {
		return nil, NotFound, false, false, nil
	}
	iserr := 0
	if isError {
		iserr = 1
	}
	v, err := r.run(ctx, reportScript, now, id, workspace, iserr, int(pb.Decision_DECISION_ALLOW))
	if err != nil {
		return nil, NotFound, false, false, err
	}
	out, _ := v.([]any)
	if len(out) != 4 {
		return nil, NotFound, false, false, fmt.Errorf("%w: report: an unexpected answer %v", ErrUnavailable, v)
	}
	switch out[0] {
	case "ok":
		c.reported = true
		return c, Found, true, toInt(out[1]) == 1, nil
	case "state":
		if ans, err := strconv.Atoi(fmt.Sprint(out[3])); err == nil {
			c.Answer = pb.Decision(ans)
		}
		if c.Expired {
			return c, Expired, false, false, nil
		}
		return c, Found, false, false, nil
	}
	return nil, NotFound, false, false, nil
}

func (r *Redis) Page(ctx context.Context, workspace, agentID string, after uint64, limit int, now time.Time) ([]Call, uint64, error) {
	if err := r.check(ctx); err != nil {
		return nil, 0, err
	}
	var out []Call
	from := "(" + strconv.FormatUint(after, 10)
	for {
		ids, err := r.client.ZRangeArgs(ctx, redis.ZRangeArgs{Key: r.prefix + "asks", Start: from, Stop: "+inf", ByScore: true, Count: int64(4 * (limit + 1))}).Result()
		if err != nil {
			return nil, 0, r.fail(err)
		}
		if len(ids) == 0 {
			return out, 0, nil
		}
		pipe := r.client.Pipeline()
		cmds := make([]*redis.MapStringStringCmd, len(ids))
		for i, id := range ids {
			cmds[i] = pipe.HGetAll(ctx, r.prefix+"c:"+id)
		}
		if _, err := pipe.Exec(ctx); r.fail(err) != nil {
			return nil, 0, r.fail(err)
		}
		for _, cmd := range cmds {
			f := cmd.Val()
			if len(f) == 0 || f["q"] != "asks" || f["exp"] == "1" {
				continue
			}
			c, err := decodeCall(f)
			if err != nil {
				continue
			}
			from = "(" + f["seq"]
			if c.Workspace != workspace || now.Sub(c.Created) > r.b.PendingTTL || (agentID != "" && c.AgentID != agentID) {
				continue
			}
			if len(out) == limit {
				return out, out[len(out)-1].seq, nil
			}
			out = append(out, *c)
		}
		if len(ids) < 4*(limit+1) {
			return out, 0, nil
		}
	}
}

func (r *Redis) End(ctx context.Context, k Key) (bool, error) {
	v, err := r.run(ctx, endScript, time.Now(), sk(k))
	return toInt(v) == 1, err
}

func (r *Redis) Activate(ctx context.Context, digest string) (string, error) {
	r.mu.Lock()
	first, mine := !r.activated, r.epoch
	r.mu.Unlock()
	f := "0"
	if first {
		f = "1"
	}
	v, err := r.run(ctx, activateScript, time.Now(), digest, f, mine, newEpoch(digest))
	if err != nil {
		return "", err
	}
	epoch, _ := v.(string)
	r.mu.Lock()
	r.activated, r.epoch = true, epoch
	r.mu.Unlock()
	return epoch, nil
}

func (r *Redis) Sweep(ctx context.Context, now time.Time) {
	_, _ = r.run(ctx, sweepScript, now, r.b.SessionIdle.Milliseconds(), r.b.PendingTTL.Milliseconds(), r.channel(), r.b.MaxPending, r.maxPendingBytes())
}

func (r *Redis) Collectors() []prometheus.Collector {
	gauge := func(name, help string, read func(ctx context.Context) (float64, error)) prometheus.Collector {
		return prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: name, Help: help}, func() float64 {
			ctx, cancel := context.WithTimeout(context.Background(), time.Second)
			defer cancel()
			v, err := read(ctx)
			if err != nil {
				return -1
			}
			return v
		})
	}
	intKey := func(key string) func(ctx context.Context) (float64, error) {
		return func(ctx context.Context) (float64, error) {
			n, err := r.client.Get(ctx, r.prefix+key).Int64()
			if errors.Is(err, redis.Nil) {
				return 0, nil
			}
			return float64(n), err
		}
	}
	card := func(key string) func(ctx context.Context) (float64, error) {
		return func(ctx context.Context) (float64, error) {
			n, err := r.client.ZCard(ctx, r.prefix+key).Result()
			return float64(n), err
		}
	}
	return []prometheus.Collector{r.evicted, r.refused,
		gauge("toolpdp_sessions", "Sessions held (pinned definitions and denial counts), in the shared store; -1 when it cannot be read.", card("all")),
		gauge("toolpdp_sessions_bytes", "Bytes the sessions hold (estimated; bounded by --max-session-bytes), in the shared store.", intKey("sbytes")),
		gauge("toolpdp_pending", "Asks awaiting Confirm, in the shared store.", card("asks")),
		gauge("toolpdp_pending_bytes", "Bytes the decided calls held for Confirm and ReportResult take (estimated), in the shared store.",
			func(ctx context.Context) (float64, error) {
				a, err := intKey("abytes")(ctx)
				if err != nil {
					return 0, err
				}
				b, err := intKey("rbytes")(ctx)
				return a + b, err
			}),
	}
}

// Ping reports whether the store answers and still holds this process's
// epoch.
func (r *Redis) Ping(ctx context.Context) error { return r.check(ctx) }

func (r *Redis) Close() error {
	r.waiters.close()
	return r.client.Close()
}

func toInt(v any) int64 {
	switch n := v.(type) {
	case int64:
		return n
	case string:
		i, _ := strconv.ParseInt(n, 10, 64)
		return i
	}
	return 0
}
