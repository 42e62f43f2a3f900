package session

import (
	_ "embed"

	"github.com/redis/go-redis/v9"
)

// The Redis store's scripts: each is the shared part (redis.lua) and its
// own body, run atomically by Redis. Arguments after the prefix and the
// time are named at each.

//go:embed redis.lua
var redisShared string

func script(body string) *redis.Script { return redis.NewScript(redisShared + body) }

// begin: sk, bucket, pin, body, idle, max, max per bucket, max bytes,
// ring size. Returns {pin, lost, refused, need body, evicted}.
var beginScript = script(`
local sk, bucket, pin, body = ARGV[3], ARGV[4], ARGV[5], ARGV[6]
local idle, max, maxper, maxbytes, ring = tonumber(ARGV[7]), tonumber(ARGV[8]), tonumber(ARGV[9]), tonumber(ARGV[10]), tonumber(ARGV[11])
if pin ~= '' and body == '' and redis.call('EXISTS', P .. 'pin:' .. pin) == 0 then
  return {'', 0, 0, 1, 0}
end
local s = P .. 's:' .. sk
local f = redis.call('HMGET', s, 'u', 'pin', 'lost', 'h', 'b')
if f[1] and now - num(f[1]) > idle then
  release(sk, false, 0)
  f = {false}
end
if f[1] then
  redis.call('HSET', s, 'u', now)
  redis.call('ZADD', P .. 'all', now, sk)
  if f[4] ~= '1' then
    redis.call('ZADD', P .. 'ev', now, sk)
    redis.call('ZADD', P .. 'bev:' .. f[5], now, sk)
  end
  local have = f[2] or ''
  if have == '' and pin ~= '' then
    redis.call('HSET', s, 'pin', pin)
    ref(pin, body)
    have = pin
  end
  return {have, num(f[3]), 0, 0, 0}
end
if pin == '' then
  bucket = '\0undefined'
end
local function room()
  local bn = num(redis.call('HGET', P .. 'bn', bucket))
  if bn >= maxper or redis.call('ZCARD', P .. 'all') >= max then
    expire_idle(idle)
  end
  while num(redis.call('HGET', P .. 'bn', bucket)) >= maxper do
    local o = redis.call('ZRANGE', P .. 'bev:' .. bucket, 0, 0)[1]
    if not o then
      return false
    end
    release(o, true, ring)
  end
  while redis.call('ZCARD', P .. 'all') >= max do
    local o = redis.call('ZRANGE', P .. 'ev', 0, 0)[1]
    if not o then
      return false
    end
    release(o, true, ring)
  end
  local size = 2 * #sk + 320
  if pin ~= '' and redis.call('EXISTS', P .. 'pin:' .. pin) == 0 then
    size = size + #body
  end
  while num(redis.call('GET', P .. 'sbytes')) + size > maxbytes do
    local o = redis.call('ZRANGE', P .. 'ev', 0, 0)[1]
    if not o then
      return false
    end
    release(o, true, ring)
  end
  return true
end
if not room() then
  return {'', 0, 1, 0, evicted}
end
local lost = 0
if redis.call('ZSCORE', P .. 'gone', sk) then
  lost = 1
end
local size = 2 * #sk + 320
redis.call('HSET', s, 'u', now, 'b', bucket, 'd', 0, 'r', 0, 'h', 0, 'sz', size, 'lost', lost, 'pin', pin)
redis.call('ZADD', P .. 'all', now, sk)
redis.call('ZADD', P .. 'ev', now, sk)
redis.call('ZADD', P .. 'bev:' .. bucket, now, sk)
redis.call('HINCRBY', P .. 'bn', bucket, 1)
redis.call('INCRBY', P .. 'sbytes', size)
if pin ~= '' then
  ref(pin, body)
end
return {pin, lost, 0, 0, evicted}
`)

