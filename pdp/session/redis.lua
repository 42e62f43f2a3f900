-- The shared part of every script of the Redis store. Every key starts
-- with the prefix P, which holds one hash tag: all of a store's keys live
-- in one slot, so each script is atomic over all of them (Redis Cluster
-- included). ARGV[1] is P, ARGV[2] the time in milliseconds; a script's
-- own arguments follow.
--
-- Sessions: P.."s:"..sk, a hash (pin, d: consecutive failures, r:
-- reported, h: halted, u: last use, b: the agent bucket, sz: bytes, lost);
-- P.."m:"..sk its remembered approvals; sorted sets by last use: P.."all"
-- (every session), P.."ev" (those not halted), P.."bev:"..bucket (those
-- not halted, per agent); P.."bn" the count per bucket; P.."sbytes".
-- Pins: P.."pin:"..digest, counted in P.."pinref". Decided calls:
-- P.."c:"..id, a hash (doc, ws, dec, ans, rep, created, sk, max, seq, sz,
-- cid, q: asks or recent); sorted sets P.."asks" and P.."recent" by
-- arrival; P.."abytes", P.."rbytes"; P.."cid:"..key the latest call of a
-- call id; P.."sc:"..sk a session's calls.
--
-- The store's epoch: P.."epoch", written once when the store is first
-- used ("lost:"..epoch once a process saw it vanish);
-- P.."epoch:lost", the epochs processes found lost and nobody accepted
-- yet; P.."epoch:accepted", the losses an operator accepted (lost epoch
-- -> "new|by|time"). ARGV[2] may be "time|epoch": the script then runs only
-- while the store's epoch is that one, else it fails with STATELOST, so
-- that nothing is counted into a store that lost what it held.
local P = ARGV[1]
local now, want = string.match(ARGV[2], '^(%d+)|(.*)$')
if now then
  now = tonumber(now)
  if redis.call('GET', P .. 'epoch') ~= want or string.sub(want, 1, 5) == 'lost:' then
    return redis.error_reply('STATELOST the store epoch is not ' .. want)
  end
else
  now = tonumber(ARGV[2])
end
local evicted = 0

local function num(v)
  return tonumber(v or '0') or 0
end

local function unref(pin)
  if redis.call('HINCRBY', P .. 'pinref', pin, -1) <= 0 then
    redis.call('HDEL', P .. 'pinref', pin)
    local body = P .. 'pin:' .. pin
    redis.call('DECRBY', P .. 'sbytes', redis.call('STRLEN', body))
    redis.call('DEL', body)
  end
end

