"""The Lua scripts behind ``storage.approvals``: each check-and-apply is one round trip.

Kept apart so the store reads as Python; the scripts are the atomic part.
"""

_SNAP = """
local function snap(outcome, changed)
  local r = redis.call('HGETALL', KEYS[1])
  table.insert(r, 1, changed)
  table.insert(r, 1, outcome)
  return r
end
"""

# ``bot.domain.approval.Authority`` for the clicking user: ARGV[4] user ok, ARGV[6] self
# approval allowed, ARGV[7] {kind: may} for kinds with their own list, ARGV[8] any other
_AUTHORISED = """
local function authorised()
  if ARGV[4] ~= '1' then return false end
  if ARGV[6] ~= '1' and redis.call('HGET', KEYS[1], 'requested_by') == ARGV[2] then
    return false
  end
  local action = redis.call('HGET', KEYS[1], 'action')
  local kind = action and cjson.decode(action)['kind'] or ''
  local may = cjson.decode(ARGV[7])[tostring(kind)]
  if may ~= nil then return may end
  return ARGV[8] == '1'
end
"""

# issue 34: a decision a person's click made final goes on the incident events stream in
# the same script as the claim, with its audit entry (an outbox: a click claimed is never
# a click lost, and its audit line is written before anything the flow does with it).
# KEYS[4] the events stream, KEYS[5] the incident's audit stream, KEYS[6] the global one;
# ARGV[9] '1' to announce it (a policy's own claim is not), ARGV[10] and ARGV[11] the
# events' and the global audit's MAXLEN
_AUDITED = """
local function audited(actor, action, detail, incident)
  local entry = {'incident', incident, 'ts', ARGV[3], 'actor', actor, 'action', action,
                 'detail', cjson.encode(detail), 'evidence', ''}
  redis.call('XADD', KEYS[5], '*', unpack(entry))
  redis.call('XADD', KEYS[6], 'MAXLEN', '~', ARGV[11], '*', unpack(entry))
end
local function kind_of()
  local action = redis.call('HGET', KEYS[1], 'action')
  return action and tostring(cjson.decode(action)['kind'] or '') or ''
end
"""

_CLICK = (
    _AUDITED
    + """
local function click(kind, action)
  if ARGV[9] ~= '1' then return end
  local incident = redis.call('HGET', KEYS[1], 'incident_id') or ''
  local detail = {approval_id = ARGV[1], kind = kind_of(),
                  evidence_hash = redis.call('HGET', KEYS[1], 'evidence_hash') or ''}
  if ARGV[5] ~= '' then detail['reason'] = ARGV[5] end
  audited(ARGV[2], action, detail, incident)
  redis.call('XADD', KEYS[4], 'MAXLEN', '~', ARGV[10], '*', 'type', kind,
             'incident_id', incident, 'approval_id', ARGV[1], 'user', ARGV[2],
             'reason', ARGV[5])
end
"""
)

_GUARDS = """
local st = redis.call('HGET', KEYS[1], 'status')
if not st then return {'not_found', '0'} end
if not authorised() then return snap('unauthorised', '0') end
if st == 'cancelled' then return snap('cancelled', '0') end
local resolved = redis.call('GET', KEYS[3])
if st == 'pending' and resolved then
  local how, who, at = string.match(resolved, '^([^\t]*)\t([^\t]*)\t(.*)$')
  redis.call('HSET', KEYS[1], 'status', 'cancelled', 'decided_by', who, 'decided_at', at,
             'reason', 'incident resolved', 'resolved_by', how)
  redis.call('ZREM', KEYS[2], ARGV[1])
  return snap('cancelled', '1')
end
"""

_EXPIRY = """
if tonumber(ARGV[3]) >= tonumber(redis.call('HGET', KEYS[1], 'expires_at')) then
  redis.call('HSET', KEYS[1], 'status', 'expired')
  redis.call('ZREM', KEYS[2], ARGV[1])
  click('click.expired', 'approval.expired')
  return snap('expired', '1')
end
"""

CLAIM_LUA = (
    _SNAP
    + _AUTHORISED
    + _CLICK
    + _GUARDS
    + """
if st == 'approved' then return snap('already_done', '0') end
if st == 'denied' then return snap('denied', '0') end
if st == 'expired' then return snap('expired', '0') end
"""
    + _EXPIRY
    + """
local have = redis.call('HGET', KEYS[1], 'approvers') or ''
local n = 0
for u in string.gmatch(have, '[^,]+') do
  if u == ARGV[2] then return snap('need_second_approver', '0') end
  n = n + 1
end
if have == '' then have = ARGV[2] else have = have .. ',' .. ARGV[2] end
n = n + 1
redis.call('HSET', KEYS[1], 'approvers', have)
if n >= tonumber(redis.call('HGET', KEYS[1], 'required')) then
  redis.call('HSET', KEYS[1], 'status', 'approved', 'decided_by', ARGV[2], 'decided_at', ARGV[3])
  redis.call('ZREM', KEYS[2], ARGV[1])
  click('click.approved', 'approval.approved')
  return snap('claimed', '1')
end
return snap('need_second_approver', '1')
"""
)