// decided: sk, effect, max, id, ws, decision, doc, size, call-id key,
// call signature, ask (1/0), max pending, max pending bytes, ttl, the
// answers' channel. Returns {halt}.
var decidedScript = script(`
local sk, effect, max = ARGV[3], ARGV[4], tonumber(ARGV[5])
local id, ws, dec, doc, sz, cid, sig = ARGV[6], ARGV[7], ARGV[8], ARGV[9], tonumber(ARGV[10]), ARGV[11], ARGV[12]
local ask, maxn, maxbytes, ttl = ARGV[13] == '1', tonumber(ARGV[14]), tonumber(ARGV[15]), tonumber(ARGV[16])
local halt = count(sk, effect, max)
drop_call(id)
local seq = redis.call('INCR', P .. 'seq')
local q = ask and 'asks' or 'recent'
redis.call('HSET', P .. 'c:' .. id, 'doc', doc, 'ws', ws, 'dec', dec, 'ans', '', 'rep', '0', 'created', now, 'sk', sk,
  'max', max, 'seq', seq, 'sz', sz, 'cid', cid, 'q', q)
if ask then
  expire_asks(ttl, ARGV[17], maxn, maxbytes)
end
redis.call('ZADD', P .. q, seq, id)
redis.call('INCRBY', P .. (ask and 'abytes' or 'rbytes'), sz)
if sk ~= '' and redis.call('EXISTS', P .. 's:' .. sk) == 1 then
  redis.call('SADD', P .. 'sc:' .. sk, id)
end
if cid ~= '' then
  local k = P .. 'cid:' .. cid
  local old = redis.call('HMGET', k, 'sig', 'conflict')
  local conflict = old[2] == '1' or (old[1] and old[1] ~= sig)
  redis.call('HSET', k, 'id', id, 'sig', sig, 'conflict', conflict and '1' or '0')
  redis.call('HINCRBY', k, 'held', 1)
end
trim(q, maxn, maxbytes)
return {halt}
`)

// answer: id, ws, answer (the decision's number), effect, what goes with
// the answer (a document), ttl, max pending, max pending bytes, channel,
// the answer's nonce. Returns {status, halt, ans, nonce} with status ok,
// notfound, expired, notask, answered (nonce: the one that answered) or
// void (settle gave this nonce up: it must never answer).
var answerScript = script(`
local id, ws, ans, effect, adoc = ARGV[3], ARGV[4], ARGV[5], ARGV[6], ARGV[7]
local ttl, maxn, maxbytes, channel, nonce = tonumber(ARGV[8]), tonumber(ARGV[9]), tonumber(ARGV[10]), ARGV[11], ARGV[12]
if redis.call('EXISTS', P .. 'void:' .. nonce) == 1 then
  return {'void', 0, '', ''}
end
local c = P .. 'c:' .. id
local f = redis.call('HMGET', c, 'ws', 'dec', 'ans', 'created', 'sk', 'max', 'q', 'exp', 'halt', 'an')
if not f[1] or f[1] ~= ws then
  return {'notfound', 0, '', ''}
end
if f[3] ~= '' then
  return {'answered', num(f[9]), f[3], f[10] or ''}
end
if f[8] == '1' then
  return {'expired', 0, '', ''}
end
if f[7] ~= 'asks' then
  return {'notask', 0, '', ''}
end
if now - num(f[4]) > ttl then
  expire_ask(id, channel, maxn, maxbytes)
  return {'expired', 0, '', ''}
end
local halt = count(f[5], effect, num(f[6]))
redis.call('HSET', c, 'ans', ans, 'adoc', adoc, 'halt', halt, 'an', nonce)
move(id, 'recent', maxn, maxbytes)
redis.call('PUBLISH', channel, id)
return {'ok', halt, ans, nonce}
`)