local function ref(pin, body)
  redis.call('HINCRBY', P .. 'pinref', pin, 1)
  local k = P .. 'pin:' .. pin
  if body ~= '' and redis.call('EXISTS', k) == 0 then
    redis.call('SET', k, body)
    redis.call('INCRBY', P .. 'sbytes', #body)
  end
end

-- release removes a session; bury remembers it was released at a bound,
-- in a ring of ringcap keys, so that it comes back lost.
local function release(sk, bury, ringcap)
  local s = P .. 's:' .. sk
  local f = redis.call('HMGET', s, 'b', 'pin', 'sz')
  if not f[1] then
    return
  end
  local b = f[1]
  redis.call('ZREM', P .. 'all', sk)
  redis.call('ZREM', P .. 'ev', sk)
  redis.call('ZREM', P .. 'bev:' .. b, sk)
  if redis.call('HINCRBY', P .. 'bn', b, -1) <= 0 then
    redis.call('HDEL', P .. 'bn', b)
  end
  redis.call('DECRBY', P .. 'sbytes', num(f[3]))
  if f[2] and f[2] ~= '' then
    unref(f[2])
  end
  redis.call('DEL', s, P .. 'm:' .. sk, P .. 'sc:' .. sk)
  if bury then
    evicted = evicted + 1
    redis.call('ZADD', P .. 'gone', now, sk)
    local n = redis.call('ZCARD', P .. 'gone')
    if n > ringcap then
      redis.call('ZREMRANGEBYRANK', P .. 'gone', 0, n - ringcap - 1)
    end
  end
end

local function expire_idle(idle)
  local old = redis.call('ZRANGEBYSCORE', P .. 'all', '-inf', now - idle, 'LIMIT', 0, 256)
  for _, sk in ipairs(old) do
    release(sk, false, 0)
  end
end

-- set_halted moves a session out of eviction's reach while halted.
local function set_halted(sk, b, halted, u)
  local s = P .. 's:' .. sk
  if halted then
    redis.call('HSET', s, 'h', '1')
    redis.call('ZREM', P .. 'ev', sk)
    redis.call('ZREM', P .. 'bev:' .. b, sk)
  else
    redis.call('HSET', s, 'h', '0')
    redis.call('ZADD', P .. 'ev', u, sk)
    redis.call('ZADD', P .. 'bev:' .. b, u, sk)
  end
end

-- count adds a decision or a result to session sk: effect is deny, allow
-- or ask (a decision), or error, success (a reported result). It returns
-- 1 when the session is at its cap max and the effect was a failure.
local function count(sk, effect, max)
  if sk == '' then
    return 0
  end
  local s = P .. 's:' .. sk
  local f = redis.call('HMGET', s, 'd', 'r', 'b')
  if not f[3] then
    return 0 -- released meanwhile: the call was decided; nothing to count into
  end
  local d = num(f[1])
  local failure = effect == 'deny' or effect == 'error'
  if failure then
    d = d + 1
  elseif effect == 'success' or (effect == 'allow' and f[2] ~= '1') then
    d = 0
  end
  if effect == 'error' or effect == 'success' then
    redis.call('HSET', s, 'r', '1')
  end
  redis.call('HSET', s, 'd', d, 'u', now)
  redis.call('ZADD', P .. 'all', now, sk)
  set_halted(sk, f[3], d >= max, now)
  if failure and d >= max then
    return 1
  end
  return 0
end

-- drop_call forgets a decided call.
local function drop_call(id)
  local c = P .. 'c:' .. id
  local f = redis.call('HMGET', c, 'q', 'sz', 'cid', 'sk')
  if not f[1] then
    return
  end
  if f[1] == 'asks' then
    redis.call('ZREM', P .. 'asks', id)
    redis.call('DECRBY', P .. 'abytes', num(f[2]))
  else
    redis.call('ZREM', P .. 'recent', id)
    redis.call('DECRBY', P .. 'rbytes', num(f[2]))
  end
  if f[3] and f[3] ~= '' then
    local k = P .. 'cid:' .. f[3]
    if redis.call('HINCRBY', k, 'held', -1) <= 0 then
      redis.call('DEL', k)
    end
  end
  if f[4] and f[4] ~= '' then
    redis.call('SREM', P .. 'sc:' .. f[4], id)
  end
  redis.call('DEL', c)
end

-- trim drops the oldest calls of fifo q while it is over either bound
-- (the newest stays, however large).
local function trim(q, max, maxbytes)
  local z = P .. q
  local bytes = P .. (q == 'asks' and 'abytes' or 'rbytes')
  while redis.call('ZCARD', z) > 1 and (redis.call('ZCARD', z) > max or num(redis.call('GET', bytes)) > maxbytes) do
    local oldest = redis.call('ZRANGE', z, 0, 0)[1]
    drop_call(oldest)
  end
end

-- move puts call id into fifo q.
local function move(id, q, max, maxbytes)
  local c = P .. 'c:' .. id
  local f = redis.call('HMGET', c, 'q', 'sz', 'seq')
  if f[1] == q then
    return
  end
  local sz = num(f[2])
  if f[1] == 'asks' then
    redis.call('ZREM', P .. 'asks', id)
    redis.call('DECRBY', P .. 'abytes', sz)
  elseif f[1] == 'recent' then
    redis.call('ZREM', P .. 'recent', id)
    redis.call('DECRBY', P .. 'rbytes', sz)
  end
  redis.call('HSET', c, 'q', q)
  redis.call('ZADD', P .. q, num(f[3]), id)
  redis.call('INCRBY', P .. (q == 'asks' and 'abytes' or 'rbytes'), sz)
  trim(q, max, maxbytes)
end

-- expire_ask moves an ask nobody answered within its ttl among the
-- recent decisions, marked expired, so that a waiting agent learns it
-- expired rather than that it never existed; its waiters wake.
local function expire_ask(id, channel, max, maxbytes)
  redis.call('HSET', P .. 'c:' .. id, 'exp', '1')
  move(id, 'recent', max or 1000000, maxbytes or 1e15)
  redis.call('PUBLISH', channel, id)
end

-- expire_asks expires the asks older than ttl, oldest first.
local function expire_asks(ttl, channel, max, maxbytes)
  local ids = redis.call('ZRANGE', P .. 'asks', 0, 63)
  for _, id in ipairs(ids) do
    local created = num(redis.call('HGET', P .. 'c:' .. id, 'created'))
    if now - created <= ttl then
      return
    end
    expire_ask(id, channel, max, maxbytes)
  end
end