DENY_LUA = (
    _SNAP
    + _AUTHORISED
    + _CLICK
    + _GUARDS
    + """
if st == 'approved' or st == 'denied' then return snap('already_done', '0') end
if st == 'expired' then return snap('expired', '0') end
"""
    + _EXPIRY
    + """
redis.call('HSET', KEYS[1], 'status', 'denied', 'decided_by', ARGV[2], 'decided_at', ARGV[3],
           'reason', ARGV[5])
redis.call('ZREM', KEYS[2], ARGV[1])
click('click.denied', 'approval.denied')
return snap('denied', '1')
"""
)

CANCEL_LUA = """
if redis.call('HGET', KEYS[1], 'status') ~= 'pending' then return 0 end
redis.call('HSET', KEYS[1], 'status', 'cancelled', 'decided_by', ARGV[2], 'decided_at', ARGV[3],
           'reason', ARGV[4])
redis.call('ZREM', KEYS[2], ARGV[1])
return 1
"""

# the sweep's expiry, audited as the bot's and announced like a click's, in one script
# (KEYS[4] the events stream, KEYS[5], KEYS[6] the audit streams; ARGV[3] the sweep's time
# (``audited`` reads it), ARGV[10], ARGV[11] the MAXLENs, ARGV[12] the bot's actor name)
EXPIRE_LUA = (
    _AUDITED
    + """
local st = redis.call('HGET', KEYS[1], 'status')
if st ~= 'pending' then redis.call('ZREM', KEYS[2], ARGV[1]); return 0 end
if tonumber(ARGV[3]) < tonumber(redis.call('HGET', KEYS[1], 'expires_at')) then return 0 end
redis.call('HSET', KEYS[1], 'status', 'expired')
redis.call('ZREM', KEYS[2], ARGV[1])
local incident = redis.call('HGET', KEYS[1], 'incident_id') or ''
audited(ARGV[12], 'approval.expired', {approval_id = ARGV[1], kind = kind_of()}, incident)
redis.call('XADD', KEYS[4], 'MAXLEN', '~', ARGV[10], '*', 'type', 'click.expired',
           'incident_id', incident, 'approval_id', ARGV[1], 'user', '', 'reason', '')
return 1
"""
)

# issue 25: an incident's approvals withdrawn in the same MULTI as its resolve.
MEMBERS_LUA = """
local out = {}
for i, k in ipairs(KEYS) do out[i] = redis.call('SMEMBERS', k) end
return out
"""

# KEYS[1] the pending zset, KEYS[2] the incident's audit stream, KEYS[3] the global one,
# KEYS[4..] the incident's approvals. ARGV: incident id, who, now, now as the audit's ts
# text, reason, resolver (alert|person|bot), the global stream's MAXLEN. Only approvals still
# pending when this runs are withdrawn (a click that won before the resolve keeps its win).
WITHDRAW_LUA = """
local done = {}
for i = 4, #KEYS do
  if redis.call('HGET', KEYS[i], 'status') == 'pending' then
    local id = redis.call('HGET', KEYS[i], 'id')
    redis.call('HSET', KEYS[i], 'status', 'cancelled', 'decided_by', ARGV[2],
               'decided_at', ARGV[3], 'reason', ARGV[5], 'resolved_by', ARGV[6])
    redis.call('ZREM', KEYS[1], id)
    local action = redis.call('HGET', KEYS[i], 'action')
    local kind = ''
    if action then kind = tostring(cjson.decode(action)['kind'] or '') end
    local detail = cjson.encode({approval_id = id, kind = kind, reason = ARGV[5],
                                 resolved_by = ARGV[6]})
    local entry = {'incident', ARGV[1], 'ts', ARGV[4], 'actor', ARGV[2],
                   'action', 'approval.cancelled', 'detail', detail, 'evidence', ''}
    redis.call('XADD', KEYS[2], '*', unpack(entry))
    redis.call('XADD', KEYS[3], 'MAXLEN', '~', ARGV[7], '*', unpack(entry))
    table.insert(done, id)
  end
end
return done
"""