// settle: id, ws, nonce, ttl. After an answer whose reply was lost, it
// tells whether the answer was stored, and if not, makes sure it never
// will be: the nonce is void, so a copy still on its way is refused.
// Returns {status, halt, ans, nonce} with status answered (nonce: the one
// that answered), notfound or void.
var settleScript = script(`
local id, ws, nonce, ttl = ARGV[3], ARGV[4], ARGV[5], tonumber(ARGV[6])
local f = redis.call('HMGET', P .. 'c:' .. id, 'ws', 'ans', 'halt', 'an')
if f[1] and f[1] == ws and f[2] and f[2] ~= '' then
  return {'answered', num(f[3]), f[2], f[4] or ''}
end
redis.call('SET', P .. 'void:' .. nonce, '1', 'PX', ttl)
if not f[1] or f[1] ~= ws then
  return {'notfound', 0, '', ''}
end
return {'void', 0, '', ''}
`)

// report: id, ws, is error (1/0), allow (the decision's number).
// Returns {status, halt, dec, ans} with status ok, notfound or state.
var reportScript = script(`
local id, ws, iserr, allow = ARGV[3], ARGV[4], ARGV[5] == '1', ARGV[6]
local c = P .. 'c:' .. id
local f = redis.call('HMGET', c, 'ws', 'dec', 'ans', 'rep', 'sk', 'max', 'q')
if not f[1] or f[1] ~= ws then
  return {'notfound', 0, '', ''}
end
if f[7] == 'asks' or (f[2] ~= allow and f[3] ~= allow) or f[4] == '1' then
  return {'state', 0, f[2], f[3]}
end
redis.call('HSET', c, 'rep', '1')
local halt = count(f[5], iserr and 'error' or 'success', num(f[6]))
return {'ok', halt, f[2], f[3]}
`)

// remember: sk, key, epoch, expires, max per session, size of one, max
// bytes, ring size.
var rememberScript = script(`
local sk, key, epoch, expires = ARGV[3], ARGV[4], ARGV[5], tonumber(ARGV[6])
local maxn, size, maxbytes, ring = tonumber(ARGV[7]), tonumber(ARGV[8]), tonumber(ARGV[9]), tonumber(ARGV[10])
local s = P .. 's:' .. sk
if redis.call('EXISTS', s) == 0 then
  return 0
end
local m = P .. 'm:' .. sk
local all = redis.call('HGETALL', m)
local n, soonest, soonestAt = 0, nil, nil
for i = 1, #all, 2 do
  local e, x = string.match(all[i + 1], '^(.*)|(%d+)$')
  x = tonumber(x)
  if e ~= epoch or x <= now then
    redis.call('HDEL', m, all[i])
    redis.call('HINCRBY', s, 'sz', -size)
    redis.call('DECRBY', P .. 'sbytes', size)
  elseif all[i] ~= key then
    n = n + 1
    if not soonestAt or x < soonestAt then
      soonest, soonestAt = all[i], x
    end
  end
end
if redis.call('HEXISTS', m, key) == 0 then
  if n >= maxn then
    redis.call('HDEL', m, soonest)
    redis.call('HINCRBY', s, 'sz', -size)
    redis.call('DECRBY', P .. 'sbytes', size)
  end
  while num(redis.call('GET', P .. 'sbytes')) + size > maxbytes do
    local o = redis.call('ZRANGE', P .. 'ev', 0, 0)[1]
    if o == sk then
      o = redis.call('ZRANGE', P .. 'ev', 1, 1)[1]
    end
    if not o then
      return 0
    end
    release(o, true, ring)
  end
  redis.call('HINCRBY', s, 'sz', size)
  redis.call('INCRBY', P .. 'sbytes', size)
end
redis.call('HSET', m, key, epoch .. '|' .. string.format('%d', expires))
return 1
`)

// end: sk. Returns 1 when there was a session.
var endScript = script(`
local sk = ARGV[3]
for _, id in ipairs(redis.call('SMEMBERS', P .. 'sc:' .. sk)) do
  drop_call(id)
end
redis.call('ZREM', P .. 'gone', sk)
local found = redis.call('EXISTS', P .. 's:' .. sk)
release(sk, false, 0)
return found
`)

// sweep: idle, ttl, the answers' channel, max pending, max pending bytes.
var sweepScript = script(`
expire_idle(tonumber(ARGV[3]))
expire_asks(tonumber(ARGV[4]), ARGV[5], tonumber(ARGV[6]), tonumber(ARGV[7]))
return 0
`)

// activate: digest, first activation of the process (1/0), the process's
// epoch, a new epoch. Returns the epoch in force.
var activateScript = script(`
local digest, first, mine, fresh = ARGV[3], ARGV[4] == '1', ARGV[5], ARGV[6]
local f = redis.call('HMGET', P .. 'policy', 'digest', 'epoch')
if f[1] == digest and f[2] and (first or f[2] ~= mine) then
  return f[2]
end
redis.call('HSET', P .. 'policy', 'digest', digest, 'epoch', fresh)
return fresh
`)

// open: a new epoch. Returns {status, epoch}: new (the store was empty of
// an epoch: this one is written), lost (a process saw the epoch vanish:
// the value names it) or ok.
var openScript = script(`
local fresh = ARGV[3]
local cur = redis.call('GET', P .. 'epoch')
if not cur then
  redis.call('SET', P .. 'epoch', fresh)
  return {'new', fresh}
end
if string.sub(cur, 1, 5) == 'lost:' then
  return {'lost', cur}
end
return {'ok', cur}
`)

// check: the process's epoch. Returns {status, epoch}: ok, adopted (an
// operator accepted the loss of the process's epoch: the epoch in force)
// or lost (the epoch in force, or false; a vanished epoch is marked lost,
// so that a process starting later sees the loss too).
var checkScript = script(`
local mine = ARGV[3]
local cur = redis.call('GET', P .. 'epoch')
if cur and cur == mine and string.sub(mine, 1, 5) ~= 'lost:' then
  return {'ok', cur}
end
local key = mine
if string.sub(key, 1, 5) == 'lost:' then
  key = string.sub(key, 6)
end
local rec = redis.call('HGET', P .. 'epoch:accepted', key)
if rec and cur then
  local to = string.match(rec, '^([^|]*)|')
  if to == cur then
    return {'adopted', cur}
  end
end
if not cur then
  redis.call('SET', P .. 'epoch', 'lost:' .. key, 'NX')
end
if key ~= '' then
  redis.call('HSET', P .. 'epoch:lost', key, now)
end
return {'lost', cur or ''}
`)

// accept: the process's epoch, a new epoch, who accepts. An operator
// accepts that the store lost what it held: a vanished or lost-marked
// epoch is replaced by the new one, and every lost epoch known here — the
// process's own, and those other processes found lost (P.."epoch:lost") —
// is recorded as accepted, so that each process that held one adopts the
// epoch in force, whichever replica the operator reached. Returns
// {status, from, to}: none (nothing was lost) or accepted.
var acceptScript = script(`
local mine, fresh, by = ARGV[3], ARGV[4], ARGV[5]
local cur = redis.call('GET', P .. 'epoch')
local others = redis.call('HKEYS', P .. 'epoch:lost')
if cur and cur == mine and string.sub(mine, 1, 5) ~= 'lost:' and #others == 0 then
  return {'none', cur, cur}
end
local to = cur
if not cur or string.sub(cur, 1, 5) == 'lost:' then
  to = fresh
  redis.call('SET', P .. 'epoch', fresh)
end
local rec = to .. '|' .. by .. '|' .. now
local from = ''
local lost = {mine, cur or ''}
for _, e in ipairs(others) do
  table.insert(lost, e)
end
for _, e in ipairs(lost) do
  if string.sub(e, 1, 5) == 'lost:' then
    e = string.sub(e, 6)
  end
  if e ~= '' and e ~= to then
    redis.call('HSET', P .. 'epoch:accepted', e, rec)
    if from == '' then
      from = e
    end
  end
end
redis.call('DEL', P .. 'epoch:lost')
return {'accepted', from, to}
`)
